//! The admission guard: a ValidatingAdmissionPolicy that denies creating or
//! updating any Flux HelmRelease whose Helm release is owned by bootstrap, with
//! the ledger's ConfigMaps as its parameters.
//!
//! # Ledger layout the policy relies on
//!
//! The ledger is a set of ConfigMap shards in `kube-system` (docs/design.md#ledger),
//! selected by a label through `paramRef.selector`. With a selector the API
//! server evaluates the policy once per selected parameter and denies when
//! any evaluation denies (ValidatingAdmissionPolicyBinding reference: "each
//! binding will cause its policy to be evaluated N times, where N is the
//! number of parameters selected by the binding"), so an entry in any shard
//! protects its release. Each shard has one data key per release: [`ledger_key`]`(namespace, name)` =
//! `"<namespace>.<name>"` (release names and namespaces are DNS-1123 labels,
//! so they hold no `.` and the key is unambiguous; ConfigMap keys allow
//! `[-._a-zA-Z0-9]`). The value is compact JSON (`serde_json::to_string`):
//! `{"chart":…,"version":…,"valuesDigest":…,"appliedAt":…,"toolVersion":…,"policy":"bootstrap"}`.
//! CEL in the API server cannot parse JSON, so the policy only looks for the
//! exact substring `"policy":"handover"`: such an entry lets Flux adopt the
//! release (the future `handover` policy); any other entry denies. An
//! unreadable or pretty-printed value therefore fails closed.
//!
//! # Release identity in CEL
//!
//! The same helm-controller rules as the offline scan: release name =
//! `spec.releaseName`, else `<spec.targetNamespace>-<metadata.name>`, else
//! `metadata.name`; storage namespace = `spec.storageNamespace`, else the
//! request namespace. Gap: CEL has no SHA-256, so a composed name over 53
//! characters (which helm-controller shortens to its first 40 characters, `-`
//! and 12 hex digits of its hash) is denied when a ledger release in the same
//! namespace has that 41-character prefix and 53 characters, without checking
//! the hash. That errs on the side of denying, and bootstrap release names are
//! written by hand, so it never matters in practice. The denial then names
//! the release of that ledger entry (the shortened name), not the composed
//! one, which helm-controller never creates.
//!
//! Updates of a HelmRelease that is being deleted are allowed when its spec
//! is unchanged, so that helm-controller can remove its finalizer and an old
//! conflicting object can be cleaned up; a spec change is judged as usual.

use serde_json::{Value, json};

/// Name of both the policy and its binding.
pub const POLICY_NAME: &str = "bootstrap-ownership-guard";

/// The ledger ConfigMap data key for a release.
pub fn ledger_key(namespace: &str, name: &str) -> String {
    format!("{namespace}.{name}")
}

const TARGET_NAMESPACE: &str =
    "has(object.spec.targetNamespace) ? object.spec.targetNamespace : ''";

const RELEASE_NAME: &str = "has(object.spec.releaseName) && object.spec.releaseName != '' \
     ? object.spec.releaseName \
     : (variables.targetNamespace != '' \
        ? variables.targetNamespace + '-' + object.metadata.name \
        : object.metadata.name)";

const STORAGE_NAMESPACE: &str = "has(object.spec.storageNamespace) && object.spec.storageNamespace != '' \
     ? object.spec.storageNamespace \
     : request.namespace";

const LEDGER_KEY: &str = "variables.storageNamespace + '.' + variables.releaseName";

/// An update of a HelmRelease that is being deleted which leaves its spec as
/// it was (helm-controller removing its finalizer): let through. Any other
/// update of it is judged like any update, so a spec change cannot slip in
/// while the object waits for its finalizers.
const TERMINATING_UNCHANGED: &str = "has(object.metadata.deletionTimestamp) \
     && request.operation == 'UPDATE' && oldObject != null \
     && (has(object.spec) \
         ? (has(oldObject.spec) && oldObject.spec == object.spec) \
         : !has(oldObject.spec))";

/// The ledger keys of the storage namespace that a composed name over 53
/// characters may have become (helm-controller's shortening; see the module
/// docs): empty for a short name.
const SHORTENED_KEYS: &str = "variables.releaseName.size() > 53 && has(params.data) \
     ? params.data.filter(k, \
         k.size() == variables.storageNamespace.size() + 54 \
         && k.startsWith(variables.storageNamespace + '.' + variables.releaseName.substring(0, 40) + '-') \
         && !params.data[k].contains('\"policy\":\"handover\"')) \
     : []";

const OWNED: &str = "!variables.terminatingUnchanged && has(params.data) && ( \
       (variables.releaseName.size() <= 53 \
        && variables.ledgerKey in params.data \
        && !params.data[variables.ledgerKey].contains('\"policy\":\"handover\"')) \
    || variables.shortenedKeys.size() > 0 )";

/// The Helm release the denial names: the ledger's (shortened) one for a
/// long composed name, so the message names a release that exists.
const MANAGED: &str = "variables.shortenedKeys.size() > 0 \
     ? variables.storageNamespace + '/' \
       + variables.shortenedKeys[0].substring(variables.storageNamespace.size() + 1) \
     : variables.storageNamespace + '/' + variables.releaseName";

/// The policy and its binding, ready to apply with server-side apply.
/// `shard_label` = (key, value) of the label every ledger shard carries.
pub fn admission_policy(ledger_namespace: &str, shard_label: (&str, &str)) -> Vec<Value> {
    let message = "'HelmRelease ' + request.namespace + '/' + object.metadata.name \
         + ' would manage Helm release ' + variables.managedRelease \
         + ', which is owned by bootstrap (ledger ConfigMap ' + params.metadata.namespace + '/' \
         + params.metadata.name + '). \
         Remove this HelmRelease from the Flux tree, or drop the release from bootstrap first.'";
    let labels = json!({ "app.kubernetes.io/managed-by": "bootstrap" });
    let policy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": { "name": POLICY_NAME, "labels": labels },
        "spec": {
            "failurePolicy": "Fail",
            "paramKind": { "apiVersion": "v1", "kind": "ConfigMap" },
            "matchConstraints": {
                "resourceRules": [{
                    "apiGroups": ["helm.toolkit.fluxcd.io"],
                    "apiVersions": ["*"],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": ["helmreleases"],
                }],
            },
            "variables": [
                { "name": "targetNamespace", "expression": TARGET_NAMESPACE },
                { "name": "releaseName", "expression": RELEASE_NAME },
                { "name": "storageNamespace", "expression": STORAGE_NAMESPACE },
                { "name": "ledgerKey", "expression": LEDGER_KEY },
                { "name": "terminatingUnchanged", "expression": TERMINATING_UNCHANGED },
                { "name": "shortenedKeys", "expression": SHORTENED_KEYS },
                { "name": "owned", "expression": OWNED },
                { "name": "managedRelease", "expression": MANAGED },
            ],
            "validations": [{
                "expression": "!variables.owned",
                "messageExpression": message,
                "reason": "Forbidden",
            }],
        },
    });
    let binding = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": { "name": POLICY_NAME, "labels": labels },
        "spec": {
            "policyName": POLICY_NAME,
            "validationActions": ["Deny"],
            "paramRef": {
                "selector": { "matchLabels": { shard_label.0: shard_label.1 } },
                "namespace": ledger_namespace,
                // Before the first apply there is no ledger and nothing to protect.
                "parameterNotFoundAction": "Allow",
            },
        },
    });
    vec![policy, binding]
}
