//! Secrets recognised by their shape, whatever key holds them
//! (docs/design.md#secrets): credentials in a URL's userinfo (a DSN's
//! password, a token passed as the user), tokens in a URL's query, the
//! path of a chat webhook URL (the token is the path), and the password of
//! a `key=value;` connection string or a Go MySQL DSN (`user:pass@tcp(…)`).

use std::borrow::Cow;

use super::REDACTED;

/// Query parameters whose value is a credential (compared lowercase).
const TOKEN_PARAMS: &[&str] = &[
    "token",
    "access_token",
    "id_token",
    "refresh_token",
    "auth",
    "auth_token",
    "apikey",
    "api_key",
    "api-key",
    "key",
    "secret",
    "client_secret",
    "password",
    "pwd",
    "sig",
    "signature",
    "x-amz-signature",
    "x-amz-security-token",
    "x-goog-signature",
    "code",
];

/// Webhook URLs whose path is the token: everything after the prefix goes.
const WEBHOOK_PREFIXES: &[&str] = &[
    "hooks.slack.com/",
    "discord.com/api/webhooks/",
    "discordapp.com/api/webhooks/",
    ".webhook.office.com/",
    "outlook.office.com/webhook/",
    "api.telegram.org/bot",
    "events.pagerduty.com/integration/",
];

/// Connection-string keys whose value is a password (compared lowercase).
const PASSWORD_KEYS: &[&str] = &["password=", "pwd=", "accountkey=", "sharedaccesskey="];

/// `text` with every secret of a recognised shape replaced by
/// [`REDACTED`]; borrowed when nothing was found.
pub(crate) fn redact_shapes(text: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
    for pass in [
        url_userinfo,
        query_tokens,
        webhook_paths,
        connection_passwords,
        go_dsn,
    ] {
        if let Cow::Owned(changed) = pass(&out) {
            out = Cow::Owned(changed);
        }
    }
    out
}

/// `scheme://user:pass@host/...` → `scheme://<redacted>@host/...`, anywhere
/// in the text. A bare user is redacted too: tokens are often passed as the
/// user (`https://ghp_…@github.com`, a Sentry DSN's key).
pub(crate) fn url_userinfo(text: &str) -> Cow<'_, str> {
    if !text.contains("://") || !text.contains('@') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        let authority_len = after
            .find(|c: char| {
                c.is_whitespace() || matches!(c, '/' | '?' | '#' | '"' | '\'' | '`' | '<' | '>')
            })
            .unwrap_or(after.len());
        let authority = &after[..authority_len];
        match authority.rfind('@') {
            Some(user_end) if user_end > 0 && !authority.starts_with(REDACTED) => {
                out.push_str(REDACTED);
                out.push_str(&authority[user_end..]);
            }
            _ => out.push_str(authority),
        }
        rest = &after[authority_len..];
    }
    out.push_str(rest);
    changed(text, out)
}

/// `?token=abc&x=1` → `?token=<redacted>&x=1` for each of [`TOKEN_PARAMS`].
fn query_tokens(text: &str) -> Cow<'_, str> {
    if !text.contains('=') || !(text.contains('?') || text.contains('&')) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(['?', '&']) {
        let (before, after) = rest.split_at(at + 1);
        out.push_str(before);
        let name_len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
            .unwrap_or(after.len());
        let (name, tail) = after.split_at(name_len);
        match tail.strip_prefix('=') {
            Some(value) if TOKEN_PARAMS.contains(&name.to_ascii_lowercase().as_str()) => {
                let value_len = value.find(url_value_end).unwrap_or(value.len());
                out.push_str(name);
                out.push('=');
                if value_len > 0 {
                    out.push_str(REDACTED);
                }
                rest = &value[value_len..];
            }
            _ => {
                out.push_str(name);
                rest = tail;
            }
        }
    }
    out.push_str(rest);
    changed(text, out)
}

fn url_value_end(c: char) -> bool {
    c.is_whitespace() || matches!(c, '&' | '#' | '"' | '\'' | '`' | '<' | '>' | ',' | ';')
}

/// `https://hooks.slack.com/services/T0/B0/xyz` → `https://hooks.slack.com/<redacted>`.
fn webhook_paths(text: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(text);
    for prefix in WEBHOOK_PREFIXES {
        let mut from = 0;
        while let Some(found) = out[from..].find(prefix) {
            let start = from + found + prefix.len();
            let len = out[start..]
                .find(|c: char| url_value_end(c) || c == '?')
                .unwrap_or(out.len() - start);
            if len == 0 || out[start..].starts_with(REDACTED) {
                from = start;
                continue;
            }
            let mut replaced = out[..start].to_string();
            replaced.push_str(REDACTED);
            replaced.push_str(&out[start + len..]);
            from = start + REDACTED.len();
            out = Cow::Owned(replaced);
        }
    }
    out
}

/// `Server=db;User Id=app;Password=hunter2;` → `…;Password=<redacted>;`
/// for each of [`PASSWORD_KEYS`], at the start of the text or after `;`,
/// a space or a quote.
fn connection_passwords(text: &str) -> Cow<'_, str> {
    let lower = text.to_ascii_lowercase();
    if !PASSWORD_KEYS.iter().any(|k| lower.contains(k)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        let at_boundary = i == 0
            || matches!(
                text.as_bytes()[i - 1],
                b';' | b' ' | b'"' | b'\'' | b'\t' | b'\n'
            );
        let key = at_boundary
            .then(|| PASSWORD_KEYS.iter().find(|k| lower[i..].starts_with(**k)))
            .flatten();
        match key {
            Some(key) => {
                let start = i + key.len();
                let len = text[start..]
                    .find([';', '"', '\'', '\n'])
                    .unwrap_or(text.len() - start);
                out.push_str(&text[i..start]);
                if len > 0 {
                    out.push_str(REDACTED);
                }
                i = start + len;
            }
            None => {
                let c = text[i..].chars().next().unwrap_or_default();
                out.push(c);
                i += c.len_utf8().max(1);
            }
        }
    }
    changed(text, out)
}

/// Go's MySQL DSN, which has no scheme: `app:hunter2@tcp(db:3306)/x` →
/// `app:<redacted>@tcp(db:3306)/x` (also `@unix(`).
fn go_dsn(text: &str) -> Cow<'_, str> {
    if !text.contains("@tcp(") && !text.contains("@unix(") {
        return Cow::Borrowed(text);
    }
    let words: Vec<&str> = text.split_inclusive(char::is_whitespace).collect();
    let mut out = String::with_capacity(text.len());
    for word in words {
        let at = word.find("@tcp(").or_else(|| word.find("@unix("));
        let credentials = at.map(|at| &word[..at]);
        match credentials.and_then(|c| c.find(':').map(|colon| (colon, c.len()))) {
            Some((colon, end)) if end > colon + 1 && !word[colon + 1..].starts_with(REDACTED) => {
                out.push_str(&word[..=colon]);
                out.push_str(REDACTED);
                out.push_str(&word[end..]);
            }
            _ => out.push_str(word),
        }
    }
    changed(text, out)
}

fn changed(text: &str, out: String) -> Cow<'_, str> {
    if out == text {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real-world shapes of secret-bearing values: each secret is gone, and
    /// what is left still says what the value was.
    #[test]
    fn secrets_of_every_shape_are_redacted() {
        let cases = [
            (
                "postgres://app:s3cr3t-pw@db.internal:5432/app?sslmode=require",
                "postgres://<redacted>@db.internal:5432/app?sslmode=require",
            ),
            (
                "mongodb+srv://admin:Zx9%40pw@cluster0.mongodb.net/?retryWrites=true",
                "mongodb+srv://<redacted>@cluster0.mongodb.net/?retryWrites=true",
            ),
            (
                "redis://:redis-pass-123@redis-master:6379/0",
                "redis://<redacted>@redis-master:6379/0",
            ),
            (
                "https://5f1e2d3c4b5a@o12345.ingest.sentry.io/67890",
                "https://<redacted>@o12345.ingest.sentry.io/67890",
            ),
            (
                "https://ghp_abcdefghijklmnop1234@github.com/org/repo.git",
                "https://<redacted>@github.com/org/repo.git",
            ),
            (
                "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
                "https://hooks.slack.com/<redacted>",
            ),
            (
                "https://discord.com/api/webhooks/123456789/abcDEF-token",
                "https://discord.com/api/webhooks/<redacted>",
            ),
            (
                "https://contoso.webhook.office.com/webhookb2/abc@def/IncomingWebhook/123/456",
                "https://contoso.webhook.office.com/<redacted>",
            ),
            (
                "https://api.telegram.org/bot123456:ABC-DEF1234ghIkl/sendMessage",
                "https://api.telegram.org/bot<redacted>",
            ),
            (
                "https://alerts.example.com/notify?channel=ops&token=abc123def456&x=1",
                "https://alerts.example.com/notify?channel=ops&token=<redacted>&x=1",
            ),
            (
                "https://bucket.s3.amazonaws.com/o?X-Amz-Credential=AKIA/x&X-Amz-Signature=deadbeef",
                "https://bucket.s3.amazonaws.com/o?X-Amz-Credential=AKIA/x&X-Amz-Signature=<redacted>",
            ),
            (
                "https://acct.blob.core.windows.net/c?sv=2022-11-02&sig=AbC%2Bdef%3D",
                "https://acct.blob.core.windows.net/c?sv=2022-11-02&sig=<redacted>",
            ),
            (
                "Server=tcp:db.example.com,1433;Database=app;User ID=app;Password=Hunter2!;Encrypt=True;",
                "Server=tcp:db.example.com,1433;Database=app;User ID=app;Password=<redacted>;Encrypt=True;",
            ),
            (
                "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=bXlrZXk=;EndpointSuffix=core.windows.net",
                "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=<redacted>;EndpointSuffix=core.windows.net",
            ),
            (
                "app:hunter2@tcp(mysql.db:3306)/app?parseTime=true",
                "app:<redacted>@tcp(mysql.db:3306)/app?parseTime=true",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(redact_shapes(input), expected, "{input}");
            // Redacting twice changes nothing more.
            assert_eq!(redact_shapes(expected), expected, "{expected}");
        }
    }

    /// Values that only look a little like secrets stay as they are.
    #[test]
    fn plain_values_are_left_alone() {
        for plain in [
            "https://helm.cilium.io",
            "oci://ghcr.io/fluxcd/charts/flux-operator",
            "https://example.com/search?q=password&page=2",
            "kubernetes.io/hostname",
            "git@github.com:org/repo.git",
            "ssh://git@github.com/org/repo.git",
            "user@example.com",
            "a=b;c=d",
            "https://hooks.slack.com/",
        ] {
            let out = redact_shapes(plain);
            let expected = if plain == "ssh://git@github.com/org/repo.git" {
                // A user in a URL is redacted too: tokens are passed that way.
                "ssh://<redacted>@github.com/org/repo.git"
            } else {
                plain
            };
            assert_eq!(out, expected, "{plain}");
        }
    }
}
