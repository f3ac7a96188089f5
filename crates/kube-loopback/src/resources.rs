//! The kinds the server stores: a fixed builtin table plus whatever the
//! stored CustomResourceDefinitions declare.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceType {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub has_status: bool,
    /// The group's preferred version; discovery lists it first.
    pub preferred: bool,
}

impl ResourceType {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `deployments.apps`, as API error messages name resources.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    pub fn is(&self, group: &str, kind: &str) -> bool {
        self.group == group && self.kind == kind
    }
}

pub const CRD_GROUP: &str = "apiextensions.k8s.io";
pub const CRD_KIND: &str = "CustomResourceDefinition";
const VAP_GROUP: &str = "admissionregistration.k8s.io";

/// (group, version, kind, plural, namespaced, short names, status subresource)
type Row = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    bool,
    &'static [&'static str],
    bool,
);

#[rustfmt::skip]
const BUILTINS: &[Row] = &[
    ("", "v1", "Namespace", "namespaces", false, &["ns"], true),
    ("", "v1", "Node", "nodes", false, &["no"], true),
    ("", "v1", "ConfigMap", "configmaps", true, &["cm"], false),
    ("", "v1", "Secret", "secrets", true, &[], false),
    ("", "v1", "Pod", "pods", true, &["po"], true),
    ("", "v1", "Event", "events", true, &["ev"], false),
    ("", "v1", "Service", "services", true, &["svc"], true),
    ("", "v1", "ServiceAccount", "serviceaccounts", true, &["sa"], false),
    ("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", true, &["pvc"], true),
    ("", "v1", "PersistentVolume", "persistentvolumes", false, &["pv"], true),
    ("", "v1", "Endpoints", "endpoints", true, &["ep"], false),
    ("", "v1", "ResourceQuota", "resourcequotas", true, &["quota"], true),
    ("", "v1", "LimitRange", "limitranges", true, &["limits"], false),
    ("apps", "v1", "Deployment", "deployments", true, &["deploy"], true),
    ("apps", "v1", "DaemonSet", "daemonsets", true, &["ds"], true),
    ("apps", "v1", "StatefulSet", "statefulsets", true, &["sts"], true),
    ("apps", "v1", "ReplicaSet", "replicasets", true, &["rs"], true),
    ("batch", "v1", "Job", "jobs", true, &[], true),
    ("batch", "v1", "CronJob", "cronjobs", true, &["cj"], true),
    ("coordination.k8s.io", "v1", "Lease", "leases", true, &[], false),
    ("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices", true, &[], false),
    ("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", true, &["hpa"], true),
    ("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", true, &["pdb"], true),
    ("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", true, &["netpol"], false),
    ("networking.k8s.io", "v1", "Ingress", "ingresses", true, &["ing"], true),
    ("networking.k8s.io", "v1", "IngressClass", "ingressclasses", false, &[], false),
    ("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", false, &["pc"], false),
    ("storage.k8s.io", "v1", "StorageClass", "storageclasses", false, &["sc"], false),
    ("events.k8s.io", "v1", "Event", "events", true, &["ev"], false),
    ("rbac.authorization.k8s.io", "v1", "Role", "roles", true, &[], false),
    ("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", true, &[], false),
    ("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", false, &[], false),
    ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", false, &[], false),
    (CRD_GROUP, "v1", CRD_KIND, "customresourcedefinitions", false, &["crd", "crds"], true),
    (VAP_GROUP, "v1", "ValidatingWebhookConfiguration", "validatingwebhookconfigurations", false, &[], false),
    (VAP_GROUP, "v1", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations", false, &[], false),
    (VAP_GROUP, "v1", "ValidatingAdmissionPolicy", "validatingadmissionpolicies", false, &[], true),
    (VAP_GROUP, "v1", "ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings", false, &[], false),
];

pub fn builtins(validating_admission_policy: bool) -> Vec<ResourceType> {
    BUILTINS
        .iter()
        .filter(|row| {
            validating_admission_policy || !row.2.starts_with("ValidatingAdmissionPolicy")
        })
        .map(
            |&(group, version, kind, plural, namespaced, short, status)| ResourceType {
                group: group.into(),
                version: version.into(),
                kind: kind.into(),
                plural: plural.into(),
                singular: kind.to_lowercase(),
                namespaced,
                short_names: short.iter().map(|s| s.to_string()).collect(),
                categories: Vec::new(),
                has_status: status,
                preferred: true,
            },
        )
        .collect()
}

fn str_at<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
    v.pointer(ptr)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn strings_at(v: &Value, ptr: &str) -> Vec<String> {
    v.pointer(ptr)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// What the API server's CRD validation would reject, reduced to the fields
/// discovery and storage depend on.
pub fn validate_crd(crd: &Value) -> Result<(), String> {
    let group = str_at(crd, "/spec/group").ok_or("spec.group: Required value")?;
    let plural = str_at(crd, "/spec/names/plural").ok_or("spec.names.plural: Required value")?;
    str_at(crd, "/spec/names/kind").ok_or("spec.names.kind: Required value")?;
    let name = str_at(crd, "/metadata/name").unwrap_or("");
    if name != format!("{plural}.{group}") {
        return Err(format!(
            "metadata.name: Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group"
        ));
    }
    match str_at(crd, "/spec/scope") {
        Some("Namespaced" | "Cluster") => {}
        _ => return Err("spec.scope: Unsupported value: must be Namespaced or Cluster".into()),
    }
    let versions = crd.pointer("/spec/versions").and_then(Value::as_array);
    let versions = versions.filter(|v| !v.is_empty()).ok_or(
        "spec.versions: Invalid value: must have exactly one version marked as storage version",
    )?;
    let storage = versions
        .iter()
        .filter(|v| v["storage"].as_bool() == Some(true))
        .count();
    if storage != 1 {
        return Err(
            "spec.versions: Invalid value: must have exactly one version marked as storage version"
                .into(),
        );
    }
    if versions.iter().any(|v| str_at(v, "/name").is_none()) {
        return Err("spec.versions[].name: Required value".into());
    }
    Ok(())
}

/// The kinds a stored CRD serves, one per served version.
pub fn from_crd(crd: &Value) -> Vec<ResourceType> {
    if validate_crd(crd).is_err() {
        return Vec::new();
    }
    let group = str_at(crd, "/spec/group").unwrap_or_default().to_string();
    let kind = str_at(crd, "/spec/names/kind")
        .unwrap_or_default()
        .to_string();
    let plural = str_at(crd, "/spec/names/plural")
        .unwrap_or_default()
        .to_string();
    let singular = str_at(crd, "/spec/names/singular")
        .map(String::from)
        .unwrap_or_else(|| kind.to_lowercase());
    let namespaced = str_at(crd, "/spec/scope") == Some("Namespaced");
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    versions
        .iter()
        .filter(|v| v["served"].as_bool() != Some(false))
        .map(|v| ResourceType {
            group: group.clone(),
            version: v["name"].as_str().unwrap_or_default().to_string(),
            kind: kind.clone(),
            plural: plural.clone(),
            singular: singular.clone(),
            namespaced,
            short_names: strings_at(crd, "/spec/names/shortNames"),
            categories: strings_at(crd, "/spec/names/categories"),
            has_status: v.pointer("/subresources/status").is_some(),
            preferred: v["storage"].as_bool() == Some(true),
        })
        .collect()
}

/// Groups in discovery order, each with its versions (preferred first).
pub fn groups(types: &[ResourceType]) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for rt in types {
        let idx = match out.iter().position(|(g, _)| *g == rt.group) {
            Some(i) => i,
            None => {
                out.push((rt.group.clone(), Vec::new()));
                out.len() - 1
            }
        };
        let versions = &mut out[idx].1;
        if !versions.contains(&rt.version) {
            if rt.preferred {
                versions.insert(0, rt.version.clone());
            } else {
                versions.push(rt.version.clone());
            }
        }
    }
    out
}
