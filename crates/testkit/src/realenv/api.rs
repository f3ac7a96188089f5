//! [`Api`]: a blocking JSON client of the real API server for the tests.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::condition;

/// An API error: the HTTP status and the server's message.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub code: u16,
    pub reason: String,
    pub message: String,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

/// A blocking JSON client of the API server (kube-rs on a runtime of its
/// own), by URL path: tests name exactly what they read and write.
pub struct Api {
    client: Option<kube::Client>,
    runtime: Arc<tokio::runtime::Runtime>,
}

impl Api {
    pub(super) fn placeholder() -> Api {
        Api {
            client: None,
            runtime: Arc::new(runtime()),
        }
    }

    /// A client from `kubeconfig`'s `context`.
    pub fn new(kubeconfig: &Path, context: &str) -> Api {
        let runtime = runtime();
        let client = runtime.block_on(async {
            let config = kube::config::Kubeconfig::read_from(kubeconfig)
                .unwrap_or_else(|e| panic!("{}: {e}", kubeconfig.display()));
            let options = kube::config::KubeConfigOptions {
                context: Some(context.to_string()),
                ..Default::default()
            };
            let mut config = kube::Config::from_custom_kubeconfig(config, &options)
                .await
                .unwrap_or_else(|e| panic!("{}: {e}", kubeconfig.display()));
            config.read_timeout = Some(Duration::from_secs(30));
            kube::Client::try_from(config).expect("a client of the API server")
        });
        Api {
            client: Some(client),
            runtime: Arc::new(runtime),
        }
    }

    fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        content_type: &str,
    ) -> Result<String, ApiError> {
        let client = self.client.as_ref().expect("the client is set up");
        let request = http::Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", content_type)
            .header("accept", "application/json")
            .body(body.map(|b| b.to_string().into_bytes()).unwrap_or_default())
            .expect("a request");
        self.runtime
            .block_on(client.request_text(request))
            .map_err(|e| match e {
                kube::Error::Api(status) => ApiError {
                    code: status.code,
                    reason: status.reason.clone(),
                    message: status.message.clone(),
                },
                other => ApiError {
                    code: 0,
                    reason: "Transport".into(),
                    message: other.to_string(),
                },
            })
    }

    /// A GET, tried again (5 times in all, a second apart) when the server
    /// failed to answer: on a loaded machine the API server's handlers time
    /// out now and then (`http: Handler timeout`, a 500), which says
    /// nothing about what a test reads.
    fn read(&self, path: &str) -> Result<String, ApiError> {
        let mut attempt = 1;
        loop {
            match self.send("GET", path, None, "application/json") {
                Err(e) if attempt < 5 && matches!(e.code, 0 | 429 | 500 | 503 | 504) => {
                    eprintln!("realenv: GET {path} failed ({e}); trying again");
                    attempt += 1;
                    std::thread::sleep(Duration::from_secs(1));
                }
                other => return other,
            }
        }
    }

    /// GET of a non-JSON path (`/readyz`).
    pub fn raw_get(&self, path: &str) -> Result<String, ApiError> {
        self.send("GET", path, None, "application/json")
    }

    /// The object at `path`, `None` when it does not exist.
    pub fn get(&self, path: &str) -> Option<Value> {
        match self.read(path) {
            Ok(text) => Some(serde_json::from_str(&text).expect("JSON")),
            Err(e) if e.code == 404 => None,
            Err(e) => panic!("GET {path}: {e}"),
        }
    }

    /// The API path of `object` (by its apiVersion and kind, through the
    /// server's discovery), in its own namespace or else `namespace` when
    /// its kind is namespaced.
    pub fn path_of(&self, object: &Value, namespace: &str) -> String {
        let api_version = object["apiVersion"].as_str().unwrap_or_default();
        let kind = object["kind"].as_str().unwrap_or_default();
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let base = if api_version.contains('/') {
            format!("/apis/{api_version}")
        } else {
            format!("/api/{api_version}")
        };
        let discovery = self
            .get(&base)
            .unwrap_or_else(|| panic!("{api_version} is not served"));
        let resource = discovery["resources"]
            .as_array()
            .and_then(|rs| {
                rs.iter()
                    .find(|r| r["kind"] == kind && !r["name"].as_str().unwrap_or("/").contains('/'))
            })
            .unwrap_or_else(|| panic!("{api_version} serves no {kind}"));
        let plural = resource["name"].as_str().unwrap_or_default();
        if resource["namespaced"] == true {
            let namespace = object["metadata"]["namespace"]
                .as_str()
                .unwrap_or(namespace);
            format!("{base}/namespaces/{namespace}/{plural}/{name}")
        } else {
            format!("{base}/{plural}/{name}")
        }
    }

    /// The items of the list at `path` (empty when the kind is not served).
    pub fn list(&self, path: &str) -> Vec<Value> {
        self.get(path)
            .and_then(|l| l["items"].as_array().cloned())
            .unwrap_or_default()
    }

    /// POST `object` to the collection `path`.
    pub fn create(&self, path: &str, object: &Value) -> Result<Value, ApiError> {
        self.send("POST", path, Some(object), "application/json")
            .map(|t| serde_json::from_str(&t).expect("JSON"))
    }

    /// PUT `object` at `path` (an update; carry `metadata.resourceVersion`).
    pub fn update(&self, path: &str, object: &Value) -> Result<Value, ApiError> {
        self.send("PUT", path, Some(object), "application/json")
            .map(|t| serde_json::from_str(&t).expect("JSON"))
    }

    /// A JSON merge patch of the object at `path`.
    pub fn merge_patch(&self, path: &str, patch: &Value) -> Result<Value, ApiError> {
        self.send("PATCH", path, Some(patch), "application/merge-patch+json")
            .map(|t| serde_json::from_str(&t).expect("JSON"))
    }

    /// DELETE of the object at `path`; a missing one is fine.
    pub fn delete(&self, path: &str) -> Result<(), ApiError> {
        match self.send("DELETE", path, None, "application/json") {
            Ok(_) => Ok(()),
            Err(e) if e.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Creates the CustomResourceDefinitions of a YAML file (or of every
    /// `*.yaml` of a directory) and waits until the API server serves them
    /// (condition Established).
    pub fn install_crds(&self, path: &Path) {
        let files: Vec<PathBuf> = if path.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(path)
                .expect("read the CRD dir")
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
                .collect();
            files.sort();
            files
        } else {
            vec![path.to_path_buf()]
        };
        let mut names = Vec::new();
        for file in files {
            let text = std::fs::read_to_string(&file).expect("read CRD file");
            for doc in serde_saphyr::from_multiple::<Value>(&text)
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
            {
                if doc["kind"] != "CustomResourceDefinition" {
                    continue;
                }
                let name = doc["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                self.create(
                    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                    &doc,
                )
                .unwrap_or_else(|e| panic!("creating CRD {name}: {e}"));
                names.push(name);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        for name in names {
            loop {
                let crd = self.get(&format!(
                    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
                ));
                if crd.as_ref().is_some_and(|c| condition(c, "Established")) {
                    break;
                }
                assert!(Instant::now() < deadline, "CRD {name} not Established");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}
