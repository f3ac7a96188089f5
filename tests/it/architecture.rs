//! The module map, checked: which module may use which (docs/design.md#module-map).
//!
//! Reads `src/` and collects every `crate::…` path (and `super::…` inside a
//! directory module) per file, then checks that the modules form no cycle,
//! at the top level and inside each directory module, and that the layering
//! rules hold: the engines (apply, destroy, status) are siblings, the leaves
//! (helm, kube, reporter, …) never reach up into the command layer.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use petgraph::algo::tarjan_scc;
use petgraph::graphmap::DiGraphMap;

/// `(module, submodule)` of a source file: `src/apply/runner/mod.rs` is
/// `("apply", Some("runner"))`, `src/cli.rs` is `("cli", None)`.
fn module_of(file: &Path) -> (String, Option<String>) {
    // Below the crate's `src/` (this crate's or a test tool's).
    let components: Vec<String> = file
        .iter()
        .map(|p| p.to_string_lossy().to_string())
        .collect();
    let start = components.iter().position(|c| c == "src").unwrap() + 1;
    let parts: Vec<String> = components[start..]
        .iter()
        .map(|p| p.trim_end_matches(".rs").to_string())
        .collect();
    match parts.as_slice() {
        [one] => (one.clone(), None),
        [dir, sub, ..] if sub == "mod" => (dir.clone(), None),
        [dir, sub, ..] => (dir.clone(), Some(sub.clone())),
        [] => unreachable!(),
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file without comments and without `#[cfg(test)]` modules
/// kept in other files (tests may reach anywhere).
fn code(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `crate::a::b` path as `(a, Some(b))` and `super::b` (in a
/// directory module's file) as `(own, Some(b))`.
fn references(file: &Path, text: &str) -> BTreeSet<(String, Option<String>)> {
    let (own, sub) = module_of(file);
    let mut found = BTreeSet::new();
    let text = code(text);
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    for (i, _) in text.match_indices("crate::") {
        if i > 0 && text[..i].ends_with("$") {
            continue;
        }
        let rest = &text[i + "crate::".len()..];
        // `use crate::{a, b}`: each item is a top-level module.
        if let Some(list) = rest.strip_prefix('{') {
            let end = list.find('}').unwrap_or(list.len());
            for item in list[..end].split(',') {
                let m = ident(item.trim());
                if !m.is_empty() {
                    found.insert((m, None));
                }
            }
            continue;
        }
        let top = ident(rest);
        let after = &rest[top.len()..];
        let second = after
            .strip_prefix("::")
            .map(ident)
            .filter(|s| !s.is_empty());
        found.insert((top, second));
    }
    if sub.is_some() {
        for (i, _) in text.match_indices("super::") {
            if i > 0 && text[..i].ends_with("super::") {
                continue;
            }
            let m = ident(&text[i + "super::".len()..]);
            if !m.is_empty() {
                found.insert((own.clone(), Some(m)));
            }
        }
    }
    found
}

struct Map {
    /// Top-level module → top-level modules it uses.
    top: BTreeMap<String, BTreeSet<String>>,
    /// Directory module → (submodule → sibling submodules it uses).
    inner: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
}

fn map() -> Map {
    map_of(Path::new("src"))
}

/// The module map of the crate whose sources are in `dir`.
fn map_of(dir: &Path) -> Map {
    let mut files = Vec::new();
    rust_files(dir, &mut files);
    let mut top: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut inner: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    let submodules: BTreeSet<(String, String)> = files
        .iter()
        .filter_map(|f| {
            let (m, s) = module_of(f);
            Some((m, s?))
        })
        .collect();
    for file in &files {
        let name = file.file_name().unwrap().to_string_lossy();
        // Unit-test files (`x/tests.rs`) may use anything.
        if name == "tests.rs" || name == "lib.rs" || name == "main.rs" {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        let text = match text.find("#[cfg(test)]\nmod tests {") {
            Some(i) => text[..i].to_string(),
            None => text,
        };
        let (own, sub) = module_of(file);
        top.entry(own.clone()).or_default();
        for (m, second) in references(file, &text) {
            if m != own {
                top.entry(own.clone()).or_default().insert(m);
            } else if let (Some(sub), Some(second)) = (&sub, second)
                && &second != sub
                && submodules.contains(&(own.clone(), second.clone()))
            {
                inner
                    .entry(own.clone())
                    .or_default()
                    .entry(sub.clone())
                    .or_default()
                    .insert(second);
            }
        }
    }
    Map { top, inner }
}

fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let mut graph: DiGraphMap<&str, ()> = DiGraphMap::new();
    for (from, tos) in edges {
        graph.add_node(from);
        for to in tos {
            graph.add_edge(from, to, ());
        }
    }
    tarjan_scc(&graph)
        .into_iter()
        .filter(|scc| scc.len() > 1)
        .map(|scc| {
            let mut names: Vec<String> = scc.iter().map(|s| s.to_string()).collect();
            names.sort();
            names
        })
        .collect()
}

#[test]
fn top_level_modules_form_no_cycle() {
    let map = map();
    let found = cycles(&map.top);
    assert_eq!(
        found,
        Vec::<Vec<String>>::new(),
        "{found:?}: {:#?}",
        map.top
    );
}

/// The test tools are crates of their own and hold to the same rule: no
/// import cycle between their modules (fake-helm's dispatch and install
/// once used each other's types).
#[test]
fn test_tool_crates_form_no_cycle() {
    for krate in ["fake-helm", "kube-loopback", "testkit"] {
        let map = map_of(&Path::new("crates").join(krate).join("src"));
        let found = cycles(&map.top);
        assert_eq!(found, Vec::<Vec<String>>::new(), "{krate}: {:#?}", map.top);
    }
}

#[test]
fn submodules_form_no_cycle() {
    for (module, edges) in map().inner {
        assert_eq!(
            cycles(&edges),
            Vec::<Vec<String>>::new(),
            "inside `{module}`: {edges:#?}"
        );
    }
}

/// The commands are views of what the layers below compute: none uses
/// another (what two of them share lives in `commands/mod.rs` or below, as
/// the Flux scan `check` reports and `apply` refuses on lives in `gate`).
#[test]
fn commands_never_use_each_other() {
    let map = map();
    let crossings: Vec<String> = map
        .inner
        .get("commands")
        .into_iter()
        .flatten()
        .filter(|(_, used)| !used.is_empty())
        .map(|(from, used)| format!("commands::{from} uses {used:?}"))
        .collect();
    assert_eq!(crossings, Vec::<String>::new());
}

#[test]
fn layering_rules_hold() {
    let map = map();
    let uses = |from: &str, to: &str| map.top.get(from).is_some_and(|t| t.contains(to));
    // The engines are siblings on the run layer.
    for a in ENGINES {
        for b in ENGINES.iter().chain(&COMMAND_LAYER) {
            assert!(a == *b || !uses(a, b), "`{a}` uses `{b}`");
        }
    }
    // Leaves never reach up into the command layer or the engines.
    for leaf in LEAVES {
        for up in ["cli", "commands", "apply", "destroy", "status"] {
            assert!(!uses(leaf, up), "`{leaf}` uses `{up}`");
        }
    }
    // Nothing uses the command layer but the library root.
    for (from, tos) in &map.top {
        assert!(
            !tos.contains("commands") || from == "cli",
            "`{from}` uses `commands`"
        );
    }
    // The lints and the Flux scan reach the commands and the engines only
    // through the gate, which judges them once (docs/design.md#module-map);
    // neither knows of the gate.
    for up in COMMAND_LAYER.iter().chain(&ENGINES) {
        assert!(!uses(up, "lint"), "`{up}` uses `lint`, not `gate`");
    }
    for below in ["lint", "flux", "finding"] {
        assert!(!uses(below, "gate"), "`{below}` uses `gate`");
    }
    // The stop signal is the bottom: every layer may use it, it uses nothing.
    assert!(map.top["stop"].is_empty(), "{:?}", map.top["stop"]);
    // What the checks report sits below the lints, the scan and the error
    // (docs/design.md#error-policy): it uses nothing of the crate.
    assert!(map.top["finding"].is_empty(), "{:?}", map.top["finding"]);
    // The one user-facing error is worded from data of the modules below it
    // only; the others' errors reach it boxed.
    let below_error: BTreeSet<String> = ["stop", "duration", "finding"].map(String::from).into();
    assert!(
        map.top["error"].is_subset(&below_error),
        "`error` uses {:?}",
        map.top["error"]
    );
}

/// The command layer, the engines and every other module (a leaf of the
/// run layer or below): `every_module_has_a_layer` keeps this true to src/.
const COMMAND_LAYER: [&str; 2] = ["cli", "commands"];
const ENGINES: [&str; 3] = ["apply", "destroy", "status"];
const LEAVES: [&str; 34] = [
    "gate",
    "helm",
    "complete",
    "kube",
    "reporter",
    "event",
    "stop",
    "flux",
    "config",
    "graph",
    "plan",
    "release",
    "handlebars",
    "values",
    "yaml",
    "error",
    "hooks",
    "import",
    "scheduler",
    "crds",
    "change",
    "ownership",
    "run",
    "child",
    "duration",
    "plural",
    "lexical",
    "output",
    "finding",
    "ledger",
    "lint",
    "chart_render",
    "select",
    "validate",
];

/// Every module of src/ is in one of the layers the rules above check.
#[test]
fn every_module_has_a_layer() {
    let known: BTreeSet<&str> = COMMAND_LAYER
        .iter()
        .chain(&ENGINES)
        .chain(&LEAVES)
        .copied()
        .collect();
    let map = map();
    let unplaced: Vec<&String> = map
        .top
        .keys()
        .filter(|m| !known.contains(m.as_str()))
        .collect();
    assert!(
        unplaced.is_empty(),
        "modules in no layer of tests/it/architecture.rs (and docs/design.md#module-map): {unplaced:?}"
    );
}

/// The integration tests are one binary (tests/it/main.rs, docs/design.md#test-map):
/// a file in `tests/` or a `tests/NAME/main.rs` would be a second binary
/// linking the whole library again, and a suite file in `tests/it/` without
/// its `mod` line in main.rs would never be compiled nor run.
#[test]
fn integration_tests_are_one_binary() {
    let mut binaries = Vec::new();
    for entry in std::fs::read_dir("tests").unwrap() {
        let path = entry.unwrap().path();
        let is_binary = if path.is_dir() {
            path.join("main.rs").exists()
        } else {
            path.extension().is_some_and(|e| e == "rs")
        };
        if is_binary {
            binaries.push(path.display().to_string());
        }
    }
    assert_eq!(
        binaries,
        ["tests/it"],
        "a suite is a module of tests/it/main.rs (tests/it/NAME.rs and `mod NAME;`)"
    );
    let main = std::fs::read_to_string("tests/it/main.rs").unwrap();
    let declared: BTreeSet<&str> = main
        .lines()
        .filter_map(|l| l.strip_prefix("mod ")?.strip_suffix(';'))
        .collect();
    let mut files = BTreeSet::new();
    for entry in std::fs::read_dir("tests/it").unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("main.rs") {
            files.insert(path.file_stem().unwrap().to_string_lossy().to_string());
        }
    }
    let undeclared: Vec<&String> = files
        .iter()
        .filter(|f| !declared.contains(f.as_str()))
        .collect();
    assert!(
        undeclared.is_empty(),
        "suites in tests/it/ with no `mod` line in tests/it/main.rs: {undeclared:?}"
    );
}

/// The code of `src/` outside test modules, file by file: `(path, text)`.
fn source_code() -> Vec<(String, String)> {
    let mut files = Vec::new();
    rust_files(Path::new("src"), &mut files);
    files.sort();
    files
        .into_iter()
        .filter(|f| f.file_name().is_some_and(|n| n != "tests.rs"))
        .map(|f| {
            let text = std::fs::read_to_string(&f).unwrap();
            let text = match text.find("#[cfg(test)]\nmod tests") {
                Some(i) => text[..i].to_string(),
                None => text,
            };
            (f.display().to_string(), text)
        })
        .collect()
}

/// Each line of `text` with its string and char literals emptied and its
/// `//` comment cut, so that braces and `Result<…>` are only code's.
/// Strings may span lines (`"…` to `"`, raw `r#"…"#`).
fn code_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    // Inside a string: the text that ends it (`"`, or `"#` for `r#"`).
    let mut in_string: Option<String> = None;
    for line in text.lines() {
        let chars: Vec<char> = line.chars().collect();
        let mut kept = String::new();
        let mut i = 0;
        while i < chars.len() {
            if let Some(end) = &in_string {
                if end == "\"" && chars[i] == '\\' {
                    i += 2;
                    continue;
                }
                let rest: String = chars[i..].iter().take(end.len()).collect();
                if rest == *end {
                    i += end.len();
                    kept.push('"');
                    in_string = None;
                } else {
                    i += 1;
                }
                continue;
            }
            let c = chars[i];
            let next = chars.get(i + 1).copied();
            if c == '/' && next == Some('/') {
                break;
            }
            if c == '"' {
                in_string = Some("\"".into());
                kept.push('"');
                i += 1;
            } else if c == 'r'
                && (next == Some('"') || next == Some('#'))
                && (i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_'))
            {
                let hashes = chars[i + 1..].iter().take_while(|c| **c == '#').count();
                if chars.get(i + 1 + hashes) == Some(&'"') {
                    in_string = Some(format!("\"{}", "#".repeat(hashes)));
                    kept.push('"');
                    i += 2 + hashes;
                } else {
                    kept.push(c);
                    i += 1;
                }
            } else if c == '\'' {
                // A char literal (`'{'`, `'\n'`), not a lifetime (`'a`).
                let close = if next == Some('\\') {
                    chars[i + 2..]
                        .iter()
                        .position(|c| *c == '\'')
                        .map(|p| i + 2 + p)
                } else if chars.get(i + 2) == Some(&'\'') {
                    Some(i + 2)
                } else {
                    None
                };
                match close {
                    Some(end) => {
                        kept.push_str("' '");
                        i = end + 1;
                    }
                    None => {
                        kept.push(c);
                        i += 1;
                    }
                }
            } else {
                kept.push(c);
                i += 1;
            }
        }
        out.push(kept);
    }
    out
}

/// Every function of `src/` (outside tests) as `(file, name, code lines)`:
/// the lines of its body, between the line that opens it and the line that
/// closes it, that are neither blank nor only a comment.
fn function_lengths() -> Vec<(String, String, usize)> {
    let signature =
        regex::Regex::new(r"^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?fn\s+(\w+)")
            .unwrap();
    let mut out = Vec::new();
    for (file, text) in source_code() {
        let lines = code_lines(&text);
        for (start, line) in lines.iter().enumerate() {
            let Some(name) = signature.captures(line).map(|c| c[6].to_string()) else {
                continue;
            };
            let (mut depth, mut opened, mut count) = (0usize, false, 0);
            for l in &lines[start..] {
                if !opened && l.contains(';') && !l.contains('{') {
                    break; // a declaration without a body (a trait's)
                }
                let inside = opened;
                for c in l.chars() {
                    match c {
                        '{' => {
                            depth += 1;
                            opened = true;
                        }
                        '}' => depth = depth.saturating_sub(1),
                        _ => {}
                    }
                }
                if opened && depth == 0 {
                    break;
                }
                if inside && !l.trim().is_empty() {
                    count += 1;
                }
            }
            if opened {
                out.push((file.clone(), name, count));
            }
        }
    }
    out
}

/// Longer than this many code lines, a function says why it is one.
const LONG: usize = 100;

/// Every function over [`LONG`] code lines, and why it is one piece. A
/// function that grows past the limit must be split along its steps, or
/// listed here with its reason; one that shrinks below it leaves the list.
const LONG_FUNCTIONS: &[(&str, &str, &str)] = &[
    (
        "src/import/gotmpl/mod.rs",
        "call",
        "one piece: one match over the template functions the subset evaluates, an arm of a few lines per function (said at the function)",
    ),
    (
        "src/import/gotmpl/syntax.rs",
        "tokenize",
        "one piece: one pass over an action's characters, whose state (quotes, parentheses, the token being read) lives across the loop (said at the function)",
    ),
    (
        "src/reporter/plain.rs",
        "render",
        "one piece: one match over the event kinds, an arm per event (said at the function)",
    ),
    (
        "src/scheduler.rs",
        "run",
        "one piece: the scheduling state (waiting counts, running set, helm slots, stop) lives across one select loop (said at the function)",
    ),
];

#[test]
fn long_functions_are_listed_with_their_reason() {
    let long: BTreeSet<(String, String)> = function_lengths()
        .into_iter()
        .filter(|(_, _, n)| *n > LONG)
        .map(|(f, name, _)| (f, name))
        .collect();
    let listed: BTreeSet<(String, String)> = LONG_FUNCTIONS
        .iter()
        .map(|(f, name, _)| (f.to_string(), name.to_string()))
        .collect();
    let lengths: BTreeMap<(String, String), usize> = function_lengths()
        .into_iter()
        .map(|(f, name, n)| ((f, name), n))
        .collect();
    let unlisted: Vec<String> = long
        .difference(&listed)
        .map(|k| format!("{} {} ({} lines)", k.0, k.1, lengths[k]))
        .collect();
    let short: Vec<&(String, String)> = listed.difference(&long).collect();
    assert!(
        unlisted.is_empty() && short.is_empty(),
        "functions over {LONG} code lines not in LONG_FUNCTIONS (split them, or list them with why they are one): {unlisted:#?}\nlisted but no longer over {LONG}: {short:?}"
    );
}

/// Parsers return their own error enum, never a `String`
/// (docs/design.md#error-policy); clap's value parsers in `cli` are the
/// exception clap imposes.
#[test]
fn no_function_returns_a_string_as_its_error() {
    let mut found = Vec::new();
    for (file, text) in source_code() {
        if file.starts_with("src/cli") {
            continue;
        }
        for (n, line) in code_lines(&text).iter().enumerate() {
            for (i, _) in line.match_indices("Result<") {
                // The generic arguments up to the matching `>`.
                let mut depth = 0;
                let mut args = String::new();
                for c in line[i + "Result<".len()..].chars() {
                    match c {
                        '<' | '(' | '[' => depth += 1,
                        '>' | ')' | ']' if depth == 0 => break,
                        '>' | ')' | ']' => depth -= 1,
                        _ => {}
                    }
                    args.push(c);
                }
                let mut top = Vec::new();
                let (mut depth, mut part) = (0, String::new());
                for c in args.chars() {
                    match c {
                        '<' | '(' | '[' => depth += 1,
                        '>' | ')' | ']' => depth -= 1,
                        ',' if depth == 0 => {
                            top.push(std::mem::take(&mut part));
                            continue;
                        }
                        _ => {}
                    }
                    part.push(c);
                }
                top.push(part);
                if top.len() == 2 && top[1].trim() == "String" {
                    found.push(format!("{file}:{}: {}", n + 1, line.trim()));
                }
            }
        }
    }
    assert!(found.is_empty(), "{found:#?}");
}

/// One module-file convention (docs/design.md#test-map): a module with
/// submodules is a directory with a `mod.rs`, never `x.rs` beside `x/`.
#[test]
fn directory_modules_are_mod_rs() {
    let mut files = Vec::new();
    rust_files(Path::new("src"), &mut files);
    let pairs: Vec<String> = files
        .iter()
        .filter(|f| f.with_extension("").is_dir())
        .map(|f| f.display().to_string())
        .collect();
    assert!(
        pairs.is_empty(),
        "`x.rs` beside a directory `x/`: move it to `x/mod.rs` (git mv): {pairs:?}"
    );
}

/// The most lines of code a library file holds (blank lines, comments and
/// its unit tests left out): a file is split along its steps before it
/// grows past them (docs/design.md#module-map).
const FILE_LINES: usize = 800;

#[test]
fn no_library_file_is_over_the_line_limit() {
    let over: Vec<String> = source_code()
        .into_iter()
        .filter_map(|(file, text)| {
            let n = code_lines(&text)
                .iter()
                .filter(|l| !l.trim().is_empty())
                .count();
            (n > FILE_LINES).then(|| format!("{file}: {n}"))
        })
        .collect();
    assert!(
        over.is_empty(),
        "files over {FILE_LINES} lines of code: {over:?}"
    );
}
