//! The admission guard's CEL, evaluated with a CEL implementation the way the
//! API server does: `object`, `request` and `params` (the ledger ConfigMap)
//! bound, `variables` evaluated in order, then the validation.

use std::sync::Arc;

use bootstrap::flux::helmrelease::identity;
use bootstrap::flux::{admission_policy, ledger_key, shorten_name};
use cel::{Context, Env, Program};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

struct Guard {
    env: Arc<Env>,
    variables: Vec<(String, Program)>,
    validation: Program,
    message: Program,
}

fn guard() -> Guard {
    let policy = &admission_policy("kube-system", ("bootstrap.dev/ledger", "ownership"))[0];
    let mut env = Env::stdlib();
    // Kubernetes enables cel-go's strings extension; `substring` comes from it.
    env.add_extension(cel::extensions::strings).unwrap();
    let env = Arc::new(env);
    let compile = |source: &Value| env.compile(source.as_str().unwrap()).unwrap();
    let spec = &policy["spec"];
    Guard {
        variables: spec["variables"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                (
                    v["name"].as_str().unwrap().to_string(),
                    compile(&v["expression"]),
                )
            })
            .collect(),
        validation: compile(&spec["validations"][0]["expression"]),
        message: compile(&spec["validations"][0]["messageExpression"]),
        env: env.clone(),
    }
}

/// `Err(message)` when the policy denies. An UPDATE changes nothing of the
/// object it updates (see [`admit_update`]).
fn admit(guard: &Guard, operation: &str, object: &Value, ledger: &Value) -> Result<(), String> {
    let old = (operation == "UPDATE").then_some(object);
    admit_change(guard, operation, old, object, ledger)
}

/// An UPDATE from `old` to `object`.
fn admit_update(guard: &Guard, old: &Value, object: &Value, ledger: &Value) -> Result<(), String> {
    admit_change(guard, "UPDATE", Some(old), object, ledger)
}

fn admit_change(
    guard: &Guard,
    operation: &str,
    old: Option<&Value>,
    object: &Value,
    ledger: &Value,
) -> Result<(), String> {
    let namespace = object["metadata"]["namespace"]
        .as_str()
        .unwrap_or("flux-system");
    let request = json!({
        "operation": operation,
        "namespace": namespace,
        "name": object["metadata"]["name"],
        "kind": {"group": "helm.toolkit.fluxcd.io", "version": "v2", "kind": "HelmRelease"},
    });
    let mut ctx = Context::with_env(guard.env.clone());
    ctx.add_variable("object", cel::to_value(object).unwrap())
        .unwrap();
    ctx.add_variable(
        "oldObject",
        cel::to_value(old.unwrap_or(&Value::Null)).unwrap(),
    )
    .unwrap();
    ctx.add_variable("request", cel::to_value(&request).unwrap())
        .unwrap();
    ctx.add_variable("params", cel::to_value(ledger).unwrap())
        .unwrap();
    let mut variables = serde_json::Map::new();
    for (name, program) in &guard.variables {
        ctx.add_variable("variables", cel::to_value(&variables).unwrap())
            .unwrap();
        let value = program
            .execute(&ctx)
            .unwrap_or_else(|e| panic!("variable {name}: {e:?}"));
        let value = value.json().unwrap();
        variables.insert(name.clone(), value);
    }
    ctx.add_variable("variables", cel::to_value(&variables).unwrap())
        .unwrap();
    match guard.validation.execute(&ctx).unwrap() {
        cel::Value::Bool(true) => Ok(()),
        cel::Value::Bool(false) => match guard.message.execute(&ctx).unwrap() {
            cel::Value::String(message) => Err(message.to_string()),
            other => panic!("message is not a string: {other:?}"),
        },
        other => panic!("validation is not a bool: {other:?}"),
    }
}

fn entry(chart: &str, policy: &str) -> String {
    serde_json::to_string(&json!({
        "chart": chart, "version": "1.0.0", "valuesDigest": "sha256:00", "appliedAt": "2025-01-01T00:00:00Z",
        "toolVersion": "0.1.0", "policy": policy,
    }))
    .unwrap()
}

const LONG_TARGET: &str = "observability-platform-team-namespace";
const LONG_NAME: &str = "kube-prometheus-stack-operator";

fn ledger() -> Value {
    let long = shorten_name(&format!("{LONG_TARGET}-{LONG_NAME}"));
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "bootstrap-ownership", "namespace": "kube-system"},
        "data": {
            ledger_key("kube-system", "cilium"): entry("cilium", "bootstrap"),
            ledger_key("flux-system", "flux-operator"): entry("flux-operator", "bootstrap"),
            ledger_key("kube-system", "spegel"): entry("spegel", "handover"),
            ledger_key("flux-system", &long): entry("kube-prometheus-stack", "bootstrap"),
        },
    })
}

fn helm_release(name: &str, namespace: Option<&str>, spec: Value) -> Value {
    let mut metadata = json!({ "name": name });
    if let Some(ns) = namespace {
        metadata["namespace"] = json!(ns);
    }
    let mut spec = spec;
    spec["interval"] = json!("1h");
    json!({
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": metadata,
        "spec": spec,
    })
}

#[test]
fn denies_exactly_the_helm_releases_whose_release_is_owned_by_bootstrap() {
    let guard = guard();
    let ledger = ledger();
    let cases = [
        (
            "name only, bootstrap namespace",
            helm_release("cilium", Some("kube-system"), json!({})),
            true,
        ),
        (
            "name only, other namespace",
            helm_release("cilium", Some("flux-system"), json!({})),
            false,
        ),
        (
            "releaseName",
            helm_release("cni", Some("kube-system"), json!({"releaseName": "cilium"})),
            true,
        ),
        (
            "targetNamespace composes the name and stores in the object's namespace",
            helm_release(
                "cilium",
                Some("flux-system"),
                json!({"targetNamespace": "kube-system"}),
            ),
            false,
        ),
        (
            "targetNamespace composing a bootstrap name",
            helm_release(
                "operator",
                Some("flux-system"),
                json!({"targetNamespace": "flux"}),
            ),
            true,
        ),
        (
            "storageNamespace",
            helm_release(
                "cilium",
                Some("flux-system"),
                json!({"storageNamespace": "kube-system"}),
            ),
            true,
        ),
        (
            "releaseName + targetNamespace + storageNamespace",
            helm_release(
                "anything",
                Some("apps"),
                json!({"releaseName": "cilium", "targetNamespace": "kube-system", "storageNamespace": "kube-system"}),
            ),
            true,
        ),
        (
            "unrelated release",
            helm_release("podinfo", Some("default"), json!({})),
            false,
        ),
        (
            "handover entry: Flux may adopt",
            helm_release("spegel", Some("kube-system"), json!({})),
            false,
        ),
        (
            "composed name over 53 characters, shortened by helm-controller",
            helm_release(
                LONG_NAME,
                Some("flux-system"),
                json!({"targetNamespace": LONG_TARGET}),
            ),
            true,
        ),
        (
            "long name with another prefix",
            helm_release(
                "another-release-with-a-rather-long-name",
                Some("flux-system"),
                json!({"targetNamespace": LONG_TARGET}),
            ),
            false,
        ),
    ];
    for (what, object, denied) in &cases {
        for operation in ["CREATE", "UPDATE"] {
            let verdict = admit(&guard, operation, object, &ledger);
            assert_eq!(
                verdict.is_err(),
                *denied,
                "{what} ({operation}): {verdict:?}"
            );
        }
        // The offline scan's rules agree with the CEL (short names).
        let id = identity(
            object["metadata"]["name"].as_str().unwrap(),
            object["metadata"]["namespace"].as_str(),
            &object["spec"],
        );
        let key = ledger_key(id.storage_namespace.as_deref().unwrap(), &id.release_name);
        let owned = ledger["data"]
            .get(&key)
            .and_then(Value::as_str)
            .is_some_and(|v| !v.contains("\"policy\":\"handover\""));
        assert_eq!(owned, *denied, "offline identity for {what}: {key}");
    }
}

#[test]
fn message_names_the_release_and_its_owner() {
    let object = helm_release("cni", Some("kube-system"), json!({"releaseName": "cilium"}));
    let message = admit(&guard(), "CREATE", &object, &ledger()).unwrap_err();
    assert_eq!(
        message,
        "HelmRelease kube-system/cni would manage Helm release kube-system/cilium, which is owned by bootstrap \
         (ledger ConfigMap kube-system/bootstrap-ownership). Remove this HelmRelease from the Flux tree, \
         or drop the release from bootstrap first."
    );
}

/// A composed name over 53 characters: the denial names the release
/// helm-controller would manage, the ledger's shortened name (the composed
/// one is never created; a real API server showed the message naming it).
#[test]
fn message_names_the_shortened_release_of_a_long_composed_name() {
    let object = helm_release(
        LONG_NAME,
        Some("flux-system"),
        json!({"targetNamespace": LONG_TARGET}),
    );
    let message = admit(&guard(), "CREATE", &object, &ledger()).unwrap_err();
    let long = shorten_name(&format!("{LONG_TARGET}-{LONG_NAME}"));
    assert_eq!(long.len(), 53);
    assert_eq!(
        message,
        format!(
            "HelmRelease flux-system/{LONG_NAME} would manage Helm release flux-system/{long}, which is owned \
             by bootstrap (ledger ConfigMap kube-system/bootstrap-ownership). Remove this HelmRelease from the \
             Flux tree, or drop the release from bootstrap first."
        )
    );
}

#[test]
fn namespace_comes_from_the_request_when_the_object_has_none() {
    // On CREATE a client may omit metadata.namespace; the request carries it.
    let guard = guard();
    let mut object = helm_release("cilium", None, json!({}));
    let ledger = ledger();
    assert!(
        admit(&guard, "CREATE", &object, &ledger).is_ok(),
        "request namespace flux-system"
    );
    object["metadata"]["namespace"] = json!("kube-system");
    assert!(admit(&guard, "CREATE", &object, &ledger).is_err());
}

#[test]
fn deletion_and_an_empty_ledger_are_let_through() {
    let guard = guard();
    let mut object = helm_release("cilium", Some("kube-system"), json!({}));
    object["metadata"]["deletionTimestamp"] = json!("2025-01-01T00:00:00Z");
    assert!(
        admit(&guard, "UPDATE", &object, &ledger()).is_ok(),
        "finalizer removal must pass"
    );
    object["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("deletionTimestamp");
    let empty = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bootstrap-ownership"}});
    assert!(admit(&guard, "CREATE", &object, &empty).is_ok());
}

/// A HelmRelease being deleted may lose its finalizers (metadata only), but
/// a spec change rides on no deletion: it is judged like any update.
#[test]
fn a_terminating_helm_release_may_change_its_metadata_but_not_its_spec() {
    let guard = guard();
    let mut old = helm_release(
        "cilium",
        Some("kube-system"),
        json!({"chart": {"spec": {"chart": "cilium"}}}),
    );
    old["metadata"]["deletionTimestamp"] = json!("2025-01-01T00:00:00Z");
    old["metadata"]["finalizers"] = json!(["finalizers.fluxcd.io"]);
    let mut finalized = old.clone();
    finalized["metadata"]["finalizers"] = json!([]);
    assert!(admit_update(&guard, &old, &finalized, &ledger()).is_ok());
    let mut changed = old.clone();
    changed["spec"]["values"] = json!({"hubble": {"enabled": false}});
    let denied = admit_update(&guard, &old, &changed, &ledger()).unwrap_err();
    assert!(denied.contains("owned by bootstrap"), "{denied}");
    // Not being deleted: a metadata-only update is judged as always.
    let mut live = finalized.clone();
    live["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("deletionTimestamp");
    assert!(admit_update(&guard, &live, &live, &ledger()).is_err());
}

#[test]
fn policy_and_binding_shape() {
    let objects = admission_policy("kube-system", ("bootstrap.dev/ledger", "ownership"));
    let [policy, binding] = objects.as_slice() else {
        panic!("expected policy and binding")
    };
    assert_eq!(policy["apiVersion"], "admissionregistration.k8s.io/v1");
    assert_eq!(policy["kind"], "ValidatingAdmissionPolicy");
    assert_eq!(
        policy["spec"]["paramKind"],
        json!({"apiVersion": "v1", "kind": "ConfigMap"})
    );
    assert_eq!(
        policy["spec"]["matchConstraints"]["resourceRules"][0],
        json!({"apiGroups": ["helm.toolkit.fluxcd.io"], "apiVersions": ["*"],
               "operations": ["CREATE", "UPDATE"], "resources": ["helmreleases"]})
    );
    assert_eq!(binding["kind"], "ValidatingAdmissionPolicyBinding");
    assert_eq!(binding["spec"]["policyName"], policy["metadata"]["name"]);
    assert_eq!(binding["spec"]["validationActions"], json!(["Deny"]));
    assert_eq!(
        binding["spec"]["paramRef"],
        json!({"selector": {"matchLabels": {"bootstrap.dev/ledger": "ownership"}},
               "namespace": "kube-system", "parameterNotFoundAction": "Allow"})
    );
    assert_eq!(ledger_key("kube-system", "cilium"), "kube-system.cilium");
}

/// The ledger entries apply really writes (`ledger::Entry`, serialized as the
/// ledger serializes it): a `handover` release's lets its Flux HelmRelease
/// through, a `bootstrap` release's still denies.
#[test]
fn real_ledger_entries_admit_handover_and_deny_bootstrap() {
    use bootstrap::ledger::Entry;
    use bootstrap::release::Ownership;
    let guard = guard();
    let entry = |release: &str, ownership: Ownership| Entry {
        release: release.into(),
        chart: "cilium".into(),
        version: "1.18.2".into(),
        values_digest: "sha256:00".into(),
        applied_at: "2025-01-01T00:00:00Z".into(),
        tool_version: "0.1.0".into(),
        policy: ownership.as_str().into(),
        // Written by this version: the guard reads entries with every field.
        cluster: Some("infra".into()),
        hooks_digest: Some("hmac-sha256:00".into()),
    };
    let ledger = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "bootstrap-ownership", "namespace": "kube-system"},
        "data": {
            ledger_key("kube-system", "cilium"):
                serde_json::to_string(&entry("kube-system/cilium", Ownership::Handover)).unwrap(),
            ledger_key("flux-system", "flux-operator"):
                serde_json::to_string(&entry("flux-system/flux-operator", Ownership::Bootstrap)).unwrap(),
        },
    });
    let cilium = helm_release("cilium", Some("kube-system"), json!({}));
    assert_eq!(admit(&guard, "CREATE", &cilium, &ledger), Ok(()));
    assert_eq!(admit(&guard, "UPDATE", &cilium, &ledger), Ok(()));
    let operator = helm_release("flux-operator", Some("flux-system"), json!({}));
    let denied = admit(&guard, "CREATE", &operator, &ledger).unwrap_err();
    assert!(denied.contains("owned by bootstrap"), "{denied}");
}

/// The API server with `paramRef.selector`: the policy is evaluated once per
/// selected shard, and any denial denies.
fn admit_sharded(
    guard: &Guard,
    operation: &str,
    object: &Value,
    shards: &[Value],
) -> Result<(), String> {
    shards
        .iter()
        .try_for_each(|shard| admit(guard, operation, object, shard))
}

#[test]
fn an_entry_in_any_shard_protects_its_release() {
    let guard = guard();
    let first = ledger();
    let second = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "bootstrap-ownership-1", "namespace": "kube-system"},
        "data": { ledger_key("kube-system", "coredns"): entry("coredns", "bootstrap") },
    });
    let coredns = helm_release("coredns", Some("kube-system"), json!({}));
    assert_eq!(
        admit_sharded(&guard, "CREATE", &coredns, &[first.clone(), second.clone()]).unwrap_err(),
        "HelmRelease kube-system/coredns would manage Helm release kube-system/coredns, which is owned by bootstrap \
         (ledger ConfigMap kube-system/bootstrap-ownership-1). Remove this HelmRelease from the Flux tree, \
         or drop the release from bootstrap first."
    );
    let cilium = helm_release("cilium", Some("kube-system"), json!({}));
    assert!(admit_sharded(&guard, "CREATE", &cilium, &[first.clone(), second.clone()]).is_err());
    let other = helm_release("podinfo", Some("kube-system"), json!({}));
    assert!(admit_sharded(&guard, "CREATE", &other, &[first, second]).is_ok());
}
