//! Kubernetes quantities (`resource.Quantity`) read as whole device counts.
//! A node advertises GPUs as an extended resource whose allocatable must be
//! a whole, non-negative number; anything else (`abc`, `-8`, `8.5`, a number
//! past what Kubernetes counts, [`MOST`]) is refused with the reason, never
//! read as some other count.

use super::amount::MOST;

use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QuantityError {
    /// Not a quantity at all.
    Malformed,
    Negative,
    /// A quantity, but not a whole number of devices.
    Fractional,
    TooLarge,
}

impl fmt::Display for QuantityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            QuantityError::Malformed => "is not a Kubernetes quantity",
            QuantityError::Negative => "is negative",
            QuantityError::Fractional => "is not a whole number of devices",
            QuantityError::TooLarge => "is too large to count",
        })
    }
}

/// The suffix's factor as (power of 10, power of 2).
fn suffix(s: &str) -> Option<(i32, u32)> {
    Some(match s {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        _ => {
            // A decimal exponent: e3, E-2.
            let exp = s.strip_prefix(['e', 'E'])?;
            let n: i32 = exp.parse().ok()?;
            (n, 0)
        }
    })
}

/// A quantity taken apart: `digits` × 10^`ten` × 2^`two`.
struct Parsed {
    digits: u128,
    ten: i32,
    two: u32,
}

/// Parses a quantity; None for zero (whatever its sign or suffix).
fn parse(q: &str) -> Result<Option<Parsed>, QuantityError> {
    let q = q.trim();
    let (negative, rest) = match q.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, q.strip_prefix('+').unwrap_or(q)),
    };
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suf) = rest.split_at(end);
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
        return Err(QuantityError::Malformed);
    }
    let (ten, two) = suffix(suf).ok_or(QuantityError::Malformed)?;
    // The digits as one integer, scaled by 10^-(fraction digits).
    let digits = format!("{int}{frac}");
    let digits = digits.trim_start_matches('0');
    if digits.is_empty() {
        return Ok(None);
    }
    if negative {
        return Err(QuantityError::Negative);
    }
    let mut ten = ten - i32::try_from(frac.len()).map_err(|_| QuantityError::TooLarge)?;
    let mut digits = digits.to_string();
    // Trailing zeros can be cancelled against a negative exponent.
    while ten < 0 && digits.ends_with('0') {
        digits.pop();
        ten += 1;
    }
    if digits.len() > 38 {
        return Err(QuantityError::TooLarge);
    }
    let digits = digits.parse().map_err(|_| QuantityError::TooLarge)?;
    Ok(Some(Parsed { digits, ten, two }))
}

/// The parsed quantity times 10^`scale`, rounded up when it is not whole
/// (`round_up`) or refused as `Fractional`.
fn scaled(q: &str, scale: i32, round_up: bool) -> Result<u64, QuantityError> {
    let Some(p) = parse(q)? else {
        return Ok(0);
    };
    let ten = p.ten + scale;
    let mut n = p
        .digits
        .checked_mul(1u128.checked_shl(p.two).ok_or(QuantityError::TooLarge)?)
        .ok_or(QuantityError::TooLarge)?;
    if ten >= 0 {
        if ten > 38 {
            return Err(QuantityError::TooLarge);
        }
        n = n
            .checked_mul(10u128.pow(ten as u32))
            .ok_or(QuantityError::TooLarge)?;
    } else {
        let div = 10u128.checked_pow(ten.unsigned_abs()).unwrap_or(u128::MAX);
        let (whole, rest) = (n / div, n % div);
        if rest != 0 && !round_up {
            return Err(QuantityError::Fractional);
        }
        n = whole + u128::from(rest != 0);
    }
    // Past an int64 Kubernetes cannot count it either (`Quantity.Value`).
    u64::try_from(n)
        .ok()
        .filter(|n| *n <= MOST)
        .ok_or(QuantityError::TooLarge)
}

/// A quantity as a whole count: `8`, `1k`, `2000m`, `1.5k`, `4e2`.
pub fn whole_count(q: &str) -> Result<u64, QuantityError> {
    scaled(q, 0, false)
}

/// A quantity as kube-scheduler counts it: `cpu` in millicores
/// (`MilliValue`), every other resource in units (`Value`), both rounded
/// up to the next whole number as upstream rounds them.
pub fn scheduler_amount(resource: &str, q: &str) -> Result<u64, QuantityError> {
    let scale = if resource == CPU { 3 } else { 0 };
    scaled(q, scale, true)
}

/// The resource whose amounts are counted in millicores.
pub const CPU: &str = "cpu";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_are_read_as_whole_counts_or_refused_with_the_reason() {
        use QuantityError::*;
        let cases: &[(&str, Result<u64, QuantityError>)] = &[
            ("8", Ok(8)),
            ("0", Ok(0)),
            ("1k", Ok(1000)),
            ("1.5k", Ok(1500)),
            ("2000m", Ok(2)),
            ("4e2", Ok(400)),
            ("1Ki", Ok(1024)),
            ("+3", Ok(3)),
            (" 8 ", Ok(8)),
            ("-0", Ok(0)),
            ("abc", Err(Malformed)),
            ("", Err(Malformed)),
            ("8x", Err(Malformed)),
            ("1.2.3", Err(Malformed)),
            ("-8", Err(Negative)),
            ("8.5", Err(Fractional)),
            ("1500m", Err(Fractional)),
            ("18446744073709552k", Err(TooLarge)),
            ("9223372036854775807", Ok(MOST)),
            ("9223372036854775808", Err(TooLarge)),
            ("18446744073709551615", Err(TooLarge)),
            ("18446744073709551616", Err(TooLarge)),
            ("1e40", Err(TooLarge)),
        ];
        for (q, want) in cases {
            assert_eq!(&whole_count(q), want, "{q:?}");
        }
    }

    #[test]
    fn scheduler_amounts_are_millicores_for_cpu_and_units_rounded_up_for_the_rest() {
        use QuantityError::*;
        let cases: &[(&str, &str, Result<u64, QuantityError>)] = &[
            ("cpu", "2", Ok(2000)),
            ("cpu", "500m", Ok(500)),
            ("cpu", "1.5", Ok(1500)),
            ("cpu", "0.0001", Ok(1)),
            ("cpu", "100u", Ok(1)),
            ("cpu", "0", Ok(0)),
            ("memory", "1Gi", Ok(1 << 30)),
            ("memory", "1.5Gi", Ok(3 << 29)),
            ("memory", "512M", Ok(512_000_000)),
            ("memory", "100m", Ok(1)),
            ("memory", "1e3", Ok(1000)),
            ("nvidia.com/gpu", "2", Ok(2)),
            ("pods", "110", Ok(110)),
            ("memory", "-1Gi", Err(Negative)),
            ("memory", "lots", Err(Malformed)),
            ("memory", "64Ei", Err(TooLarge)),
            ("memory", "8Ei", Err(TooLarge)),
            ("memory", "9223372036854775807", Ok(MOST)),
            // kube-scheduler's MilliValue of this wraps to -1000m.
            ("cpu", "9223372036854775807", Err(TooLarge)),
            ("cpu", "9223372036854775807m", Ok(MOST)),
        ];
        for (resource, q, want) in cases {
            assert_eq!(&scheduler_amount(resource, q), want, "{resource} {q:?}");
        }
    }
}
