//! Hooks: what a release waits for or runs before (`presync`) and after
//! (`postsync`) its helm operation (docs/design.md#hooks). Readiness hooks
//! are watch-based waits against the API with a timeout (and diagnostics when
//! a workload never becomes ready); command hooks run without a shell unless
//! `shell:`, with the cluster's kubeconfig and context in the environment and
//! the config root as working directory.
//!
//! Each hook kind is one module below (its config shape, its checks, the
//! strings it templates, how `plan` shows it, how it runs) and one entry in
//! the `hook_kinds!` list in this file. Everything else is derived from that
//! list: the keys a hook entry accepts and their JSON Schema ([`HookFile`]), the "must have exactly one of ..." message,
//! [`HookAction`] with its display, rendering and dispatch, and what `apply`,
//! `status` and `check` ask of a hook ([`HookAction::is_readiness`],
//! [`HookAction::workload`]). Matches over the kinds are generated, so they
//! are exhaustive; no code elsewhere matches on a kind.
//!
//! # Adding a hook kind
//!
//! Two source files and two docs:
//!
//! 1. **`src/hooks/<key>.rs`** (new): a marker type named like the variant
//!    (`pub struct Endpoints;`) implementing [`HookKind`]: `File` (what the
//!    user writes under `<key>:`; derive `Deserialize` with
//!    `deny_unknown_fields`, and `JsonSchema`), `Action` (the checked value,
//!    often an [`ObjectRef`]), `Error` (a `thiserror` enum, or
//!    `std::convert::Infallible`), `READINESS`, `check`, `templates`,
//!    `describe` and `run`; `check_rendered` and `workload` when they apply.
//!    A wait goes through [`object::wait`] (one object by name) or
//!    `kube::wait::wait_for_set` (a set selected by labels, e.g. the
//!    EndpointSlices of a Service); keep its readiness rule a pure function
//!    in the module, and unit-test it there.
//! 2. **`src/hooks/mod.rs`** (this file): `pub mod <key>;` and one entry in
//!    `hook_kinds!`: the schema description as a doc comment, then
//!    `<key> => <Variant>,`. The key is one lower-case word: it is the YAML
//!    key and the module name.
//! 3. **Docs**: a row in the hook table of docs/design.md and a line in the
//!    release example of README.md; `tests::docs_name_every_kind` fails until
//!    both mention `<key>:`.
//!
//! Nothing else changes: the loader (`config/load.rs`), the renderer
//! (`config/release_render.rs`), `plan`, `apply`, `status` and `check` only
//! use [`HookFile::check`], [`Hook::render`] and [`HookAction`]'s methods,
//! and the tests that name the kinds read them from the registry (unit
//! tests) or from `bootstrap schema release` (tests/it/validation.rs).

pub(crate) mod command;
pub(crate) mod condition;
pub(crate) mod created;
pub(crate) mod job;
pub(crate) mod object;
mod registry;
pub(crate) mod rollout;
pub(crate) mod shell;

use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;

use crate::handlebars::{Located, Renderer, TemplateContext};
use crate::kube::diagnose::Diagnosis;
use crate::validate::{self, DurationError};
pub use object::ObjectRef;

registry::hook_kinds! {
    /// Wait until a Deployment, DaemonSet or StatefulSet is fully rolled out.
    rollout => Rollout,
    /// Wait until an object has a status condition.
    condition => Condition,
    /// Wait until an object exists.
    created => Created,
    /// Wait until a Job completes.
    job => Job,
    /// Run a program (no shell); every element is a template.
    command => Command,
    /// Run `sh -c` with this script; use only when a shell is needed.
    shell => Shell,
}

/// One kind of hook. Implemented by a marker type per module; the registry
/// turns the implementations into [`HookFile`], [`HookAction`] and
/// [`KindError`].
pub trait HookKind {
    /// What the user writes under the kind's key.
    type File: DeserializeOwned + serde::Serialize + JsonSchema + fmt::Debug;
    /// The checked (and later rendered) hook.
    type Action: Clone + fmt::Debug + PartialEq + Eq + Send + Sync;
    /// Why a `File` cannot be used, or a rendered `Action` is wrong.
    type Error: std::error::Error + Send + Sync + 'static;

    /// `true` for hooks that only wait for something to be ready; `false`
    /// for hooks that change something (commands). An unchanged release runs
    /// its readiness hooks again, so dependents never start on a sick release,
    /// but not the others.
    const READINESS: bool;

    /// Static checks, before rendering; `release_namespace` is the default
    /// for objects named without one.
    fn check(file: &Self::File, release_namespace: &str) -> Result<Self::Action, Self::Error>;

    /// The strings of the action that are templates, in the order they are
    /// rendered (the first error stops).
    fn templates(action: &mut Self::Action) -> Vec<&mut String>;

    /// Checks that need the rendered action (files named by a command).
    fn check_rendered(_action: &Self::Action, _root: &Path) -> Result<(), Self::Error> {
        Ok(())
    }

    /// The kubeconfig contexts the rendered action names itself
    /// (`--context X`, `--kube-context=X`): a hook must act on the cluster
    /// the run targets, so the loader refuses any other.
    fn contexts(_action: &Self::Action) -> Vec<String> {
        Vec::new()
    }

    /// The hook in `plan`, in events and in failure messages.
    fn describe(action: &Self::Action, f: &mut fmt::Formatter<'_>) -> fmt::Result;

    /// Runs the hook within `timeout`; on success, command output if any.
    /// `progress` hears the latest readiness detail (or output lines with `-v`).
    fn run<P: crate::kube::wait::Observer + Send + Sync>(
        action: &Self::Action,
        env: &HookEnv,
        timeout: Duration,
        progress: &P,
    ) -> impl Future<Output = Result<Option<String>, HookFailure>> + Send;

    /// The workload this hook rolls out, if it is one: what `status` judges
    /// now and what `check` compares with Flux health checks.
    fn workload(_action: &Self::Action) -> Option<&ObjectRef> {
        None
    }
}

/// A hook: what it does, and how long it may take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    pub action: HookAction,
    pub timeout: Option<Duration>,
}

/// Why a hook entry cannot be used. The text completes "presync hook ...".
#[derive(Debug, thiserror::Error)]
pub enum HookError {
    #[error("must have exactly one of {} (found {found})", one_of())]
    NotExactlyOne { found: usize },
    #[error(transparent)]
    Kind(#[from] KindError),
    #[error("timeout {0}")]
    Timeout(#[source] DurationError),
    #[error("hook: {0}")]
    Template(Located),
}

/// "`rollout`, `condition`, ..." for messages.
fn one_of() -> String {
    KINDS
        .iter()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl HookFile {
    /// The hook this entry describes, checked; templates are not rendered yet.
    pub fn check(&self, release_namespace: &str) -> Result<Hook, HookError> {
        let action = self.action(release_namespace)?;
        let timeout = self
            .timeout
            .as_deref()
            .map(validate::duration)
            .transpose()
            .map_err(HookError::Timeout)?;
        Ok(Hook { action, timeout })
    }
}

/// What rendering a hook needs: the template engine, one release's context,
/// and the config root (commands' `-f` files are checked against it).
pub struct Templates<'a> {
    pub renderer: &'a Renderer,
    pub context: &'a TemplateContext,
    pub root: &'a Path,
}

impl Hook {
    /// Renders the hook's templates in place, then checks what needs them rendered.
    pub fn render(&mut self, templates: &Templates<'_>) -> Result<(), HookError> {
        for text in self.action.templates() {
            *text = templates
                .renderer
                .render_str_located(text, templates.context)
                .map_err(HookError::Template)?;
        }
        self.action.check_rendered(templates.root)?;
        Ok(())
    }
}

/// What hooks need to reach the cluster.
#[derive(Clone)]
pub struct HookEnv {
    pub client: Option<::kube::Client>,
    pub root: PathBuf,
    /// A kubeconfig whose current context is the cluster's.
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    /// Stream command output line by line as progress (`-v`).
    pub stream: bool,
}

#[derive(Debug)]
pub struct HookFailure {
    pub message: String,
    pub output: Option<String>,
    pub diagnostics: Option<Diagnosis>,
}

impl HookFailure {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        HookFailure {
            message: message.into(),
            output: None,
            diagnostics: None,
        }
    }
}

/// Runs one hook within `timeout`; on success returns command output, if any.
pub(crate) async fn run(
    action: &HookAction,
    env: &HookEnv,
    timeout: Duration,
    progress: impl crate::kube::wait::Observer + Send + Sync,
) -> Result<Option<String>, HookFailure> {
    action.run(env, timeout, &progress).await
}

#[cfg(test)]
mod tests;
