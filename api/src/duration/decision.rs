//! Oz's duration decision: a template's `defaultDuration` / `maxDuration` check and how long a
//! request's access lasts, with Oz's condition messages.

use chrono::TimeDelta;

use super::{DurationError, format_go_duration, parse_go_duration, parse_positive_duration};

/// The message of Oz's `TemplateDurationsValid=True` condition.
pub const TEMPLATE_DURATIONS_VALID_MESSAGE: &str =
    "spec.defaultDuration and spec.maxDuration valid";

/// A template's parsed `defaultDuration` and `maxDuration`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TemplateDurations {
    /// Used when a request gives no duration.
    pub default: TimeDelta,
    /// Longer requests are clamped to this.
    pub max: TimeDelta,
}

/// Why a template's `defaultDuration` / `maxDuration` pair was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TemplateDurationsError {
    /// `defaultDuration` does not parse, or is not positive.
    #[error("spec.accessConfig.defaultDuration: {0}")]
    Default(DurationError),

    /// `maxDuration` does not parse, or is not positive.
    #[error("spec.accessConfig.maxDuration: {0}")]
    Max(DurationError),

    /// `defaultDuration` is longer than `maxDuration`.
    #[error(
        "spec.accessConfig.defaultDuration ({default}) is greater than spec.accessConfig.maxDuration ({max}): lower the default or raise the maximum"
    )]
    DefaultExceedsMax {
        /// The default, in Go's format.
        default: String,
        /// The maximum, in Go's format.
        max: String,
    },
}

impl TemplateDurationsError {
    /// The message of Oz's `TemplateDurationsValid=False` condition (reason `NotAcceptable`),
    /// such as `Error on spec.defaultDuration: time: invalid duration "abc"` or
    /// `Error: spec.defaultDuration can not be greater than spec.maxDuration`.
    pub fn condition_message(&self) -> String {
        match self {
            Self::Default(error) => {
                format!("Error on spec.defaultDuration: {}", error.go_message())
            }
            Self::Max(error) => format!("Error on spec.maxDuration: {}", error.go_message()),
            Self::DefaultExceedsMax { .. } => {
                "Error: spec.defaultDuration can not be greater than spec.maxDuration".to_owned()
            }
        }
    }
}

/// Checks a template's durations as Oz's template reconciler does: both parse, and the default
/// is not greater than the maximum. Unlike Oz, both must also be positive: a negative or zero
/// default made every request relying on it expire at once.
///
/// On success the `TemplateDurationsValid=True` message is [`TEMPLATE_DURATIONS_VALID_MESSAGE`].
pub fn validate_template_durations(
    default: &str,
    max: &str,
) -> Result<TemplateDurations, TemplateDurationsError> {
    let default = parse_positive_duration(default).map_err(TemplateDurationsError::Default)?;
    let max = parse_positive_duration(max).map_err(TemplateDurationsError::Max)?;
    if default > max {
        return Err(TemplateDurationsError::DefaultExceedsMax {
            default: format_go_duration(default),
            max: format_go_duration(max),
        });
    }
    Ok(TemplateDurations { default, max })
}

/// Which rule chose a request's access duration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DurationOutcome {
    /// The request gave no duration (absent, empty, or zero), so the template's default applies.
    Default,
    /// The request's own duration, which is within the template's maximum.
    Custom,
    /// The request asked for more than the template's maximum and got the maximum. Oz clamps
    /// rather than rejects, and the condition stays `True`.
    ClampedToMax,
}

/// How long a request's access lasts, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DurationDecision {
    /// The access duration, counted from the request's creation.
    pub duration: TimeDelta,
    /// Which rule chose it.
    pub outcome: DurationOutcome,
    /// Oz's `AccessDurationsValid=True` message (reason `Success`) for this decision.
    pub message: String,
}

/// Why no access duration could be decided for a request.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationDecisionError {
    /// The request's `spec.duration` does not parse, or is negative.
    #[error("spec.duration: {0}")]
    Request(DurationError),

    /// The template's durations are invalid, so no request through it can be decided.
    #[error("the template's {0}")]
    Template(TemplateDurationsError),
}

impl DurationDecisionError {
    /// The message of Oz's `AccessDurationsValid=False` condition (reason `BadRequest`), such
    /// as `request error: "access request duration invalid": time: invalid duration "abc"`.
    ///
    /// Oz reports a template problem with the same sentinel text, prefixed `template error`.
    pub fn condition_message(&self) -> String {
        const SENTINEL: &str = "\"access request duration invalid\"";
        match self {
            Self::Request(error) => format!("request error: {SENTINEL}: {}", error.go_message()),
            Self::Template(
                TemplateDurationsError::Default(error) | TemplateDurationsError::Max(error),
            ) => {
                format!("template error: {SENTINEL}: {}", error.go_message())
            }
            Self::Template(TemplateDurationsError::DefaultExceedsMax { .. }) => format!(
                "template error: {SENTINEL}: spec.defaultDuration can not be greater than spec.maxDuration"
            ),
        }
    }
}

/// Decides how long a request's access lasts, as Oz's `GetAccessDuration` does.
///
/// `requested` is the request's `spec.duration`; `None`, `""` and any zero value (`0`, `0s`)
/// mean "use the template default". `default` and `max` are the template's `defaultDuration`
/// and `maxDuration`.
///
/// | requested            | result                 | message                                                                        |
/// |----------------------|------------------------|--------------------------------------------------------------------------------|
/// | none or zero         | `default`              | `Access request duration defaulting to template duration time (1h0m0s)`        |
/// | `0 < requested ≤ max`| `requested`            | `Access requested custom duration (5m0s)`                                      |
/// | `requested > max`    | `max` (clamped)        | `Access requested duration (3h0m0s) larger than template maximum duration (2h0m0s)` |
///
/// Oz's order of checks is kept (request first, then template), but three inputs Oz accepted
/// are refused: a negative request (Oz granted it already expired), a non-positive template
/// duration, and a default above the maximum (Oz flagged that template invalid yet still
/// granted the default to requests).
pub fn decide_access_duration(
    requested: Option<&str>,
    default: &str,
    max: &str,
) -> Result<DurationDecision, DurationDecisionError> {
    let requested_text = requested.unwrap_or_default();
    let requested = if requested_text.is_empty() {
        TimeDelta::zero()
    } else {
        parse_go_duration(requested_text).map_err(DurationDecisionError::Request)?
    };
    if requested < TimeDelta::zero() {
        return Err(DurationDecisionError::Request(DurationError::Negative {
            input: requested_text.to_owned(),
        }));
    }
    let template =
        validate_template_durations(default, max).map_err(DurationDecisionError::Template)?;

    let decision = if requested.is_zero() {
        DurationDecision {
            duration: template.default,
            outcome: DurationOutcome::Default,
            message: format!(
                "Access request duration defaulting to template duration time ({})",
                format_go_duration(template.default)
            ),
        }
    } else if requested <= template.max {
        DurationDecision {
            duration: requested,
            outcome: DurationOutcome::Custom,
            message: format!(
                "Access requested custom duration ({})",
                format_go_duration(requested)
            ),
        }
    } else {
        DurationDecision {
            duration: template.max,
            outcome: DurationOutcome::ClampedToMax,
            message: format!(
                "Access requested duration ({}) larger than template maximum duration ({})",
                format_go_duration(requested),
                format_go_duration(template.max)
            ),
        }
    };
    Ok(decision)
}

#[cfg(test)]
mod tests {
    use super::super::test_units::*;
    use super::*;

    #[test]
    fn template_durations_follow_ozs_check_and_messages() {
        assert_eq!(
            validate_template_durations("1h", "24h"),
            Ok(TemplateDurations {
                default: nanos(H),
                max: nanos(24 * H)
            })
        );
        // Equal is fine: Oz only refuses a default strictly greater than the maximum.
        assert!(validate_template_durations("2h", "120m").is_ok());

        let too_long = validate_template_durations("3h", "2h").unwrap_err();
        assert_eq!(
            too_long,
            TemplateDurationsError::DefaultExceedsMax {
                default: "3h0m0s".into(),
                max: "2h0m0s".into()
            }
        );
        assert_eq!(
            too_long.condition_message(),
            "Error: spec.defaultDuration can not be greater than spec.maxDuration"
        );
        assert!(too_long.to_string().contains("(3h0m0s)"));

        let bad_default = validate_template_durations("abc", "2h").unwrap_err();
        assert_eq!(
            bad_default.condition_message(),
            r#"Error on spec.defaultDuration: time: invalid duration "abc""#
        );
        assert!(
            bad_default
                .to_string()
                .starts_with("spec.accessConfig.defaultDuration: ")
        );

        let bad_max = validate_template_durations("1h", "1d").unwrap_err();
        assert_eq!(
            bad_max.condition_message(),
            r#"Error on spec.maxDuration: time: unknown unit "d" in duration "1d""#
        );

        // Oz accepted these, and every request relying on them expired at once.
        assert_eq!(
            validate_template_durations("-1h", "2h"),
            Err(TemplateDurationsError::Default(DurationError::Negative {
                input: "-1h".into()
            }))
        );
        assert_eq!(
            validate_template_durations("1h", "0"),
            Err(TemplateDurationsError::Max(DurationError::Zero {
                input: "0".into()
            }))
        );
    }

    #[test]
    fn decision_defaults_when_the_request_gives_no_duration() {
        for requested in [None, Some(""), Some("0"), Some("0s"), Some("-0")] {
            assert_eq!(
                decide_access_duration(requested, "1h", "2h"),
                Ok(DurationDecision {
                    duration: nanos(H),
                    outcome: DurationOutcome::Default,
                    message:
                        "Access request duration defaulting to template duration time (1h0m0s)"
                            .into(),
                }),
                "{requested:?}"
            );
        }
    }

    #[test]
    fn decision_accepts_a_custom_duration_up_to_the_maximum() {
        assert_eq!(
            decide_access_duration(Some("5m"), "1h", "2h"),
            Ok(DurationDecision {
                duration: nanos(5 * M),
                outcome: DurationOutcome::Custom,
                message: "Access requested custom duration (5m0s)".into(),
            })
        );
        let at_max = decide_access_duration(Some("120m"), "1h", "2h").unwrap();
        assert_eq!(at_max.outcome, DurationOutcome::Custom);
        assert_eq!(at_max.message, "Access requested custom duration (2h0m0s)");
        // Any Go duration is accepted on a request, as in Oz.
        let fractional = decide_access_duration(Some("1.5h"), "1h", "2h").unwrap();
        assert_eq!(fractional.duration, nanos(90 * M));
        assert_eq!(
            fractional.message,
            "Access requested custom duration (1h30m0s)"
        );
    }

    #[test]
    fn decision_clamps_a_request_above_the_maximum() {
        assert_eq!(
            decide_access_duration(Some("3h"), "1h", "2h"),
            Ok(DurationDecision {
                duration: nanos(2 * H),
                outcome: DurationOutcome::ClampedToMax,
                message:
                    "Access requested duration (3h0m0s) larger than template maximum duration (2h0m0s)"
                        .into(),
            })
        );
    }

    #[test]
    fn decision_errors_carry_ozs_condition_messages() {
        let invalid = decide_access_duration(Some("abc"), "1h", "2h").unwrap_err();
        assert!(matches!(
            invalid,
            DurationDecisionError::Request(DurationError::InvalidSyntax { .. })
        ));
        assert_eq!(
            invalid.condition_message(),
            r#"request error: "access request duration invalid": time: invalid duration "abc""#
        );
        assert!(invalid.to_string().starts_with("spec.duration: "));

        let bad_template = decide_access_duration(None, "1h", "forever").unwrap_err();
        assert_eq!(
            bad_template.condition_message(),
            r#"template error: "access request duration invalid": time: invalid duration "forever""#
        );

        // The request is checked before the template, as in Oz.
        let both_bad = decide_access_duration(Some("x"), "y", "z").unwrap_err();
        assert!(matches!(both_bad, DurationDecisionError::Request(_)));
    }

    #[test]
    fn decision_refuses_what_oz_let_through() {
        // Oz granted a negative duration, already expired.
        let negative = decide_access_duration(Some("-1m"), "1h", "2h").unwrap_err();
        assert_eq!(
            negative,
            DurationDecisionError::Request(DurationError::Negative {
                input: "-1m".into()
            })
        );
        assert!(
            negative
                .condition_message()
                .starts_with(r#"request error: "access request duration invalid": "#)
        );

        // Oz flagged the template but still handed out the too-long default.
        let default_above_max = decide_access_duration(None, "3h", "2h").unwrap_err();
        assert!(matches!(
            default_above_max,
            DurationDecisionError::Template(TemplateDurationsError::DefaultExceedsMax { .. })
        ));
        assert_eq!(
            default_above_max.condition_message(),
            r#"template error: "access request duration invalid": spec.defaultDuration can not be greater than spec.maxDuration"#
        );

        assert!(matches!(
            decide_access_duration(Some("5m"), "0s", "2h"),
            Err(DurationDecisionError::Template(
                TemplateDurationsError::Default(DurationError::Zero { .. })
            ))
        ));
    }
}
