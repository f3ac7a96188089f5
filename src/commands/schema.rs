//! `bootstrap schema cluster|release|events`: the JSON Schemas of the
//! config files (for editors, generated from their types) and of the
//! events `apply` and `destroy` print (docs/design.md#apply-and-destroy-events),
//! written by hand as the contract of that output: a test validates every
//! event kind of real runs against it.

use std::io::Write;

use crate::cli::SchemaKind;
use crate::config::file::{ClusterFile, ReleaseFile};
use crate::error::Error;
use crate::output::Format;

/// The schema of the events, `schemaVersion` 1.
pub(super) const EVENTS: &str = include_str!("events.schema.json");

/// A schema is a JSON Schema document, not one of the command outputs:
/// it has no `schemaVersion` of its own. JSON unless `-o yaml`.
pub(super) fn run(
    kind: SchemaKind,
    format: Option<Format>,
    out: &mut dyn Write,
) -> Result<(), Error> {
    let schema = match kind {
        SchemaKind::Cluster => schemars::schema_for!(ClusterFile).to_value(),
        SchemaKind::Release => schemars::schema_for!(ReleaseFile).to_value(),
        SchemaKind::Events => {
            serde_json::from_str(EVENTS).expect("the events schema shipped is JSON")
        }
    };
    let format = format.unwrap_or(Format::Json);
    super::write(out, &crate::output::document(format, &schema))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every event kind the engine has is in the schema (a new one fails
    /// here until it is described); what real runs print is checked
    /// against it in tests/it/json_schema.rs.
    #[test]
    fn the_events_schema_names_every_event_of_the_engine() {
        let schema: serde_json::Value = serde_json::from_str(EVENTS).unwrap();
        let kinds: Vec<&str> = schema["oneOf"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["$ref"].as_str().unwrap().trim_start_matches("#/$defs/"))
            .collect();
        for kind in &kinds {
            assert_eq!(schema["$defs"][kind]["properties"]["event"]["const"], *kind);
        }
        assert!(kinds.contains(&"run_failed") && kinds.contains(&"fleet_finished"));
    }
}
