//! `bootstrap import helmfile PATH… --cluster NAME` (docs/design.md#import):
//! converts, writes what it could, lists what it did not convert and exits 1
//! when that list is not empty.

use std::io::Write;

use serde_json::json;

use crate::cli::{Config, ImportHelmfileArgs};
use crate::error::{Error, Prerequisite};
use crate::import;

pub(super) fn run(
    config: &Config,
    args: &ImportHelmfileArgs,
    out: &mut dyn Write,
) -> Result<(), Error> {
    let (paths, cluster, force) = (&args.paths, &args.cluster, args.force);
    let environment = args.environment.as_deref();
    if let Err(e) = crate::validate::dns_label(cluster) {
        return Err(Error::Usage(format!("--cluster `{cluster}`: {e}")));
    }
    let root = &config.global.dir;
    let mut options = import::Options {
        environment: environment.map(String::from),
        flux_root: args.flux_root.clone(),
        flux_entrypoint: args
            .flux_entrypoint
            .as_ref()
            .map(|p| p.to_string_lossy().into_owned()),
        ..Default::default()
    };
    if let Some(root) = &args.flux_root
        && !root.is_dir()
    {
        return Err(Error::Usage(format!(
            "--flux-root {}: no such directory",
            root.display()
        )));
    }
    let ran = choose_renderer(args, paths, &mut options)?;
    if environment.is_some() && options.helmfile.is_none() {
        return Err(Error::Usage(format!(
            "--environment needs helmfile to render the environment ({}): install helmfile or pass --helmfile PATH",
            options.without
        )));
    }
    let imported = import::import(paths, cluster, root, &options)?;
    let rendered = import::render(&imported, root);
    let written = import::write(&rendered, root, force)?;
    let releases: usize = imported.groups.iter().map(|g| g.releases.len()).sum();
    if let Some(format) = config.structured() {
        let mut doc = document(&imported, cluster, releases, &written);
        doc["ranCommands"] = json!(
            ran.iter()
                .map(|r| json!({
                    "file": r.file, "line": r.line, "what": r.what,
                }))
                .collect::<Vec<_>>()
        );
        super::write_document(out, format, &doc)?;
    } else {
        let mut text = report(&imported, root, cluster, releases, &written);
        if !ran.is_empty() {
            // Right after the renderer's line: what rendering executed.
            let at = text.find('\n').map_or(0, |i| i + 1);
            text.insert_str(
                at,
                &format!(
                    "helmfile ran the repository's commands while rendering (twice: `build` and `build --embed-values`): {}; --no-exec renders without running them\n",
                    ran.iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
        }
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

/// Who renders the state files (helmfile, or the importer's own subset and
/// why) into `options`; returns what rendering with helmfile will run of
/// the repository's commands (said in the output; `--no-exec` refuses).
fn choose_renderer(
    args: &ImportHelmfileArgs,
    paths: &[std::path::PathBuf],
    options: &mut import::Options,
) -> Result<Vec<import::rendered::Runs>, Error> {
    let broken = |e: import::rendered::BrokenHelmfile| {
        Error::from(Prerequisite::Helmfile { error: e.into() })
    };
    let found = match args.helmfile() {
        crate::cli::HelmfileChoice::No => Err("--no-helmfile".to_string()),
        crate::cli::HelmfileChoice::At(path) => import::rendered::find(Some(&path))
            .map_err(broken)?
            .map_err(|why| why.to_string()),
        crate::cli::HelmfileChoice::Find => import::rendered::find(None)
            .map_err(broken)?
            .map_err(|why| why.to_string()),
    };
    // helmfile runs the repository's commands while it renders (`exec`,
    // `prepare` hooks): said in the output, refused with --no-exec.
    let runs = match &found {
        Ok(_) => import::commands(paths),
        Err(_) => Vec::new(),
    };
    match found {
        Ok(_) if args.no_exec && !runs.is_empty() => {
            options.without = format!(
                "--no-exec: rendering with helmfile would run {}",
                runs.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        Ok(found) => options.helmfile = Some(found),
        Err(why) => options.without = why,
    }
    Ok(if options.helmfile.is_some() {
        runs
    } else {
        Vec::new()
    })
}

/// docs/design.md#import: what `--output json` prints.
fn document(
    imported: &import::Imported,
    cluster: &str,
    releases: usize,
    written: &[std::path::PathBuf],
) -> serde_json::Value {
    json!({
        "cluster": cluster,
        "sources": imported.sources,
        "releases": releases,
        "written": written,
        "renderedWith": match &imported.renderer {
            import::Renderer::Helmfile(h) => json!({"helmfile": h.version, "program": h.program}),
            import::Renderer::Subset(why) => json!({"subset": why}),
        },
        "notConverted": imported.issues.iter().map(|i| json!({
            "file": i.file, "line": i.line, "construct": i.construct, "reason": i.reason,
        })).collect::<Vec<_>>(),
        "flux": imported.flux.as_ref().map(|f| json!({
            "root": f.root,
            "entrypoint": f.entrypoint,
            "handover": imported.groups.iter().flat_map(|g| &g.releases)
                .filter(|r| r.from.is_some() || r.flux_managed.is_some())
                .map(|r| r.id()).collect::<Vec<_>>(),
        })),
        "fluxSearched": imported.flux_searched,
        "fromEnvironment": imported.from_environment,
        "fromEnvironmentWritten": imported.literals.iter().map(|l| json!({
            "release": l.release, "key": l.key, "variable": l.variable,
        })).collect::<Vec<_>>(),
        "notCarriedOver": imported.notes.iter().map(|i| json!({
            "file": i.file, "line": i.line, "construct": i.construct, "reason": i.reason,
        })).collect::<Vec<_>>(),
    })
}

/// What the import says on stdout: how it rendered, what it wrote, what
/// it did not carry over or convert, and the next command.
fn report(
    imported: &import::Imported,
    root: &std::path::Path,
    cluster: &str,
    releases: usize,
    written: &[std::path::PathBuf],
) -> String {
    let mut text = match &imported.renderer {
        import::Renderer::Helmfile(h) => format!(
            "rendered with helmfile {} ({})\n",
            h.version,
            h.program.display()
        ),
        import::Renderer::Subset(why) if why == "--no-helmfile" => {
            "rendered with the importer's own template subset (--no-helmfile)\n".to_string()
        }
        import::Renderer::Subset(why) if why.starts_with("--no-exec") => {
            format!("rendered with the importer's own template subset ({why})\n")
        }
        import::Renderer::Subset(why) => format!(
            "rendered with the importer's own template subset ({why}; install helmfile or pass --helmfile PATH to render with it)\n"
        ),
    };
    text.push_str(&format!(
        "imported {releases} release{} from {} into {}:\n",
        if releases == 1 { "" } else { "s" },
        imported
            .sources
            .iter()
            .map(|s| s.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        root.display()
    ));
    for path in written {
        text.push_str(&format!("  wrote {}\n", path.display()));
    }
    for release in imported.groups.iter().flat_map(|g| &g.releases) {
        if let Some(doc) = release.from.as_ref().and_then(|f| f.document.as_ref()) {
            text.push_str(&format!(
                "  `{}`: {} reads {} with `fromYaml`, which takes only {} of its {} documents, as helmfile does; its HelmRelease is document {}: written as `from: {{ helmRelease }}` with `ownership: handover`\n",
                release.id(),
                doc.template.display(),
                doc.file.display(),
                doc.first,
                doc.total,
                doc.helmrelease
            ));
        }
    }
    for l in &imported.literals {
        text.push_str(&format!(
            "`{}` of {}: the value of the environment variable `{}` as helmfile rendered it, written as that value (bootstrap takes no template in `{}`)\n",
            l.key, l.release, l.variable, l.key
        ));
    }
    if !imported.from_environment.is_empty() {
        text.push_str(&format!(
            "read from the environment by helmfile, written as `{{{{env \"X\"}}}}` templates and never as their values: {}\n",
            imported.from_environment.join(", ")
        ));
    }
    text.push_str(&flux_lines(imported));
    if !imported.notes.is_empty() {
        text.push_str("not carried over (no effect on a bootstrap; said in cluster.yaml too):\n");
        for note in &imported.notes {
            text.push_str(&format!("  {note}\n"));
        }
    }
    if !imported.issues.is_empty() {
        let todo = imported
            .groups
            .iter()
            .flat_map(|g| &g.releases)
            .any(|r| !r.todo.is_empty());
        text.push_str(&not_converted(&imported.issues, todo));
    }
    let dir = if root == std::path::Path::new(".") {
        String::new()
    } else {
        format!("--dir {} ", root.display())
    };
    text.push_str(&format!("next: bootstrap {dir}plan {cluster}\n"));
    text
}

/// What the import found of the repository's Flux tree: where, and which
/// releases its HelmReleases manage (written `ownership: handover`); or
/// where it looked, and how to point it at the tree.
fn flux_lines(imported: &import::Imported) -> String {
    let Some(flux) = &imported.flux else {
        let searched: Vec<String> = imported
            .flux_searched
            .iter()
            .map(|d| shown(d).display().to_string())
            .collect();
        return format!(
            "no Flux tree found (searched {}): nothing says whether Flux manages these releases, and `bootstrap check` cannot tell; if a Flux repository manages any of them, import again with --flux-root DIR (and --flux-entrypoint PATH), or write `flux:` in cluster.yaml\n",
            if searched.is_empty() {
                "nothing".to_string()
            } else {
                searched.join(", ")
            }
        );
    };
    let handed: Vec<String> = imported
        .groups
        .iter()
        .flat_map(|g| &g.releases)
        .filter(|r| r.from.is_some() || r.flux_managed.is_some())
        .map(|r| r.id())
        .collect();
    let mut text = format!(
        "Flux tree: {} (entrypoint {})\n",
        shown(&flux.root).display(),
        flux.entrypoint
    );
    text.push_str(&match handed.len() {
        0 => "  no HelmRelease of it manages an imported release: all stay bootstrap's\n".to_string(),
        n => format!(
            "  {} that its HelmReleases manage, written `ownership: handover` (Flux adopts {} after the bootstrap): {}\n",
            crate::plural::count(n, "release"),
            if n == 1 { "it" } else { "them" },
            handed.join(", ")
        ),
    });
    text
}

/// `path` as the user named it: relative to the working directory.
fn shown(path: &std::path::Path) -> std::path::PathBuf {
    match std::env::current_dir() {
        Ok(cwd) => import::relative(&cwd, path),
        Err(_) => path.to_path_buf(),
    }
}

/// The not-converted list, one line per cause: its reason, how often, and
/// the first places (all of them when there are three or fewer).
fn not_converted(issues: &[import::Issue], todo: bool) -> String {
    const SHOWN: usize = 3;
    let causes = import::causes(issues);
    let mut text = if causes.len() == issues.len() {
        format!("not converted ({}):\n", issues.len())
    } else {
        format!(
            "not converted ({} constructs, {} causes):\n",
            issues.len(),
            causes.len()
        )
    };
    for cause in &causes {
        let line = match cause.issues.as_slice() {
            [one] => one.to_string(),
            all => {
                let mut places: Vec<String> =
                    all.iter().take(SHOWN).map(|i| i.location()).collect();
                if all.len() > SHOWN {
                    places.push(format!("and {} more", all.len() - SHOWN));
                }
                format!("{} ({}×: {})", cause.reason, all.len(), places.join(", "))
            }
        };
        let hint = if cause.helmfile_renders() {
            " [helmfile-rendering converts this]"
        } else {
            ""
        };
        text.push_str(&format!("  {line}{hint}\n"));
    }
    if todo {
        text.push_str("the releases concerned carry their entries as `todo:`: `plan`, `check` and `apply` stop on each until it is done and removed\n");
    }
    text
}
