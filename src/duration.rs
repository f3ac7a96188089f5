//! How durations read in messages: `250ms`, `45s`, `1m30s`, `1h02m`, never
//! `1m 29s 999ms 974us 492ns`.

use std::time::Duration;

pub fn span(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        return format!("{}ms", d.as_millis());
    }
    // Rounded to the nearest second: a timer that fired at 89.99s means 90s.
    let secs = (d.as_millis() + 500) / 1000;
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 && s % 60 == 0 => format!("{}m", s / 60),
        s if s < 3600 => format!("{}m{}s", s / 60, s % 60),
        s if s % 3600 / 60 == 0 => format!("{}h", s / 3600),
        s => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
    }
}

/// A moment in UTC, to the second: `2026-01-01T00:00:00Z`.
pub fn timestamp(t: std::time::SystemTime) -> String {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    k8s_openapi::jiff::Timestamp::from_second(secs)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| format!("{secs}s after the Unix epoch"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_units() {
        let ms = Duration::from_millis;
        assert_eq!(span(ms(250)), "250ms");
        assert_eq!(span(ms(45_000)), "45s");
        assert_eq!(span(ms(89_999)), "1m30s");
        assert_eq!(span(ms(90_000)), "1m30s");
        assert_eq!(span(ms(120_000)), "2m");
        assert_eq!(span(ms(3_600_000)), "1h");
        assert_eq!(span(ms(3_720_000)), "1h02m");
    }

    #[test]
    fn timestamps_are_utc_to_the_second() {
        let t = std::time::UNIX_EPOCH + Duration::from_millis(1_767_225_600_900);
        assert_eq!(timestamp(t), "2026-01-01T00:00:00Z");
    }
}
