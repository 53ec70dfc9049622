//! Go's `time.ParseDuration` and `Duration.String()`, reproduced exactly.

use std::fmt::Write as _;

use chrono::TimeDelta;

/// One hour in nanoseconds, Go's largest duration unit.
const NANOS_PER_HOUR: u64 = 3_600_000_000_000;

/// Go's `Duration` is an `int64` of nanoseconds; parsing works on magnitudes up to `2^63` so
/// that the most negative value still fits.
const MAGNITUDE_LIMIT: u64 = 1 << 63;

/// Why a duration string was refused.
///
/// The [`Display`](std::fmt::Display) text names the input and says how to fix it;
/// [`DurationError::go_message`] gives the text Go's `time.ParseDuration` would have returned,
/// for messages that must match Oz's byte for byte.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// The string is empty.
    #[error(r#"the duration is empty: write a Go duration such as "30m", "1h" or "1h30m""#)]
    Empty,

    /// The string is not a sequence of `<number><unit>` pairs (a stray character, a lone sign,
    /// a number with no digits such as `.s`).
    #[error(
        r#"invalid duration {input:?}: write one or more <number><unit> pairs without spaces, such as "30m", "1.5h" or "1h30m""#
    )]
    InvalidSyntax {
        /// The string as given.
        input: String,
    },

    /// A number is not followed by a unit, as in `30` or `1h30`.
    #[error(
        r#"missing unit in duration {input:?}: put a unit (ns, us, µs, ms, s, m or h) after every number, as in "30m""#
    )]
    MissingUnit {
        /// The string as given.
        input: String,
    },

    /// A number is followed by something that is not a unit, as in `1d` or `1 h`.
    #[error(
        r#"unknown unit {unit:?} in duration {input:?}: valid units are ns, us (or µs), ms, s, m and h, written without spaces; for days use hours, as in "48h""#
    )]
    UnknownUnit {
        /// Everything between the number and the next number, as Go reports it.
        unit: String,
        /// The string as given.
        input: String,
    },

    /// The value does not fit Go's `int64` nanoseconds (about ±292 years).
    #[error(
        "duration {input:?} is too long: the longest Go duration is 2562047h47m16.854775807s (about 292 years)"
    )]
    Overflow {
        /// The string as given.
        input: String,
    },

    /// The value is below zero where only positive durations make sense.
    #[error(r#"duration {input:?} is negative: use a positive duration such as "30m""#)]
    Negative {
        /// The string as given.
        input: String,
    },

    /// The value is zero where only positive durations make sense.
    #[error(r#"duration {input:?} is zero: use a positive duration such as "30m""#)]
    Zero {
        /// The string as given.
        input: String,
    },
}

impl DurationError {
    /// The error text Go's `time.ParseDuration` gives for the same input, such as
    /// `time: invalid duration "abc"`.
    ///
    /// Go accepts negative and zero durations, so for [`DurationError::Negative`] and
    /// [`DurationError::Zero`] this is the [`Display`](std::fmt::Display) text instead.
    pub fn go_message(&self) -> String {
        match self {
            Self::Empty => format!("time: invalid duration {}", go_quote("")),
            Self::InvalidSyntax { input } | Self::Overflow { input } => {
                format!("time: invalid duration {}", go_quote(input))
            }
            Self::MissingUnit { input } => {
                format!("time: missing unit in duration {}", go_quote(input))
            }
            Self::UnknownUnit { unit, input } => format!(
                "time: unknown unit {} in duration {}",
                go_quote(unit),
                go_quote(input)
            ),
            Self::Negative { .. } | Self::Zero { .. } => self.to_string(),
        }
    }
}

/// Parses a duration exactly as Go's `time.ParseDuration` does.
///
/// The grammar is an optional sign followed by one or more `<number><unit>` pairs, where a
/// number is decimal with an optional fraction (`1`, `1.5`, `1.`, `.5`) and the unit is one of
/// `ns`, `us`, `µs` (U+00B5), `μs` (U+03BC), `ms`, `s`, `m`, `h`. A bare `0` (with or without a
/// sign) is the only number allowed without a unit. Fractions are converted the way Go does,
/// through a float64, so results agree to the nanosecond.
///
/// ```
/// use chrono::TimeDelta;
/// use oz_api::duration::parse_go_duration;
///
/// assert_eq!(parse_go_duration("1h30m"), Ok(TimeDelta::minutes(90)));
/// assert_eq!(parse_go_duration("1.5h"), Ok(TimeDelta::minutes(90)));
/// assert_eq!(parse_go_duration("-1.5h"), Ok(TimeDelta::minutes(-90)));
/// assert_eq!(parse_go_duration("300ms"), Ok(TimeDelta::milliseconds(300)));
/// assert_eq!(parse_go_duration(".5s"), Ok(TimeDelta::milliseconds(500)));
/// assert!(parse_go_duration("1d").is_err());
/// ```
///
/// One deliberate difference: Go's running total can wrap around when two terms of exactly
/// 2^63 ns are added (`"9223372036854775808ns9223372036854775808ns"` parses to `0s` in Go);
/// here that is [`DurationError::Overflow`].
pub fn parse_go_duration(input: &str) -> Result<TimeDelta, DurationError> {
    let invalid = || DurationError::InvalidSyntax {
        input: input.to_owned(),
    };
    let overflow = || DurationError::Overflow {
        input: input.to_owned(),
    };

    if input.is_empty() {
        return Err(DurationError::Empty);
    }
    let (negative, mut rest) = match input.as_bytes()[0] {
        b'-' => (true, &input[1..]),
        b'+' => (false, &input[1..]),
        _ => (false, input),
    };
    if rest == "0" {
        return Ok(TimeDelta::zero());
    }
    if rest.is_empty() {
        return Err(invalid());
    }

    let mut magnitude: u64 = 0;
    while !rest.is_empty() {
        let first = rest.as_bytes()[0];
        if !(first == b'.' || first.is_ascii_digit()) {
            return Err(invalid());
        }

        let (whole, after_whole) = leading_int(rest).ok_or_else(overflow)?;
        let has_whole_digits = after_whole.len() != rest.len();
        rest = after_whole;

        let (mut fraction, mut scale, mut has_fraction_digits) = (0, 1.0, false);
        if let Some(after_dot) = rest.strip_prefix('.') {
            let (digits, digits_scale, after_fraction) = leading_fraction(after_dot);
            has_fraction_digits = after_fraction.len() != after_dot.len();
            (fraction, scale, rest) = (digits, digits_scale, after_fraction);
        }
        if !has_whole_digits && !has_fraction_digits {
            return Err(invalid());
        }

        // Like Go, the unit is everything up to the next number, so "1h 30m" reports "h ".
        let unit_len = rest
            .bytes()
            .position(|byte| byte == b'.' || byte.is_ascii_digit())
            .unwrap_or(rest.len());
        if unit_len == 0 {
            return Err(DurationError::MissingUnit {
                input: input.to_owned(),
            });
        }
        let (unit_name, after_unit) = rest.split_at(unit_len);
        rest = after_unit;
        let unit = unit_nanos(unit_name).ok_or_else(|| DurationError::UnknownUnit {
            unit: unit_name.to_owned(),
            input: input.to_owned(),
        })?;

        if whole > MAGNITUDE_LIMIT / unit {
            return Err(overflow());
        }
        let mut term = whole * unit;
        if fraction > 0 {
            // Go goes through float64 here so fractions of an hour stay nanosecond-accurate;
            // the same operations in the same order give the same rounding.
            term += (fraction as f64 * (unit as f64 / scale)) as u64;
            if term > MAGNITUDE_LIMIT {
                return Err(overflow());
            }
        }
        magnitude = magnitude
            .checked_add(term)
            .filter(|total| *total <= MAGNITUDE_LIMIT)
            .ok_or_else(overflow)?;
    }

    let nanos = if negative {
        0_i64.wrapping_sub_unsigned(magnitude)
    } else {
        i64::try_from(magnitude).map_err(|_| overflow())?
    };
    Ok(TimeDelta::nanoseconds(nanos))
}

/// Parses a Go duration that must be greater than zero, as a lifetime must be.
///
/// Negative values give [`DurationError::Negative`] and zero (`0`, `0s`, `-0`) gives
/// [`DurationError::Zero`]; everything else is as [`parse_go_duration`].
pub fn parse_positive_duration(input: &str) -> Result<TimeDelta, DurationError> {
    let duration = parse_go_duration(input)?;
    if duration < TimeDelta::zero() {
        Err(DurationError::Negative {
            input: input.to_owned(),
        })
    } else if duration.is_zero() {
        Err(DurationError::Zero {
            input: input.to_owned(),
        })
    } else {
        Ok(duration)
    }
}

/// Formats a duration exactly as Go's `Duration.String()` does.
///
/// One second and above: `72h3m0.5s`, `1h0m0s`, `1m30s`, `1.5s`, with the fraction's trailing
/// zeros dropped. Below one second the unit shrinks so a non-zero value keeps a leading
/// non-zero digit: `100ms`, `1.5µs` (U+00B5), `7ns`. Zero is `0s`; negative values get a
/// leading `-`.
///
/// ```
/// use chrono::TimeDelta;
/// use oz_api::duration::format_go_duration;
///
/// assert_eq!(format_go_duration(TimeDelta::hours(1)), "1h0m0s");
/// assert_eq!(format_go_duration(TimeDelta::minutes(90)), "1h30m0s");
/// assert_eq!(format_go_duration(TimeDelta::milliseconds(1500)), "1.5s");
/// assert_eq!(format_go_duration(TimeDelta::milliseconds(100)), "100ms");
/// assert_eq!(format_go_duration(TimeDelta::zero()), "0s");
/// ```
///
/// A `TimeDelta` can be longer than Go's largest duration (about 292 years); such values are
/// printed in the same style with a larger hour count, where Go could not represent them.
pub fn format_go_duration(duration: TimeDelta) -> String {
    const NANOS_PER_SECOND: u128 = 1_000_000_000;

    let total_nanos =
        i128::from(duration.num_seconds()) * 1_000_000_000 + i128::from(duration.subsec_nanos());
    let sign = if total_nanos < 0 { "-" } else { "" };
    let nanos = total_nanos.unsigned_abs();

    if nanos == 0 {
        return "0s".to_owned();
    }
    if nanos < NANOS_PER_SECOND {
        let (unit, precision) = match nanos {
            0..1_000 => ("ns", 0),
            1_000..1_000_000 => ("µs", 3),
            _ => ("ms", 6),
        };
        let divisor = 10_u128.pow(precision);
        let fraction = go_fraction(nanos % divisor, precision);
        return format!("{sign}{}{fraction}{unit}", nanos / divisor);
    }

    let fraction = go_fraction(nanos % NANOS_PER_SECOND, 9);
    let total_seconds = nanos / NANOS_PER_SECOND;
    let (seconds, total_minutes) = (total_seconds % 60, total_seconds / 60);
    let (minutes, hours) = (total_minutes % 60, total_minutes / 60);
    // Go stops at hours because days vary in length, and always prints the smaller units
    // once a larger one is present.
    if hours > 0 {
        format!("{sign}{hours}h{minutes}m{seconds}{fraction}s")
    } else if total_minutes > 0 {
        format!("{sign}{minutes}m{seconds}{fraction}s")
    } else {
        format!("{sign}{seconds}{fraction}s")
    }
}

/// Nanoseconds per unit, for the units Go's `unitMap` knows.
fn unit_nanos(unit: &str) -> Option<u64> {
    match unit {
        "ns" => Some(1),
        // "µs" is U+00B5 MICRO SIGN, "μs" is U+03BC GREEK SMALL LETTER MU; Go takes both.
        "us" | "\u{b5}s" | "\u{3bc}s" => Some(1_000),
        "ms" => Some(1_000_000),
        "s" => Some(1_000_000_000),
        "m" => Some(60_000_000_000),
        "h" => Some(NANOS_PER_HOUR),
        _ => None,
    }
}

/// Go's `leadingInt`: consumes leading ASCII digits; `None` once the value passes 2^63.
fn leading_int(text: &str) -> Option<(u64, &str)> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let mut value: u64 = 0;
    for digit in text[..digits].bytes() {
        if value > MAGNITUDE_LIMIT / 10 {
            return None;
        }
        value = value * 10 + u64::from(digit - b'0');
        if value > MAGNITUDE_LIMIT {
            return None;
        }
    }
    Some((value, &text[digits..]))
}

/// Go's `leadingFraction`: consumes leading ASCII digits as `value / scale`. Digits past what
/// fits in 63 bits are consumed but ignored, as in Go (they are below a nanosecond anyway).
fn leading_fraction(text: &str) -> (u64, f64, &str) {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (mut value, mut scale, mut saturated) = (0_u64, 1.0_f64, false);
    for digit in text[..digits].bytes() {
        if saturated {
            continue;
        }
        if value > (MAGNITUDE_LIMIT - 1) / 10 {
            saturated = true;
            continue;
        }
        let next = value * 10 + u64::from(digit - b'0');
        if next > MAGNITUDE_LIMIT {
            saturated = true;
            continue;
        }
        value = next;
        scale *= 10.0;
    }
    (value, scale, &text[digits..])
}

/// Go's `fmtFrac`: `.digits` of `value / 10^precision` without trailing zeros, or nothing
/// when the fraction is zero.
fn go_fraction(value: u128, precision: u32) -> String {
    if value == 0 {
        return String::new();
    }
    let digits = format!("{value:0width$}", width = precision as usize);
    format!(".{}", digits.trim_end_matches('0'))
}

/// Go's `time.quote`: double quotes, with `"` and `\` escaped and every byte of a non-ASCII or
/// control character written as `\xNN`.
fn go_quote(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for character in text.chars() {
        if character.is_ascii() && character >= ' ' {
            if matches!(character, '"' | '\\') {
                quoted.push('\\');
            }
            quoted.push(character);
        } else {
            let mut buffer = [0; 4];
            for byte in character.encode_utf8(&mut buffer).bytes() {
                // Writing to a String cannot fail.
                let _ = write!(quoted, "\\x{byte:02x}");
            }
        }
    }
    quoted.push('"');
    quoted
}

#[cfg(test)]
mod tests {
    use super::super::test_units::*;
    use super::*;

    /// Go's own `parseDurationTests` (time_test.go) plus the examples in its documentation.
    #[test]
    fn parses_what_go_parses_to_the_same_value() {
        let cases: &[(&str, i64)] = &[
            ("0", 0),
            ("5s", 5 * S),
            ("30s", 30 * S),
            ("1478s", 1478 * S),
            ("-5s", -5 * S),
            ("+5s", 5 * S),
            ("-0", 0),
            ("+0", 0),
            ("5.0s", 5 * S),
            ("5.6s", 5 * S + 600 * MS),
            ("5.s", 5 * S),
            (".5s", 500 * MS),
            ("1.0s", S),
            ("1.00s", S),
            ("1.004s", S + 4 * MS),
            ("1.0040s", S + 4 * MS),
            ("100.00100s", 100 * S + MS),
            ("10ns", 10 * NS),
            ("11us", 11 * US),
            ("12µs", 12 * US),
            ("12\u{b5}s", 12 * US),
            ("12\u{3bc}s", 12 * US),
            ("13ms", 13 * MS),
            ("14s", 14 * S),
            ("15m", 15 * M),
            ("16h", 16 * H),
            ("3h30m", 3 * H + 30 * M),
            ("10.5s4m", 4 * M + 10 * S + 500 * MS),
            ("-2m3.4s", -(2 * M + 3 * S + 400 * MS)),
            (
                "1h2m3s4ms5us6ns",
                H + 2 * M + 3 * S + 4 * MS + 5 * US + 6 * NS,
            ),
            ("39h9m14.425s", 39 * H + 9 * M + 14 * S + 425 * MS),
            ("52763797000ns", 52_763_797_000),
            ("0.3333333333333333333h", 20 * M),
            ("9007199254740993ns", (1 << 53) + 1),
            ("9223372036854775807ns", i64::MAX),
            ("9223372036854775.807us", i64::MAX),
            ("9223372036s854ms775us807ns", i64::MAX),
            ("-9223372036854775808ns", i64::MIN),
            ("-9223372036854775.808us", i64::MIN),
            ("-9223372036s854ms775us808ns", i64::MIN),
            ("-2562047h47m16.854775808s", i64::MIN),
            ("0.100000000000000000000h", 6 * M),
            ("0.830103483285477580700h", 49 * M + 48 * S + 372_539_827),
            // The examples in the brief and in Go's documentation.
            ("1.5h", 90 * M),
            ("1h30m", 90 * M),
            ("-1.5h", -90 * M),
            ("300ms", 300 * MS),
            ("2h45m", 2 * H + 45 * M),
            ("10h", 10 * H),
            ("1h10m10s", H + 10 * M + 10 * S),
            ("1µs", US),
            ("1us", US),
            // Oz's CRD defaults and examples.
            ("1h", H),
            ("24h", 24 * H),
            ("5m", 5 * M),
            ("90m", 90 * M),
            // Zero with a unit is a zero duration, not the special case.
            ("0s", 0),
            ("0h0m", 0),
            ("-0s", 0),
            // Trailing zeros and a bare trailing dot are fine.
            ("1.h", H),
            ("00001s", S),
        ];
        for (input, expected) in cases {
            assert_eq!(
                parse_go_duration(input),
                Ok(nanos(*expected)),
                "parsing {input:?}"
            );
        }
    }

    #[test]
    fn refuses_what_go_refuses_with_the_same_message() {
        let cases: &[(&str, &str)] = &[
            ("", r#"time: invalid duration """#),
            ("3", r#"time: missing unit in duration "3""#),
            ("-", r#"time: invalid duration "-""#),
            ("+", r#"time: invalid duration "+""#),
            ("s", r#"time: invalid duration "s""#),
            (".", r#"time: invalid duration ".""#),
            ("-.", r#"time: invalid duration "-.""#),
            (".s", r#"time: invalid duration ".s""#),
            ("+.s", r#"time: invalid duration "+.s""#),
            ("1d", r#"time: unknown unit "d" in duration "1d""#),
            ("abc", r#"time: invalid duration "abc""#),
            ("1h30", r#"time: missing unit in duration "1h30""#),
            ("00", r#"time: missing unit in duration "00""#),
            ("1h 30m", r#"time: unknown unit "h " in duration "1h 30m""#),
            (" 1h", r#"time: invalid duration " 1h""#),
            ("1H", r#"time: unknown unit "H" in duration "1H""#),
            ("1.5.5h", r#"time: missing unit in duration "1.5.5h""#),
            ("--1h", r#"time: invalid duration "--1h""#),
            (
                "1µ",
                r#"time: unknown unit "\xc2\xb5" in duration "1\xc2\xb5""#,
            ),
            (
                "\u{FFFD} hello \u{FFFD} world",
                r#"time: invalid duration "\xef\xbf\xbd hello \xef\xbf\xbd world""#,
            ),
            ("say \"hi\"", r#"time: invalid duration "say \"hi\"""#),
            (
                "9223372036854775810ns",
                r#"time: invalid duration "9223372036854775810ns""#,
            ),
            (
                "9223372036854775808ns",
                r#"time: invalid duration "9223372036854775808ns""#,
            ),
            (
                "9223372036854775.808us",
                r#"time: invalid duration "9223372036854775.808us""#,
            ),
            (
                "9223372036854ms775us808ns",
                r#"time: invalid duration "9223372036854ms775us808ns""#,
            ),
            ("2562048h", r#"time: invalid duration "2562048h""#),
        ];
        for (input, go_message) in cases {
            let error = parse_go_duration(input).expect_err(input);
            assert_eq!(error.go_message(), *go_message, "parsing {input:?}");
        }
    }

    #[test]
    fn errors_say_which_kind_of_mistake_it_is() {
        assert_eq!(parse_go_duration(""), Err(DurationError::Empty));
        assert!(matches!(
            parse_go_duration("abc"),
            Err(DurationError::InvalidSyntax { .. })
        ));
        assert!(matches!(
            parse_go_duration("30"),
            Err(DurationError::MissingUnit { .. })
        ));
        assert_eq!(
            parse_go_duration("2d"),
            Err(DurationError::UnknownUnit {
                unit: "d".into(),
                input: "2d".into()
            })
        );
        assert!(matches!(
            parse_go_duration("2562048h"),
            Err(DurationError::Overflow { .. })
        ));
        // Overflow inside a number is reported as overflow too, not as bad syntax.
        assert!(matches!(
            parse_go_duration("99999999999999999999ns"),
            Err(DurationError::Overflow { .. })
        ));
        // Go wraps this sum around to 0s; it is refused here.
        assert!(matches!(
            parse_go_duration("9223372036854775808ns9223372036854775808ns"),
            Err(DurationError::Overflow { .. })
        ));
    }

    #[test]
    fn error_messages_name_the_input_and_the_fix() {
        let unknown = parse_go_duration("2d").unwrap_err().to_string();
        assert!(unknown.contains("\"2d\""), "{unknown}");
        assert!(
            unknown.contains("ns, us (or µs), ms, s, m and h"),
            "{unknown}"
        );
        assert!(unknown.contains("48h"), "{unknown}");

        let missing = parse_go_duration("30").unwrap_err().to_string();
        assert!(missing.contains("\"30\""), "{missing}");
        assert!(missing.contains("30m"), "{missing}");

        let empty = DurationError::Empty.to_string();
        assert!(
            empty.contains("empty") && empty.contains("1h30m"),
            "{empty}"
        );

        let negative = parse_positive_duration("-5m").unwrap_err().to_string();
        assert!(
            negative.contains("\"-5m\"") && negative.contains("negative"),
            "{negative}"
        );

        let zero = parse_positive_duration("0s").unwrap_err().to_string();
        assert!(zero.contains("\"0s\"") && zero.contains("zero"), "{zero}");

        let overflow = parse_go_duration("3000000h").unwrap_err().to_string();
        assert!(
            overflow.contains("\"3000000h\"") && overflow.contains("2562047h47m16.854775807s"),
            "{overflow}"
        );
    }

    #[test]
    fn positive_durations_refuse_negative_and_zero() {
        assert_eq!(parse_positive_duration("90m"), Ok(nanos(90 * M)));
        assert_eq!(parse_positive_duration("1ns"), Ok(nanos(1)));
        for zero in ["0", "-0", "+0", "0s", "0.0h", "0h0m0s"] {
            assert_eq!(
                parse_positive_duration(zero),
                Err(DurationError::Zero { input: zero.into() }),
                "{zero}"
            );
        }
        for negative in ["-1ns", "-1.5h", "-1m"] {
            assert_eq!(
                parse_positive_duration(negative),
                Err(DurationError::Negative {
                    input: negative.into()
                }),
                "{negative}"
            );
        }
        assert_eq!(parse_positive_duration(""), Err(DurationError::Empty));
    }

    /// Go's own `durationTests` (time_test.go) plus the values Oz writes into conditions.
    #[test]
    fn formats_like_go() {
        let cases: &[(i64, &str)] = &[
            (0, "0s"),
            (1, "1ns"),
            (1_100, "1.1µs"),
            (2_200 * US, "2.2ms"),
            (3_300 * MS, "3.3s"),
            (4 * M + 5 * S, "4m5s"),
            (4 * M + 5_001 * MS, "4m5.001s"),
            (5 * H + 6 * M + 7_001 * MS, "5h6m7.001s"),
            (8 * M + 1, "8m0.000000001s"),
            (i64::MAX, "2562047h47m16.854775807s"),
            (i64::MIN, "-2562047h47m16.854775808s"),
            (H, "1h0m0s"),
            (90 * M, "1h30m0s"),
            (1_500 * MS, "1.5s"),
            (100 * MS, "100ms"),
            (1_500, "1.5µs"),
            (999, "999ns"),
            (999_999, "999.999µs"),
            (999_999_999, "999.999999ms"),
            (S, "1s"),
            (M, "1m0s"),
            (2 * M + 3_500 * MS, "2m3.5s"),
            (5 * M, "5m0s"),
            (2 * H, "2h0m0s"),
            (3 * H, "3h0m0s"),
            (24 * H, "24h0m0s"),
            (72 * H + 3 * M + 500 * MS, "72h3m0.5s"),
            (-S, "-1s"),
            (-90 * M, "-1h30m0s"),
            (-1, "-1ns"),
            (-1_500, "-1.5µs"),
            (-100 * MS, "-100ms"),
            (-(M + 500 * MS), "-1m0.5s"),
        ];
        for (value, expected) in cases {
            assert_eq!(
                format_go_duration(nanos(*value)),
                *expected,
                "formatting {value}ns"
            );
        }
    }

    #[test]
    fn formats_time_deltas_beyond_gos_range_in_the_same_style() {
        let beyond = TimeDelta::nanoseconds(i64::MAX) + TimeDelta::seconds(1);
        assert_eq!(format_go_duration(beyond), "2562047h47m17.854775807s");
        assert_eq!(format_go_duration(-beyond), "-2562047h47m17.854775807s");
    }

    #[test]
    fn formatting_then_parsing_gives_the_same_duration() {
        for value in [
            1,
            999,
            1_001,
            123_456_789,
            S,
            61 * S + 1,
            H + 1,
            -7 * H - 1,
            i64::MAX,
            i64::MIN,
        ] {
            let formatted = format_go_duration(nanos(value));
            assert_eq!(
                parse_go_duration(&formatted),
                Ok(nanos(value)),
                "{formatted}"
            );
        }
    }

    #[test]
    fn quotes_like_go() {
        assert_eq!(go_quote(""), r#""""#);
        assert_eq!(go_quote("1h"), r#""1h""#);
        assert_eq!(go_quote(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(go_quote("tab\there"), r#""tab\x09here""#);
        assert_eq!(go_quote("\u{3bc}"), r#""\xce\xbc""#);
    }

    /// The CRD patterns in `rules` must accept a duration exactly when the parser accepts it
    /// as an unsigned, non-overflowing value (the CEL rule then adds "greater than zero").
    #[test]
    fn crd_patterns_agree_with_the_parser() {
        let go_pattern = regex::Regex::new(crate::rules::GO_DURATION_RE).unwrap();
        let oz_pod_pattern =
            regex::Regex::new(crate::rules::OZ_POD_REQUEST_DURATION_PATTERN).unwrap();
        let inputs = [
            "1h",
            "90m",
            "1h30m",
            "1.5h",
            ".5s",
            "5.s",
            "300ms",
            "2h45m",
            "1h2m3s4ms5us6ns",
            "12µs",
            "12\u{3bc}s",
            "11us",
            "10ns",
            "0s",
            "00001s",
            "10.5s4m",
            "0.000001h",
            "",
            "0",
            "-1h",
            "+1h",
            "1",
            "1d",
            "h",
            ".",
            ".s",
            "1h 30m",
            " 1h",
            "1h ",
            "1H",
            "1.5.5h",
            "abc",
            "1µ",
            "30",
            "1h30",
            "1e3s",
            "1,5h",
        ];
        for input in inputs {
            let parsed = parse_go_duration(input);
            let unsigned = !input.starts_with(['-', '+']) && input != "0";
            assert_eq!(
                go_pattern.is_match(input),
                parsed.is_ok() && unsigned,
                "GO_DURATION_RE on {input:?} (parser says {parsed:?})"
            );
            // Oz's stricter PodAccessRequest pattern only accepts a subset of that.
            if oz_pod_pattern.is_match(input) {
                assert!(parsed.is_ok() && unsigned, "pod pattern on {input:?}");
            }
        }
        for accepted in ["90m", "2h", "30s", "0s"] {
            assert!(oz_pod_pattern.is_match(accepted), "{accepted}");
        }
        for refused in ["1h30m", "1.5h", "300ms", "1d", ""] {
            assert!(!oz_pod_pattern.is_match(refused), "{refused}");
        }
    }
}
