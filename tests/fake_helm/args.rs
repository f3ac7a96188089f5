//! Argv parsing with helm's (cobra/pflag) rules: flags before or after
//! positionals, `--flag value` and `--flag=value`, `-n value`, `-nvalue`,
//! `-n=value`, `--` ends the flags, and an unknown flag is an error.

/// How a flag takes its value, as pflag declares it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Bool,
    Value,
    /// pflag's `NoOptDefVal`: `--wait` alone or `--wait=watcher`, never `--wait watcher`.
    OptValue,
}

#[derive(Clone, Copy, Debug)]
pub struct Flag {
    pub long: &'static str,
    pub short: Option<char>,
    pub kind: Kind,
}

const fn b(long: &'static str) -> Flag {
    Flag {
        long,
        short: None,
        kind: Kind::Bool,
    }
}
const fn v(long: &'static str) -> Flag {
    Flag {
        long,
        short: None,
        kind: Kind::Value,
    }
}
const fn o(long: &'static str) -> Flag {
    Flag {
        long,
        short: None,
        kind: Kind::OptValue,
    }
}
const fn s(mut flag: Flag, short: char) -> Flag {
    flag.short = Some(short);
    flag
}

/// Helm's persistent flags, valid on every command and before the command word.
pub const GLOBAL: &[Flag] = &[
    s(v("namespace"), 'n'),
    v("kube-context"),
    v("kubeconfig"),
    b("debug"),
    v("kube-apiserver"),
    v("kube-token"),
    v("kube-as-user"),
    v("kube-as-group"),
    v("kube-ca-file"),
    b("kube-insecure-skip-tls-verify"),
    v("kube-tls-server-name"),
    v("burst-limit"),
    v("qps"),
    v("registry-config"),
    v("repository-cache"),
    v("repository-config"),
    v("content-cache"),
    v("color"),
    v("colour"),
    s(b("help"), 'h'),
];

/// Flags shared by install, upgrade and template (chart location, values, install options).
pub const CHART: &[Flag] = &[
    v("repo"),
    v("version"),
    b("devel"),
    b("create-namespace"),
    s(v("values"), 'f'),
    v("set"),
    v("set-string"),
    v("set-json"),
    v("set-file"),
    v("set-literal"),
    b("skip-crds"),
    v("timeout"),
    o("wait"),
    b("wait-for-jobs"),
    s(v("labels"), 'l'),
    b("atomic"),
    o("rollback-on-failure"),
    s(v("output"), 'o'),
    o("dry-run"),
    v("description"),
    b("force"),
    b("force-replace"),
    b("force-conflicts"),
    o("server-side"),
    b("take-ownership"),
    b("no-hooks"),
    b("disable-openapi-validation"),
    v("post-renderer"),
    v("post-renderer-args"),
    v("username"),
    v("password"),
    b("plain-http"),
    b("insecure-skip-tls-verify"),
    v("ca-file"),
    v("cert-file"),
    v("key-file"),
    v("keyring"),
    b("verify"),
    b("pass-credentials"),
    b("render-subchart-notes"),
    b("skip-schema-validation"),
    b("enable-dns"),
    b("hide-notes"),
    b("hide-secret"),
    b("dependency-update"),
    b("skip-tests"),
];

pub const INSTALL_ONLY: &[Flag] = &[s(b("generate-name"), 'g'), v("name-template"), b("replace")];

pub const UPGRADE_ONLY: &[Flag] = &[
    s(b("install"), 'i'),
    b("reset-values"),
    b("reuse-values"),
    b("reset-then-reuse-values"),
    b("cleanup-on-fail"),
    v("history-max"),
];

pub const TEMPLATE_ONLY: &[Flag] = &[
    b("include-crds"),
    v("kube-version"),
    s(v("api-versions"), 'a'),
    s(v("show-only"), 's'),
    v("output-dir"),
    b("release-name"),
    b("is-upgrade"),
    b("validate"),
    s(b("generate-name"), 'g'),
    v("name-template"),
];

pub const LIST: &[Flag] = &[
    s(b("all"), 'a'),
    s(b("all-namespaces"), 'A'),
    s(b("date"), 'd'),
    b("deployed"),
    b("failed"),
    b("pending"),
    b("superseded"),
    b("uninstalled"),
    b("uninstalling"),
    s(v("filter"), 'f'),
    s(v("max"), 'm'),
    v("offset"),
    b("no-headers"),
    s(v("output"), 'o'),
    s(b("short"), 'q'),
    s(b("reverse"), 'r'),
    s(v("selector"), 'l'),
    v("time-format"),
];

pub const STATUS: &[Flag] = &[
    s(v("output"), 'o'),
    v("revision"),
    b("show-desc"),
    b("show-resources"),
];

pub const GET_VALUES: &[Flag] = &[s(v("output"), 'o'), s(b("all"), 'a'), v("revision")];
pub const GET_MANIFEST: &[Flag] = &[v("revision")];
pub const HISTORY: &[Flag] = &[s(v("output"), 'o'), v("max")];

pub const UNINSTALL: &[Flag] = &[
    o("wait"),
    v("timeout"),
    b("keep-history"),
    b("no-hooks"),
    o("dry-run"),
    b("ignore-not-found"),
    v("cascade"),
    v("description"),
];

pub const VERSION: &[Flag] = &[b("short"), v("template")];

/// What a command line says once parsed against its flag set.
#[derive(Debug, Default, Clone)]
pub struct Parsed {
    pub positionals: Vec<String>,
    /// Every flag occurrence in order, by long name; a bool flag's value is "true" unless given.
    pub flags: Vec<(String, String)>,
}

impl Parsed {
    /// The last value given for `long`, like pflag's scalar flags.
    pub fn get(&self, long: &str) -> Option<&str> {
        self.flags
            .iter()
            .rev()
            .find(|(k, _)| k == long)
            .map(|(_, v)| v.as_str())
    }

    /// A bool flag is on unless absent or explicitly `=false`.
    pub fn on(&self, long: &str) -> bool {
        self.get(long).is_some_and(|v| v != "false")
    }

    /// Every value of a repeatable flag, in order.
    pub fn all(&self, long: &str) -> Vec<&str> {
        self.flags
            .iter()
            .filter(|(k, _)| k == long)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// pflag's stringSlice flags (`-f a,b -f c`) split every occurrence on commas.
    pub fn slice(&self, long: &str) -> Vec<String> {
        self.all(long)
            .into_iter()
            .flat_map(|v| v.split(','))
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    }
}

/// Parses `args` against `specs`; the error is helm's message without the "Error: " prefix.
pub fn parse(args: &[String], specs: &[&[Flag]]) -> Result<Parsed, String> {
    let find_long = |name: &str| specs.iter().flat_map(|s| s.iter()).find(|f| f.long == name);
    let find_short = |c: char| {
        specs
            .iter()
            .flat_map(|s| s.iter())
            .find(|f| f.short == Some(c))
    };
    let mut parsed = Parsed::default();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        if arg == "--" {
            parsed.positionals.extend(it.by_ref().cloned());
            break;
        }
        if let Some(body) = arg.strip_prefix("--") {
            let (name, inline) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (body, None),
            };
            let flag = find_long(name).ok_or_else(|| format!("unknown flag: --{name}"))?;
            let value = take_value(flag, inline, &mut it, &format!("--{name}"))?;
            parsed.flags.push((flag.long.to_string(), value));
        } else if arg.len() > 1 && arg.starts_with('-') {
            let mut chars = arg[1..].chars();
            while let Some(c) = chars.next() {
                let flag = find_short(c)
                    .ok_or_else(|| format!("unknown shorthand flag: '{c}' in {arg}"))?;
                let rest: String = chars.clone().collect();
                if flag.kind == Kind::Bool {
                    let value = rest.strip_prefix('=').map(str::to_string);
                    parsed.flags.push((
                        flag.long.to_string(),
                        value.clone().unwrap_or("true".into()),
                    ));
                    if value.is_some() {
                        break;
                    }
                    continue;
                }
                let inline = if rest.is_empty() {
                    None
                } else {
                    Some(rest.strip_prefix('=').unwrap_or(&rest).to_string())
                };
                let value = take_value(flag, inline, &mut it, &format!("-{c}"))?;
                parsed.flags.push((flag.long.to_string(), value));
                break;
            }
        } else {
            parsed.positionals.push(arg.clone());
        }
    }
    Ok(parsed)
}

fn take_value<'a>(
    flag: &Flag,
    inline: Option<String>,
    it: &mut impl Iterator<Item = &'a String>,
    shown: &str,
) -> Result<String, String> {
    match (flag.kind, inline) {
        (_, Some(v)) => Ok(v),
        (Kind::Bool, None) => Ok("true".into()),
        (Kind::OptValue, None) => Ok("true".into()),
        (Kind::Value, None) => it
            .next()
            .cloned()
            .ok_or_else(|| format!("flag needs an argument: {shown}")),
    }
}

/// Finds the command words (e.g. `["get", "values"]`) and the remaining args,
/// skipping global flags and their values that may precede the command.
pub fn split_command(argv: &[String]) -> (Vec<String>, Vec<String>) {
    let mut words = Vec::new();
    let mut rest = Vec::new();
    let mut i = 0;
    while i < argv.len() {
        let arg = &argv[i];
        let wants_more = words.is_empty() || (words.len() == 1 && words[0] == "get");
        if wants_more && !arg.starts_with('-') {
            words.push(arg.clone());
        } else {
            rest.push(arg.clone());
            if takes_separate_global_value(arg) && i + 1 < argv.len() {
                i += 1;
                rest.push(argv[i].clone());
            }
        }
        i += 1;
    }
    (words, rest)
}

fn takes_separate_global_value(arg: &str) -> bool {
    if arg.contains('=') {
        return false;
    }
    let global = |f: &&Flag| f.kind == Kind::Value;
    if let Some(name) = arg.strip_prefix("--") {
        return GLOBAL.iter().filter(global).any(|f| f.long == name);
    }
    let short = arg.strip_prefix('-').filter(|s| s.chars().count() == 1);
    short.is_some_and(|s| {
        GLOBAL
            .iter()
            .filter(global)
            .any(|f| f.short.map(String::from).as_deref() == Some(s))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn flags_anywhere_and_both_value_forms() {
        let p = parse(
            &argv("x -n ns c --set=a=1 --set b=2 -f1.yaml --wait"),
            &[GLOBAL, CHART],
        )
        .unwrap();
        assert_eq!(p.positionals, ["x", "c"]);
        assert_eq!(p.get("namespace"), Some("ns"));
        assert_eq!(p.all("set"), ["a=1", "b=2"]);
        assert_eq!(p.get("values"), Some("1.yaml"));
        assert!(p.on("wait"));
    }

    #[test]
    fn command_found_after_global_flags() {
        let (words, rest) = split_command(&argv("-n ns --kube-context c get values x"));
        assert_eq!(words, ["get", "values"]);
        assert_eq!(rest, argv("-n ns --kube-context c x"));
    }

    #[test]
    fn unknown_flag_is_named() {
        assert_eq!(
            parse(&argv("--bogus"), &[GLOBAL]).unwrap_err(),
            "unknown flag: --bogus"
        );
    }
}
