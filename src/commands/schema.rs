use std::io::Write;

use crate::cli::SchemaKind;
use crate::config::file::{ClusterFile, ReleaseFile};
use crate::error::Error;

pub fn run(kind: SchemaKind, out: &mut dyn Write) -> Result<(), Error> {
    let schema = match kind {
        SchemaKind::Cluster => schemars::schema_for!(ClusterFile),
        SchemaKind::Release => schemars::schema_for!(ReleaseFile),
    };
    super::write_json(out, &schema.to_value())
}
