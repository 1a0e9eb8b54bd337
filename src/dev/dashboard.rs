//! What a dashboard of the demo's cluster shows, read from the
//! controller's own `/metrics`: GPUs per class, per tenant (attached,
//! idle reservations, Lost) with the GPU-seconds they were charged, and
//! the sets waiting at the gate. The demo prints it at its end.

use std::collections::BTreeMap;

/// A sample's labels, by name.
pub type Labels = BTreeMap<String, String>;

/// The samples of family member `name` (as exposed: `_total`, `_seconds`
/// included) in a Prometheus text exposition. Parsed here, not by a
/// crate: the sample line's grammar is one loop (the crates that read it
/// bring a regex engine and a date library along).
pub fn samples(text: &str, name: &str) -> Vec<(Labels, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(sample)
        .filter(|(n, _, _)| n == name)
        .map(|(_, l, v)| (l, v))
        .collect()
}

/// One sample line: `name{k="v",...} value`, label values escaped as the
/// text format escapes them (`\\`, `\"`, `\n`).
fn sample(line: &str) -> Option<(String, Labels, f64)> {
    let name_end = line.find(['{', ' '])?;
    let name = line[..name_end].to_string();
    let mut labels = Labels::new();
    let mut rest = &line[name_end..];
    if let Some(body) = rest.strip_prefix('{') {
        let mut chars = body.char_indices();
        let mut key = String::new();
        let mut value = String::new();
        let mut in_value = false;
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            match (in_value, c) {
                (false, '}') => {
                    end = Some(i + 1);
                    break;
                }
                (false, '=') => {
                    chars.next(); // the opening quote
                    in_value = true;
                }
                (false, ',') => {}
                (false, c) => key.push(c),
                (true, '\\') => match chars.next().map(|(_, c)| c) {
                    Some('n') => value.push('\n'),
                    Some(c) => value.push(c),
                    None => return None,
                },
                (true, '"') => {
                    labels.insert(std::mem::take(&mut key), std::mem::take(&mut value));
                    in_value = false;
                }
                (true, c) => value.push(c),
            }
        }
        rest = &body[end?..];
    }
    let value = rest.split_whitespace().next()?.parse().ok()?;
    Some((name, labels, value))
}

/// The figures by (label values of `keys`), summed.
pub fn by(text: &str, name: &str, keys: &[&str]) -> BTreeMap<Vec<String>, f64> {
    let mut out = BTreeMap::new();
    for (l, v) in samples(text, name) {
        let k = keys
            .iter()
            .map(|k| l.get(*k).cloned().unwrap_or_default())
            .collect();
        *out.entry(k).or_insert(0.0) += v;
    }
    out
}

fn whole(v: Option<&f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.0}"))
}

/// The printout: classes, tenants, waiting sets.
pub fn summary(text: &str) -> String {
    let mut out = String::new();
    let cap = by(text, "gpu_claims_class_gpus_capacity", &["class"]);
    let alloc = by(text, "gpu_claims_class_gpus_allocated", &["class"]);
    let budget = by(text, "gpu_claims_class_gpus_budget", &["class"]);
    let free = by(text, "gpu_claims_class_gpus_free", &["class"]);
    let waiting = by(text, "gpu_claims_class_waiting_sets", &["class"]);
    let classes = cap
        .keys()
        .map(|k| {
            vec![
                k[0].clone(),
                whole(cap.get(k)),
                whole(alloc.get(k)),
                whole(budget.get(k)),
                whole(free.get(k)),
                whole(waiting.get(k)),
            ]
        })
        .collect();
    crate::status::section(
        &mut out,
        "GPUs BY CLASS",
        &[
            "CLASS",
            "CAPACITY",
            "ALLOCATED",
            "BUDGET",
            "FREE",
            "WAITING SETS",
        ],
        classes,
    );
    let held = by(
        text,
        "gpu_claims_namespace_gpus",
        &["namespace", "class", "phase"],
    );
    let gpu_held = by(
        text,
        "gpu_claims_held_gpu_seconds_total",
        &["namespace", "class"],
    );
    let gpu_used = by(
        text,
        "gpu_claims_attached_gpu_seconds_total",
        &["namespace", "class"],
    );
    let phase = |k: &[String], p: &str| {
        let v = held.get(&vec![k[0].clone(), k[1].clone(), p.to_string()]);
        whole(Some(v.unwrap_or(&0.0)))
    };
    let tenants = gpu_held
        .keys()
        .map(|k| {
            vec![
                k[0].clone(),
                k[1].clone(),
                phase(k, "Attached"),
                phase(k, "Bound"),
                phase(k, "Lost"),
                format!("{:.1}", gpu_held.get(k).unwrap_or(&0.0)),
                format!("{:.1}", gpu_used.get(k).unwrap_or(&0.0)),
            ]
        })
        .collect();
    crate::status::section(
        &mut out,
        "GPUs BY TENANT (idle: held by a claim no VM uses; GPU-seconds since the controller started)",
        &[
            "NAMESPACE",
            "CLASS",
            "ATTACHED",
            "IDLE",
            "LOST",
            "GPU-SECONDS HELD",
            "GPU-SECONDS ATTACHED",
        ],
        tenants,
    );
    let sets = by(text, "gpu_claims_waiting_sets", &["namespace", "reason"]);
    let longest = by(
        text,
        "gpu_claims_waiting_longest_seconds",
        &["namespace", "reason"],
    );
    let rows = sets
        .iter()
        .map(|(k, n)| {
            let waited = longest.get(k).copied().unwrap_or(0.0);
            vec![
                k[0].clone(),
                k[1].clone(),
                format!("{n:.0}"),
                format!("{waited:.1}s"),
            ]
        })
        .collect();
    crate::status::section(
        &mut out,
        "SETS WAITING AT THE GATE",
        &["NAMESPACE", "REASON", "SETS", "LONGEST"],
        rows,
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"# HELP gpu_claims_class_gpus_capacity x
# TYPE gpu_claims_class_gpus_capacity gauge
gpu_claims_class_gpus_capacity{class="h200"} 16
gpu_claims_class_gpus_allocated{class="h200"} 4
gpu_claims_class_gpus_budget{class="h200"} 6
gpu_claims_class_gpus_free{class="h200"} 2
gpu_claims_class_waiting_sets{class="h200"} 1
gpu_claims_namespace_gpus{namespace="tenant-a",class="h200",phase="Attached"} 3
gpu_claims_namespace_gpus{namespace="tenant-a",class="h200",phase="Bound"} 1
gpu_claims_held_gpu_seconds_total{namespace="tenant-a",class="h200"} 40.3
gpu_claims_attached_gpu_seconds_total{namespace="tenant-a",class="h200"} 30
gpu_claims_waiting_sets{namespace="tenant-b",reason="OverBudget"} 1
gpu_claims_waiting_longest_seconds{namespace="tenant-b",reason="OverBudget"} 12.5
"#;

    #[test]
    fn samples_read_labels_with_escapes_and_values() {
        let text = "m{a=\"x,\\\"y\\\"\",b=\"1\\n2\"} 2.5\nm 1\nmm{a=\"z\"} 3\n";
        let s = samples(text, "m");
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].0["a"], "x,\"y\"");
        assert_eq!(s[0].0["b"], "1\n2");
        assert_eq!(s[0].1, 2.5);
        assert!(s[1].0.is_empty());
    }

    #[test]
    fn the_summary_shows_classes_tenants_idle_gpus_and_waiting_sets() {
        let out = summary(TEXT);
        let line = |start: &str| {
            out.lines()
                .find(|l| l.trim_start().starts_with(start))
                .unwrap_or_else(|| panic!("{start} in\n{out}"))
                .split_whitespace()
                .collect::<Vec<_>>()
        };
        assert_eq!(line("h200"), ["h200", "16", "4", "6", "2", "1"]);
        assert_eq!(
            line("tenant-a"),
            ["tenant-a", "h200", "3", "1", "0", "40.3", "30.0"]
        );
        assert_eq!(line("tenant-b"), ["tenant-b", "OverBudget", "1", "12.5s"]);
    }
}
