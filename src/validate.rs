//! Field-level checks shared by the loader: names, versions, durations, URLs.

use std::time::Duration;

/// Why a name is not a DNS-1123 label; reads after "name `x` ".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NameError {
    #[error("is empty")]
    Empty,
    #[error("is {0} characters long; at most 63 are allowed")]
    TooLong(usize),
    #[error(
        "is {0} characters long; helm allows at most 53 in a release name (it appends suffixes to name objects after it)"
    )]
    TooLongForHelm(usize),
    #[error(
        "must consist of lower case letters, digits and '-', and start and end with a letter or digit (a DNS-1123 label)"
    )]
    NotALabel,
}

/// Kubernetes DNS-1123 label: what Helm requires of release names and what
/// namespaces must be.
pub(crate) fn dns_label(value: &str) -> Result<(), NameError> {
    let ok_chars = value
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    let ok_ends = value
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
        && value
            .chars()
            .last()
            .is_some_and(|c| c.is_ascii_alphanumeric());
    if value.is_empty() {
        Err(NameError::Empty)
    } else if value.len() > 63 {
        Err(NameError::TooLong(value.len()))
    } else if !ok_chars || !ok_ends {
        Err(NameError::NotALabel)
    } else {
        Ok(())
    }
}

/// What helm accepts as a release name: a DNS-1123 label of at most 53
/// characters (helm's `ValidateReleaseName`).
pub(crate) fn release_name(value: &str) -> Result<(), NameError> {
    dns_label(value)?;
    if value.len() > 53 {
        return Err(NameError::TooLongForHelm(value.len()));
    }
    Ok(())
}

/// Why a chart version is not pinned; reads after "chart version ".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum VersionError {
    #[error("is empty")]
    Empty,
    #[error("`latest` is not a pinned version")]
    Latest,
    #[error("`{0}` is a range, not a pinned version")]
    Range(String),
}

/// Bootstrap must be reproducible: a chart version must name exactly one version.
pub(crate) fn pinned_version(version: &str) -> Result<(), VersionError> {
    let v = version.trim();
    if v.is_empty() {
        return Err(VersionError::Empty);
    }
    if v.eq_ignore_ascii_case("latest") {
        return Err(VersionError::Latest);
    }
    let range_chars = ['^', '~', '>', '<', '=', '*', '|', ',', ' '];
    if v.contains(range_chars) || v.split('.').any(|part| part.eq_ignore_ascii_case("x")) {
        return Err(VersionError::Range(v.to_string()));
    }
    Ok(())
}

/// Why a duration cannot be used; reads after "timeout ".
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DurationError {
    #[error("`{text}` is not a duration ({reason}); write it like `90s`, `5m` or `1h30m`")]
    Unparsable {
        text: String,
        reason: humantime::DurationError,
    },
    #[error("`{0}` is zero; give a positive duration")]
    Zero(String),
    #[error(
        "`{0}` is longer than 7 days, more than any bootstrap step or run waits; give a shorter duration"
    )]
    TooLong(String),
}

/// The longest duration accepted: every wait, helm's `--timeout` (Go's
/// `time.Duration`) and the run's deadline represent it exactly.
pub(crate) const LONGEST: Duration = Duration::from_secs(7 * 24 * 3600);

pub(crate) fn duration(text: &str) -> Result<Duration, DurationError> {
    let d = humantime::parse_duration(text.trim()).map_err(|reason| DurationError::Unparsable {
        text: text.to_string(),
        reason,
    })?;
    if d.is_zero() {
        return Err(DurationError::Zero(text.to_string()));
    }
    if d > LONGEST {
        return Err(DurationError::TooLong(text.to_string()));
    }
    Ok(d)
}

/// A chart's name in its repository as helm's chart lint accepts it
/// (letters, digits, `.`, `_`, `-`), and never starting like a flag.
pub(crate) fn chart_name(name: &str) -> bool {
    name.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

pub(crate) fn is_url(text: &str) -> bool {
    text.contains("://")
}

/// What makes a chart repository URL or OCI reference unusable; each
/// ends the sentence "is not a reference helm can use: …".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum UrlError {
    #[error("it holds {0}, which a URL cannot (percent-encode it, e.g. a space as %20)")]
    Character(&'static str),
    #[error("it has no host after `://`")]
    NoHost,
    #[error("its port `{0}` is not a number from 1 to 65535")]
    Port(String),
    #[error("it names no chart: write `oci://REGISTRY/PATH/CHART`")]
    NoChart,
    #[error(
        "its path `{0}` is not a repository name an OCI registry accepts (lowercase letters, digits and single `.`, `_`, `__` or `-` between them)"
    )]
    OciPath(String),
    #[error("it carries a tag or digest (`{0}`); give the chart's version in `version` instead")]
    OciTag(String),
}

/// The part after `scheme://`, split into authority (without userinfo)
/// and path; the characters no URL may hold refused.
fn url_parts(text: &str) -> Result<(&str, &str), UrlError> {
    if let Some(c) = text.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err(UrlError::Character(if c == ' ' {
            "a space"
        } else if c.is_whitespace() {
            "whitespace"
        } else {
            "a control character"
        }));
    }
    if let Some(c) = text
        .chars()
        .find(|c| matches!(c, '"' | '<' | '>' | '\\' | '^' | '`' | '{' | '|' | '}'))
    {
        return Err(UrlError::Character(match c {
            '"' => "a `\"`",
            '<' | '>' => "a `<` or `>`",
            '\\' => "a backslash",
            '{' | '}' => "a brace",
            '|' => "a `|`",
            _ => "a `^` or backtick",
        }));
    }
    let rest = text.split_once("://").map_or(text, |(_, rest)| rest);
    let (authority, path) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    // `[::1]:5000`: an IPv6 host is bracketed.
    let (host, port) = match host_port.strip_prefix('[').and_then(|h| h.find(']')) {
        Some(end) => {
            let (host, after) = host_port.split_at(end + 2);
            (host, after.strip_prefix(':'))
        }
        None => match host_port.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        },
    };
    if host.is_empty() {
        return Err(UrlError::NoHost);
    }
    if let Some(port) = port
        && !port.parse::<u16>().is_ok_and(|p| p > 0)
    {
        return Err(UrlError::Port(port.to_string()));
    }
    Ok((host_port, path))
}

/// A chart repository URL helm can fetch `index.yaml` under:
/// `http(s)://[user:token@]host[:port][/path]`.
pub(crate) fn repository_url(text: &str) -> Result<(), UrlError> {
    url_parts(text).map(|_| ())
}

/// An OCI chart reference as helm and registries take it:
/// `oci://registry[:port]/path/chart`, the path a registry repository
/// name, no tag or digest (the version is `version`).
pub(crate) fn oci_reference(text: &str) -> Result<(), UrlError> {
    let (_, path) = url_parts(text)?;
    let path = path.trim_start_matches('/').trim_end_matches('/');
    if path.is_empty() {
        return Err(UrlError::NoChart);
    }
    if let Some(at) = path.find('@') {
        return Err(UrlError::OciTag(path[at..].to_string()));
    }
    let last = path.rsplit('/').next().unwrap_or(path);
    if let Some(colon) = last.find(':') {
        return Err(UrlError::OciTag(last[colon..].to_string()));
    }
    if !path.split('/').all(oci_component) {
        return Err(UrlError::OciPath(path.to_string()));
    }
    Ok(())
}

/// One component of a registry repository name (the distribution spec's
/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`).
fn oci_component(component: &str) -> bool {
    let bytes = component.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if bytes.is_empty() || !alnum(&bytes[0]) || !alnum(&bytes[bytes.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < bytes.len() {
        if alnum(&bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && !alnum(&bytes[i]) {
            i += 1;
        }
        let separator = &component[start..i];
        let dashes = separator.bytes().all(|b| b == b'-');
        if !(matches!(separator, "." | "_" | "__") || dashes) {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repository_urls_and_oci_references_are_parsed() {
        for ok in [
            "https://helm.cilium.io",
            "https://helm.cilium.io/",
            "http://127.0.0.1:8080/charts",
            "https://user:tok%20en@charts.example.com/stable",
            "http://[::1]:8080",
        ] {
            assert_eq!(repository_url(ok), Ok(()), "{ok}");
        }
        for (bad, why) in [
            (
                "https://helm.cilium.io/ charts",
                UrlError::Character("a space"),
            ),
            ("https://", UrlError::NoHost),
            ("https:///charts", UrlError::NoHost),
            ("https://host:99999", UrlError::Port("99999".into())),
            ("https://host:http", UrlError::Port("http".into())),
            ("https://ho\tst", UrlError::Character("whitespace")),
            ("https://host/{x}", UrlError::Character("a brace")),
        ] {
            assert_eq!(repository_url(bad), Err(why), "{bad}");
        }
        for ok in [
            "oci://ghcr.io/fluxcd/charts/flux-operator",
            "oci://quay.io/jetstack/charts/cert-manager",
            "oci://127.0.0.1:5000/charts/a__b.c-d",
            "oci://registry.example.com/x",
        ] {
            assert_eq!(oci_reference(ok), Ok(()), "{ok}");
        }
        for (bad, why) in [
            (
                "oci://ghcr.io/fluxcd/charts/flux operator",
                UrlError::Character("a space"),
            ),
            ("oci://ghcr.io", UrlError::NoChart),
            ("oci://ghcr.io/", UrlError::NoChart),
            ("oci:///charts/x", UrlError::NoHost),
            (
                "oci://ghcr.io/FluxCD/x",
                UrlError::OciPath("FluxCD/x".into()),
            ),
            ("oci://ghcr.io/a//b", UrlError::OciPath("a//b".into())),
            ("oci://ghcr.io/a/-b", UrlError::OciPath("a/-b".into())),
            ("oci://ghcr.io/a/b:1.2.3", UrlError::OciTag(":1.2.3".into())),
            (
                "oci://ghcr.io/a/b@sha256:abc",
                UrlError::OciTag("@sha256:abc".into()),
            ),
        ] {
            assert_eq!(oci_reference(bad), Err(why), "{bad}");
        }
    }

    #[test]
    fn chart_names_never_start_like_a_flag() {
        for ok in [
            "cilium",
            "cert-manager",
            "prometheus-operator-crds",
            "a.b_c",
            "0x",
        ] {
            assert!(chart_name(ok), "{ok}");
        }
        for bad in [
            "-cilium",
            "--dry-run",
            "",
            ".hidden",
            "a b",
            "a=b",
            "ci/lium",
        ] {
            assert!(!chart_name(bad), "{bad}");
        }
    }

    #[test]
    fn durations_are_bounded_as_helm_and_the_waits_can_hold_them() {
        assert_eq!(duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(duration("7d"), Ok(LONGEST));
        for huge in ["18446744073709551615s", "8d", "99999h"] {
            assert!(
                matches!(duration(huge), Err(DurationError::TooLong(_))),
                "{huge}: {:?}",
                duration(huge)
            );
        }
    }

    #[test]
    fn release_names_are_at_most_53_characters() {
        assert!(release_name(&"a".repeat(53)).is_ok());
        assert_eq!(
            release_name(&"a".repeat(54)),
            Err(NameError::TooLongForHelm(54))
        );
        assert_eq!(release_name("Cilium"), Err(NameError::NotALabel));
    }

    #[test]
    fn dns_labels() {
        assert!(dns_label("cert-manager").is_ok());
        assert!(dns_label("Cilium").is_err());
        assert!(dns_label("-x").is_err());
        assert!(dns_label("a_b").is_err());
        assert_eq!(dns_label(&"a".repeat(64)), Err(NameError::TooLong(64)));
        assert_eq!(dns_label(""), Err(NameError::Empty));
    }

    #[test]
    fn versions_must_be_pinned() {
        assert!(pinned_version("1.18.2").is_ok());
        assert!(pinned_version("v1.19.0").is_ok());
        assert!(pinned_version("0.0.0-rc.1+build").is_ok());
        for range in ["^1.2", "~1.2", ">=1", "1.x", "*", "1.2 || 1.3"] {
            assert_eq!(
                pinned_version(range),
                Err(VersionError::Range(range.into())),
                "{range}"
            );
        }
        assert_eq!(pinned_version("latest"), Err(VersionError::Latest));
    }

    #[test]
    fn durations() {
        assert_eq!(duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert!(matches!(
            duration("5 minutes please"),
            Err(DurationError::Unparsable { .. })
        ));
        assert_eq!(duration("0s"), Err(DurationError::Zero("0s".into())));
        assert_eq!(
            duration("soon").unwrap_err().to_string(),
            "`soon` is not a duration (expected number at 0); write it like `90s`, `5m` or `1h30m`"
        );
    }
}
