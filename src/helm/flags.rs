//! The flags each helm command accepts, per helm major version. bootstrap
//! builds its command lines from [`super::args`] and checks them against this
//! table in unit tests; the test helm (`fake-helm`) rejects any flag that is
//! not here for the version it impersonates, the way cobra does
//! (`Error: unknown flag: --all`).
//!
//! Taken from helm's own flag definitions:
//! - Helm 3 (v3.13 to v3.21): `cmd/helm/{version,install,upgrade,template,
//!   status,list,get_values,get_manifest,history,uninstall,pull,repo_add,
//!   flags}.go` and
//!   `pkg/cli/environment.go` (`EnvSettings.AddFlags`), as of v3.21.4. Flags
//!   added after 3.13 (`--take-ownership`, `--skip-schema-validation`,
//!   `--hide-secret`, `--reset-then-reuse-values`, `--qps`) are listed;
//!   bootstrap never passes them, so 3.13 is still enough.
//! - Helm 4: `pkg/cmd/*.go` (same file names) and `pkg/cli/environment.go`,
//!   as of v4.2.4. What changed for bootstrap: `helm list` lost `--all`
//!   (`pkg/cmd/list.go`; `pkg/action/list.go` `SetStateMask` lists every
//!   state when no state flag is given), `helm status` lost
//!   `--show-desc`/`--show-resources`, `helm version` lost `--client`,
//!   `--wait` takes an optional strategy (`pkg/cmd/flags.go` `AddWaitFlag`),
//!   `--atomic` became `--rollback-on-failure`, and server-side apply came
//!   with `--server-side`/`--force-conflicts`/`--force-replace`.

/// How a flag takes its value, as pflag declares it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Bool,
    Value,
    /// pflag's `NoOptDefVal`: `--wait` alone or `--wait=watcher`, never `--wait watcher`.
    OptValue,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Flag {
    pub long: &'static str,
    pub short: Option<char>,
    pub kind: Kind,
}

/// The helm commands bootstrap runs (and the test helm answers).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Command {
    Version,
    Install,
    Upgrade,
    Template,
    Uninstall,
    List,
    Status,
    GetValues,
    GetManifest,
    History,
    Pull,
    RepoAdd,
    Rollback,
}

impl Command {
    pub const ALL: [Command; 13] = [
        Command::Version,
        Command::Install,
        Command::Upgrade,
        Command::Template,
        Command::Uninstall,
        Command::List,
        Command::Status,
        Command::GetValues,
        Command::GetManifest,
        Command::History,
        Command::Pull,
        Command::RepoAdd,
        Command::Rollback,
    ];

    /// The command words, as typed after `helm`.
    pub fn words(self) -> &'static str {
        match self {
            Command::Version => "version",
            Command::Install => "install",
            Command::Upgrade => "upgrade",
            Command::Template => "template",
            Command::Uninstall => "uninstall",
            Command::List => "list",
            Command::Status => "status",
            Command::GetValues => "get values",
            Command::GetManifest => "get manifest",
            Command::History => "history",
            Command::Pull => "pull",
            Command::RepoAdd => "repo add",
            Command::Rollback => "rollback",
        }
    }
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

/// Persistent flags of every version (`EnvSettings.AddFlags`, cobra's `--help`).
const GLOBAL: &[Flag] = &[
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
    s(b("help"), 'h'),
];

const GLOBAL_4: &[Flag] = &[v("content-cache"), v("color"), v("colour")];

/// `addChartPathOptionsFlags`: where a chart comes from.
const CHART_PATH: &[Flag] = &[
    v("version"),
    b("verify"),
    v("keyring"),
    v("repo"),
    v("username"),
    v("password"),
    v("cert-file"),
    v("key-file"),
    b("insecure-skip-tls-verify"),
    b("plain-http"),
    v("ca-file"),
    b("pass-credentials"),
];

/// `addValueOptionsFlags`.
const VALUES: &[Flag] = &[
    s(v("values"), 'f'),
    v("set"),
    v("set-string"),
    v("set-file"),
    v("set-json"),
    v("set-literal"),
];

/// Install-like options shared by install, upgrade and template in both versions.
const INSTALL_COMMON: &[Flag] = &[
    b("create-namespace"),
    b("devel"),
    b("dependency-update"),
    v("description"),
    b("disable-openapi-validation"),
    o("dry-run"),
    b("enable-dns"),
    b("force"),
    b("hide-notes"),
    s(v("labels"), 'l'),
    b("no-hooks"),
    v("post-renderer"),
    v("post-renderer-args"),
    b("render-subchart-notes"),
    b("skip-crds"),
    b("skip-schema-validation"),
    b("take-ownership"),
    v("timeout"),
    b("wait-for-jobs"),
    b("atomic"),
];

/// Helm 3: `--wait` is a plain bool.
const INSTALL_3: &[Flag] = &[b("wait")];

/// Helm 4: wait strategies, server-side apply, the new name of `--atomic`.
const INSTALL_4: &[Flag] = &[
    o("wait"),
    b("rollback-on-failure"),
    b("force-replace"),
    b("force-conflicts"),
];

const INSTALL_4_WAIT: &[Flag] = &[o("wait")];

const INSTALL_ONLY: &[Flag] = &[
    s(b("generate-name"), 'g'),
    v("name-template"),
    b("replace"),
    b("hide-secret"),
    s(v("output"), 'o'),
];

const UPGRADE_ONLY: &[Flag] = &[
    s(b("install"), 'i'),
    b("reset-values"),
    b("reuse-values"),
    b("reset-then-reuse-values"),
    b("cleanup-on-fail"),
    v("history-max"),
    b("hide-secret"),
    s(v("output"), 'o'),
];

const UPGRADE_3: &[Flag] = &[b("recreate-pods")];

/// Helm 4's `--server-side` is a bool on install/template and a value
/// ("true", "false", "auto") on upgrade; pflag accepts `--server-side` alone
/// only for the bool, so both are declared with their own kind.
const INSTALL_SERVER_SIDE_4: &[Flag] = &[b("server-side")];
const UPGRADE_SERVER_SIDE_4: &[Flag] = &[v("server-side")];

const TEMPLATE_ONLY: &[Flag] = &[
    s(b("generate-name"), 'g'),
    v("name-template"),
    b("replace"),
    b("include-crds"),
    b("skip-tests"),
    b("is-upgrade"),
    v("kube-version"),
    s(v("api-versions"), 'a'),
    s(v("show-only"), 's'),
    v("output-dir"),
    b("release-name"),
    b("validate"),
];

const UNINSTALL_COMMON: &[Flag] = &[
    o("dry-run"),
    b("no-hooks"),
    b("ignore-not-found"),
    b("keep-history"),
    v("cascade"),
    v("timeout"),
    v("description"),
];

const LIST_COMMON: &[Flag] = &[
    s(b("short"), 'q'),
    b("no-headers"),
    v("time-format"),
    s(b("date"), 'd'),
    s(b("reverse"), 'r'),
    b("uninstalled"),
    b("superseded"),
    b("uninstalling"),
    b("deployed"),
    b("failed"),
    b("pending"),
    s(b("all-namespaces"), 'A'),
    s(v("max"), 'm'),
    v("offset"),
    s(v("filter"), 'f'),
    s(v("selector"), 'l'),
    s(v("output"), 'o'),
];

/// Helm 3 only: `helm list --all`; Helm 4 lists every state by default.
const LIST_3: &[Flag] = &[s(b("all"), 'a')];

const STATUS_COMMON: &[Flag] = &[v("revision"), s(v("output"), 'o')];
const STATUS_3: &[Flag] = &[b("show-desc"), b("show-resources")];

const GET_VALUES: &[Flag] = &[v("revision"), s(b("all"), 'a'), s(v("output"), 'o')];
const GET_MANIFEST: &[Flag] = &[v("revision")];
const HISTORY: &[Flag] = &[s(v("max"), 'm'), s(v("output"), 'o')];

/// `helm pull`: helm v3.21.4 `cmd/helm/pull.go`, v4.2.4 `pkg/cmd/pull.go`
/// (`newPullCmd`), identical in both: these plus `addChartPathOptionsFlags`
/// ([`CHART_PATH`]). bootstrap passes `--destination` (and `--version`,
/// `--repo`) to fill the chart cache.
const PULL: &[Flag] = &[
    b("devel"),
    b("untar"),
    b("prov"),
    v("untardir"),
    s(v("destination"), 'd'),
];

/// `helm repo add` (Helm 3 `cmd/helm/repo_add.go`, Helm 4
/// `pkg/cmd/repo_add.go`): `--password-stdin` reads the password from stdin
/// when `--username` is given. Helm 3 also has the ignored `--no-update`
/// and, since 3.14, `--timeout`; Helm 4 dropped `--no-update`.
const REPO_ADD_COMMON: &[Flag] = &[
    v("username"),
    v("password"),
    b("password-stdin"),
    b("force-update"),
    v("cert-file"),
    v("key-file"),
    v("ca-file"),
    b("insecure-skip-tls-verify"),
    b("allow-deprecated-repos"),
    b("pass-credentials"),
    v("timeout"),
];
const REPO_ADD_3: &[Flag] = &[b("no-update")];

/// `helm rollback` (pkg/cmd/rollback.go): the same in both majors but for
/// the flags Helm 4 renamed (`--force` → `--force-replace`) or made take a
/// value (`--wait`, `--dry-run`) and its server-side apply.
const ROLLBACK_COMMON: &[Flag] = &[
    b("cleanup-on-fail"),
    v("history-max"),
    b("no-hooks"),
    v("timeout"),
    b("wait-for-jobs"),
];
const ROLLBACK_3: &[Flag] = &[b("dry-run"), b("force"), b("recreate-pods"), b("wait")];
const ROLLBACK_4: &[Flag] = &[
    v("dry-run"),
    b("force-replace"),
    b("force-conflicts"),
    v("server-side"),
    v("wait"),
];

const VERSION_COMMON: &[Flag] = &[b("short"), v("template")];
const VERSION_3: &[Flag] = &[s(b("client"), 'c')];

/// The persistent flags, valid on every command and before the command word.
pub fn global(major: u64) -> Vec<Flag> {
    let extra: &[Flag] = if major >= 4 { GLOBAL_4 } else { &[] };
    GLOBAL.iter().chain(extra).copied().collect()
}

/// Every flag `command` accepts on helm `major` (3 or 4; anything newer is
/// taken to be 4, anything older 3), the persistent flags included.
pub fn accepted(major: u64, command: Command) -> Vec<Flag> {
    let four = major >= 4;
    let pick = |three: &'static [Flag], four_: &'static [Flag]| if four { four_ } else { three };
    let install = pick(INSTALL_3, INSTALL_4);
    let own: Vec<&[Flag]> = match command {
        Command::Version => vec![VERSION_COMMON, pick(VERSION_3, &[])],
        Command::Install => vec![
            INSTALL_COMMON,
            install,
            INSTALL_ONLY,
            VALUES,
            CHART_PATH,
            pick(&[], INSTALL_SERVER_SIDE_4),
        ],
        Command::Upgrade => vec![
            INSTALL_COMMON,
            install,
            UPGRADE_ONLY,
            VALUES,
            CHART_PATH,
            pick(UPGRADE_3, UPGRADE_SERVER_SIDE_4),
        ],
        Command::Template => vec![
            INSTALL_COMMON,
            install,
            TEMPLATE_ONLY,
            VALUES,
            CHART_PATH,
            pick(&[], INSTALL_SERVER_SIDE_4),
        ],
        Command::Uninstall => vec![UNINSTALL_COMMON, pick(INSTALL_3, INSTALL_4_WAIT)],
        Command::List => vec![LIST_COMMON, pick(LIST_3, &[])],
        Command::Status => vec![STATUS_COMMON, pick(STATUS_3, &[])],
        Command::GetValues => vec![GET_VALUES],
        Command::GetManifest => vec![GET_MANIFEST],
        Command::History => vec![HISTORY],
        Command::Pull => vec![PULL, CHART_PATH],
        Command::RepoAdd => vec![REPO_ADD_COMMON, pick(REPO_ADD_3, &[])],
        Command::Rollback => vec![ROLLBACK_COMMON, pick(ROLLBACK_3, ROLLBACK_4)],
    };
    let mut flags = global(major);
    flags.extend(own.iter().flat_map(|set| set.iter().copied()));
    flags
}

/// The first long flag in `argv` (a bootstrap-built command line, command
/// words first) that helm `major` would reject, if any. Values are skipped by
/// the flag's kind, so a value that starts with `--` is not mistaken for a flag.
pub fn unknown_flag(major: u64, command: Command, argv: &[String]) -> Option<String> {
    let flags = accepted(major, command);
    let mut args = argv.iter();
    while let Some(arg) = args.next() {
        if arg == "--" {
            // Positional arguments only from here on.
            break;
        }
        let Some(body) = arg.strip_prefix("--") else {
            continue;
        };
        let (name, inline) = match body.split_once('=') {
            Some((name, _)) => (name, true),
            None => (body, false),
        };
        match flags.iter().find(|f| f.long == name) {
            None => return Some(format!("--{name}")),
            Some(flag) if flag.kind == Kind::Value && !inline => {
                args.next();
            }
            Some(_) => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn has(major: u64, command: Command, long: &str) -> bool {
        accepted(major, command).iter().any(|f| f.long == long)
    }

    #[test]
    fn helm_4_list_has_no_all_flag() {
        assert!(has(3, Command::List, "all"));
        assert!(!has(4, Command::List, "all"));
        assert!(has(4, Command::List, "all-namespaces"));
    }

    #[test]
    fn version_specific_flags() {
        assert!(has(3, Command::Version, "client"));
        assert!(!has(4, Command::Version, "client"));
        assert!(has(3, Command::Status, "show-resources"));
        assert!(!has(4, Command::Status, "show-resources"));
        assert!(!has(3, Command::Upgrade, "rollback-on-failure"));
        assert!(has(4, Command::Upgrade, "rollback-on-failure"));
        assert!(has(3, Command::Upgrade, "recreate-pods"));
        assert!(!has(4, Command::Upgrade, "recreate-pods"));
        assert!(has(4, Command::Template, "content-cache"));
        assert!(!has(3, Command::Template, "content-cache"));
    }

    #[test]
    fn no_command_declares_a_flag_twice() {
        for major in [3, 4] {
            for command in Command::ALL {
                let flags = accepted(major, command);
                for (i, flag) in flags.iter().enumerate() {
                    assert!(
                        !flags[..i].iter().any(|f| f.long == flag.long),
                        "helm {major} {}: --{} twice",
                        command.words(),
                        flag.long
                    );
                    if let Some(c) = flag.short {
                        assert!(
                            !flags[..i].iter().any(|f| f.short == Some(c)),
                            "helm {major} {}: -{c} twice",
                            command.words()
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn unknown_flag_skips_values() {
        let argv: Vec<String> = ["list", "--filter", "--all", "--all"]
            .map(String::from)
            .to_vec();
        assert_eq!(unknown_flag(4, Command::List, &argv), Some("--all".into()));
        assert_eq!(unknown_flag(3, Command::List, &argv), None);
    }
}
