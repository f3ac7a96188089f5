//! The Kubernetes side of a release, only for releases scripted with
//! `apply_manifests: true` and only when a kubeconfig is given: server-side
//! apply of the manifests, and helm's release Secrets
//! (`sh.helm.release.v1.<name>.v<revision>`) so tools that read them see the release.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::GroupVersionKind;
use kube::discovery::{Discovery, Scope};
use kube::{Client, Config};
use serde_json::{Value, json};

use crate::ctx::Ctx;
use crate::state::Release;

/// The field manager helm 4 uses for server-side apply.
const MANAGER: &str = "helm";

pub struct Kube {
    rt: tokio::runtime::Runtime,
    client: Client,
}

impl Kube {
    /// Connects with `--kubeconfig` (else `$KUBECONFIG`) and `--kube-context` (else `$HELM_KUBECONTEXT`); `None` without a kubeconfig.
    pub fn connect(ctx: &Ctx) -> Result<Option<Kube>, String> {
        let kubeconfig = match ctx.args.get("kubeconfig") {
            Some(path) => {
                Some(Kubeconfig::read_from(path).map_err(|e| format!("kubeconfig {path}: {e}"))?)
            }
            None => Kubeconfig::from_env().map_err(|e| format!("KUBECONFIG: {e}"))?,
        };
        let Some(kubeconfig) = kubeconfig else {
            return Ok(None);
        };
        let options = KubeConfigOptions {
            context: ctx
                .args
                .get("kube-context")
                .map(str::to_string)
                .or_else(|| {
                    std::env::var("HELM_KUBECONTEXT")
                        .ok()
                        .filter(|c| !c.is_empty())
                }),
            ..KubeConfigOptions::default()
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("fake-helm: tokio runtime: {e}"))?;
        let client = rt.block_on(async {
            let config = Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(|e| format!("kubernetes cluster unreachable: {e}"))?;
            Client::try_from(config).map_err(|e| format!("kubernetes cluster unreachable: {e}"))
        })?;
        Ok(Some(Kube { rt, client }))
    }

    pub fn ensure_namespace(&self, ns: &str) -> Result<(), String> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        self.rt
            .block_on(api.patch(
                ns,
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(body),
            ))
            .map(drop)
            .map_err(|e| format!("create: failed to create: {e}"))
    }

    /// Writes the release's Secret with helm's labels and its payload (base64 JSON, which helm
    /// reads as well as its usual gzip).
    pub fn write_release_secret(&self, r: &Release, release_json: &Value) -> Result<(), String> {
        let name = secret_name(&r.name, r.revision);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let mut labels: BTreeMap<String, String> = r.labels.clone();
        labels.insert("owner".into(), "helm".into());
        labels.insert("name".into(), r.name.clone());
        labels.insert("status".into(), r.status.clone());
        labels.insert("version".into(), r.revision.to_string());
        labels.insert("modifiedAt".into(), now.to_string());
        let payload = base64(release_json.to_string().as_bytes());
        let body = json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": r.namespace, "labels": labels},
            "type": "helm.sh/release.v1",
            "data": {"release": ByteString(payload.into_bytes())},
        });
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &r.namespace);
        self.rt
            .block_on(api.patch(
                &name,
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(body),
            ))
            .map(drop)
            .map_err(|e| format!("create: failed to create: {e}"))
    }

    /// Relabels an earlier revision's Secret (superseded, failed), ignoring one that is gone.
    pub fn mark_secret(
        &self,
        ns: &str,
        name: &str,
        revision: u64,
        status: &str,
    ) -> Result<(), String> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), ns);
        let patch = json!({"metadata": {"labels": {"status": status}}});
        match self.rt.block_on(api.patch(
            &secret_name(name, revision),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )) {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    }

    pub fn delete_release_secrets(&self, ns: &str, name: &str) -> Result<(), String> {
        let api: Api<Secret> = Api::namespaced(self.client.clone(), ns);
        self.rt.block_on(async {
            let lp = ListParams::default().labels(&format!("owner=helm,name={name}"));
            let secrets = api.list(&lp).await.map_err(|e| e.to_string())?;
            for s in secrets {
                let Some(n) = s.metadata.name else { continue };
                match api.delete(&n, &DeleteParams::default()).await {
                    Err(e) if !is_not_found(&e) => return Err(e.to_string()),
                    _ => {}
                }
            }
            Ok(())
        })
    }

    /// Server-side applies each object, in order, into `ns` unless it names its own namespace.
    pub fn apply(&self, ns: &str, objects: &[Value]) -> Result<(), String> {
        self.rt.block_on(async {
            let mut discovery = None;
            for obj in objects {
                let (api, name, namespaced) = self.api_for(&mut discovery, ns, obj).await?;
                let pp = PatchParams::apply(MANAGER).force();
                let mut body = obj.clone();
                if let Some(meta) = body
                    .get_mut("metadata")
                    .and_then(Value::as_object_mut)
                    .filter(|_| namespaced)
                {
                    meta.entry("namespace")
                        .or_insert_with(|| Value::String(ns.to_string()));
                }
                api.patch(&name, &pp, &Patch::Apply(body))
                    .await
                    .map_err(|e| format!("failed to create resource: {e}"))?;
            }
            Ok(())
        })
    }

    /// Deletes the objects in reverse order; ones already gone are fine, as for helm.
    pub fn delete(&self, ns: &str, objects: &[Value]) -> Result<(), String> {
        self.rt.block_on(async {
            let mut discovery = None;
            for obj in objects.iter().rev() {
                let (api, name, _) = self.api_for(&mut discovery, ns, obj).await?;
                match api.delete(&name, &DeleteParams::background()).await {
                    Err(e) if !is_not_found(&e) => {
                        return Err(format!("uninstallation completed with 1 error(s): {e}"));
                    }
                    _ => {}
                }
            }
            Ok(())
        })
    }

    /// The dynamic API for an object's kind; rediscovers once when the kind is unknown
    /// (a CRD applied earlier in the same run).
    async fn api_for(
        &self,
        discovery: &mut Option<Discovery>,
        ns: &str,
        obj: &Value,
    ) -> Result<(Api<DynamicObject>, String, bool), String> {
        let text = |p: &str| {
            obj.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let (api_version, kind, name) =
            (text("/apiVersion"), text("/kind"), text("/metadata/name"));
        if api_version.is_empty() || kind.is_empty() || name.is_empty() {
            return Err(format!(
                "manifest object lacks apiVersion, kind or metadata.name: {obj}"
            ));
        }
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
        let gvk = GroupVersionKind::gvk(group, version, &kind);
        for fresh in [false, true] {
            if fresh || discovery.is_none() {
                let d = Discovery::new(self.client.clone())
                    .run()
                    .await
                    .map_err(|e| format!("discovery: {e}"))?;
                *discovery = Some(d);
            }
            let found = discovery.as_ref().and_then(|d| d.resolve_gvk(&gvk));
            if let Some((ar, caps)) = found {
                let own_ns = obj
                    .pointer("/metadata/namespace")
                    .and_then(Value::as_str)
                    .unwrap_or(ns);
                return Ok(match caps.scope {
                    Scope::Namespaced => (
                        Api::namespaced_with(self.client.clone(), own_ns, &ar),
                        name,
                        true,
                    ),
                    Scope::Cluster => (Api::all_with(self.client.clone(), &ar), name, false),
                });
            }
        }
        Err(format!(
            "resource mapping not found for name: \"{name}\" namespace: \"{ns}\": no matches for kind \"{kind}\" in version \"{api_version}\""
        ))
    }
}

fn secret_name(name: &str, revision: u64) -> String {
    format!("sh.helm.release.v1.{name}.v{revision}")
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Standard base64 with padding; helm's payload is base64 inside the Secret's own encoding.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_matches_rfc4648_vectors() {
        let cases = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, encoded) in cases {
            assert_eq!(super::base64(plain.as_bytes()), encoded);
        }
    }
}
