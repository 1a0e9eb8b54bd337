//! `promtool test rules` on the chart's rule groups, rendered as a
//! PrometheusRule and as a VMRule. Each group `gpu-claims.X` has its test
//! file `X.yaml`; every alert has a case that fires when its `for:` says,
//! one silent a step short, and (where it reads labels) one whose labels
//! do not match; every recording rule's output is checked. The rules then
//! break one at a time (a `for:` doubled, a `by`, `on` or matcher label
//! dropped), and each break must fail its group's tests.

use super::*;
use std::collections::{BTreeMap, BTreeSet};
use std::process::Output;

/// The rule groups of the PrometheusRule and of the VMRule.
fn rendered(helm: &str) -> Vec<(&'static str, Value)> {
    let docs = render(
        helm,
        &[
            "monitoring.prometheusRule.enabled=true",
            "monitoring.vmRule.enabled=true",
        ],
    );
    ["PrometheusRule", "VMRule"]
        .into_iter()
        .map(|kind| (kind, find(&docs, kind)["spec"]["groups"].clone()))
        .collect()
}

/// Group `gpu-claims.X`'s test file: `X.yaml`.
fn test_file(group: &Value) -> String {
    let name = group["name"].as_str().unwrap();
    let short = name
        .strip_prefix("gpu-claims.")
        .unwrap_or_else(|| panic!("group {name} is gpu-claims.<theme>"));
    format!("{short}.yaml")
}

/// promtool on `files` of PROMTOOL_TESTS against `groups`, side by side
/// in a directory of their own (rule_files are read from the test's).
fn promtool_test(groups: &Value, files: &[String]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    write_rules(dir.path(), groups);
    for f in files {
        std::fs::copy(Path::new(PROMTOOL_TESTS).join(f), dir.path().join(f))
            .unwrap_or_else(|e| panic!("{PROMTOOL_TESTS}/{f}: {e}"));
    }
    let mut c = Command::new("promtool");
    c.current_dir(dir.path())
        .args(["test", "rules"])
        .args(files);
    c.output().unwrap_or_else(|e| panic!("{c:?}: {e}"))
}

fn said(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn every_rule_group_passes_its_promtool_tests_as_a_prometheusrule_and_a_vmrule() {
    let Some(helm) = helm() else { return };
    if !promtool() {
        return;
    }
    let on_disk: BTreeSet<String> = std::fs::read_dir(PROMTOOL_TESTS)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    for (kind, groups) in rendered(&helm) {
        let files: BTreeSet<String> = groups.as_array().unwrap().iter().map(test_file).collect();
        assert_eq!(
            files, on_disk,
            "{kind}: one test file per rule group, no other"
        );
        let files: Vec<String> = files.into_iter().collect();
        let out = promtool_test(&groups, &files);
        assert!(out.status.success(), "{kind}:\n{}", said(&out));
    }
}

/// What the test files check of each alert.
#[derive(Default, Debug)]
struct Cases {
    fires: bool,
    silent: bool,
    labels: bool,
    file: BTreeSet<String>,
}

/// The test files as promtool reads them.
fn test_files() -> Vec<(String, Value)> {
    let mut files: Vec<(String, Value)> = std::fs::read_dir(PROMTOOL_TESTS)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let v = gpu_claims_actors::yaml::from_str(&text)
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p.file_name().unwrap().to_string_lossy().into_owned(), v)
        })
        .collect();
    files.sort_by(|a, b| a.0.cmp(&b.0));
    files
}

/// Whether an expression picks series by a label (a matcher, `on`, or a
/// `by` of more than the histogram's `le`): it then needs a case whose
/// labels do not match.
fn reads_labels(expr: &str) -> bool {
    expr.contains('{')
        || labels_after(expr, " on(").is_some_and(|l| !l.is_empty())
        || labels_after(expr, "by (").is_some_and(|l| l.iter().any(|x| x != "le"))
}

/// Where the list after the first `keyword` in `expr` starts and ends
/// (a matcher's `{` closes at `}`, `by (` and `on(` at `)`).
fn list_after(expr: &str, keyword: &str) -> Option<(usize, usize)> {
    let close = if keyword == "{" { '}' } else { ')' };
    let start = expr.find(keyword)? + keyword.len();
    Some((start, start + expr[start..].find(close)?))
}

/// The labels of the first `keyword(...)` in `expr` (a matcher's whole).
fn labels_after(expr: &str, keyword: &str) -> Option<Vec<String>> {
    let (start, end) = list_after(expr, keyword)?;
    Some(
        expr[start..end]
            .split(',')
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .collect(),
    )
}

#[test]
fn every_alert_fires_on_time_stays_silent_short_of_it_and_every_record_is_checked() {
    let Some(helm) = helm() else { return };
    let (_, groups) = rendered(&helm).swap_remove(0);
    let mut alerts: BTreeMap<String, (String, Cases)> = BTreeMap::new();
    let mut records = BTreeMap::new();
    for g in groups.as_array().unwrap() {
        for r in g["rules"].as_array().unwrap() {
            let expr = r["expr"].as_str().unwrap().to_string();
            match (r["alert"].as_str(), r["record"].as_str()) {
                (Some(a), _) => {
                    alerts.insert(a.into(), (expr, Cases::default()));
                }
                (_, Some(name)) => {
                    records.insert(name.to_string(), false);
                }
                _ => panic!("a rule is an alert or a record: {r}"),
            }
        }
    }
    for (file, tests) in test_files() {
        for t in tests["tests"].as_array().unwrap() {
            let name = t["name"].as_str().unwrap_or_default();
            for a in t["alert_rule_test"].as_array().into_iter().flatten() {
                let alert = a["alertname"].as_str().unwrap();
                let (_, cases) = alerts
                    .get_mut(alert)
                    .unwrap_or_else(|| panic!("{file} tests {alert}, which the chart has not"));
                let fired = a["exp_alerts"].as_array().is_some_and(|x| !x.is_empty());
                cases.fires |= fired;
                cases.silent |= !fired;
                cases.labels |= name.contains("labels that do not match");
                cases.file.insert(file.clone());
            }
            for e in t["promql_expr_test"].as_array().into_iter().flatten() {
                let checked = e["exp_samples"].as_array().is_some_and(|x| !x.is_empty());
                if let Some(seen) = records.get_mut(e["expr"].as_str().unwrap()) {
                    *seen |= checked;
                }
            }
        }
    }
    let mut missing = Vec::new();
    for g in groups.as_array().unwrap() {
        for r in g["rules"].as_array().unwrap() {
            let Some(alert) = r["alert"].as_str() else {
                continue;
            };
            let (expr, c) = &alerts[alert];
            let own = test_file(g);
            if !(c.fires && c.silent) || c.file != BTreeSet::from([own.clone()]) {
                missing.push(format!("{alert}: fires and silent in {own} ({c:?})"));
            }
            if reads_labels(expr) && !c.labels {
                missing.push(format!("{alert}: a case of labels that do not match"));
            }
        }
    }
    missing.extend(
        records
            .iter()
            .filter(|(_, seen)| !**seen)
            .map(|(r, _)| format!("{r}: its output checked")),
    );
    assert!(missing.is_empty(), "cases missing:\n{}", missing.join("\n"));
}

/// One way to break a rule: what it changes, and the rule broken.
fn breaks(rule: &Value) -> Vec<(String, Value)> {
    let name = rule["alert"].as_str().or(rule["record"].as_str()).unwrap();
    let expr = rule["expr"].as_str().unwrap();
    let mut out = Vec::new();
    if let Some(f) = rule["for"].as_str() {
        let d = humantime::parse_duration(f).unwrap();
        let mut r = rule.clone();
        r["for"] = format!("{}s", d.as_secs() * 2).into();
        out.push((format!("{name}: for {f} doubled"), r));
    }
    for keyword in ["by (", " on(", "{"] {
        let Some(labels) = labels_after(expr, keyword).filter(|l| !l.is_empty()) else {
            continue;
        };
        let (start, end) = list_after(expr, keyword).unwrap();
        let mut r = rule.clone();
        let rest = labels[1..].join(", ");
        r["expr"] = format!("{}{rest}{}", &expr[..start], &expr[end..]).into();
        out.push((format!("{name}: {} dropped from {keyword}", labels[0]), r));
    }
    out
}

#[test]
fn a_rule_broken_by_a_longer_for_or_a_dropped_label_fails_its_tests() {
    let Some(helm) = helm() else { return };
    if !promtool() {
        return;
    }
    let (_, groups) = rendered(&helm).swap_remove(0);
    let mut passed = Vec::new();
    let mut tried = 0;
    for (gi, g) in groups.as_array().unwrap().iter().enumerate() {
        let file = vec![test_file(g)];
        for (ri, rule) in g["rules"].as_array().unwrap().iter().enumerate() {
            for (what, broken) in breaks(rule) {
                let mut groups = groups.clone();
                groups[gi]["rules"][ri] = broken;
                tried += 1;
                if promtool_test(&groups, &file).status.success() {
                    passed.push(what);
                }
            }
        }
    }
    assert!(tried >= 40, "{tried} breaks tried");
    assert!(
        passed.is_empty(),
        "broken rules the tests let through:\n{}",
        passed.join("\n")
    );
}
