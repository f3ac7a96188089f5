//! Field-level checks shared by the loader: names, versions, durations, URLs.

use std::time::Duration;

/// Why a name is not a DNS-1123 label; reads after "name `x` ".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
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
pub fn dns_label(value: &str) -> Result<(), NameError> {
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
pub fn release_name(value: &str) -> Result<(), NameError> {
    dns_label(value)?;
    if value.len() > 53 {
        return Err(NameError::TooLongForHelm(value.len()));
    }
    Ok(())
}

/// Why a chart version is not pinned; reads after "chart version ".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    #[error("is empty")]
    Empty,
    #[error("`latest` is not a pinned version")]
    Latest,
    #[error("`{0}` is a range, not a pinned version")]
    Range(String),
}

/// Bootstrap must be reproducible: a chart version must name exactly one version.
pub fn pinned_version(version: &str) -> Result<(), VersionError> {
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
pub const LONGEST: Duration = Duration::from_secs(7 * 24 * 3600);

pub fn duration(text: &str) -> Result<Duration, DurationError> {
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
pub fn chart_name(name: &str) -> bool {
    name.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

pub fn is_url(text: &str) -> bool {
    text.contains("://")
}

#[cfg(test)]
mod tests {
    use super::*;

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
