//! The man pages in docs/man/ are generated from the clap definitions
//! (clap_mangen): `bootstrap.1` and one `bootstrap-COMMAND.1` per
//! subcommand (`bootstrap-import-helmfile.1` for nested ones). This test
//! fails when one is missing or stale; `BOOTSTRAP_BLESS=1 cargo test --test
//! it manpages` writes them. Install with
//! `install -m 644 docs/man/*.1 /usr/local/share/man/man1/`.

use std::path::PathBuf;

/// Every page, by file name, with its text.
fn pages() -> Vec<(String, Vec<u8>)> {
    // The long version names the commit: a page carrying it would be stale
    // on every commit. The pages carry the release version only.
    let mut command = bootstrap::cli::command().long_version(None::<&str>);
    command.build();
    let mut out = Vec::new();
    render(&command, "bootstrap", &mut out);
    out
}

fn render(command: &clap::Command, name: &str, out: &mut Vec<(String, Vec<u8>)>) {
    let mut text = Vec::new();
    // clap names take `&'static str` without its `string` feature; a test
    // leaking a few short names is fine.
    let leaked: &'static str = Box::leak(name.to_string().into_boxed_str());
    clap_mangen::Man::new(command.clone().name(leaked))
        .render(&mut text)
        .expect("render a man page");
    out.push((format!("{name}.1"), text));
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        if sub.get_name() == "help" {
            continue;
        }
        render(sub, &format!("{name}-{}", sub.get_name()), out);
    }
}

#[test]
fn man_pages_are_current() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/man");
    let pages = pages();
    if std::env::var("BOOTSTRAP_BLESS").as_deref() == Ok("1") {
        std::fs::create_dir_all(&dir).unwrap();
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            std::fs::remove_file(entry.path()).unwrap();
        }
        for (name, text) in &pages {
            std::fs::write(dir.join(name), text).unwrap();
        }
        return;
    }
    let mut stale = Vec::new();
    for (name, text) in &pages {
        match std::fs::read(dir.join(name)) {
            Ok(found) if &found == text => {}
            Ok(_) => stale.push(format!("{name} (stale)")),
            Err(_) => stale.push(format!("{name} (missing)")),
        }
    }
    let expected: std::collections::BTreeSet<&str> =
        pages.iter().map(|(name, _)| name.as_str()).collect();
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !expected.contains(name.as_str()) {
            stale.push(format!("{name} (no such command any more)"));
        }
    }
    assert!(
        stale.is_empty(),
        "docs/man/ is not what the CLI generates: {stale:?}; run `BOOTSTRAP_BLESS=1 cargo test --test it manpages`"
    );
    assert!(
        expected.contains("bootstrap-apply.1") && expected.contains("bootstrap-import-helmfile.1")
    );
}
