//! `resource.Quantity` as kube-apiserver reads it
//! (`apimachinery/pkg/api/resource/quantity.go`): what it refuses to
//! decode (400: `quantities must match the regular expression ...`), the
//! canonical form its validation messages show, and `MilliValue`, the
//! number `ValidateResourceQuantityValue` asks to be whole for an integer
//! resource, with Go's int64 arithmetic, overflow and all: a value that
//! upstream lets through must be let through here, and one it refuses
//! refused.

use std::fmt;

mod arithmetic;
mod canonical;
use arithmetic::{add_one, compare, dec_scaled, int64_scaled, shift_down, times_pow2};

/// Why a string is not a quantity, in upstream's words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantityError {
    /// `ErrFormatWrong`
    Format,
    /// `ErrSuffix`
    Suffix,
    /// `ErrNumeric`
    Numeric,
}

impl fmt::Display for QuantityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            QuantityError::Format => {
                "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
            }
            QuantityError::Suffix => "unable to parse quantity's suffix",
            QuantityError::Numeric => "unable to parse numeric part of quantity",
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Format {
    DecimalExponent,
    BinarySI,
    DecimalSI,
}

/// How upstream holds a parsed quantity: an int64 with a decimal scale
/// (its fast path), or an arbitrary-precision decimal (`inf.Dec`).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Amount {
    /// value × 10^scale
    Int64 { value: i64, scale: i32 },
    /// ±digits × 10^-scale (inf.Dec's convention: scale counts decimals).
    Dec {
        negative: bool,
        digits: String,
        scale: i64,
    },
}

/// A quantity kube-apiserver accepts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quantity {
    amount: Amount,
    format: Format,
}

/// `str` as a JSON value holds it: a string, or a bare number (Quantity's
/// `UnmarshalJSON` takes both; `null` is zero).
pub fn from_json(v: &serde_json::Value) -> Result<Quantity, QuantityError> {
    match v {
        serde_json::Value::Null => parse("0"),
        serde_json::Value::String(s) => parse(s.trim()),
        serde_json::Value::Number(n) => parse(&n.to_string()),
        _ => Err(QuantityError::Format),
    }
}

/// `ParseQuantity`.
pub fn parse(s: &str) -> Result<Quantity, QuantityError> {
    if s.is_empty() {
        return Err(QuantityError::Format);
    }
    if s == "0" {
        return Ok(zero());
    }
    let p = split(s)?;
    let (base, exponent, format) = suffix(p.suffix).ok_or(QuantityError::Suffix)?;
    let num_len = i64::try_from(p.num.len()).unwrap_or(i64::MAX);
    let denom_len = i64::try_from(p.denom.len()).unwrap_or(i64::MAX);
    // The fast path: the whole number fits an int64 with nano precision.
    let precision = match format {
        Format::DecimalExponent | Format::DecimalSI => 18i64.saturating_sub(num_len + denom_len),
        Format::BinarySI if exponent >= 0 && p.denom.is_empty() => {
            15 - num_len - i64::from(exponent) * 3 / 10 - 1
        }
        Format::BinarySI => -1,
    };
    if precision >= 0 {
        let scale = match format {
            Format::BinarySI => -denom_len,
            _ => i64::from(exponent) - denom_len,
        };
        if scale >= -9 {
            let shifted = format!("{}{}", p.num, p.denom);
            let value: i64 = shifted.parse().map_err(|_| QuantityError::Numeric)?;
            let mantissa: i64 = if format == Format::BinarySI {
                1i64.checked_shl(exponent as u32).unwrap_or(0)
            } else {
                1
            };
            if let Some(v) = value.checked_mul(mantissa) {
                let v = if p.positive { v } else { -v };
                return Ok(Quantity {
                    amount: Amount::Int64 {
                        value: v,
                        scale: scale as i32,
                    },
                    format,
                });
            }
        }
    }
    slow(&p, base, exponent, format)
}

fn zero() -> Quantity {
    Quantity {
        amount: Amount::Int64 { value: 0, scale: 0 },
        format: Format::DecimalSI,
    }
}

/// `parseQuantityString`'s parts.
struct Parts<'a> {
    positive: bool,
    /// The number as written, sign and all, without its suffix.
    value: &'a str,
    /// Integer digits, leading zeros gone ("0" for none).
    num: &'a str,
    denom: &'a str,
    suffix: &'a str,
}

fn split(s: &str) -> Result<Parts<'_>, QuantityError> {
    let b = s.as_bytes();
    let end = b.len();
    let mut pos = 0;
    let mut positive = true;
    match b.first() {
        Some(b'-') => {
            positive = false;
            pos += 1;
        }
        Some(b'+') => pos += 1,
        _ => {}
    }
    while pos < end && b[pos] == b'0' {
        pos += 1;
    }
    if pos >= end {
        return Ok(Parts {
            positive,
            value: "0",
            num: "0",
            denom: "",
            suffix: "",
        });
    }
    let digits = |from: usize| {
        b[from..]
            .iter()
            .position(|c| !c.is_ascii_digit())
            .map_or(end, |i| from + i)
    };
    let num_end = digits(pos);
    let num = if num_end == pos {
        "0"
    } else {
        &s[pos..num_end]
    };
    pos = num_end;
    let mut denom = "";
    if pos < end && b[pos] == b'.' {
        let from = pos + 1;
        let denom_end = digits(from);
        denom = &s[from..denom_end];
        pos = denom_end;
    }
    let value = &s[..pos];
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos < end && matches!(b[pos], b'-' | b'+') {
        pos += 1;
    }
    if digits(pos) != end {
        return Err(QuantityError::Format);
    }
    Ok(Parts {
        positive,
        value,
        num,
        denom,
        suffix: &s[suffix_start..],
    })
}

/// A suffix's base, exponent and format (`quantitySuffixer.interpret`).
fn suffix(s: &str) -> Option<(u32, i32, Format)> {
    let (base, exp, format) = match s {
        "" => (10, 0, Format::DecimalSI),
        "n" => (10, -9, Format::DecimalSI),
        "u" => (10, -6, Format::DecimalSI),
        "m" => (10, -3, Format::DecimalSI),
        "k" => (10, 3, Format::DecimalSI),
        "M" => (10, 6, Format::DecimalSI),
        "G" => (10, 9, Format::DecimalSI),
        "T" => (10, 12, Format::DecimalSI),
        "P" => (10, 15, Format::DecimalSI),
        "E" => (10, 18, Format::DecimalSI),
        "Ki" => (2, 10, Format::BinarySI),
        "Mi" => (2, 20, Format::BinarySI),
        "Gi" => (2, 30, Format::BinarySI),
        "Ti" => (2, 40, Format::BinarySI),
        "Pi" => (2, 50, Format::BinarySI),
        "Ei" => (2, 60, Format::BinarySI),
        _ if s.len() > 1 && s.starts_with(['e', 'E']) => {
            // strconv.ParseInt(s[1:], 10, 64), then int32.
            let exp: i64 = s[1..].parse().ok()?;
            (10, exp as i32, Format::DecimalExponent)
        }
        _ => return None,
    };
    Some((base, exp, format))
}

/// The inf.Dec path: the number as written, the suffix applied, rounded
/// up to nano precision.
fn slow(
    p: &Parts<'_>,
    base: u32,
    exponent: i32,
    format: Format,
) -> Result<Quantity, QuantityError> {
    let unsigned = p.value.trim_start_matches(['-', '+']);
    let (int, frac) = unsigned.split_once('.').unwrap_or((unsigned, ""));
    if !int.bytes().chain(frac.bytes()).all(|c| c.is_ascii_digit())
        || (int.is_empty() && frac.is_empty())
    {
        return Err(QuantityError::Numeric);
    }
    let mut digits = format!("{int}{frac}").trim_start_matches('0').to_string();
    let mut scale = i64::try_from(frac.len()).unwrap_or(i64::MAX);
    let mut format = format;
    if base == 10 {
        scale -= i64::from(exponent);
    } else {
        digits = times_pow2(&digits, exponent.max(0) as u32);
    }
    if !digits.is_empty() && scale > 9 {
        let (q, rest) = shift_down(&digits, scale - 9);
        digits = if rest { add_one(&q) } else { q };
        scale = 9;
    }
    if format == Format::BinarySI {
        // Binary amounts are capped at int64's largest.
        if compare(&digits, scale, &i64::MAX.to_string(), 0) == std::cmp::Ordering::Greater {
            digits = i64::MAX.to_string();
            scale = 0;
        }
        if compare(&digits, scale, "1", 0) == std::cmp::Ordering::Less && !digits.is_empty() {
            format = Format::DecimalSI;
        }
    }
    Ok(Quantity {
        amount: Amount::Dec {
            negative: !p.positive && !digits.is_empty(),
            digits,
            scale,
        },
        format,
    })
}

impl Quantity {
    /// Less than zero.
    pub fn is_negative(&self) -> bool {
        match &self.amount {
            Amount::Int64 { value, .. } => *value < 0,
            Amount::Dec { negative, .. } => *negative,
        }
    }

    /// `MilliValue()`, as an int64 with Go's overflow: 0 where the
    /// int64 path overflows, the low 64 bits where the decimal path does.
    pub fn milli_value(&self) -> i64 {
        match &self.amount {
            Amount::Int64 { value, scale } => int64_scaled(*value, *scale + 3),
            Amount::Dec {
                negative,
                digits,
                scale,
            } => dec_scaled(*negative, digits, *scale - 3),
        }
    }

    /// What `ValidateResourceQuantityValue` asks of an integer resource:
    /// `MilliValue() % 1000 == 0`.
    pub fn is_whole(&self) -> bool {
        self.milli_value() % 1000 == 0
    }

    /// The exact value as (negative, digits, power of ten).
    pub(super) fn decimal(&self) -> (bool, String, i64) {
        let (negative, digits, exponent) = match &self.amount {
            Amount::Int64 { value, scale } => (
                *value < 0,
                value.unsigned_abs().to_string(),
                i64::from(*scale),
            ),
            Amount::Dec {
                negative,
                digits,
                scale,
            } => (*negative, digits.clone(), -*scale),
        };
        let digits = digits.trim_start_matches('0').to_string();
        (negative && !digits.is_empty(), digits, exponent)
    }

    /// `Cmp`: the exact values compared.
    pub fn cmp_value(&self, other: &Quantity) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        let (an, ad, ae) = self.decimal();
        let (bn, bd, be) = other.decimal();
        match (an, bn) {
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
            (false, false) => compare(&ad, -ae, &bd, -be),
            (true, true) => compare(&bd, -be, &ad, -ae),
        }
    }
}

#[cfg(test)]
mod tests;
