//! Field-level checks shared by the loader: names, versions, durations, URLs.

use std::time::Duration;

/// Kubernetes DNS-1123 label: what Helm requires of release names and what
/// namespaces must be.
pub fn dns_label(value: &str) -> Result<(), String> {
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
        Err("is empty".into())
    } else if value.len() > 63 {
        Err(format!(
            "is {} characters long; at most 63 are allowed",
            value.len()
        ))
    } else if !ok_chars || !ok_ends {
        Err("must consist of lower case letters, digits and '-', and start and end with a letter or digit (a DNS-1123 label)".into())
    } else {
        Ok(())
    }
}

/// Bootstrap must be reproducible: a chart version must name exactly one version.
pub fn pinned_version(version: &str) -> Result<(), String> {
    let v = version.trim();
    if v.is_empty() {
        return Err("is empty".into());
    }
    if v.eq_ignore_ascii_case("latest") {
        return Err("`latest` is not a pinned version".into());
    }
    let range_chars = ['^', '~', '>', '<', '=', '*', '|', ',', ' '];
    if v.contains(range_chars) || v.split('.').any(|part| part.eq_ignore_ascii_case("x")) {
        return Err(format!("`{v}` is a range, not a pinned version"));
    }
    Ok(())
}

pub fn duration(text: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(text.trim()).map_err(|e| {
        format!("`{text}` is not a duration ({e}); write it like `90s`, `5m` or `1h30m`")
    })?;
    if d.is_zero() {
        return Err(format!("`{text}` is zero; give a positive duration"));
    }
    Ok(d)
}

pub fn is_url(text: &str) -> bool {
    text.contains("://")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_labels() {
        assert!(dns_label("cert-manager").is_ok());
        assert!(dns_label("Cilium").is_err());
        assert!(dns_label("-x").is_err());
        assert!(dns_label("a_b").is_err());
        assert!(dns_label(&"a".repeat(64)).is_err());
    }

    #[test]
    fn versions_must_be_pinned() {
        assert!(pinned_version("1.18.2").is_ok());
        assert!(pinned_version("v1.19.0").is_ok());
        assert!(pinned_version("0.0.0-rc.1+build").is_ok());
        for range in ["^1.2", "~1.2", ">=1", "1.x", "*", "latest", "1.2 || 1.3"] {
            assert!(pinned_version(range).is_err(), "{range}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert!(duration("5 minutes please").is_err());
        assert!(duration("0s").is_err());
    }
}
