//! kustomizations with constructs this scan does not model, built by
//! `kubectl kustomize` (docs/design.md#tree-resolution).

use std::path::{Component, Path, PathBuf};

use serde_json::Value;

use super::{Walker, normalize, object};
use crate::flux::findings::{Finding, NOT_MODELLED, Severity};
use crate::flux::object::Object;

impl Walker {
    /// The objects `kubectl kustomize` builds from `dir`, when the
    /// kustomization `doc` (in `kfile`) uses a [`DELEGATED_FIELDS`] construct
    /// and kubectl is at hand; `None` (the built-in build runs, and warns)
    /// otherwise. Built through a kustomization around `dir` with
    /// `buildMetadata: [originAnnotations]`, whose
    /// `config.kubernetes.io/origin` gives each object's file
    /// (kubernetes-sigs/kustomize `api/internal/target/kusttarget.go`,
    /// `api/resource/origin.go`); generated objects are attributed to the
    /// kustomization that configures them.
    pub(super) fn delegate(
        &mut self,
        dir: &Path,
        kfile: &Path,
        doc: &Value,
        chain: &[String],
    ) -> Option<Vec<Object>> {
        let kubectl = self.kubectl.clone()?;
        let used: Vec<String> = doc
            .as_object()?
            .keys()
            .filter(|k| DELEGATED_FIELDS.contains(&k.as_str()))
            .map(|k| format!("`{k}`"))
            .collect();
        if used.is_empty() {
            return None;
        }
        let file = self.rel(kfile);
        let mut chain = chain.to_vec();
        chain.push(file.clone());
        let built = kubectl_kustomize(&kubectl, dir).and_then(|(wrapper, text)| {
            crate::flux::kyaml::from_multiple(&text)
                .map(|docs| (wrapper, docs))
                .map_err(|error| KubectlError::NotYaml { error })
        });
        let (wrapper, docs) = match built {
            Ok(built) => built,
            Err(why) => {
                self.tree.findings.push(Finding {
                    severity: Severity::Info,
                    code: NOT_MODELLED,
                    release: None,
                    object: None,
                    chain,
                    message: format!(
                        "{file} uses {}, which this scan does not model, and `kubectl kustomize` could not build it ({why}); see the warnings about it",
                        used.join(", ")
                    ),
                    written: None,
                    ignored: false,
                });
                return None;
            }
        };
        let mut objects = Vec::new();
        for mut body in docs.into_iter().filter(|d| !d.is_null()) {
            let origin = take_origin(&mut body);
            let from = origin
                .and_then(|o| {
                    let path = o
                        .get("path")
                        .or(o.get("configuredIn"))?
                        .as_str()?
                        .to_string();
                    Some(self.rel(&normalize(&wrapper.join(path))))
                })
                .unwrap_or_else(|| file.clone());
            let mut object_chain = chain.clone();
            if from != file {
                object_chain.push(from.clone());
            }
            objects.extend(object(body, &from, &object_chain));
        }
        self.tree.findings.push(Finding {
            severity: Severity::Info,
            code: NOT_MODELLED,
            release: None,
            object: None,
            chain,
            message: format!(
                "{file} uses {}, which this scan does not model; it was built with `kubectl kustomize` instead ({})",
                used.join(", "),
                crate::plural::count(objects.len(), "object")
            ),
            written: None,
            ignored: false,
        });
        Some(objects)
    }
}

/// kustomization fields kustomize builds and this scan does not model: with
/// kubectl at hand, a kustomization using one is built by `kubectl
/// kustomize` ([`resolve_with`]). Remote resources are not among them (that
/// build would fetch them).
pub const DELEGATED_FIELDS: [&str; 7] = [
    "generators",
    "transformers",
    "validators",
    "helmCharts",
    "helmGlobals",
    "helmChartInflationGenerator",
    "vars",
];

/// How long `kubectl kustomize` may build one kustomization.
pub(super) const KUBECTL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Why `kubectl kustomize` could not build a kustomization.
#[derive(Debug, thiserror::Error)]
pub(super) enum KubectlError {
    #[error("no temporary directory: {0}")]
    TempDir(#[source] std::io::Error),
    /// Setting up the wrapper kustomization, or waiting for kubectl.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("cannot run {}: {source}", .kubectl.display())]
    Spawn {
        kubectl: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("it did not finish within {}s", .after.as_secs())]
    Timeout { after: std::time::Duration },
    /// kubectl's `error:` lines ([`kubectl_error`]).
    #[error("{reason}")]
    Failed { reason: String },
    #[error("its output is not YAML: {error}")]
    NotYaml {
        #[source]
        error: crate::flux::kyaml::KyamlError,
    },
}

/// `kubectl kustomize` of a kustomization around `dir` with origin
/// annotations: (the wrapper's directory, which the origins are relative
/// to, and the output). kustomize takes no absolute path as a resource, so
/// the wrapper names `dir` relative to itself. No plugin or helm flag is
/// given: exec and container plugins never run, `helmCharts` fails (and the
/// built-in build warns).
pub(super) fn kubectl_kustomize(
    kubectl: &Path,
    dir: &Path,
) -> Result<(PathBuf, String), KubectlError> {
    use std::io::Read;
    let wrapper = tempfile::tempdir().map_err(KubectlError::TempDir)?;
    let base = normalize(&std::fs::canonicalize(wrapper.path())?);
    let target = normalize(&std::fs::canonicalize(dir)?);
    std::fs::write(
        base.join("kustomization.yaml"),
        format!(
            "resources:\n  - {}\nbuildMetadata: [originAnnotations]\n",
            serde_json::Value::from(relative(&base, &target).to_string_lossy().into_owned())
        ),
    )?;
    // Flux builds with no load restrictions (fluxcd/pkg kustomize `Build`:
    // `LoadRestrictionsNone`): files above the kustomization's directory load.
    let mut child = std::process::Command::new(kubectl)
        .arg("kustomize")
        .arg("--load-restrictor")
        .arg("LoadRestrictionsNone")
        .arg(&base)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|source| KubectlError::Spawn {
            kubectl: kubectl.to_path_buf(),
            source,
        })?;
    let read = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            pipe.read_to_string(&mut text).map(|_| text)
        })
    };
    let stdout = read(Box::new(child.stdout.take().expect("piped")));
    let stderr = read(Box::new(child.stderr.take().expect("piped")));
    let deadline = std::time::Instant::now() + KUBECTL_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(KubectlError::Timeout {
                    after: KUBECTL_TIMEOUT,
                });
            }
            Err(e) => return Err(e.into()),
        }
    };
    let stdout = stdout.join().ok().and_then(Result::ok).unwrap_or_default();
    let stderr = stderr.join().ok().and_then(Result::ok).unwrap_or_default();
    if !status.success() {
        return Err(KubectlError::Failed {
            reason: kubectl_error(&stderr),
        });
    }
    Ok((base, stdout))
}

/// kubectl's reason for a failed build: its `error:` lines (kustomize's
/// message is there, after any deprecation notice or warning kubectl prints
/// first), else everything it printed, on one line.
fn kubectl_error(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let errors: Vec<&str> = lines
        .iter()
        .skip_while(|l| !l.to_ascii_lowercase().starts_with("error"))
        .copied()
        .collect();
    let chosen = if errors.is_empty() { lines } else { errors };
    if chosen.is_empty() {
        "no message".to_string()
    } else {
        chosen.join(" ")
    }
}

/// `to` relative to `from` (both absolute and normalized): `../x/y`.
pub(super) fn relative(from: &Path, to: &Path) -> PathBuf {
    let from: Vec<Component> = from.components().collect();
    let to: Vec<Component> = to.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..from.len() {
        out.push("..");
    }
    for part in &to[common..] {
        out.push(part.as_os_str());
    }
    out
}

/// Removes kustomize's `config.kubernetes.io/origin` annotation (and an
/// annotations map it leaves empty) and returns it, parsed.
pub(super) fn take_origin(body: &mut Value) -> Option<Value> {
    let annotations = body
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)?;
    let origin = annotations.remove("config.kubernetes.io/origin")?;
    if annotations.is_empty()
        && let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut)
    {
        meta.remove("annotations");
    }
    serde_saphyr::from_str::<Value>(origin.as_str()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kustomize_resources_are_named_relative_to_the_wrapper() {
        assert_eq!(
            relative(Path::new("/tmp/.tmpX"), Path::new("/work/repo/apps")),
            Path::new("../../work/repo/apps")
        );
        assert_eq!(
            relative(Path::new("/work/a"), Path::new("/work/a/b")),
            Path::new("b")
        );
    }

    #[test]
    fn kubectl_errors_are_its_error_lines() {
        let stderr = "Warning: 'bases' is deprecated. Please use 'resources' instead.\nerror: accumulating resources: accumulation err='accumulating resources from '../x': missing'\n";
        assert_eq!(
            kubectl_error(stderr),
            "error: accumulating resources: accumulation err='accumulating resources from '../x': missing'"
        );
        assert_eq!(kubectl_error("boom\n\nmore\n"), "boom more");
        assert_eq!(kubectl_error(""), "no message");
    }

    #[test]
    fn the_origin_annotation_is_taken_out() {
        let mut body = json!({"metadata": {"name": "x", "annotations": {
            "config.kubernetes.io/origin": "path: ../repo/apps/hr.yaml\n"}}});
        assert_eq!(
            take_origin(&mut body),
            Some(json!({"path": "../repo/apps/hr.yaml"}))
        );
        assert_eq!(body, json!({"metadata": {"name": "x"}}));
        let mut plain = json!({"metadata": {"name": "x", "annotations": {"a": "b"}}});
        assert_eq!(take_origin(&mut plain), None);
        assert_eq!(plain["metadata"]["annotations"], json!({"a": "b"}));
    }
}
