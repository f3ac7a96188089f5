//! The one user-facing error type. All wording lives here and in [`Problem`]'s
//! `Display`, so every command reports failures the same way: one `error: ...`
//! line per problem (file, line, release, what to do), then a `Caused by:` chain.

use std::fmt;
use std::path::PathBuf;

/// Exit codes: docs/design.md#exit-codes.
pub(crate) const EXIT_OK: i32 = 0;
pub(crate) const EXIT_FAILED: i32 = 1;
pub(crate) const EXIT_INVALID: i32 = 2;
/// Another run holds the cluster lock, or took it during this run: retry later.
pub(crate) const EXIT_LOCKED: i32 = 3;
pub(crate) const EXIT_INTERRUPTED: i32 = 130;

/// How bad an exit code is, for the code of many clusters (`--all`,
/// `--clusters`): a config or prerequisite problem (permanent) over a
/// failure over a held lock (retry later) over success. An interrupt wins
/// over everything: the operator asked to stop.
fn rank(code: i32) -> u8 {
    match code {
        EXIT_OK => 0,
        EXIT_LOCKED => 1,
        EXIT_FAILED => 2,
        EXIT_INVALID => 3,
        EXIT_INTERRUPTED => 5,
        _ => 4,
    }
}

/// The exit code of many clusters: the worst of theirs.
pub(crate) fn worst(codes: impl IntoIterator<Item = i32>) -> i32 {
    codes
        .into_iter()
        .max_by_key(|c| rank(*c))
        .unwrap_or(EXIT_OK)
}

/// One thing wrong with the user's input, located as precisely as we can.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Relative to the config root where possible, so messages stay short.
    pub file: Option<PathBuf>,
    pub line: Option<u64>,
    pub column: Option<u64>,
    /// `namespace/name` of the release the problem belongs to.
    pub release: Option<String>,
    pub message: String,
    /// What another program said about it (sops' message), one line each:
    /// printed under `Caused by:`. Boxed: problems travel in `Result`s.
    pub causes: Box<[String]>,
}

impl Problem {
    pub fn new(message: impl Into<String>) -> Self {
        Problem {
            file: None,
            line: None,
            column: None,
            release: None,
            message: message.into(),
            causes: Box::default(),
        }
    }

    /// Adds a cause; its lines are joined into one.
    pub fn caused_by(mut self, cause: impl fmt::Display) -> Self {
        let cause = cause.to_string();
        let line: Vec<&str> = cause
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        let mut causes = std::mem::take(&mut self.causes).into_vec();
        causes.push(line.join(" "));
        self.causes = causes.into_boxed_slice();
        self
    }

    pub fn file(mut self, file: impl Into<PathBuf>) -> Self {
        self.file = Some(file.into());
        self
    }

    pub fn at(mut self, line: u64, column: u64) -> Self {
        if line > 0 {
            self.line = Some(line);
            self.column = (column > 0).then_some(column);
        }
        self
    }

    pub fn release(mut self, release: impl fmt::Display) -> Self {
        self.release = Some(release.to_string());
        self
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = &self.file {
            write!(f, "{}", file.display())?;
            if let Some(line) = self.line {
                write!(f, ":{line}")?;
                if let Some(column) = self.column {
                    write!(f, ":{column}")?;
                }
            }
            write!(f, ": ")?;
        }
        if let Some(release) = &self.release {
            write!(f, "release `{release}`: ")?;
        }
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for Problem {}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The command line itself is wrong (clap reports most of these itself).
    #[error("{0}")]
    Usage(String),

    /// The config has one or more problems; nothing was changed anywhere.
    #[error("{}", problems_summary(.0))]
    Config(Vec<Problem>),

    /// A prerequisite (helm, kubeconfig, ...) is missing or unusable.
    #[error(transparent)]
    Prerequisite(Box<Prerequisite>),

    /// The operation ran and failed (a release, hook or wait failed or timed out).
    #[error(transparent)]
    Failed(Box<Failure>),

    /// `check` found error-level findings; they were already printed.
    #[error("{0}")]
    Findings(String),

    /// `diff --exit-code` found something `apply` would change; the diff
    /// itself was the output, so nothing more is printed.
    #[error("{0}")]
    Changes(String),

    /// Another bootstrap run holds the cluster lock (or took it over during
    /// this run): nothing is wrong with the config or the cluster, so a Job
    /// controller retries later (docs/design.md#exit-codes).
    #[error("{0}")]
    Locked(String),

    /// Several clusters ran (`apply --all`); some did not succeed. Their own
    /// errors were already printed; `code` is the worst of theirs.
    #[error("{message}")]
    Clusters { message: String, code: i32 },

    /// A run's failure after its `run_finished` event (JSON Lines) already
    /// carried the summary: said on stderr, not again on stdout.
    #[error(transparent)]
    Summarized(Box<Error>),

    /// SIGINT/SIGTERM: what was running was stopped and reported.
    #[error(
        "interrupted; what was running was stopped, nothing new was started (run the command again to continue)"
    )]
    Interrupted,
}

/// A lower module's error, boxed: the layers below `error` return their
/// own enums, which `error` cannot name without an import cycle.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What is missing or unusable before a command can start (exit 2).
#[derive(Debug, thiserror::Error)]
pub enum Prerequisite {
    #[error(
        "cannot read kubeconfig `{}`; pass --kubeconfig FILE with a readable kubeconfig",
        .path.display()
    )]
    KubeconfigUnreadable {
        path: PathBuf,
        #[source]
        source: ::kube::config::KubeconfigError,
    },
    #[error(
        "no kubeconfig found ($KUBECONFIG unset, ~/.kube/config unreadable); pass --kubeconfig FILE"
    )]
    NoKubeconfig {
        #[source]
        source: ::kube::config::KubeconfigError,
    },
    #[error(
        "the kubeconfig has no current context; set `context:` in cluster.yaml or pass --context NAME"
    )]
    NoContext,
    /// `known`: the contexts the kubeconfig has.
    #[error(
        "kubeconfig context `{context}` does not exist{}; contexts: {}; set `context:` in cluster.yaml or pass --context NAME",
        did_you_mean(.context, .known.iter().map(String::as_str)),
        if .known.is_empty() { "none".to_string() } else { .known.join(", ") }
    )]
    UnknownContext { context: String, known: Vec<String> },
    #[error("kubeconfig context `{context}` is not usable")]
    UnusableContext {
        context: String,
        #[source]
        source: ::kube::config::KubeconfigError,
    },
    #[error("cannot build a client for context `{context}`")]
    Client {
        context: String,
        #[source]
        source: ::kube::Error,
    },
    /// `helm version` failed (helm missing, or not a helm); helm's error
    /// says which, in its own words.
    #[error("{error}")]
    Helm { error: BoxError },
    /// The helmfile `import` was told to use cannot run.
    #[error("{error}")]
    Helmfile { error: BoxError },
}

/// How a command that ran failed (exit 1). Each variant is one cause, with
/// what its words need; a lower module's error is the `source`, printed
/// under `Caused by:`.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    #[error("cannot start the async runtime")]
    Runtime {
        #[source]
        source: std::io::Error,
    },
    #[error(
        "cannot reach the Kubernetes API server of context `{context}` at {server} within {}; nothing was changed. Check that it is up and that the kubeconfig points at it (--kubeconfig, --context), or wait longer with --wait-for-api",
        crate::duration::span(*.budget)
    )]
    Unreachable {
        context: String,
        server: String,
        budget: std::time::Duration,
        /// The innermost cause, in words.
        #[source]
        source: BoxError,
    },
    #[error("cluster `{cluster}` was not loaded")]
    NotLoaded { cluster: String },
    /// Error-level findings that `lints.ignore` does not list: of the
    /// lints, or of the Flux scan of the cluster's GitOps tree.
    #[error(transparent)]
    Refused(#[from] crate::finding::Refusal),
    /// The live refusal rules (docs/design.md#live-refusal-rules), one line each.
    #[error("refusing to apply; nothing was changed:\n  {}", .conflicts.join("\n  "))]
    OwnershipRefused { conflicts: Vec<String> },
    /// The ledger says another cluster config installed these releases.
    #[error(
        "apply of cluster `{cluster}` refused: the ownership ledger of this cluster says its releases were installed by cluster config {}; nothing was changed. Check the kubeconfig context (--context, or `context:` in clusters/{cluster}/cluster.yaml); pass --force to apply `{cluster}` over them anyway",
        .installed_by.join(" and ")
    )]
    OtherCluster {
        cluster: String,
        installed_by: Vec<String>,
    },
    #[error("cannot list Flux HelmReleases in the cluster")]
    ListHelmReleases {
        #[source]
        source: BoxError,
    },
    #[error("cannot list Helm releases")]
    ListReleases {
        #[source]
        source: BoxError,
    },
    /// `releases`: the plan's releases in `namespace` whose secrets were
    /// to be read (`kube-system/cilium, kube-system/coredns`).
    #[error("cannot read the Helm release secrets in namespace {namespace} (of {releases})")]
    ReleaseSecrets {
        namespace: String,
        releases: String,
        #[source]
        source: BoxError,
    },
    #[error("cannot read the manifest of {release}")]
    Manifest {
        release: String,
        #[source]
        source: BoxError,
    },
    #[error("cannot render the CRDs of the CRD phase; nothing was changed")]
    CrdRender {
        #[source]
        source: BoxError,
    },
    #[error("cannot render the CRD phase, whose API versions the manifests are rendered with")]
    ApiVersions {
        #[source]
        source: BoxError,
    },
    #[error("cannot render the CRDs to delete; nothing was changed")]
    CrdsToDelete {
        #[source]
        source: BoxError,
    },
    #[error("the CRD phase failed; no release was touched")]
    CrdPhase {
        #[source]
        source: BoxError,
    },
    #[error(
        "cannot install the admission guard (set `guard: false` in cluster.yaml to go without it)"
    )]
    Guard {
        #[source]
        source: BoxError,
    },
    /// The ownership ledger or the cluster lock could not be read or
    /// written: the module's own error, its words and its causes.
    #[error(transparent)]
    Cluster(Cause),
    #[error("cannot read {release} from helm")]
    ReadRelease {
        release: String,
        #[source]
        source: BoxError,
    },
    #[error("cannot read the deployed values of {release} from helm")]
    ReadValues {
        release: String,
        #[source]
        source: BoxError,
    },
    /// `diff` of one release.
    #[error("release `{release}`")]
    Diff {
        release: String,
        #[source]
        source: BoxError,
    },
    #[error("release `{release}`: helm could not render the chart")]
    Template {
        release: String,
        #[source]
        source: BoxError,
    },
    #[error("release `{release}`: helm template printed invalid YAML: {problem}")]
    TemplateOutput { release: String, problem: Problem },
    #[error("cannot write output")]
    Output {
        #[source]
        source: std::io::Error,
    },
    #[error("cannot create `{}`", .path.display())]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write `{}`", .path.display())]
    WriteFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the fleet's scheduler closed")]
    FleetClosed,
    #[error("destroy cancelled; nothing was changed")]
    Cancelled,
    #[error(
        "--timeout {} reached before any release ran; nothing was changed by releases",
        .timeout.map(crate::duration::span).unwrap_or_default()
    )]
    TimeoutBeforeStart {
        timeout: Option<std::time::Duration>,
    },
    #[error(
        "apply timed out after {} (--timeout)",
        .timeout.map(crate::duration::span).unwrap_or_default()
    )]
    TimedOut {
        timeout: Option<std::time::Duration>,
    },
    /// `releases`: the releases that failed first, as the summary names
    /// them (empty: what failed is in the summary).
    #[error("apply of cluster `{cluster}` failed: {}", if .releases.is_empty() {
        "see the summary above".to_string()
    } else {
        format!("{} failed", .releases)
    })]
    ApplyFailed { cluster: String, releases: String },
    /// `releases` as for `ApplyFailed` (empty: the CRDs could not be deleted).
    #[error("destroy of cluster `{cluster}` failed: {}", if .releases.is_empty() {
        "CRDs could not be deleted; see the warnings above".to_string()
    } else {
        format!("{} failed; what they need was kept", .releases)
    })]
    DestroyFailed { cluster: String, releases: String },
}

/// A lower module's error carried whole: its own words, then its own
/// causes (not itself again, as a plain `#[source]` would print it).
#[derive(Debug)]
pub struct Cause(pub BoxError);

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Cause {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

fn problems_summary(problems: &[Problem]) -> String {
    match problems {
        [one] => one.to_string(),
        many => format!("{} problems in the config", many.len()),
    }
}

/// An error and its causes on one line (`what: why: why`), for the places
/// that show a failure in one line (a release's result in the summary).
pub(crate) fn one_line(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = words(error);
    if error.downcast_ref::<::kube::Error>().is_none() {
        for cause in causes(error.source()) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

/// The chain of causes from `source` on, in words: an API error reads as
/// the server's message and status code (kube's own text appends the Debug
/// dump of the whole `Status`), and its own sources are already in it.
///
/// A cause that only repeats the one before it is left out (kube's
/// kubeconfig errors both say and wrap their I/O error).
pub(crate) fn causes(mut source: Option<&(dyn std::error::Error + 'static)>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    while let Some(cause) = source {
        // A cause with no words of its own (an io::Error built from an
        // empty message) is never printed as an empty line.
        let text = words(cause).trim().to_string();
        if !text.is_empty() && !out.last().is_some_and(|last| last.contains(&text)) {
            out.push(text);
        }
        if cause.downcast_ref::<::kube::Error>().is_some() {
            break;
        }
        source = cause.source();
    }
    out
}

fn words(error: &(dyn std::error::Error + 'static)) -> String {
    match error.downcast_ref::<::kube::Error>() {
        Some(e) => describe_kube(e),
        None => error.to_string(),
    }
}

/// An API error in a person's words: the server's message and status code,
/// not the Debug dump of a `Status`; other errors with their causes.
/// The innermost cause of `e` with words of its own (`Connection refused
/// (os error 111)`), else `e` itself.
pub(crate) fn innermost(e: &(dyn std::error::Error + 'static)) -> String {
    let mut innermost = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !text.trim().is_empty() {
            innermost = text;
        }
        source = cause.source();
    }
    innermost
}

pub(crate) fn describe_kube(e: &::kube::Error) -> String {
    if let ::kube::Error::Api(s) = e {
        return match (s.message.is_empty(), s.reason.is_empty()) {
            (false, _) => format!("{} ({})", s.message, s.code),
            (true, false) => format!("{} ({})", s.reason, s.code),
            (true, true) => format!("HTTP {}", s.code),
        };
    }
    // The transport's chain (`ServiceError: client error (Connect): tcp
    // connect error: Connection refused (os error 111)`) says one thing:
    // the server could not be reached, and its innermost cause why.
    if let ::kube::Error::Service(_) | ::kube::Error::HyperError(_) = e {
        return format!("the API server could not be reached: {}", innermost(e));
    }
    let mut out = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = cause.source();
    }
    out
}

impl From<Prerequisite> for Error {
    fn from(e: Prerequisite) -> Self {
        Error::Prerequisite(Box::new(e))
    }
}

impl From<Failure> for Error {
    fn from(e: Failure) -> Self {
        Error::Failed(Box::new(e))
    }
}

impl From<crate::stop::Interrupted> for Error {
    fn from(_: crate::stop::Interrupted) -> Self {
        Error::Interrupted
    }
}

impl Error {
    pub fn config(problem: Problem) -> Self {
        Error::Config(vec![problem])
    }

    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Usage(_) | Error::Config(_) | Error::Prerequisite(_) => EXIT_INVALID,
            Error::Failed(_) | Error::Findings(_) | Error::Changes(_) => EXIT_FAILED,
            Error::Locked(_) => EXIT_LOCKED,
            Error::Clusters { code, .. } => *code,
            Error::Summarized(inner) => inner.exit_code(),
            Error::Interrupted => EXIT_INTERRUPTED,
        }
    }

    /// The text printed on stderr: `error: ` lines, then the cause chain.
    pub fn render(&self) -> String {
        let mut out = String::new();
        match self {
            Error::Changes(_) => return out,
            Error::Config(problems) => {
                for problem in problems {
                    out.push_str(&format!("error: {problem}\n"));
                    let said: Vec<&String> = problem
                        .causes
                        .iter()
                        .filter(|c| !c.trim().is_empty())
                        .collect();
                    if !said.is_empty() {
                        out.push_str("Caused by:\n");
                    }
                    for cause in said {
                        out.push_str(&format!("    {cause}\n"));
                    }
                }
                if problems.len() > 1 {
                    out.push_str(&format!(
                        "error: {} problems in the config; nothing was changed\n",
                        problems.len()
                    ));
                }
            }
            other => out.push_str(&format!("error: {other}\n")),
        }
        let causes = causes(std::error::Error::source(self));
        if !causes.is_empty() {
            out.push_str("Caused by:\n");
        }
        for cause in causes {
            out.push_str(&format!("    {cause}\n"));
        }
        out
    }
}

impl Problem {
    /// docs/design.md#error-json: `{file, line, column, release, message}`,
    /// absent parts `null`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "file": self.file.as_ref().map(|f| f.display().to_string()),
            "line": self.line,
            "column": self.column,
            "release": self.release,
            "message": self.message,
            "causes": self.causes,
        })
    }
}

impl Error {
    /// The findings a refusal rests on, as check JSON shapes them
    /// (docs/design.md#error-json); empty for every other error.
    fn findings_json(&self) -> Vec<serde_json::Value> {
        let Error::Failed(failure) = self else {
            return Vec::new();
        };
        match failure.as_ref() {
            Failure::Refused(refusal) => refusal
                .blocking
                .iter()
                .filter_map(|f| serde_json::to_value(f).ok())
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The error as `--output json` prints it on stdout
    /// (docs/design.md#error-json): one line, so it is also a valid last
    /// line of `apply`'s and `destroy`'s JSON Lines.
    pub fn to_json(&self) -> serde_json::Value {
        let (error, problems) = match self {
            Error::Config(problems) => (
                match problems.as_slice() {
                    [one] => one.to_string(),
                    many => format!("{} problems in the config; nothing was changed", many.len()),
                },
                problems.iter().map(Problem::to_json).collect(),
            ),
            other => (other.to_string(), Vec::new()),
        };
        let mut causes = Vec::new();
        if let Error::Config(problems) = self
            && let [one] = problems.as_slice()
        {
            causes.extend(one.causes.iter().cloned().map(serde_json::Value::String));
        }
        causes.extend(
            self::causes(std::error::Error::source(self))
                .into_iter()
                .map(serde_json::Value::String),
        );
        serde_json::json!({
            "error": error,
            "exitCode": self.exit_code(),
            "problems": problems,
            "findings": self.findings_json(),
            "causes": causes,
        })
    }

    /// Whether the command already printed its whole result (`check`,
    /// `plan` and `status` findings): JSON output then has nothing to add.
    pub fn already_reported(&self) -> bool {
        // Several clusters' results: each cluster's own result (errors
        // included) is in the command's JSON already.
        matches!(
            self,
            Error::Findings(_) | Error::Clusters { .. } | Error::Changes(_) | Error::Summarized(_)
        )
    }
}

/// `did you mean `x`?` by edit distance, the way just suggests recipe names.
pub(crate) fn suggest<'a>(
    wrong: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|candidate| (strsim::damerau_levenshtein(wrong, candidate), candidate))
        .filter(|(distance, candidate)| *distance <= 2.max(candidate.len() / 3) && *distance > 0)
        .min()
        .map(|(_, candidate)| candidate)
}

pub(crate) fn did_you_mean<'a>(
    wrong: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> String {
    suggest(wrong, candidates)
        .map(|s| format!("; did you mean `{s}`?"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_worst_exit_code_wins() {
        assert_eq!(worst([0, 0]), 0);
        assert_eq!(worst([0, 3]), 3);
        assert_eq!(worst([3, 1, 0]), 1);
        assert_eq!(worst([1, 2, 3]), 2);
        assert_eq!(worst([2, 130, 0]), 130);
        assert_eq!(worst([]), 0);
    }

    use super::*;

    #[test]
    fn problem_names_file_line_and_release() {
        let p = Problem::new("needs `cilum`, which is not a release")
            .file("releases/core.yaml")
            .at(12, 5)
            .release("kube-system/coredns");
        assert_eq!(
            p.to_string(),
            "releases/core.yaml:12:5: release `kube-system/coredns`: needs `cilum`, which is not a release"
        );
    }

    #[test]
    fn suggestion_prefers_closest_name() {
        let names = ["cilium", "coredns", "cert-manager"];
        assert_eq!(suggest("cilum", names), Some("cilium"));
        assert_eq!(suggest("cert-manger", names), Some("cert-manager"));
        assert_eq!(suggest("flux", names), None);
    }

    #[test]
    fn exit_codes_follow_the_spec() {
        assert_eq!(Error::config(Problem::new("x")).exit_code(), 2);
        assert_eq!(Error::from(Failure::FleetClosed).exit_code(), 1);
        assert_eq!(Error::from(Prerequisite::NoContext).exit_code(), 2);
        assert_eq!(Error::Interrupted.exit_code(), 130);
    }

    #[test]
    fn json_holds_every_problem_and_the_exit_code() {
        let e = Error::Config(vec![
            Problem::new("a").file("r.yaml").at(3, 4).release("ns/x"),
            Problem::new("b"),
        ]);
        assert_eq!(
            e.to_json(),
            serde_json::json!({
                "error": "2 problems in the config; nothing was changed",
                "exitCode": 2,
                "problems": [
                    {"file": "r.yaml", "line": 3, "column": 4, "release": "ns/x", "message": "a", "causes": []},
                    {"file": null, "line": null, "column": null, "release": null, "message": "b", "causes": []},
                ],
                "findings": [],
                "causes": [],
            })
        );
        let e = Error::config(Problem::new("a").caused_by("sops said\n\n  this"));
        assert_eq!(e.to_json()["causes"], serde_json::json!(["sops said this"]));
        assert_eq!(
            e.to_json()["problems"][0]["causes"],
            serde_json::json!(["sops said this"])
        );
        let e = Error::from(Failure::Output {
            source: std::io::Error::other("disk full"),
        });
        assert_eq!(e.to_json()["causes"], serde_json::json!(["disk full"]));
    }

    #[test]
    fn api_errors_read_as_words_not_debug_dumps() {
        let status =
            ::kube::core::Status::failure("etcdserver: request timed out", "ServiceUnavailable")
                .with_code(503);
        let api = ::kube::Error::Api(Box::new(status));
        let e = Error::from(crate::ledger::LedgerError::Record(
            crate::release::ReleaseId::new("kube-system", "cilium"),
            api,
        ));
        assert!(matches!(&e, Error::Failed(f) if matches!(**f, Failure::Cluster(_))));
        assert_eq!(
            e.render(),
            "error: cannot record kube-system/cilium in the ownership ledger\nCaused by:\n    etcdserver: request timed out (503)\n"
        );
        assert_eq!(
            e.to_json()["causes"],
            serde_json::json!(["etcdserver: request timed out (503)"])
        );
        let nested = crate::ledger::LedgerError::Record(
            crate::release::ReleaseId::new("kube-system", "cilium"),
            ::kube::Error::Api(Box::new(
                ::kube::core::Status::failure("no", "ServiceUnavailable").with_code(503),
            )),
        );
        assert_eq!(
            one_line(&nested),
            "cannot record kube-system/cilium in the ownership ledger: no (503)"
        );
    }

    #[test]
    fn render_prints_every_problem_then_a_summary() {
        let e = Error::Config(vec![Problem::new("a"), Problem::new("b")]);
        assert_eq!(
            e.render(),
            "error: a\nerror: b\nerror: 2 problems in the config; nothing was changed\n"
        );
        let e = Error::config(Problem::new("a").caused_by("why"));
        assert_eq!(e.render(), "error: a\nCaused by:\n    why\n");
    }

    /// A transport error reads as what it means, with its innermost cause,
    /// not as the client's chain of wrappers.
    #[test]
    fn an_unreachable_api_server_is_said_in_words() {
        let refused = ::kube::Error::Service(Box::new(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "Connection refused (os error 111)",
        )));
        assert_eq!(
            describe_kube(&refused),
            "the API server could not be reached: Connection refused (os error 111)"
        );
    }

    /// A cause with no words (an io::Error made from an empty message, as
    /// a full disk can give) is never printed as an empty `Caused by:`.
    #[test]
    fn an_empty_cause_is_never_printed() {
        #[derive(Debug, thiserror::Error)]
        #[error("cannot write the values file of kube-system/cilium")]
        struct Write(#[source] std::io::Error);
        let empty = Write(std::io::Error::other(""));
        assert_eq!(
            one_line(&empty),
            "cannot write the values file of kube-system/cilium"
        );
        assert!(causes(std::error::Error::source(&empty)).is_empty());
        let e = Error::config(Problem::new("a").caused_by(" "));
        assert_eq!(e.render(), "error: a\n");
    }
}
