//! `bootstrap import helmfile PATH… --cluster NAME` (docs/design.md#import):
//! converts, writes what it could, lists what it did not convert and exits 1
//! when that list is not empty.

use std::io::Write;
use std::path::PathBuf;

use serde_json::json;

use crate::cli::Config;
use crate::error::Error;
use crate::import;

pub fn run(
    config: &Config,
    paths: &[PathBuf],
    cluster: &str,
    force: bool,
    out: &mut dyn Write,
) -> Result<(), Error> {
    if let Err(e) = crate::validate::dns_label(cluster) {
        return Err(Error::Usage(format!("--cluster `{cluster}`: {e}")));
    }
    let root = &config.global.dir;
    let imported = import::import(paths, cluster, root)?;
    let rendered = import::render(&imported, root);
    let written = import::write(&rendered, root, force)?;
    let releases: usize = imported.groups.iter().map(|g| g.releases.len()).sum();
    if config.json() {
        super::write_json(
            out,
            &json!({
                "cluster": cluster,
                "sources": imported.sources,
                "releases": releases,
                "written": written,
                "notConverted": imported.issues.iter().map(|i| json!({
                    "file": i.file, "line": i.line, "construct": i.construct, "reason": i.reason,
                })).collect::<Vec<_>>(),
            }),
        )?;
    } else {
        let mut text = format!(
            "imported {releases} release{} from {} into {}:\n",
            if releases == 1 { "" } else { "s" },
            imported
                .sources
                .iter()
                .map(|s| s.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            root.display()
        );
        for path in &written {
            text.push_str(&format!("  wrote {}\n", path.display()));
        }
        if !imported.issues.is_empty() {
            text.push_str(&format!("not converted ({}):\n", imported.issues.len()));
            for issue in &imported.issues {
                text.push_str(&format!("  {issue}\n"));
            }
        }
        let dir = if root == std::path::Path::new(".") {
            String::new()
        } else {
            format!("--dir {} ", root.display())
        };
        text.push_str(&format!("next: bootstrap {dir}plan {cluster}\n"));
        super::write(out, &text)?;
    }
    if imported.issues.is_empty() {
        return Ok(());
    }
    let n = imported.issues.len();
    Err(Error::Findings(format!(
        "{n} construct{} of the helmfile {} not converted (listed above); convert {} by hand in the files written",
        if n == 1 { "" } else { "s" },
        if n == 1 { "was" } else { "were" },
        if n == 1 { "it" } else { "them" },
    )))
}
