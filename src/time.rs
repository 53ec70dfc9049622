//! Instants are jiff `Timestamp`s, as Kubernetes objects carry them; durations are chrono
//! `TimeDelta`s, as `oz_api::duration` decides them. These convert between the two.

use chrono::TimeDelta;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// `start + duration`, saturating at the largest representable instant.
pub fn add(start: Timestamp, duration: TimeDelta) -> Timestamp {
    let span = SignedDuration::new(duration.num_seconds(), duration.subsec_nanos());
    start.checked_add(span).unwrap_or(Timestamp::MAX)
}

/// How long from `now` until `then`; zero if `then` has passed.
pub fn until(now: Timestamp, then: Timestamp) -> std::time::Duration {
    let span = then.duration_since(now);
    if span.is_negative() {
        std::time::Duration::ZERO
    } else {
        span.unsigned_abs()
    }
}

/// How far `now` is past `then`, in seconds (negative if `then` is still ahead).
pub fn seconds_past(now: Timestamp, then: Timestamp) -> f64 {
    now.duration_since(then).as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_and_measures() {
        let start: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let end = add(start, TimeDelta::minutes(90));
        assert_eq!(end.to_string(), "2026-01-01T01:30:00Z");
        assert_eq!(until(start, end), std::time::Duration::from_secs(5400));
        assert_eq!(until(end, start), std::time::Duration::ZERO);
        assert_eq!(seconds_past(end, start), 5400.0);
    }

    #[test]
    fn saturates_instead_of_overflowing() {
        let start: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        assert_eq!(add(start, TimeDelta::MAX), Timestamp::MAX);
    }
}
