//! `$FAKE_HELM_SCRIPT`: per-release behaviour knobs. Keys are `namespace/name`,
//! `name` or `*`; the knobs of all matching keys are layered in that order of
//! precedence (`namespace/name` wins), so `*` can carry defaults.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize, Default, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct Knobs {
    /// Milliseconds install/upgrade/uninstall spend "working", with the release pending.
    pub delay_ms: Option<u64>,
    /// Milliseconds `template` takes (rendering a big chart is not instant).
    pub template_delay_ms: Option<u64>,
    /// `template` fails with this message (`Error: <it>`, exit 1).
    pub template_fail: Option<String>,
    /// Printed verbatim on stderr when install/upgrade fails (exit 1, release failed).
    pub fail: Option<String>,
    /// Fail only the first n attempts of the release (needs `fail` for the message, or uses a default).
    pub fail_times: Option<u64>,
    /// CRD objects, emitted by `template --include-crds`.
    pub crds: Option<Vec<Value>>,
    /// Objects emitted by `template` and `get manifest`, and applied on install with `apply_manifests`;
    /// `{{ .Values.a.b }}` and `{{ .Chart.Version }}` in their strings are filled in as a chart would.
    pub manifests: Option<Vec<Value>>,
    /// Apply `manifests` and write helm's release Secret through the Kubernetes API.
    pub apply_manifests: Option<bool>,
    /// Printed verbatim by every form of `helm version`.
    pub version_output: Option<String>,
    /// The chart's appVersion; the chart version otherwise.
    pub app_version: Option<String>,
    /// Chart default values, merged under the user values by `get values --all`.
    pub chart_values: Option<Value>,
}

impl Knobs {
    fn overlay(&mut self, o: Knobs) {
        macro_rules! take {
            ($($f:ident),*) => { $( if o.$f.is_some() { self.$f = o.$f; } )* };
        }
        take!(
            delay_ms,
            template_delay_ms,
            template_fail,
            fail,
            fail_times,
            crds,
            manifests,
            apply_manifests,
            version_output,
            app_version,
            chart_values
        );
    }
}

pub struct Script {
    entries: BTreeMap<String, Knobs>,
}

impl Script {
    /// Reads `$FAKE_HELM_SCRIPT`; no variable means no knobs.
    pub fn from_env() -> Result<Script, String> {
        let Some(path) = std::env::var_os("FAKE_HELM_SCRIPT").filter(|p| !p.is_empty()) else {
            return Ok(Script {
                entries: BTreeMap::new(),
            });
        };
        let shown = path.to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("fake-helm: reading FAKE_HELM_SCRIPT {shown}: {e}"))?;
        let entries = serde_json::from_str(&text)
            .map_err(|e| format!("fake-helm: invalid FAKE_HELM_SCRIPT {shown}: {e}"))?;
        Ok(Script { entries })
    }

    pub fn knobs(&self, namespace: &str, name: &str) -> Knobs {
        let mut knobs = Knobs::default();
        for key in [
            "*".to_string(),
            name.to_string(),
            format!("{namespace}/{name}"),
        ] {
            if let Some(k) = self.entries.get(&key) {
                knobs.overlay(k.clone());
            }
        }
        knobs
    }

    pub fn defaults(&self) -> Knobs {
        self.entries.get("*").cloned().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specific_key_wins_over_name_and_default() {
        let script = Script {
            entries: serde_json::from_str(
                r#"{"*": {"delay_ms": 5, "fail": "x"}, "a": {"delay_ms": 7}, "ns/a": {"fail": "y"}}"#,
            )
            .unwrap(),
        };
        let k = script.knobs("ns", "a");
        assert_eq!((k.delay_ms, k.fail.as_deref()), (Some(7), Some("y")));
        let other = script.knobs("other", "a");
        assert_eq!(
            (other.delay_ms, other.fail.as_deref()),
            (Some(7), Some("x"))
        );
    }
}
