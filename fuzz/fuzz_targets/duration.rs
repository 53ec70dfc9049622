//! The duration parser and Oz's duration decision, on any string.
//!
//! Properties: nothing panics; what parses formats back to itself; a positive duration is
//! positive; the CRD's duration pattern (what the apiserver accepts) and the parser agree; a
//! decision is within (0, max] and follows the request when the request is within the maximum.
//!
//! The input is `requested|default|max` (missing parts: `1h`, `2h`).
#![no_main]

use std::sync::LazyLock;

use chrono::TimeDelta;
use libfuzzer_sys::fuzz_target;
use oz_api::{
    duration::{
        DurationError, DurationOutcome, decide_access_duration, format_go_duration,
        parse_go_duration, parse_positive_duration, validate_template_durations,
    },
    rules::GO_DURATION_RE,
};
use regex::Regex;

static PATTERN: LazyLock<Regex> = LazyLock::new(|| Regex::new(GO_DURATION_RE).unwrap());

fn check_one(text: &str) {
    let parsed = parse_go_duration(text);
    match &parsed {
        Ok(duration) => {
            let formatted = format_go_duration(*duration);
            assert_eq!(
                parse_go_duration(&formatted),
                Ok(*duration),
                "{text:?} formats as {formatted:?}, which does not parse back"
            );
        }
        Err(error) => {
            // Messages never panic, and read as Go's do.
            assert!(!error.to_string().is_empty());
            assert!(error.go_message().starts_with("time: "), "{error:?}");
        }
    }
    match parse_positive_duration(text) {
        Ok(duration) => assert!(duration > TimeDelta::zero(), "{text:?}"),
        Err(DurationError::Negative { .. }) => {
            assert!(parsed.as_ref().is_ok_and(|d| *d < TimeDelta::zero()))
        }
        Err(DurationError::Zero { .. }) => assert!(parsed.as_ref().is_ok_and(|d| d.is_zero())),
        Err(other) => assert_eq!(Err(&other), parsed.as_ref()),
    }
    // The CRD's pattern (unsigned <number><unit> groups) against the parser: what the pattern
    // admits parses (or is merely too long for Go), and what parses unsigned is admitted.
    let admitted = PATTERN.is_match(text);
    let unsigned = !text.starts_with(['+', '-']);
    match &parsed {
        Ok(_) if unsigned && text != "0" => {
            assert!(admitted, "{text:?} parses but the CRD pattern refuses it")
        }
        Err(DurationError::Overflow { .. }) => {}
        Err(error) => assert!(
            !admitted,
            "{text:?} is admitted by the CRD pattern but: {error}"
        ),
        Ok(_) => {}
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut parts = text.splitn(3, '|');
    let requested = parts.next().unwrap_or_default();
    let default = parts.next().unwrap_or("1h");
    let max = parts.next().unwrap_or("2h");
    for part in [requested, default, max] {
        check_one(part);
    }

    let requested = (!requested.is_empty()).then_some(requested);
    match decide_access_duration(requested, default, max) {
        Ok(decision) => {
            let template = validate_template_durations(default, max).unwrap();
            assert!(decision.duration > TimeDelta::zero());
            assert!(decision.duration <= template.max);
            match decision.outcome {
                DurationOutcome::Default => assert_eq!(decision.duration, template.default),
                DurationOutcome::Custom => {
                    assert_eq!(Ok(decision.duration), parse_go_duration(requested.unwrap()))
                }
                DurationOutcome::ClampedToMax => {
                    assert_eq!(decision.duration, template.max);
                    assert!(parse_go_duration(requested.unwrap()).unwrap() > template.max);
                }
            }
            assert!(!decision.message.is_empty());
        }
        Err(error) => {
            assert!(!error.condition_message().is_empty());
        }
    }
});
