//! Go-compatible durations and Oz's duration decision.
//!
//! Oz stores every duration (`defaultDuration`, `maxDuration`, a request's `duration`) as a
//! string parsed with Go's `time.ParseDuration`, and writes durations into condition messages
//! with Go's `Duration.String()`. Manifests written for Oz must mean the same thing here, and
//! the messages must read the same, so both are reproduced exactly:
//!
//! * [`parse_go_duration`] accepts exactly what `time.ParseDuration` accepts;
//! * [`format_go_duration`] prints exactly what `Duration.String()` prints.
//!
//! On top of those, [`validate_template_durations`] and [`decide_access_duration`] reproduce
//! Oz's template check (`templatecontroller/verify_duration.go`) and its request decision
//! (`builders/utils/get_access_duration.go`), including the condition messages, but refuse
//! the negative and zero durations that Oz let through (they expired access at once).

mod decision;
mod go;

pub use decision::{
    DurationDecision, DurationDecisionError, DurationOutcome, TEMPLATE_DURATIONS_VALID_MESSAGE,
    TemplateDurations, TemplateDurationsError, decide_access_duration, validate_template_durations,
};
pub use go::{DurationError, format_go_duration, parse_go_duration, parse_positive_duration};

/// Durations in nanoseconds, and the [`TimeDelta`](chrono::TimeDelta) of one, for the tests.
#[cfg(test)]
mod test_units {
    use chrono::TimeDelta;

    pub(super) const NS: i64 = 1;
    pub(super) const US: i64 = 1_000;
    pub(super) const MS: i64 = 1_000_000;
    pub(super) const S: i64 = 1_000_000_000;
    pub(super) const M: i64 = 60 * S;
    pub(super) const H: i64 = 60 * M;

    pub(super) fn nanos(value: i64) -> TimeDelta {
        TimeDelta::nanoseconds(value)
    }
}
