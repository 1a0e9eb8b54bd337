//! The name and label checks of Kubernetes' apimachinery validation
//! (`IsDNS1123Subdomain`, `IsQualifiedName`, `IsValidLabelValue`), for what
//! gpu-claims reads from users: claim names in a VMI's annotations, and the
//! keys and values of node selector requirements (a requirement that fails
//! them makes its term match nothing, as in kube-scheduler).

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*`, at
/// most 253 characters: the name of most objects, GPUClaims among them.
pub fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns_label_part)
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 characters
/// (`IsDNS1123Label`): a namespace's name.
pub fn is_dns_label(s: &str) -> bool {
    s.len() <= 63 && is_dns_label_part(s)
}

fn is_dns_label_part(p: &str) -> bool {
    let b = p.as_bytes();
    let edge = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty() && edge(b[0]) && edge(b[b.len() - 1]) && b.iter().all(|c| edge(*c) || *c == b'-')
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, at most 63 characters.
fn is_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    let edge = |c: u8| c.is_ascii_alphanumeric();
    !b.is_empty()
        && b.len() <= 63
        && edge(b[0])
        && edge(b[b.len() - 1])
        && b.iter()
            .all(|c| edge(*c) || matches!(*c, b'-' | b'_' | b'.'))
}

/// A label key: an optional DNS subdomain prefix and `/`, then a name part.
pub fn is_label_key(s: &str) -> bool {
    match s.split_once('/') {
        Some((prefix, name)) => is_dns_subdomain(prefix) && is_name_part(name),
        None => is_name_part(s),
    }
}

/// A label value: empty, or a name part.
pub fn is_label_value(s: &str) -> bool {
    s.is_empty() || is_name_part(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_labels_and_values_follow_apimachinery() {
        for ok in ["a", "vm-1-gpu", "a.b-c", "0", &"a".repeat(253)] {
            assert!(is_dns_subdomain(ok), "{ok}");
        }
        for bad in ["", "A", "a_b", "-a", "a-", "a..b", ".a", &"a".repeat(254)] {
            assert!(!is_dns_subdomain(bad), "{bad}");
        }
        for ok in ["foo", "kubernetes.io/hostname", "GPU", "a_b.c-d", "x.y/Z"] {
            assert!(is_label_key(ok), "{ok}");
        }
        for bad in [
            "",
            "invalid key",
            "/a",
            "a/",
            "A.B/c",
            "_a",
            &"a".repeat(64),
        ] {
            assert!(!is_label_key(bad), "{bad}");
        }
        for ok in ["", "bar", "DDR3", "0204", "a_b"] {
            assert!(is_label_value(ok), "{ok}");
        }
        for bad in ["invalid value: ___@#$%^", "-a", "a b", &"a".repeat(64)] {
            assert!(!is_label_value(bad), "{bad}");
        }
    }
}
