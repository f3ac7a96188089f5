//! Scrubs secrets out of what a helm failure reports. A failed helm call is
//! printed, logged and put in JSON events, so its argv and stderr must not carry
//! `--set` values, credentials embedded in chart URLs, or secret values that helm
//! may quote back (schema errors echo offending values).

use serde_json::Value;

use crate::values::{MIN_SCRUBBED_LEN, REDACTED, SecretPaths, is_secret_entry};

/// Helm flags whose value is a piece of the release's values.
const SET_FLAGS: &[&str] = &[
    "--set",
    "--set-string",
    "--set-file",
    "--set-json",
    "--set-literal",
];

#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Literal strings to scrub from free text, longest first.
    secrets: Vec<String>,
}

impl Redactor {
    /// Learns the `--set` values in `argv` and the secret-looking leaves of
    /// `values` (the contents of the values file helm was given), with the
    /// leaves at its secret paths (from sops-encrypted files). Strings
    /// shorter than [`MIN_SCRUBBED_LEN`] are still removed from argv by
    /// position, never from free text.
    pub fn new(argv: &[String], values: Option<(&Value, &SecretPaths)>) -> Redactor {
        let mut secrets = Vec::new();
        let mut args = argv.iter();
        while let Some(arg) = args.next() {
            let value = if SET_FLAGS.contains(&arg.as_str()) {
                args.next().map(String::as_str)
            } else {
                set_flag_inline(arg)
            };
            if let Some(value) = value {
                secrets.push(value.to_string());
                // `a=x,b=y`: the pieces after `=` also appear alone in helm's errors.
                secrets.extend(
                    value
                        .split(',')
                        .filter_map(|pair| pair.split_once('=').map(|(_, v)| v.to_string())),
                );
            }
        }
        if let Some((values, paths)) = values {
            secret_leaves(values, false, &mut secrets);
            secrets.extend(paths.strings(values));
        }
        secrets.retain(|s| s.len() >= MIN_SCRUBBED_LEN);
        secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        secrets.dedup();
        Redactor { secrets }
    }

    /// argv with `--set*` values replaced and every argument scrubbed as text.
    pub fn argv(&self, argv: &[String]) -> Vec<String> {
        let mut out = Vec::with_capacity(argv.len());
        let mut args = argv.iter();
        while let Some(arg) = args.next() {
            if SET_FLAGS.contains(&arg.as_str()) {
                out.push(arg.clone());
                if args.next().is_some() {
                    out.push(REDACTED.to_string());
                }
            } else if set_flag_inline(arg).is_some() {
                let flag = arg.split_once('=').map_or(arg.as_str(), |(flag, _)| flag);
                out.push(format!("{flag}={REDACTED}"));
            } else {
                out.push(self.text(arg));
            }
        }
        out
    }

    /// Free text (stderr) with URL credentials and known secrets replaced.
    pub fn text(&self, text: &str) -> String {
        crate::values::scrub(&redact_url_credentials(text), &self.secrets)
    }
}

/// The value of `--set=a=b` style arguments.
fn set_flag_inline(arg: &str) -> Option<&str> {
    let (flag, value) = arg.split_once('=')?;
    SET_FLAGS.contains(&flag).then_some(value)
}

fn secret_leaves(value: &Value, secret: bool, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                secret_leaves(v, secret || is_secret_entry(key, map), out);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| secret_leaves(v, secret, out)),
        Value::String(s) if secret => out.push(s.clone()),
        Value::Number(n) if secret => out.push(n.to_string()),
        _ => {}
    }
}

/// Credentials recognised by their shape (URL userinfo, tokens in a URL's
/// query, webhook paths, connection-string passwords), anywhere in the text
/// (docs/design.md#secrets).
pub fn redact_url_credentials(text: &str) -> String {
    crate::values::shape::redact_shapes(text).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn set_values_are_replaced_in_both_flag_forms() {
        let args = argv(
            "upgrade --install x ./c --set password=hunter22 --set-string=a=b,token=abcdef \
             --set-file cert=/etc/key.pem --set-json j={} --set-literal l=v --values /tmp/v.yaml",
        );
        let redacted = Redactor::new(&args, None).argv(&args);
        assert_eq!(
            redacted,
            argv(
                "upgrade --install x ./c --set <redacted> --set-string=<redacted> \
                 --set-file <redacted> --set-json <redacted> --set-literal <redacted> \
                 --values /tmp/v.yaml"
            )
        );
    }

    #[test]
    fn a_trailing_set_flag_without_value_is_kept() {
        let args = argv("upgrade x --set");
        assert_eq!(Redactor::new(&args, None).argv(&args), args);
    }

    #[test]
    fn set_values_are_scrubbed_from_stderr() {
        let args = argv("upgrade x c --set db.password=hunter22,user=admin");
        let r = Redactor::new(&args, None);
        assert_eq!(
            r.text("Error: bad value \"hunter22\" for db.password; user admin"),
            "Error: bad value \"<redacted>\" for db.password; user <redacted>"
        );
    }

    #[test]
    fn url_credentials_are_redacted_in_argv_and_text() {
        let args = argv("upgrade x cilium --repo https://bot:s3cr3t@charts.example.com/stable");
        let r = Redactor::new(&args, None);
        assert_eq!(
            r.argv(&args).last().unwrap(),
            "https://<redacted>@charts.example.com/stable"
        );
        assert_eq!(
            r.text(
                "Error: looks like \"https://bot:s3cr3t@charts.example.com/stable\" is not \
                 a valid chart repository; also oci://tok@ghcr.io/x and https://plain.example.com"
            ),
            "Error: looks like \"https://<redacted>@charts.example.com/stable\" is not a valid \
             chart repository; also oci://<redacted>@ghcr.io/x and https://plain.example.com"
        );
    }

    #[test]
    fn an_at_sign_in_the_path_is_not_taken_for_credentials() {
        assert_eq!(
            redact_url_credentials("https://example.com/a@b user@host"),
            "https://example.com/a@b user@host"
        );
    }

    #[test]
    fn secret_values_helm_quotes_back_are_scrubbed_but_ordinary_ones_are_not() {
        let values = json!({
            "auth": {"token": "tok-123456"},
            "db": {"password": 99887766, "host": "db.internal"},
            "existingSecret": "my-secret",
            "enabled": true
        });
        let r = Redactor::new(&[], Some((&values, &SecretPaths::default())));
        assert_eq!(
            r.text(
                "at '/auth/token': tok-123456 is invalid; port 99887766 on db.internal, my-secret"
            ),
            "at '/auth/token': <redacted> is invalid; port <redacted> on db.internal, my-secret"
        );
    }

    #[test]
    fn values_from_sops_files_are_scrubbed_whatever_their_key() {
        let values = json!({"db": {"host": "db.internal"}, "image": "nginx:1.27"});
        let mut paths = SecretPaths::default();
        paths.add_leaves(&json!({"db": {"host": "x"}}));
        let r = Redactor::new(&[], Some((&values, &paths)));
        assert_eq!(
            r.text("cannot reach db.internal with nginx:1.27"),
            "cannot reach <redacted> with nginx:1.27"
        );
    }

    #[test]
    fn values_file_path_is_kept() {
        let args = argv("template x c --values /tmp/bootstrap-values-abc.yaml");
        assert_eq!(Redactor::new(&args, None).argv(&args), args);
    }
}
