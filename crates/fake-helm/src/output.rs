//! The shapes helm prints: its release JSON, list rows, manifests with
//! `# Source:` headers, and the text summary after install/upgrade.

use serde_json::{Value, json};

use crate::state::{Release, go_time_string};

/// Helm's `release.Release` JSON (`status -o json`, `upgrade -o json`, and the release Secret's payload).
pub fn release_json(r: &Release, chart_values: &Value) -> Value {
    json!({
        "name": r.name,
        "info": {
            "first_deployed": r.first_deployed,
            "last_deployed": r.updated,
            "deleted": "",
            "description": r.description,
            "status": r.status,
            "notes": "",
        },
        "chart": {
            "metadata": {
                "name": r.chart,
                "version": r.version,
                "appVersion": r.app_version,
                "apiVersion": "v2",
                "type": "application",
            },
            "lock": null,
            "templates": [],
            "values": chart_values,
            "schema": null,
            "files": [],
        },
        "config": r.values,
        "manifest": r.manifest,
        "version": r.revision,
        "namespace": r.namespace,
    })
}

/// One row of `helm list -o json`; helm prints the revision as a string.
pub fn list_row(r: &Release) -> Value {
    json!({
        "name": r.name,
        "namespace": r.namespace,
        "revision": r.revision.to_string(),
        "updated": go_time_string(&r.updated),
        "status": r.status,
        "chart": r.chart_ref(),
        "app_version": r.app_version,
    })
}

pub fn history_rows(r: &Release) -> Value {
    let mut rows: Vec<Value> = r
        .history
        .iter()
        .map(|h| {
            json!({
                "revision": h.revision,
                "updated": h.updated,
                "status": h.status,
                "chart": format!("{}-{}", h.chart, h.version),
                "app_version": h.app_version,
                "description": h.description,
            })
        })
        .collect();
    rows.push(json!({
        "revision": r.revision,
        "updated": r.updated,
        "status": r.status,
        "chart": r.chart_ref(),
        "app_version": r.app_version,
        "description": r.description,
    }));
    Value::Array(rows)
}

/// Multi-document YAML, each document headed by `---` and `# Source:` like `helm template`.
pub fn render_documents(chart: &str, dir: &str, objects: &[Value]) -> String {
    let mut out = String::new();
    for obj in objects {
        let kind = obj
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("object")
            .to_lowercase();
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("unnamed");
        out.push_str(&format!(
            "---\n# Source: {chart}/{dir}/{kind}-{name}.yaml\n"
        ));
        out.push_str(&to_yaml(obj));
    }
    out
}

pub fn to_yaml(v: &Value) -> String {
    let mut text =
        serde_saphyr::to_string(v).unwrap_or_else(|e| format!("# fake-helm: cannot render: {e}\n"));
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// The `NAME: ... TEST SUITE: None` block helm prints after install, upgrade and status.
pub fn summary(r: &Release) -> String {
    format!(
        "NAME: {}\nLAST DEPLOYED: {}\nNAMESPACE: {}\nSTATUS: {}\nREVISION: {}\nTEST SUITE: None\n",
        r.name, r.updated, r.namespace, r.status, r.revision
    )
}

/// `-o json|yaml|table` for a value; `table` falls back to `table_text`.
pub fn format(
    value: &Value,
    output: Option<&str>,
    table_text: impl FnOnce() -> String,
) -> Result<String, String> {
    match output.unwrap_or("table") {
        "json" => Ok(format!("{value}\n")),
        "yaml" => Ok(to_yaml(value)),
        "table" => Ok(table_text()),
        other => Err(format!("invalid format type: {other}")),
    }
}
