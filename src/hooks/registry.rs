//! The machinery behind the list of hook kinds in `hooks/mod.rs`: from
//! `key => Variant` entries (module `key`, marker type `key::Variant`
//! implementing `HookKind`) it generates
//!
//! - `KINDS`, the keys in list order;
//! - `HookFile`, a hook entry as written (one optional field per kind plus
//!   `timeout`; serde's unknown-key message and the JSON Schema come from it);
//! - `HookAction`, one variant per kind, with `Display` and the dispatch
//!   methods (`check`, `templates`, `check_rendered`, `run`, `is_readiness`,
//!   `workload`);
//! - `KindError`, one variant per kind's `Error`.
//!
//! Every match it writes has one arm per kind and no wildcard.

/// "`a`, `b`, `c`" at compile time, for the `HookFile` doc (the schema's
/// description).
macro_rules! join_keys {
    ($first:ident $(, $rest:ident)*) => {
        concat!("`", stringify!($first), "`" $(, ", `", stringify!($rest), "`")*)
    };
}

macro_rules! hook_kinds {
    ($( $(#[doc = $doc:literal])+ $key:ident => $variant:ident, )+) => {
        /// The key of every hook kind, in registry order.
        pub(crate) const KINDS: &[&str] = &[$(stringify!($key)),+];

        #[doc = concat!("Exactly one of ", $crate::hooks::registry::join_keys!($($key),+), ".")]
        #[derive(Debug, serde::Deserialize, serde::Serialize, schemars::JsonSchema)]
        #[serde(deny_unknown_fields, rename_all = "camelCase")]
        pub struct HookFile {
            $(
                $(#[doc = $doc])+
                pub $key: Option<<$key::$variant as $crate::hooks::HookKind>::File>,
            )+
            /// Bounds this hook (default: what is left of the release timeout).
            pub timeout: Option<String>,
        }

        /// What a hook does, checked and rendered.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum HookAction {
            $(
                $(#[doc = $doc])+
                $variant(<$key::$variant as $crate::hooks::HookKind>::Action),
            )+
        }

        /// A kind's own reason why a hook cannot be used.
        #[derive(Debug, thiserror::Error)]
        pub enum KindError {
            $(
                #[error(transparent)]
                $variant(<$key::$variant as $crate::hooks::HookKind>::Error),
            )+
        }

        impl HookFile {
            /// The one action the entry names, checked by its kind.
            fn action(
                &self,
                release_namespace: &str,
            ) -> Result<HookAction, $crate::hooks::HookError> {
                let mut found = 0;
                let mut action = None;
                $(
                    if let Some(file) = &self.$key {
                        found += 1;
                        action = Some(
                            <$key::$variant as $crate::hooks::HookKind>::check(file, release_namespace)
                                .map(HookAction::$variant)
                                .map_err(KindError::$variant),
                        );
                    }
                )+
                match (found, action) {
                    (1, Some(action)) => Ok(action?),
                    (found, _) => Err($crate::hooks::HookError::NotExactlyOne { found }),
                }
            }
        }

        impl HookAction {
            /// The key this hook was written with (`rollout`, `command`, ...).
            pub fn key(&self) -> &'static str {
                match self {
                    $( HookAction::$variant(_) => stringify!($key), )+
                }
            }

            /// Whether the hook only waits for readiness (see `HookKind::READINESS`).
            pub fn is_readiness(&self) -> bool {
                match self {
                    $( HookAction::$variant(_) => <$key::$variant as $crate::hooks::HookKind>::READINESS, )+
                }
            }

            /// The workload the hook rolls out, if any (see `HookKind::workload`).
            pub fn workload(&self) -> Option<&$crate::hooks::ObjectRef> {
                match self {
                    $( HookAction::$variant(action) => <$key::$variant as $crate::hooks::HookKind>::workload(action), )+
                }
            }

            fn templates(&mut self) -> Vec<&mut String> {
                match self {
                    $( HookAction::$variant(action) => <$key::$variant as $crate::hooks::HookKind>::templates(action), )+
                }
            }

            /// The kubeconfig contexts the rendered hook names itself.
            pub fn contexts(&self) -> Vec<String> {
                match self {
                    $( HookAction::$variant(action) => <$key::$variant as $crate::hooks::HookKind>::contexts(action), )+
                }
            }

            fn check_rendered(&self, root: &std::path::Path) -> Result<(), KindError> {
                match self {
                    $(
                        HookAction::$variant(action) => {
                            <$key::$variant as $crate::hooks::HookKind>::check_rendered(action, root)
                                .map_err(KindError::$variant)
                        }
                    )+
                }
            }

            /// Runs the hook within `timeout`.
            pub async fn run<P: crate::kube::wait::Observer + Send + Sync>(
                &self,
                env: &$crate::hooks::HookEnv,
                timeout: std::time::Duration,
                progress: &P,
            ) -> Result<Option<String>, $crate::hooks::HookFailure> {
                match self {
                    $(
                        HookAction::$variant(action) => {
                            <$key::$variant as $crate::hooks::HookKind>::run(action, env, timeout, progress).await
                        }
                    )+
                }
            }
        }

        impl std::fmt::Display for HookAction {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                match self {
                    $( HookAction::$variant(action) => <$key::$variant as $crate::hooks::HookKind>::describe(action, f), )+
                }
            }
        }
    };
}

pub(super) use {hook_kinds, join_keys};
