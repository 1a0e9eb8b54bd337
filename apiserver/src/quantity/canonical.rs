//! `Quantity.String()`: the canonical form kube-apiserver's validation
//! messages show (`CanonicalizeBytes`): factors of ten moved into an
//! exponent that is a multiple of three and named by its suffix, or powers
//! of 1024 for a binary amount that is whole and at least 1024.

use super::{Format, Quantity};

impl Quantity {
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
