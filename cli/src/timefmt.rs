//! How ozctl reads durations from flags and writes times for people.

use std::time::Duration;

use chrono::{DateTime, TimeZone};
use k8s_openapi::jiff::Timestamp;
use oz_api::duration::parse_go_duration;

/// `d` in its two largest units, the way people say it: `45s`, `29m 58s`, `1h 5m`, `2d 3h`.
pub fn compact(d: Duration) -> String {
    const UNITS: [(u64, &str); 4] = [(86_400, "d"), (3_600, "h"), (60, "m"), (1, "s")];
    let mut seconds = d.as_secs();
    if seconds == 0 {
        return "0s".into();
    }
    let mut parts = Vec::new();
    for (size, unit) in UNITS {
        if seconds >= size {
            parts.push(format!("{}{unit}", seconds / size));
            seconds %= size;
        } else if !parts.is_empty() {
            // The unit right below the largest one counts even when zero ("1h 0m" is "1h"),
            // so stop: two units at most, and never a gap.
            break;
        }
        if parts.len() == 2 {
            break;
        }
    }
    parts.join(" ")
}

/// `then` relative to `now`: `in 29m 58s`, `3m 2s ago` or `now`.
pub fn relative(now: Timestamp, then: Timestamp) -> String {
    let span = then.duration_since(now);
    let magnitude = span.unsigned_abs();
    if magnitude.as_secs() == 0 {
        "now".into()
    } else if span.is_negative() {
        format!("{} ago", compact(magnitude))
    } else {
        format!("in {}", compact(magnitude))
    }
}

/// When something happened at `then`, for messages such as "expired 3m 2s ago": like
/// [`relative`], but `just now` within the second.
pub fn ago(now: Timestamp, then: Timestamp) -> String {
    match relative(now, then).as_str() {
        "now" => "just now".into(),
        other => other.into(),
    }
}

/// `then` in the local time zone, to the second, with its UTC offset.
pub fn local(then: Timestamp) -> String {
    absolute_in(then, &chrono::Local)
}

/// `then` in `zone`: `2026-11-21 15:04:05 +01:00`.
pub fn absolute_in<Tz: TimeZone>(then: Timestamp, zone: &Tz) -> String
where
    Tz::Offset: std::fmt::Display,
{
    match DateTime::from_timestamp(then.as_second(), then.subsec_nanosecond().max(0) as u32) {
        Some(utc) => utc
            .with_timezone(zone)
            .format("%Y-%m-%d %H:%M:%S %:z")
            .to_string(),
        None => then.to_string(),
    }
}

/// `then` in local time, to the minute, for table cells: `2026-11-21 15:04`.
pub fn local_short(then: Timestamp) -> String {
    match DateTime::from_timestamp(then.as_second(), 0) {
        Some(utc) => utc
            .with_timezone(&chrono::Local)
            .format("%Y-%m-%d %H:%M")
            .to_string(),
        None => then.to_string(),
    }
}

/// A positive Go duration such as `2m`, `90s` or `1h30m`, for `--timeout` and `--duration`.
pub fn parse_positive(text: &str) -> Result<Duration, String> {
    let delta = parse_go_duration(text).map_err(|e| e.to_string())?;
    match delta.to_std() {
        Ok(d) if !d.is_zero() => Ok(d),
        _ => Err(format!(
            "{text:?} is not a positive duration: use one such as 30s, 2m or 1h"
        )),
    }
}

/// How far back `--since` reaches: whole days such as `7d`, or a Go duration such as `36h`.
pub fn parse_since(text: &str) -> Result<Duration, String> {
    if let Some(days) = text.strip_suffix('d') {
        return match days.parse::<u64>() {
            Ok(days) if days > 0 => Ok(Duration::from_secs(days * 86_400)),
            _ => Err(format!(
                "{text:?}: use a whole number of days such as 7d, or a duration such as 36h"
            )),
        };
    }
    parse_positive(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn compact_uses_the_two_largest_units() {
        let s = Duration::from_secs;
        assert_eq!(compact(s(0)), "0s");
        assert_eq!(compact(Duration::from_millis(900)), "0s");
        assert_eq!(compact(s(45)), "45s");
        assert_eq!(compact(s(60)), "1m");
        assert_eq!(compact(s(29 * 60 + 58)), "29m 58s");
        assert_eq!(compact(s(3600)), "1h");
        assert_eq!(compact(s(3600 + 5 * 60 + 59)), "1h 5m");
        assert_eq!(compact(s(3600 + 59)), "1h");
        assert_eq!(compact(s(2 * 86_400 + 3 * 3600 + 7)), "2d 3h");
        assert_eq!(compact(s(7 * 86_400)), "7d");
    }

    #[test]
    fn relative_says_in_or_ago() {
        let now = at("2026-11-21T12:00:00Z");
        assert_eq!(relative(now, at("2026-11-21T12:29:58Z")), "in 29m 58s");
        assert_eq!(relative(now, at("2026-11-21T11:56:58Z")), "3m 2s ago");
        assert_eq!(relative(now, now), "now");
        assert_eq!(relative(now, at("2026-11-21T12:00:00.4Z")), "now");
        assert_eq!(ago(now, at("2026-11-21T11:59:59.6Z")), "just now");
        assert_eq!(ago(now, at("2026-11-21T11:59:00Z")), "1m ago");
    }

    #[test]
    fn absolute_times_carry_their_offset() {
        let then = at("2026-11-21T14:03:12.5Z");
        assert_eq!(
            absolute_in(then, &chrono::Utc),
            "2026-11-21 14:03:12 +00:00"
        );
        let paris = chrono::FixedOffset::east_opt(3600).unwrap();
        assert_eq!(absolute_in(then, &paris), "2026-11-21 15:03:12 +01:00");
    }

    #[test]
    fn durations_from_flags() {
        assert_eq!(parse_positive("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_positive("1h30m"), Ok(Duration::from_secs(5400)));
        assert!(
            parse_positive("0s")
                .unwrap_err()
                .contains("not a positive duration")
        );
        assert!(parse_positive("-1m").is_err());
        assert!(parse_positive("2 minutes").is_err());
        assert_eq!(parse_since("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_since("36h"), Ok(Duration::from_secs(36 * 3600)));
        assert!(parse_since("0d").is_err());
        assert!(
            parse_since("1.5d")
                .unwrap_err()
                .contains("whole number of days")
        );
    }
}
