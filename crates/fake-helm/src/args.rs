//! Argv parsing with helm's (cobra/pflag) rules: flags before or after
//! positionals, `--flag value` and `--flag=value`, `-n value`, `-nvalue`,
//! `-n=value`, `--` ends the flags, and an unknown flag is an error.

pub use bootstrap::helm::flags::{Flag, Kind};

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
pub fn parse(args: &[String], flags: &[Flag]) -> Result<Parsed, String> {
    let find_long = |name: &str| flags.iter().find(|f| f.long == name);
    let find_short = |c: char| flags.iter().find(|f| f.short == Some(c));
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
pub fn split_command(argv: &[String], global: &[Flag]) -> (Vec<String>, Vec<String>) {
    let mut words = Vec::new();
    let mut rest = Vec::new();
    let mut i = 0;
    while i < argv.len() {
        let arg = &argv[i];
        let wants_more =
            words.is_empty() || (words.len() == 1 && (words[0] == "get" || words[0] == "repo"));
        if wants_more && !arg.starts_with('-') {
            words.push(arg.clone());
        } else {
            rest.push(arg.clone());
            if takes_separate_global_value(arg, global) && i + 1 < argv.len() {
                i += 1;
                rest.push(argv[i].clone());
            }
        }
        i += 1;
    }
    (words, rest)
}

fn takes_separate_global_value(arg: &str, global: &[Flag]) -> bool {
    if arg.contains('=') {
        return false;
    }
    let value = |f: &&Flag| f.kind == Kind::Value;
    if let Some(name) = arg.strip_prefix("--") {
        return global.iter().filter(value).any(|f| f.long == name);
    }
    let short = arg.strip_prefix('-').filter(|s| s.chars().count() == 1);
    short.is_some_and(|s| {
        global
            .iter()
            .filter(value)
            .any(|f| f.short.map(String::from).as_deref() == Some(s))
    })
}

#[cfg(test)]
mod tests {
    use bootstrap::helm::flags::{Command, accepted, global};

    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn flags_anywhere_and_both_value_forms() {
        let p = parse(
            &argv("x -n ns c --set=a=1 --set b=2 -f1.yaml --wait"),
            &accepted(4, Command::Upgrade),
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
        let (words, rest) = split_command(&argv("-n ns --kube-context c get values x"), &global(4));
        assert_eq!(words, ["get", "values"]);
        assert_eq!(rest, argv("-n ns --kube-context c x"));
    }

    #[test]
    fn unknown_flag_is_named() {
        assert_eq!(
            parse(&argv("--bogus"), &global(3)).unwrap_err(),
            "unknown flag: --bogus"
        );
    }

    #[test]
    fn helm_4_rejects_list_all_like_cobra() {
        let list = argv("--all-namespaces --all --max 0");
        assert_eq!(
            parse(&list, &accepted(4, Command::List)).unwrap_err(),
            "unknown flag: --all"
        );
        assert!(parse(&list, &accepted(3, Command::List)).is_ok());
        assert_eq!(
            parse(&argv("-a"), &accepted(4, Command::List)).unwrap_err(),
            "unknown shorthand flag: 'a' in -a"
        );
    }
}
