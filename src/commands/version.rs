//! `bootstrap version` and `--version`: what ran, for a bug report
//! (docs/design.md#commands).

use std::io::Write;

use crate::cli::OutputFormat;
use crate::error::Error;

const VERSION: &str = env!("CARGO_PKG_VERSION");
const COMMIT: &str = env!("BOOTSTRAP_GIT_COMMIT");
/// `true`, `false` or `unknown` (built without git).
const DIRTY: &str = env!("BOOTSTRAP_GIT_DIRTY");
const BUILD_DATE: &str = env!("BOOTSTRAP_BUILD_DATE");

/// `--version`'s text after the name (declared with the CLI).
pub(crate) use crate::cli::LONG_VERSION as LONG;

fn helm_minimum() -> String {
    let (major, minor) = crate::helm::binary::MIN_VERSION;
    format!("{major}.{minor}")
}

pub(crate) fn run(output: OutputFormat, out: &mut dyn Write) -> Result<(), Error> {
    match output.structured() {
        // One line, as it always was: `bootstrap version -o json | jq`.
        Some(crate::output::Format::Json) => {
            let document = crate::output::versioned(document());
            super::write(out, &format!("{document}\n"))
        }
        Some(format) => super::write_document(out, format, &document()),
        None => super::write(out, &format!("bootstrap {LONG}\n")),
    }
}

/// `version -o json`.
fn document() -> serde_json::Value {
    serde_json::json!({
        "version": VERSION,
        "commit": COMMIT,
        "dirty": match DIRTY { "true" => serde_json::json!(true), "false" => serde_json::json!(false), _ => serde_json::Value::Null },
        "buildDate": BUILD_DATE,
        "helm": {"minimum": helm_minimum(), "majors": [3, 4]},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_long_version_names_the_commit_date_and_helm_minimum() {
        assert!(LONG.starts_with(VERSION), "{LONG}");
        assert!(LONG.contains(&format!("commit {COMMIT}")), "{LONG}");
        assert!(LONG.contains(&format!("built {BUILD_DATE}")), "{LONG}");
        assert!(
            LONG.contains(&format!("helm {} or newer", helm_minimum())),
            "{LONG}"
        );
        let json = document();
        assert_eq!(json["version"], VERSION);
        assert_eq!(json["commit"], COMMIT);
        assert_eq!(json["helm"]["minimum"], helm_minimum());
    }
}
