//! Proves the loopback API server is faithful enough for kube-rs and kubectl,
//! the two clients the binary-level tests put in front of it.

use std::io::{Read, Write};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, Preconditions,
    WatchEvent, WatchParams,
};
use kube::core::{GroupVersionKind, ObjectList};
use kube::discovery::{Discovery, Scope};
use kube::runtime::utils::Backoff;
use kube::runtime::wait::{await_condition, conditions};
use kube::runtime::{WatchStreamExt, watcher};
use kube_loopback::{ApiServer, Rollout};
use serde_json::{Value, json};

const MANAGER: &str = "selftest";
const PATIENCE: Duration = Duration::from_secs(10);

fn client(server: &ApiServer) -> kube::Client {
    let config = kube::Config::new(server.url().parse().unwrap());
    kube::Client::try_from(config).unwrap()
}

fn api_error<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> (u16, String) {
    match result {
        Err(kube::Error::Api(status)) => (status.code, status.reason.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn from_json<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

/// A request without kube-rs, for bodies kube-rs never sends (YAML apply,
/// RFC 6902 JSON patches).
fn raw(
    server: &ApiServer,
    method: &str,
    path: &str,
    content_type: &str,
    body: &str,
) -> (u16, Value) {
    let mut stream =
        std::net::TcpStream::connect(server.url().trim_start_matches("http://")).unwrap();
    let len = body.len();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: loopback\r\nContent-Type: {content_type}\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n{body}"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let code = head.split(' ').nth(1).unwrap().parse().unwrap();
    (code, serde_json::from_str(body).unwrap())
}

/// A GET without kube-rs with the given Accept header: the status code and
/// the body as JSON.
fn get_accepting(server: &ApiServer, path: &str, accept: &str) -> (u16, Value) {
    let mut stream =
        std::net::TcpStream::connect(server.url().trim_start_matches("http://")).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: loopback\r\nAccept: {accept}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let code = head.split(' ').nth(1).unwrap().parse().unwrap();
    (code, serde_json::from_str(body).unwrap())
}

fn widget_crd() -> CustomResourceDefinition {
    let schema = json!({"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}});
    from_json(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wg"]},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": schema, "subresources": {"status": {}}},
                {"name": "v1beta1", "served": true, "storage": false, "schema": schema},
            ],
        },
    }))
}

#[tokio::test]
async fn discovery_serves_builtins_and_a_crd_kind_as_soon_as_the_crd_is_created() {
    let server = ApiServer::start();
    let client = client(&server);
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    for (group, version, kind) in [
        ("", "v1", "ConfigMap"),
        ("", "v1", "Namespace"),
        ("apps", "v1", "DaemonSet"),
        ("batch", "v1", "Job"),
        ("coordination.k8s.io", "v1", "Lease"),
        ("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
        (
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingAdmissionPolicy",
        ),
        (
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingAdmissionPolicyBinding",
        ),
    ] {
        let gvk = GroupVersionKind::gvk(group, version, kind);
        assert!(
            discovery.resolve_gvk(&gvk).is_some(),
            "{group}/{version} {kind} is not discovered"
        );
    }
    let widget = GroupVersionKind::gvk("example.com", "v1", "Widget");
    assert!(discovery.resolve_gvk(&widget).is_none());

    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &widget_crd())
        .await
        .unwrap();

    let legacy = Discovery::new(client.clone()).run().await.unwrap();
    let aggregated = Discovery::new(client.clone())
        .run_aggregated()
        .await
        .unwrap();
    for discovery in [legacy, aggregated] {
        let (ar, caps) = discovery
            .resolve_gvk(&widget)
            .expect("Widget is discovered once its CRD exists");
        assert_eq!(ar.plural, "widgets");
        assert_eq!(caps.scope, Scope::Namespaced);
        let beta = GroupVersionKind::gvk("example.com", "v1beta1", "Widget");
        assert!(
            discovery.resolve_gvk(&beta).is_some(),
            "every served version is discovered"
        );
    }
    let established = await_condition(
        crds.clone(),
        "widgets.example.com",
        conditions::is_crd_established(),
    );
    tokio::time::timeout(PATIENCE, established)
        .await
        .unwrap()
        .unwrap();

    // All versions of a kind are one object.
    let (v1, _) = Discovery::new(client.clone())
        .run()
        .await
        .unwrap()
        .resolve_gvk(&widget)
        .unwrap();
    let widgets: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &v1);
    let obj: DynamicObject = from_json(
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 3}}),
    );
    widgets.create(&PostParams::default(), &obj).await.unwrap();
    let beta = kube::discovery::ApiResource::from_gvk(&GroupVersionKind::gvk(
        "example.com",
        "v1beta1",
        "Widget",
    ));
    let through_beta = Api::<DynamicObject>::namespaced_with(client.clone(), "default", &beta)
        .get("w")
        .await
        .unwrap();
    assert_eq!(through_beta.data["spec"]["size"], 3);
    assert_eq!(
        through_beta.types.unwrap().api_version,
        "example.com/v1beta1"
    );

    crds.delete("widgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    assert!(
        discovery.resolve_gvk(&widget).is_none(),
        "deleting the CRD removes its kinds"
    );
    assert_eq!(api_error(widgets.get("w").await).0, 404);
}

#[tokio::test]
async fn validating_admission_policy_can_be_switched_off() {
    let server = ApiServer::builder()
        .without_validating_admission_policy()
        .start();
    let discovery = Discovery::new(client(&server)).run().await.unwrap();
    let gvk = |kind| GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind);
    assert!(
        discovery
            .resolve_gvk(&gvk("ValidatingAdmissionPolicy"))
            .is_none()
    );
    assert!(
        discovery
            .resolve_gvk(&gvk("ValidatingAdmissionPolicyBinding"))
            .is_none()
    );
    assert!(
        discovery
            .resolve_gvk(&gvk("ValidatingWebhookConfiguration"))
            .is_some()
    );
}

fn names(list: ObjectList<ConfigMap>) -> Vec<String> {
    let mut names: Vec<String> = list
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn configmaps_round_trip_with_selectors_and_real_error_statuses() {
    let server = ApiServer::start();
    let client = client(&server);
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "apps");
    for (name, app) in [("one", "a"), ("two", "b"), ("three", "c")] {
        let cm = from_json(
            json!({"metadata": {"name": name, "labels": {"app": app}}, "data": {"k": name}}),
        );
        let created = cms.create(&PostParams::default(), &cm).await.unwrap();
        assert_eq!(created.metadata.generation, Some(1));
        assert!(created.metadata.uid.is_some() && created.metadata.creation_timestamp.is_some());
    }
    let list = |lp: ListParams| {
        let cms = cms.clone();
        async move { names(cms.list(&lp).await.unwrap()) }
    };
    assert_eq!(list(ListParams::default().labels("app=a")).await, ["one"]);
    assert_eq!(
        list(ListParams::default().labels("app in (a,b)")).await,
        ["one", "two"]
    );
    assert_eq!(
        list(ListParams::default().labels("app notin (a)")).await,
        ["three", "two"]
    );
    assert_eq!(
        list(ListParams::default().fields("metadata.name=two")).await,
        ["two"]
    );
    assert_eq!(
        names(
            Api::<ConfigMap>::all(client.clone())
                .list(&ListParams::default())
                .await
                .unwrap()
        )
        .len(),
        3
    );
    let elsewhere: Api<ConfigMap> = Api::namespaced(client.clone(), "other");
    assert!(
        elsewhere
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let listed = cms.list(&ListParams::default()).await.unwrap();
    assert_eq!(
        listed.metadata.resource_version,
        Some(server.resource_version().to_string())
    );

    let got = cms.get("two").await.unwrap();
    assert_eq!(got.data.unwrap()["k"], "two");
    let again = from_json(json!({"metadata": {"name": "two"}}));
    assert_eq!(
        api_error(cms.create(&PostParams::default(), &again).await),
        (409, "AlreadyExists".into())
    );

    cms.delete("one", &DeleteParams::default()).await.unwrap();
    assert_eq!(api_error(cms.get("one").await), (404, "NotFound".into()));
    assert!(server.get("v1", "ConfigMap", Some("apps"), "one").is_none());
    assert!(server.get("v1", "ConfigMap", Some("apps"), "two").is_some());

    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = namespaces
        .create(
            &PostParams::default(),
            &from_json(json!({"metadata": {"name": "apps"}})),
        )
        .await
        .unwrap();
    assert_eq!(ns.status.unwrap().phase.as_deref(), Some("Active"));
}

#[tokio::test]
async fn a_stale_resource_version_is_a_conflict() {
    let server = ApiServer::start();
    let cms: Api<ConfigMap> = Api::namespaced(client(&server), "default");
    let original = cms
        .create(
            &PostParams::default(),
            &from_json(json!({"metadata": {"name": "settings"}, "data": {"v": "1"}})),
        )
        .await
        .unwrap();
    let mut fresh = original.clone();
    fresh.data = Some([("v".to_string(), "2".to_string())].into());
    let updated = cms
        .replace("settings", &PostParams::default(), &fresh)
        .await
        .unwrap();
    assert_ne!(
        updated.metadata.resource_version,
        original.metadata.resource_version
    );

    let mut stale = original.clone();
    stale.data = Some([("v".to_string(), "3".to_string())].into());
    assert_eq!(
        api_error(
            cms.replace("settings", &PostParams::default(), &stale)
                .await
        ),
        (409, "Conflict".into())
    );
    let precondition = Preconditions {
        resource_version: original.metadata.resource_version.clone(),
        uid: None,
    };
    let dp = DeleteParams {
        preconditions: Some(precondition),
        ..DeleteParams::default()
    };
    assert_eq!(api_error(cms.delete("settings", &dp).await).0, 409);
    assert_eq!(cms.get("settings").await.unwrap().data.unwrap()["v"], "2");
}

fn deployment(replicas: i32, track: &str) -> Deployment {
    from_json(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "web", "labels": {"track": track}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}},
        },
    }))
}

#[tokio::test]
async fn server_side_apply_bumps_generation_only_when_spec_changes() {
    let server = ApiServer::builder().default_rollout(Rollout::Never).start();
    let deploys: Api<Deployment> = Api::namespaced(client(&server), "web");
    let pp = PatchParams::apply(MANAGER).force();

    let created = deploys
        .patch("web", &pp, &Patch::Apply(deployment(1, "stable")))
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    let managers: Vec<_> = created
        .metadata
        .managed_fields
        .unwrap()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert_eq!(managers, [MANAGER]);

    let unchanged = deploys
        .patch("web", &pp, &Patch::Apply(deployment(1, "stable")))
        .await
        .unwrap();
    assert_eq!(
        unchanged.metadata.resource_version, created.metadata.resource_version,
        "a no-op apply writes nothing"
    );

    let relabeled = deploys
        .patch("web", &pp, &Patch::Apply(deployment(1, "canary")))
        .await
        .unwrap();
    assert_eq!(relabeled.metadata.generation, Some(1));
    assert_ne!(
        relabeled.metadata.resource_version,
        created.metadata.resource_version
    );

    let scaled = deploys
        .patch("web", &pp, &Patch::Apply(deployment(3, "canary")))
        .await
        .unwrap();
    assert_eq!(scaled.metadata.generation, Some(2));

    let yaml =
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 4\n";
    let path = "/apis/apps/v1/namespaces/web/deployments/web?fieldManager=yaml-client&force=true";
    let (code, body) = raw(&server, "PATCH", path, "application/apply-patch+yaml", yaml);
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["metadata"]["generation"], 3);
    assert_eq!(body["spec"]["replicas"], 4);
    assert_eq!(
        body["spec"]["template"]["spec"]["containers"][0]["image"], "nginx",
        "apply merges into what exists"
    );

    let (code, body) = raw(
        &server,
        "PATCH",
        "/apis/apps/v1/namespaces/web/deployments/web",
        "application/apply-patch+yaml",
        yaml,
    );
    assert_eq!(
        (code, body["reason"].as_str()),
        (422, Some("Invalid")),
        "apply needs a field manager"
    );
}

#[tokio::test]
async fn the_status_subresource_is_the_only_way_to_change_status() {
    let server = ApiServer::builder().default_rollout(Rollout::Never).start();
    let deploys: Api<Deployment> = Api::namespaced(client(&server), "web");
    let mut with_status = deployment(1, "stable");
    with_status.status = from_json(json!({"replicas": 5}));
    let created = deploys
        .create(&PostParams::default(), &with_status)
        .await
        .unwrap();
    assert!(created.status.is_none(), "status is dropped on create");

    let mut body = created.clone();
    body.spec.as_mut().unwrap().replicas = Some(9);
    body.status = from_json(json!({"observedGeneration": 1, "replicas": 7}));
    let after_status = deploys
        .replace_status("web", &PostParams::default(), &body)
        .await
        .unwrap();
    assert_eq!(
        after_status.spec.unwrap().replicas,
        Some(1),
        "a status write ignores spec"
    );
    assert_eq!(after_status.status.as_ref().unwrap().replicas, Some(7));
    assert_eq!(after_status.metadata.generation, Some(1));

    let patch = Patch::Merge(json!({"status": {"readyReplicas": 7}}));
    let patched = deploys
        .patch_status("web", &PatchParams::default(), &patch)
        .await
        .unwrap();
    let status = patched.status.clone().unwrap();
    assert_eq!((status.replicas, status.ready_replicas), (Some(7), Some(7)));

    let mut main = patched.clone();
    main.spec.as_mut().unwrap().replicas = Some(2);
    main.status = from_json(json!({"replicas": 0}));
    let replaced = deploys
        .replace("web", &PostParams::default(), &main)
        .await
        .unwrap();
    assert_eq!(
        replaced.status.unwrap().replicas,
        Some(7),
        "a main-resource write ignores status"
    );
    assert_eq!(replaced.metadata.generation, Some(2));
}

#[tokio::test]
async fn merge_and_json_patches_edit_stored_objects() {
    let server = ApiServer::start();
    let cms: Api<ConfigMap> = Api::namespaced(client(&server), "default");
    cms.create(
        &PostParams::default(),
        &from_json(json!({"metadata": {"name": "p"}, "data": {"a": "1", "b": "2"}})),
    )
    .await
    .unwrap();
    let merge = Patch::Merge(json!({"data": {"a": null, "c": "3"}}));
    let merged = cms
        .patch("p", &PatchParams::default(), &merge)
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(merged.data).unwrap(),
        json!({"b": "2", "c": "3"})
    );
    let strategic = Patch::Strategic(json!({"metadata": {"labels": {"x": "y"}}}));
    let labeled = cms
        .patch("p", &PatchParams::default(), &strategic)
        .await
        .unwrap();
    assert_eq!(labeled.metadata.labels.unwrap()["x"], "y");

    let path = "/api/v1/namespaces/default/configmaps/p";
    let ops = r#"[{"op":"add","path":"/data/d","value":"4"},{"op":"replace","path":"/data/b","value":"20"},{"op":"remove","path":"/data/c"}]"#;
    let (code, body) = raw(&server, "PATCH", path, "application/json-patch+json", ops);
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["data"], json!({"b": "20", "d": "4"}));
    let failing =
        r#"[{"op":"remove","path":"/data/b"},{"op":"test","path":"/data/d","value":"nope"}]"#;
    let (code, _) = raw(
        &server,
        "PATCH",
        path,
        "application/json-patch+json",
        failing,
    );
    assert_eq!(code, 422);
    assert_eq!(
        cms.get("p").await.unwrap().data.unwrap()["b"],
        "20",
        "a failed JSON patch changes nothing"
    );

    assert_eq!(
        api_error(cms.patch("missing", &PatchParams::default(), &merge).await).0,
        404
    );
}

fn daemonset(image: &str) -> DaemonSet {
    from_json(json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "cilium", "namespace": "kube-system"},
        "spec": {
            "selector": {"matchLabels": {"app": "cilium"}},
            "template": {"metadata": {"labels": {"app": "cilium"}}, "spec": {"containers": [{"name": "agent", "image": image}]}},
        },
    }))
}

fn daemonset_rolled_out(ds: Option<&DaemonSet>) -> bool {
    let Some(ds) = ds else { return false };
    let Some(status) = &ds.status else {
        return false;
    };
    status.observed_generation >= ds.metadata.generation
        && status.updated_number_scheduled == Some(status.desired_number_scheduled)
        && status.number_available == Some(status.desired_number_scheduled)
}

#[tokio::test]
async fn await_condition_sees_a_scripted_daemonset_rollout_and_never_a_stalled_one() {
    let server = ApiServer::start();
    let delay = Duration::from_millis(300);
    server.set_rollout("DaemonSet", "kube-system", "cilium", Rollout::After(delay));
    let dss: Api<DaemonSet> = Api::namespaced(client(&server), "kube-system");
    let pp = PatchParams::apply(MANAGER).force();
    let applied_at = Instant::now();
    dss.patch("cilium", &pp, &Patch::Apply(daemonset("cilium:1.16")))
        .await
        .unwrap();

    let rolled_out = await_condition(dss.clone(), "cilium", daemonset_rolled_out);
    let ds = tokio::time::timeout(PATIENCE, rolled_out)
        .await
        .expect("rolled out in time")
        .unwrap()
        .unwrap();
    assert_eq!(ds.status.unwrap().observed_generation, Some(1));
    let completed = server
        .rollout_completed_at("DaemonSet", "kube-system", "cilium")
        .unwrap();
    assert!(
        completed >= applied_at + delay,
        "the controller waited for its scripted delay"
    );

    server.set_rollout("DaemonSet", "kube-system", "cilium", Rollout::Never);
    let upgraded = dss
        .patch("cilium", &pp, &Patch::Apply(daemonset("cilium:1.17")))
        .await
        .unwrap();
    assert_eq!(upgraded.metadata.generation, Some(2));
    let stalled = await_condition(dss.clone(), "cilium", daemonset_rolled_out);
    assert!(
        tokio::time::timeout(Duration::from_millis(800), stalled)
            .await
            .is_err(),
        "the old rollout must not count"
    );
    assert_eq!(
        dss.get("cilium")
            .await
            .unwrap()
            .status
            .unwrap()
            .observed_generation,
        Some(1)
    );
    assert_eq!(
        server.rollout_completed_at("DaemonSet", "kube-system", "cilium"),
        Some(completed)
    );
}

#[tokio::test]
async fn jobs_complete_or_fail_and_crds_establish_as_scripted() {
    let server = ApiServer::start();
    server.set_rollout(
        "Job",
        "ops",
        "migrate",
        Rollout::FailAfter(Duration::from_millis(50)),
    );
    server.set_crd_establish("widgets.example.com", Rollout::Never);
    let client = client(&server);
    let jobs: Api<Job> = Api::namespaced(client.clone(), "ops");
    for name in ["seed", "migrate"] {
        let job = from_json(
            json!({"metadata": {"name": name}, "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}),
        );
        jobs.create(&PostParams::default(), &job).await.unwrap();
    }
    tokio::time::timeout(
        PATIENCE,
        await_condition(jobs.clone(), "seed", conditions::is_job_completed()),
    )
    .await
    .unwrap()
    .unwrap();
    let failed = |job: Option<&Job>| {
        let conditions = job
            .and_then(|j| j.status.as_ref())
            .and_then(|s| s.conditions.as_ref());
        conditions.is_some_and(|cs| cs.iter().any(|c| c.type_ == "Failed" && c.status == "True"))
    };
    tokio::time::timeout(PATIENCE, await_condition(jobs.clone(), "migrate", failed))
        .await
        .unwrap()
        .unwrap();
    assert!(server.rollout_completed_at("Job", "ops", "seed").is_some());
    assert!(
        server
            .rollout_completed_at("Job", "ops", "migrate")
            .is_none()
    );

    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &widget_crd())
        .await
        .unwrap();
    let established = await_condition(
        crds.clone(),
        "widgets.example.com",
        conditions::is_crd_established(),
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(500), established)
            .await
            .is_err()
    );
}

/// Pods on the one node: a run-to-completion Pod (a Helm hook Pod) ends
/// Succeeded, or Failed when scripted to fail; a serving Pod runs and is Ready.
#[tokio::test]
async fn pods_run_to_completion_or_stay_running_as_scripted() {
    let server = ApiServer::start();
    server.set_rollout(
        "Pod",
        "ops",
        "broken-hook",
        Rollout::FailAfter(Duration::from_millis(20)),
    );
    let pods: Api<Pod> = Api::namespaced(client(&server), "ops");
    for (name, restart) in [
        ("hook", "Never"),
        ("broken-hook", "OnFailure"),
        ("server", "Always"),
    ] {
        let pod = from_json(
            json!({"metadata": {"name": name}, "spec": {"restartPolicy": restart, "containers": [{"name": "c", "image": "busybox"}]}}),
        );
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    let phase = |name: &'static str, want: &'static str| {
        let pods = pods.clone();
        async move {
            let in_phase = move |pod: Option<&Pod>| {
                pod.and_then(|p| p.status.as_ref())
                    .and_then(|s| s.phase.as_deref())
                    == Some(want)
            };
            tokio::time::timeout(PATIENCE, await_condition(pods, name, in_phase))
                .await
                .unwrap_or_else(|_| panic!("pod {name} never reached {want}"))
                .unwrap()
        }
    };
    phase("hook", "Succeeded").await;
    phase("broken-hook", "Failed").await;
    let server_pod = phase("server", "Running").await.unwrap();
    let ready = server_pod.status.unwrap().conditions.unwrap();
    assert!(
        ready
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    );
}

/// Helm 4's typed clients write Secrets in Kubernetes' protobuf encoding;
/// the server stores them as a real one would.
#[tokio::test]
async fn a_protobuf_secret_is_stored_and_read_back_as_json() {
    use k8s_openapi::api::core::v1::Secret;
    use std::collections::BTreeMap;

    let server = ApiServer::start();
    // k8s.io/apimachinery's protobuf serializer: "k8s\0", then a
    // runtime.Unknown{typeMeta{apiVersion, kind}, raw = the Secret message}.
    fn field(tag: u8, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![(tag << 3) | 2];
        let mut len = bytes.len();
        while len >= 0x80 {
            out.push((len as u8 & 0x7f) | 0x80);
            len >>= 7;
        }
        out.push(len as u8);
        out.extend_from_slice(bytes);
        out
    }
    let meta = [
        field(1, b"sh.helm.release.v1.demo.v1"),
        field(11, &[field(1, b"owner"), field(2, b"helm")].concat()),
    ]
    .concat();
    let secret = [
        field(1, &meta),
        field(
            2,
            &[field(1, b"release"), field(2, b"\x1f\x8b\x00")].concat(),
        ),
        field(3, b"helm.sh/release.v1"),
    ]
    .concat();
    let type_meta = [field(1, b"v1"), field(2, b"Secret")].concat();
    let body = [b"k8s\0".to_vec(), field(1, &type_meta), field(2, &secret)].concat();

    let mut stream =
        std::net::TcpStream::connect(server.url().trim_start_matches("http://")).unwrap();
    write!(
        stream,
        "POST /api/v1/namespaces/ops/secrets HTTP/1.1\r\nHost: loopback\r\nContent-Type: application/vnd.kubernetes.protobuf\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    stream.write_all(&body).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 201"), "{response}");

    let secrets: Api<Secret> = Api::namespaced(client(&server), "ops");
    let stored = secrets.get("sh.helm.release.v1.demo.v1").await.unwrap();
    assert_eq!(stored.type_.as_deref(), Some("helm.sh/release.v1"));
    assert_eq!(
        stored.metadata.labels,
        Some(BTreeMap::from([("owner".into(), "helm".into())]))
    );
    assert_eq!(stored.data.unwrap()["release"].0, b"\x1f\x8b\x00");
}

/// Retries quickly so the test does not wait out kube's production backoff.
struct QuickBackoff;

impl Iterator for QuickBackoff {
    type Item = Duration;
    fn next(&mut self) -> Option<Duration> {
        Some(Duration::from_millis(20))
    }
}

impl Backoff for QuickBackoff {
    fn reset(&mut self) {}
}

async fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn kube_watcher_survives_injected_503s_and_dropped_watches() {
    let server = ApiServer::builder().close_watches_after(2).start();
    let cms: Api<ConfigMap> = Api::namespaced(client(&server), "watched");
    server.fail_next_matching(3, 503, "/configmaps?");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let stream = watcher(cms.clone(), watcher::Config::default())
        .backoff(QuickBackoff)
        .applied_objects();
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(item) = stream.next().await {
            if let Ok(cm) = item {
                let _ = tx.send(cm.metadata.name.unwrap_or_default());
            }
        }
    });
    let mut expect_seen = async |name: &str| {
        let seen = async {
            while let Some(seen) = rx.recv().await {
                if seen == name {
                    return;
                }
            }
            panic!("the watcher ended");
        };
        tokio::time::timeout(PATIENCE, seen)
            .await
            .unwrap_or_else(|_| panic!("the watcher never saw {name}"));
    };
    let create = async |name: &str| {
        cms.create(
            &PostParams::default(),
            &from_json(json!({"metadata": {"name": name}})),
        )
        .await
        .unwrap();
    };

    create("a").await;
    expect_seen("a").await;
    let lists = server
        .request_log()
        .iter()
        .filter(|r| r.path.ends_with("/configmaps") && !r.is_watch())
        .count();
    assert!(lists >= 4, "three failed lists and a good one, got {lists}");

    wait_until("the watcher is watching", || server.open_watches() > 0).await;
    server.drop_watches();
    create("b").await;
    expect_seen("b").await;

    wait_until("the watcher is watching again", || {
        server.open_watches() > 0
    })
    .await;
    server.fail_next_matching(2, 503, "watch=true");
    server.drop_watches();
    for name in ["c", "d", "e", "f"] {
        create(name).await;
    }
    for name in ["c", "d", "e", "f"] {
        expect_seen(name).await;
    }
}

#[tokio::test]
async fn a_watch_from_a_compacted_resource_version_is_gone() {
    let server = ApiServer::builder().history_capacity(2).start();
    let cms: Api<ConfigMap> = Api::namespaced(client(&server), "default");
    let create = async |name: &str| {
        cms.create(
            &PostParams::default(),
            &from_json(json!({"metadata": {"name": name}})),
        )
        .await
        .unwrap();
    };
    create("first").await;
    let old = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    for name in ["x", "y", "z"] {
        create(name).await;
    }
    let mut stream = cms
        .watch(&WatchParams::default(), &old)
        .await
        .unwrap()
        .boxed();
    match stream.try_next().await.unwrap() {
        Some(WatchEvent::Error(status)) => assert_eq!(status.code, 410),
        other => panic!("expected 410 Gone, got {other:?}"),
    }

    let now = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = cms
        .watch(&WatchParams::default().labels("pick=me"), &now)
        .await
        .unwrap()
        .boxed();
    cms.create(
        &PostParams::default(),
        &from_json(json!({"metadata": {"name": "ignored"}})),
    )
    .await
    .unwrap();
    cms.create(
        &PostParams::default(),
        &from_json(json!({"metadata": {"name": "picked", "labels": {"pick": "me"}}})),
    )
    .await
    .unwrap();
    match stream.try_next().await.unwrap() {
        Some(WatchEvent::Added(cm)) => assert_eq!(cm.metadata.name.as_deref(), Some("picked")),
        other => panic!("expected the labelled ConfigMap, got {other:?}"),
    }
}

/// Runs kubectl with its discovery cache inside the test's directory, so a
/// cache left by an earlier server on the same port cannot leak in.
fn kubectl(kubeconfig: &std::path::Path, args: &[&str]) -> Output {
    let cache = kubeconfig.with_file_name("kube-cache");
    Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(cache)
        .args(args)
        .output()
        .expect("kubectl must be installed for this test")
}

fn assert_success(what: &str, out: &Output) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{what} failed: {stderr}");
}

#[test]
#[cfg_attr(not(kubectl), ignore = "needs kubectl on PATH (.ci/run installs it)")]
fn kubectl_gets_applies_and_waits_for_a_rollout() {
    let server = ApiServer::start();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = server.write_kubeconfig(dir.path(), "loopback");
    server.insert(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "seed", "namespace": "kube-system"}, "data": {"a": "b"}}));

    let out = kubectl(&kubeconfig, &["get", "configmaps", "-A", "-o", "json"]);
    assert_success("kubectl get", &out);
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed["items"][0]["metadata"]["name"], "seed");
    assert!(
        server.mutations().is_empty(),
        "a get mutates nothing: {:?}",
        server.mutations()
    );

    let manifest = dir.path().join("agent.yaml");
    std::fs::write(
        &manifest,
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: agent\n  namespace: monitoring\nspec:\n  selector:\n    matchLabels: {app: agent}\n  template:\n    metadata:\n      labels: {app: agent}\n    spec:\n      containers:\n      - name: agent\n        image: agent:1\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: agent-config\n  namespace: monitoring\ndata:\n  level: debug\n",
    )
    .unwrap();
    server.set_rollout(
        "DaemonSet",
        "monitoring",
        "agent",
        Rollout::After(Duration::from_millis(300)),
    );
    let out = kubectl(
        &kubeconfig,
        &["apply", "--server-side", "-f", manifest.to_str().unwrap()],
    );
    assert_success("kubectl apply --server-side", &out);
    assert!(
        server
            .get("apps/v1", "DaemonSet", Some("monitoring"), "agent")
            .is_some()
    );
    assert_eq!(
        server
            .get("v1", "ConfigMap", Some("monitoring"), "agent-config")
            .unwrap()["data"]["level"],
        "debug"
    );
    let applies = server
        .mutations()
        .into_iter()
        .filter(|r| {
            r.content_type
                .as_deref()
                .is_some_and(|c| c.contains("apply-patch"))
        })
        .count();
    assert_eq!(applies, 2);

    let out = kubectl(
        &kubeconfig,
        &[
            "rollout",
            "status",
            "daemonset/agent",
            "-n",
            "monitoring",
            "--timeout=10s",
        ],
    );
    assert_success("kubectl rollout status", &out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("successfully rolled out"));
    assert!(
        server
            .rollout_completed_at("DaemonSet", "monitoring", "agent")
            .is_some()
    );

    server.set_rollout("DaemonSet", "monitoring", "agent", Rollout::Never);
    let edited = std::fs::read_to_string(&manifest)
        .unwrap()
        .replace("agent:1", "agent:2");
    std::fs::write(&manifest, edited).unwrap();
    assert_success(
        "kubectl apply",
        &kubectl(
            &kubeconfig,
            &["apply", "--server-side", "-f", manifest.to_str().unwrap()],
        ),
    );
    let out = kubectl(
        &kubeconfig,
        &[
            "rollout",
            "status",
            "daemonset/agent",
            "-n",
            "monitoring",
            "--timeout=1s",
        ],
    );
    assert!(!out.status.success(), "a stalled rollout must time out");
}

/// A Service's clusterIP cannot change once set, as on the real API server
/// (an upgrade that changes it fails there; the real tier found a test that
/// relied on the loopback server accepting it).
#[tokio::test]
async fn a_service_cluster_ip_is_immutable() {
    use k8s_openapi::api::core::v1::Service;
    let server = ApiServer::start();
    let services: Api<Service> = Api::namespaced(client(&server), "default");
    let service = |ip: &str| -> Service {
        from_json(json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "dns"},
            "spec": {"clusterIP": ip, "ports": [{"port": 53}]},
        }))
    };
    services
        .create(&PostParams::default(), &service("10.96.0.10"))
        .await
        .unwrap();
    let patch = Patch::Merge(json!({"spec": {"clusterIP": "10.96.0.11"}}));
    let (code, reason) = api_error(services.patch("dns", &PatchParams::default(), &patch).await);
    assert_eq!((code, reason.as_str()), (422, "Invalid"));
    // Other changes, and the same address, go through.
    let patch =
        Patch::Merge(json!({"spec": {"clusterIP": "10.96.0.10", "ports": [{"port": 5353}]}}));
    services
        .patch("dns", &PatchParams::default(), &patch)
        .await
        .unwrap();
}

/// `Accept: application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1`
/// (kube-rs `list_metadata`) gets every object's metadata and nothing else,
/// as kube-apiserver's `asPartialObjectMetadataList` gives it; the same for
/// one object, for a watch's events, and 406 for a list asked for as one
/// object (and the reverse), or for a transform this server does not render.
#[tokio::test]
async fn metadata_only_requests_get_partial_object_metadata() {
    let server = ApiServer::start();
    let client = client(&server);
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(client.clone(), "kube-system");
    for (name, owner) in [("a.v1", "helm"), ("a.v2", "helm"), ("other", "me")] {
        let secret = from_json(json!({
            "metadata": {"name": name, "labels": {"owner": owner}, "annotations": {"n": name}},
            "data": {"release": "cGF5bG9hZA=="}
        }));
        secrets
            .create(&PostParams::default(), &secret)
            .await
            .unwrap();
    }

    let list = secrets
        .list_metadata(&ListParams::default().labels("owner=helm"))
        .await
        .unwrap();
    let names: Vec<_> = list
        .items
        .iter()
        .map(|i| i.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["a.v1", "a.v2"]);
    assert_eq!(
        list.items[0].metadata.labels.as_ref().unwrap()["owner"],
        "helm"
    );
    assert_eq!(
        list.metadata.resource_version,
        Some(server.resource_version().to_string())
    );

    let path = "/api/v1/namespaces/kube-system/secrets?labelSelector=owner%3Dhelm";
    let list_mime = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
    let (code, raw_list) = get_accepting(&server, path, list_mime);
    assert_eq!(code, 200, "{raw_list}");
    assert_eq!(raw_list["kind"], "PartialObjectMetadataList");
    assert_eq!(raw_list["apiVersion"], "meta.k8s.io/v1");
    let item = &raw_list["items"][0];
    assert_eq!(item["kind"], "PartialObjectMetadata");
    assert_eq!(item["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(item["metadata"]["annotations"]["n"], "a.v1");
    assert!(item.get("data").is_none(), "no payload: {item}");
    assert_eq!(item.as_object().unwrap().len(), 3, "{item}");
    let (code, beta) = get_accepting(
        &server,
        path,
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1beta1",
    );
    assert_eq!(
        (code, beta["apiVersion"].as_str()),
        (200, Some("meta.k8s.io/v1beta1"))
    );

    let one = secrets.get_metadata("a.v2").await.unwrap();
    assert_eq!(one.metadata.name.as_deref(), Some("a.v2"));
    let (code, raw_one) = get_accepting(
        &server,
        "/api/v1/namespaces/kube-system/secrets/a.v2",
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
    );
    assert_eq!(code, 200);
    assert_eq!(raw_one["kind"], "PartialObjectMetadata");
    assert!(raw_one.get("data").is_none() && raw_one.get("type").is_none());

    // The wrong shape, and nothing acceptable: 406, as kube-apiserver.
    let (code, status) = get_accepting(
        &server,
        path,
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
    );
    assert_eq!(
        (code, status["reason"].as_str()),
        (406, Some("NotAcceptable"))
    );
    let (code, _) = get_accepting(
        &server,
        "/api/v1/namespaces/kube-system/secrets/a.v2",
        list_mime,
    );
    assert_eq!(code, 406);
    let (code, _) = get_accepting(
        &server,
        path,
        "application/json;as=PartialObjectMetadataList;g=example.com;v=v1",
    );
    assert_eq!(code, 406);
    // A transform not served here falls back to the next range offered.
    let (code, plain) = get_accepting(
        &server,
        path,
        "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
    );
    assert_eq!((code, plain["kind"].as_str()), (200, Some("SecretList")));
    assert_eq!(plain["items"][0]["data"]["release"], "cGF5bG9hZA==");

    let events: Vec<_> = secrets
        .watch_metadata(&WatchParams::default().labels("owner=helm").timeout(1), "0")
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let added: Vec<String> = events
        .into_iter()
        .filter_map(|e| match e {
            WatchEvent::Added(o) => o.metadata.name,
            _ => None,
        })
        .collect();
    assert_eq!(added, ["a.v1", "a.v2"]);
}

/// A latency delays every answer by about its base, requests in flight
/// together overlap (as on a network), and the log says how many a client
/// waited for in turn.
#[tokio::test]
async fn latency_delays_each_request_and_overlapping_ones_together() {
    let latency = Duration::from_millis(60);
    let server = ApiServer::builder()
        .latency(latency, Duration::from_millis(10))
        .start();
    let cms: Api<ConfigMap> = Api::namespaced(client(&server), "apps");
    let started = Instant::now();
    cms.list(&ListParams::default()).await.unwrap();
    cms.list(&ListParams::default()).await.unwrap();
    let serial = started.elapsed();
    assert!(serial >= 2 * Duration::from_millis(50), "{serial:?}");
    assert_eq!(kube_loopback::serial_depth(&server.request_log()), 2);

    server.clear_request_log();
    let started = Instant::now();
    let params = ListParams::default();
    let lists = (0..8).map(|_| cms.list(&params));
    for list in futures::future::join_all(lists).await {
        list.unwrap();
    }
    let together = started.elapsed();
    assert!(
        together >= Duration::from_millis(50) && together < 2 * latency,
        "{together:?}"
    );
    let log = server.request_log();
    assert_eq!(log.len(), 8);
    assert!(
        log.iter()
            .all(|r| r.answered.is_some_and(|a| a >= r.received))
    );
    assert_eq!(kube_loopback::serial_depth(&log), 1);
}
