//! `resource.Quantity` as kube-apiserver reads it
//! (`apimachinery/pkg/api/resource/quantity.go`): what it refuses to
//! decode (400: `quantities must match the regular expression ...`), the
//! canonical form its validation messages show, and `MilliValue`, the
//! number `ValidateResourceQuantityValue` asks to be whole for an integer
//! resource, with Go's int64 arithmetic, overflow and all: a value that
//! upstream lets through must be let through here, and one it refuses
//! refused.

use std::fmt;

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
enum Format {
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
    fn decimal(&self) -> (bool, String, i64) {
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

    /// `String()`: the canonical form upstream's messages show.
    pub fn canonical(&self) -> String {
        let (negative, digits, exponent) = self.decimal();
        let digits = digits.as_str();
        if digits.is_empty() {
            return "0".into();
        }
        let sign = if negative { "-" } else { "" };
        if self.format == Format::BinarySI
            && let Some(s) = self.binary(digits, exponent)
        {
            return format!("{sign}{s}");
        }
        // Factors of ten into the exponent, which is then a multiple of 3.
        let trimmed = digits.trim_end_matches('0');
        let mut exp = exponent + (digits.len() - trimmed.len()) as i64;
        let mut number = trimmed.to_string();
        while exp.rem_euclid(3) != 0 {
            number.push('0');
            exp -= 1;
        }
        let suffix = match self.format {
            Format::DecimalExponent if exp == 0 => String::new(),
            Format::DecimalExponent => format!("e{exp}"),
            _ => match exp {
                -9 => "n",
                -6 => "u",
                -3 => "m",
                3 => "k",
                6 => "M",
                9 => "G",
                12 => "T",
                15 => "P",
                18 => "E",
                // 0, and (as upstream) an exponent with no suffix.
                _ => "",
            }
            .to_string(),
        };
        format!("{sign}{number}{suffix}")
    }

    /// A BinarySI amount of 1024 or more that is whole, in powers of 1024.
    fn binary(&self, digits: &str, exponent: i64) -> Option<String> {
        if exponent < 0 && digits.len() as i64 + exponent <= 0 {
            return None;
        }
        let whole = if exponent >= 0 {
            format!("{digits}{}", "0".repeat(usize::try_from(exponent).ok()?))
        } else {
            let cut = digits.len() - usize::try_from(-exponent).ok()?;
            if digits[cut..].bytes().any(|c| c != b'0') {
                return None;
            }
            digits[..cut].to_string()
        };
        let mut n: u128 = whole.parse().ok()?;
        if n < 1024 {
            return None;
        }
        let mut power = 0;
        while n.is_multiple_of(1024) && power < 6 {
            n /= 1024;
            power += 1;
        }
        let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][power];
        Some(format!("{n}{suffix}"))
    }
}

/// int64Amount's `AsScaledInt64`: value × 10^shift, 0 on overflow; a
/// negative shift divides and rounds away from zero.
fn int64_scaled(value: i64, shift: i32) -> i64 {
    if shift >= 0 {
        let mut v = value;
        for _ in 0..shift {
            match v.checked_mul(10) {
                Some(n) => v = n,
                None => return 0,
            }
        }
        return v;
    }
    let mut v = value;
    let mut fraction = false;
    for _ in 0..-shift {
        fraction |= v % 10 != 0;
        v /= 10;
        if v == 0 {
            return match (fraction, value > 0) {
                (false, _) => 0,
                (true, true) => 1,
                (true, false) => -1,
            };
        }
    }
    match (fraction, value > 0) {
        (false, _) => v,
        (true, true) => v + 1,
        (true, false) => v - 1,
    }
}

/// `scaledValue(unscaled, scale, 3)` on an inf.Dec: `dif` = scale − 3.
fn dec_scaled(negative: bool, digits: &str, dif: i64) -> i64 {
    let signed = |low: u64| {
        let v = low as i64;
        if negative { v.wrapping_neg() } else { v }
    };
    if dif == 0 {
        return signed(low64(digits));
    }
    if dif < 0 {
        // unscaled.Int64() * int64(math.Pow10(-dif)): past 10^18 the
        // float does not fit an int64, and amd64 makes it MinInt64.
        let factor = if -dif <= 18 {
            10i64.pow((-dif) as u32)
        } else {
            i64::MIN
        };
        return signed(low64(digits)).wrapping_mul(factor);
    }
    // Division rounds up (toward +inf for a positive amount): ceil.
    let (q, rest) = shift_down(digits, dif);
    if !negative {
        return (low64(&q) as i64).wrapping_add(i64::from(rest));
    }
    // Euclidean DivMod of a negative amount: q = -(trunc + rest), then +1.
    let trunc = low64(&q) as i64;
    trunc
        .wrapping_add(i64::from(rest))
        .wrapping_neg()
        .wrapping_add(i64::from(rest))
}

/// A decimal digit string mod 2^64.
fn low64(digits: &str) -> u64 {
    digits.bytes().fold(0u64, |acc, c| {
        acc.wrapping_mul(10).wrapping_add(u64::from(c - b'0'))
    })
}

/// digits / 10^n truncated, and whether anything was cut off.
fn shift_down(digits: &str, n: i64) -> (String, bool) {
    let keep = usize::try_from(digits.len() as i64 - n).unwrap_or(0);
    let keep = keep.min(digits.len());
    let rest = digits[keep..].bytes().any(|c| c != b'0');
    (digits[..keep].to_string(), rest)
}

fn add_one(digits: &str) -> String {
    let mut b: Vec<u8> = digits.bytes().collect();
    for c in b.iter_mut().rev() {
        if *c == b'9' {
            *c = b'0';
        } else {
            *c += 1;
            return String::from_utf8(b).unwrap_or_default();
        }
    }
    format!("1{}", String::from_utf8(b).unwrap_or_default())
}

/// digits × 2^k, in decimal.
fn times_pow2(digits: &str, k: u32) -> String {
    if digits.is_empty() {
        return String::new();
    }
    let mut out: Vec<u8> = digits.bytes().rev().map(|c| c - b'0').collect();
    for _ in 0..k {
        let mut carry = 0;
        for d in out.iter_mut() {
            let v = *d * 2 + carry;
            *d = v % 10;
            carry = v / 10;
        }
        if carry > 0 {
            out.push(carry);
        }
    }
    out.iter().rev().map(|d| char::from(b'0' + d)).collect()
}

/// Compares two non-negative decimals given as digits × 10^-scale.
fn compare(a: &str, a_scale: i64, b: &str, b_scale: i64) -> std::cmp::Ordering {
    let a = a.trim_start_matches('0');
    let b = b.trim_start_matches('0');
    // Integer digit counts first, then the digits aligned.
    let (ai, bi) = (a.len() as i64 - a_scale, b.len() as i64 - b_scale);
    if a.is_empty() || b.is_empty() {
        return a.len().min(1).cmp(&b.len().min(1));
    }
    if ai != bi {
        return ai.cmp(&bi);
    }
    let width = a.len().max(b.len());
    let pad = |s: &str| format!("{s:0<width$}");
    pad(a).cmp(&pad(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Outcomes as upstream's parser gives them (`quantity_test.go`, and
    /// the arithmetic of `ScaledValue` worked by hand).
    #[test]
    fn quantities_parse_as_upstream_and_show_its_canonical_form() {
        for (input, canonical) in [
            ("4", "4"),
            ("-4", "-4"),
            ("0.5", "500m"),
            ("-0.5", "-500m"),
            ("1.5", "1500m"),
            ("1000", "1k"),
            ("100m", "100m"),
            ("1Ki", "1Ki"),
            ("2048", "2048"),
            ("1.5Gi", "1536Mi"),
            ("4e3", "4e3"),
            ("1e40", "10e39"),
            ("0", "0"),
            ("-", "0"),
            ("k", "0"),
            ("9223372036854775807", "9223372036854775807"),
            ("12345678901234567890123", "12345678901234567890123"),
        ] {
            let q = parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(q.canonical(), canonical, "{input}");
        }
        for (input, err) in [
            ("", QuantityError::Format),
            ("abc", QuantityError::Format),
            ("1.2.3", QuantityError::Format),
            ("1 Gi", QuantityError::Format),
            ("1ki", QuantityError::Suffix),
            ("1e", QuantityError::Suffix),
            ("1Kib", QuantityError::Format),
        ] {
            assert_eq!(parse(input), Err(err), "{input}");
        }
    }

    #[test]
    fn an_integer_resource_must_have_a_whole_milli_value_with_gos_overflow() {
        for (input, whole) in [
            ("4", true),
            ("0.5", false),
            ("1500m", false),
            ("2000m", true),
            ("1n", false),
            ("1e40", true),
            // The decimal path: (2^63-1) * 1000 wraps to -1000.
            ("9223372036854775807", true),
            ("0.0000000001", false),
            ("1Ki", true),
        ] {
            let q = parse(input).unwrap();
            assert_eq!(q.is_whole(), whole, "{input}: milli {}", q.milli_value());
        }
        assert_eq!(parse("9223372036854775807").unwrap().milli_value(), -1000);
        assert_eq!(parse("0.5").unwrap().milli_value(), 500);
        assert!(parse("-1").unwrap().is_negative());
        assert!(!parse("-0").unwrap().is_negative());
    }

    #[test]
    fn quantities_compare_by_exact_value() {
        use std::cmp::Ordering::*;
        let q = |s: &str| parse(s).unwrap();
        assert_eq!(q("1").cmp_value(&q("1000m")), Equal);
        assert_eq!(q("1Ki").cmp_value(&q("1024")), Equal);
        assert_eq!(q("2").cmp_value(&q("1500m")), Greater);
        assert_eq!(q("-1").cmp_value(&q("0")), Less);
        assert_eq!(q("-1").cmp_value(&q("-2")), Greater);
        assert_eq!(q("1e40").cmp_value(&q("9223372036854775807")), Greater);
    }

    #[test]
    fn json_numbers_are_quantities_too() {
        let q = from_json(&serde_json::json!(4)).unwrap();
        assert_eq!(q.canonical(), "4");
        assert_eq!(
            from_json(&serde_json::json!(-0.5)).unwrap().canonical(),
            "-500m"
        );
        assert!(from_json(&serde_json::json!(true)).is_err());
    }
}
