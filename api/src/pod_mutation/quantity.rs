//! Kubernetes quantities (`100m`, `1Gi`, `1e3`) parsed exactly, as the apiserver does, so the
//! resource caps compare them without rounding.

/// Nano-units per unit: Kubernetes keeps quantities to nine decimal places.
const NANOS_PER_UNIT: u128 = 1_000_000_000;
/// Kubernetes caps every quantity at 2^63-1 units.
const MAX_NANOS: u128 = i64::MAX as u128 * NANOS_PER_UNIT;
/// Exponents beyond this saturate to the cap or to one nano-unit all the same.
const EXPONENT_LIMIT: i64 = 1_000_000;
/// A value with more digits (in nano-units) than this is far above the cap.
const MAX_NANO_DIGITS: usize = 30;

/// The exact value of a Kubernetes quantity, in nano-units (`1` is 10^9, `100m` is 10^8,
/// `1Ki` is 1024 × 10^9).
///
/// It is what the apiserver makes of the string: values more precise than a nano-unit are
/// rounded up (away from zero), and magnitudes above 2^63-1 units are capped there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QuantityValue {
    nanos: i128,
}

impl QuantityValue {
    /// The value in nano-units.
    pub fn nanos(self) -> i128 {
        self.nanos
    }
}

/// Why a quantity string was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The string is empty.
    #[error("the quantity is empty: {QUANTITY_HINT}")]
    Empty,

    /// The string does not start with a number.
    #[error("invalid quantity {input:?}: it must start with a number; {QUANTITY_HINT}")]
    InvalidNumber {
        /// The string as given.
        input: String,
    },

    /// The number is followed by something that is not a suffix or an exponent.
    #[error("invalid quantity {input:?}: unknown suffix {suffix:?}; {QUANTITY_HINT}")]
    UnknownSuffix {
        /// The string as given.
        input: String,
        /// Everything after the number.
        suffix: String,
    },
}

const QUANTITY_HINT: &str = "write a number with an optional suffix (n, u, m, k, M, G, T, P, E, \
    Ki, Mi, Gi, Ti, Pi, Ei) or an integer exponent, such as 100m, 0.5, 2, 128Mi, 1Gi or 1e3";

/// Parses a Kubernetes quantity exactly as the apiserver does (`resource.ParseQuantity`).
///
/// The grammar is an optional sign, a decimal number (`1`, `1.5`, `1.`, `.5`), and an optional
/// suffix: decimal SI `n u m k M G T P E`, binary SI `Ki Mi Gi Ti Pi Ei`, or an exponent `e3`,
/// `E-2`. No floating point is involved.
///
/// ```
/// use oz_api::pod_mutation::parse_quantity;
///
/// assert_eq!(parse_quantity("100m").unwrap().nanos(), 100_000_000);
/// assert_eq!(parse_quantity("1Ki").unwrap().nanos(), 1024 * 1_000_000_000);
/// assert!(parse_quantity("1Gi").unwrap() > parse_quantity("1G").unwrap());
/// assert_eq!(parse_quantity("0.5").unwrap(), parse_quantity("500m").unwrap());
/// assert!(parse_quantity("1 Gi").is_err());
/// ```
pub fn parse_quantity(input: &str) -> Result<QuantityValue, QuantityError> {
    if input.is_empty() {
        return Err(QuantityError::Empty);
    }
    let invalid_number = || QuantityError::InvalidNumber {
        input: input.to_owned(),
    };

    let (negative, rest) = match input.as_bytes()[0] {
        b'-' => (true, &input[1..]),
        b'+' => (false, &input[1..]),
        _ => (false, input),
    };
    let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
    let (int_digits, rest) = rest.split_at(int_len);
    let (frac_digits, suffix) = match rest.strip_prefix('.') {
        Some(after_dot) => {
            let frac_len = after_dot.bytes().take_while(u8::is_ascii_digit).count();
            after_dot.split_at(frac_len)
        }
        None => ("", rest),
    };
    if int_digits.is_empty() && frac_digits.is_empty() {
        return Err(invalid_number());
    }

    let (pow10, pow2) = parse_suffix(suffix).ok_or_else(|| QuantityError::UnknownSuffix {
        input: input.to_owned(),
        suffix: suffix.to_owned(),
    })?;
    let nanos = to_nanos(int_digits, frac_digits, pow10, pow2);
    // to_nanos saturates at MAX_NANOS, which fits an i128.
    let nanos = i128::try_from(nanos).unwrap_or(i128::MAX);
    Ok(QuantityValue {
        nanos: if negative { -nanos } else { nanos },
    })
}

/// The power of ten and the power of two a suffix stands for.
fn parse_suffix(suffix: &str) -> Option<(i64, u32)> {
    let decimal = |pow10| Some((pow10, 0));
    let binary = |pow2| Some((0, pow2));
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(10),
        "Mi" => binary(20),
        "Gi" => binary(30),
        "Ti" => binary(40),
        "Pi" => binary(50),
        "Ei" => binary(60),
        _ => {
            let exponent = suffix
                .strip_prefix('e')
                .or_else(|| suffix.strip_prefix('E'))?;
            let (negative, digits) = match exponent.as_bytes().first()? {
                b'-' => (true, &exponent[1..]),
                b'+' => (false, &exponent[1..]),
                _ => (false, exponent),
            };
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let magnitude = digits
                .parse::<i64>()
                .unwrap_or(i64::MAX)
                .min(EXPONENT_LIMIT);
            decimal(if negative { -magnitude } else { magnitude })
        }
    }
}

/// ⌈(int.frac) × 10^pow10 × 2^pow2 × 10^9⌉, capped at [`MAX_NANOS`], computed on decimal digits
/// so that any input is exact.
fn to_nanos(int_digits: &str, frac_digits: &str, pow10: i64, pow2: u32) -> u128 {
    let mut digits: Vec<u8> = int_digits
        .bytes()
        .chain(frac_digits.bytes())
        .map(|b| b - b'0')
        .skip_while(|&d| d == 0)
        .collect();
    if digits.is_empty() {
        return 0;
    }
    // The value in nano-units is `digits × 10^exponent`.
    let frac_len = i64::try_from(frac_digits.len()).unwrap_or(i64::MAX);
    let mut exponent = pow10.saturating_sub(frac_len).saturating_add(9);
    while digits.last() == Some(&0) {
        digits.pop();
        exponent += 1;
    }
    for _ in 0..pow2 {
        double(&mut digits);
    }

    let len = i64::try_from(digits.len()).unwrap_or(i64::MAX);
    if exponent >= 0 {
        if len.saturating_add(exponent) > MAX_NANO_DIGITS as i64 {
            return MAX_NANOS;
        }
        let scale = 10u128.pow(u32::try_from(exponent).unwrap_or(0));
        return (digits_value(&digits) * scale).min(MAX_NANOS);
    }
    // Below the nano-unit: keep the integer part, and round any remainder up.
    let shift = usize::try_from(exponent.unsigned_abs()).unwrap_or(usize::MAX);
    if digits.len() <= shift {
        return 1;
    }
    let (whole, fraction) = digits.split_at(digits.len() - shift);
    if whole.len() > MAX_NANO_DIGITS {
        return MAX_NANOS;
    }
    let round_up = u128::from(fraction.iter().any(|&d| d != 0));
    (digits_value(whole) + round_up).min(MAX_NANOS)
}

/// Doubles a big-endian decimal digit string in place.
fn double(digits: &mut Vec<u8>) {
    let mut carry = 0;
    for digit in digits.iter_mut().rev() {
        let doubled = *digit * 2 + carry;
        *digit = doubled % 10;
        carry = doubled / 10;
    }
    if carry > 0 {
        digits.insert(0, carry);
    }
}

/// The value of at most [`MAX_NANO_DIGITS`] decimal digits.
fn digits_value(digits: &[u8]) -> u128 {
    digits
        .iter()
        .fold(0, |value, &digit| value * 10 + u128::from(digit))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GI: i128 = 1 << 30;
    const UNIT: i128 = 1_000_000_000;

    fn nanos(quantity: &str) -> i128 {
        parse_quantity(quantity)
            .unwrap_or_else(|error| panic!("{quantity}: {error}"))
            .nanos()
    }

    #[test]
    fn quantities_in_every_form() {
        for (quantity, expected) in [
            ("100m", UNIT / 10),
            ("0.5", UNIT / 2),
            ("1", UNIT),
            ("2", 2 * UNIT),
            ("1Gi", GI * UNIT),
            ("1G", 1_000_000_000 * UNIT),
            ("128Mi", 128 * (1 << 20) * UNIT),
            ("1e3", 1000 * UNIT),
            ("1E3", 1000 * UNIT),
            ("1e+3", 1000 * UNIT),
            ("15e-1", 1_500_000_000),
            ("500M", 500_000_000 * UNIT),
            ("1.5Gi", 3 * (GI / 2) * UNIT),
            ("1k", 1000 * UNIT),
            ("1Ki", 1024 * UNIT),
            ("1Ti", (1 << 40) * UNIT),
            ("1P", 1_000_000_000_000_000 * UNIT),
            ("1Pi", (1 << 50) * UNIT),
            ("1E", 1_000_000_000_000_000_000 * UNIT),
            ("1Ei", (1 << 60) * UNIT),
            ("250u", 250_000),
            ("7n", 7),
            ("0", 0),
            ("0.0Gi", 0),
            ("000100m", UNIT / 10),
            ("1.", UNIT),
            (".5", UNIT / 2),
            ("+2", 2 * UNIT),
            ("-2", -2 * UNIT),
            ("-100m", -UNIT / 10),
            ("0.000000001", 1),
            ("1.000000000000000000000000000000000000000001", UNIT + 1),
        ] {
            assert_eq!(nanos(quantity), expected, "{quantity}");
        }
    }

    #[test]
    fn quantities_are_rounded_up_to_a_nano_unit_as_kubernetes_does() {
        assert_eq!(nanos("0.1n"), 1);
        assert_eq!(nanos("1e-100"), 1);
        assert_eq!(nanos("1e-99999999999999999999"), 1);
        assert_eq!(nanos("-0.1n"), -1);
        assert_eq!(nanos("1.0000000001"), UNIT + 1);
        // 0.0000000001Ki is 102.4n: the binary factor is applied before rounding.
        assert_eq!(nanos("0.0000000001Ki"), 103);
        assert_eq!(nanos("0.5Ki"), 512 * UNIT);
    }

    #[test]
    fn quantities_are_capped_at_two_to_the_63_units_as_kubernetes_does() {
        let max = i128::from(i64::MAX) * UNIT;
        assert_eq!(nanos("8Ei"), max);
        assert_eq!(nanos("9223372036854775807"), max);
        assert_eq!(nanos("9223372036854775806"), max - UNIT);
        assert_eq!(nanos("1e100"), max);
        assert_eq!(nanos("1e99999999999999999999"), max);
        assert_eq!(nanos("123456789012345678901234567890123456789012345"), max);
        assert_eq!(nanos("-8Ei"), -max);
    }

    #[test]
    fn quantities_compare_exactly() {
        let q = |s: &str| parse_quantity(s).unwrap();
        assert_eq!(q("1000m"), q("1"));
        assert_eq!(q("0.5"), q("500m"));
        assert_eq!(q("1e3"), q("1k"));
        assert_eq!(q("1536Mi"), q("1.5Gi"));
        assert!(q("1Gi") > q("1G"));
        assert!(q("1001m") > q("1"));
        assert!(q("999999999n") < q("1"));
        assert!(q("128Mi") < q("1Gi"));
    }

    #[test]
    fn invalid_quantities() {
        assert_eq!(parse_quantity(""), Err(QuantityError::Empty));
        for input in ["abc", "+", "-", ".", "Mi", " 1", "-.", "e3", "++1"] {
            assert!(
                matches!(
                    parse_quantity(input),
                    Err(QuantityError::InvalidNumber { .. })
                ),
                "{input}"
            );
        }
        for (input, suffix) in [
            ("1K", "K"),
            ("1 Gi", " Gi"),
            ("1Gib", "Gib"),
            ("1gi", "gi"),
            ("1.2.3", ".3"),
            ("1e", "e"),
            ("1e+", "e+"),
            ("1e1.5", "e1.5"),
            ("1m5", "m5"),
            ("1mi", "mi"),
            ("2 ", " "),
        ] {
            assert_eq!(
                parse_quantity(input),
                Err(QuantityError::UnknownSuffix {
                    input: input.into(),
                    suffix: suffix.into()
                }),
                "{input}"
            );
        }
        assert_eq!(
            parse_quantity("1Gib").unwrap_err().to_string(),
            "invalid quantity \"1Gib\": unknown suffix \"Gib\"; write a number with an optional \
             suffix (n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei) or an integer exponent, \
             such as 100m, 0.5, 2, 128Mi, 1Gi or 1e3"
        );
    }
}
