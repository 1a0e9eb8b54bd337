//! Go's arithmetic on quantities, where kube-apiserver's validation
//! reads them: int64 scaling with its overflow, and `inf.Dec` (any number
//! of digits) held as a decimal digit string, with big.Int's `Int64` (the
//! low 64 bits) where a value does not fit.

/// int64Amount's `AsScaledInt64`: value × 10^shift, 0 on overflow; a
/// negative shift divides and rounds away from zero.
pub(super) fn int64_scaled(value: i64, shift: i32) -> i64 {
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
pub(super) fn dec_scaled(negative: bool, digits: &str, dif: i64) -> i64 {
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
pub(super) fn low64(digits: &str) -> u64 {
    digits.bytes().fold(0u64, |acc, c| {
        acc.wrapping_mul(10).wrapping_add(u64::from(c - b'0'))
    })
}

/// digits / 10^n truncated, and whether anything was cut off.
pub(super) fn shift_down(digits: &str, n: i64) -> (String, bool) {
    let keep = usize::try_from(digits.len() as i64 - n).unwrap_or(0);
    let keep = keep.min(digits.len());
    let rest = digits[keep..].bytes().any(|c| c != b'0');
    (digits[..keep].to_string(), rest)
}

pub(super) fn add_one(digits: &str) -> String {
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
pub(super) fn times_pow2(digits: &str, k: u32) -> String {
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
pub(super) fn compare(a: &str, a_scale: i64, b: &str, b_scale: i64) -> std::cmp::Ordering {
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
