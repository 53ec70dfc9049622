//! The parsers of oz-manager's flag values that need more than clap's: durations in Go's
//! notation, sizes with binary suffixes, bind addresses, sink networks.

use std::{net::SocketAddr, time::Duration};

use oz_sessions::recording::limits::MIN_MAX_SESSION_BYTES;

use crate::notify::SinkNetworks;

/// `--history-retention`: whole days (`7d`) or a Go duration (`168h`), never negative.
pub(super) fn parse_retention(text: &str) -> Result<Duration, String> {
    if let Some(days) = text.strip_suffix('d') {
        let seconds = days
            .parse::<u64>()
            .ok()
            .and_then(|days| days.checked_mul(24 * 3600))
            .ok_or_else(|| {
                format!(
                    "{text:?}: want a whole number of days such as 7d (at most {}d), or a Go duration such as 168h",
                    u64::MAX / (24 * 3600)
                )
            })?;
        return Ok(Duration::from_secs(seconds));
    }
    let duration = oz_api::duration::parse_go_duration(text).map_err(|e| e.to_string())?;
    duration
        .to_std()
        .map_err(|_| format!("{text:?}: history retention cannot be negative"))
}

/// `--audit-log-max-size`: bytes, or a number with a `Ki`, `Mi` or `Gi` suffix.
pub(super) fn parse_size(text: &str) -> Result<u64, String> {
    let (number, unit) = match text.len().checked_sub(2).map(|at| text.split_at(at)) {
        Some((number, "Ki")) => (number, 1 << 10),
        Some((number, "Mi")) => (number, 1 << 20),
        Some((number, "Gi")) => (number, 1 << 30),
        _ => (text, 1),
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
        .ok_or_else(|| {
            format!("{text:?}: want a number of bytes such as 104857600, or 100Mi (Ki, Mi, Gi)")
        })
}

/// `--session-recording-max-size`: a size, at least room for a header and the markers.
pub(super) fn parse_session_recording_size(text: &str) -> Result<u64, String> {
    match parse_size(text)? {
        size if size < MIN_MAX_SESSION_BYTES => Err(format!(
            "{text:?}: a recording needs at least {}Ki for its header and markers",
            MIN_MAX_SESSION_BYTES >> 10
        )),
        size => Ok(size),
    }
}

/// `--audit-log-max-age`: a Go duration, 0 for never.
pub(super) fn parse_max_age(text: &str) -> Result<Duration, String> {
    let duration = oz_api::duration::parse_go_duration(text).map_err(|e| e.to_string())?;
    duration
        .to_std()
        .map_err(|_| format!("{text:?}: the audit file's age cannot be negative"))
}

/// `--audit-checkpoint-interval`: a positive Go duration.
pub(super) fn parse_checkpoint_interval(text: &str) -> Result<Duration, String> {
    match parse_max_age(text)? {
        interval if interval.is_zero() => Err(format!("{text:?}: the interval must be positive")),
        interval => Ok(interval),
    }
}

/// A positive Go duration.
pub(super) fn parse_positive(text: &str) -> Result<Duration, String> {
    match parse_max_age(text)? {
        d if d.is_zero() => Err(format!("{text:?}: must be positive")),
        d => Ok(d),
    }
}

/// `:8080`, `0.0.0.0:8080` or `0` (off).
pub(super) fn parse_bind(flag: &str, text: &str) -> Result<Option<SocketAddr>, String> {
    match text {
        "" | "0" => Ok(None),
        _ => {
            let full = if text.starts_with(':') {
                format!("0.0.0.0{text}")
            } else {
                text.to_string()
            };
            full.parse()
                .map(Some)
                .map_err(|e| format!("--{flag} {text:?}: {e}"))
        }
    }
}

/// One `--notifications-allow-sinks-in` name, checked.
pub(super) fn parse_sink_network(text: &str) -> Result<String, String> {
    SinkNetworks::allowing(&[text.to_string()])?;
    Ok(text.trim().to_string())
}
