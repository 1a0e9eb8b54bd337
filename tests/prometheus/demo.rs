//! A real Prometheus against `gpu-claims demo --serve`: it scrapes the
//! controller's /metrics with the token of the scraper ServiceAccount the
//! chart renders (bound to its metrics-reader ClusterRole), evaluates the
//! chart's rules, and answers every dashboard query as Grafana asks it.
//! Its figures must agree with the cluster's objects.

use super::*;
use std::collections::BTreeMap;
use std::io::BufRead;
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Instant;

/// Panels whose queries can only be empty in the demo's world, with why.
const EMPTY_IN_THE_DEMO: &[(&str, &str, &str)] = &[
    (
        "Errors",
        "A",
        "no write of the demo fails but as a 409 (conflicts have their panel)",
    ),
    (
        "Errors",
        "B",
        "no API request of the demo misses its deadline: the family has no series",
    ),
];

/// How long the story and the scrapes may take, on a loaded machine.
const DEADLINE: Duration = Duration::from_secs(240);

fn wait_line(lines: &Receiver<String>, needle: &str, seen: &mut Vec<String>) -> String {
    let until = Instant::now() + DEADLINE;
    while Instant::now() < until {
        match lines.recv_timeout(Duration::from_millis(200)) {
            Ok(l) => {
                seen.push(l.clone());
                if l.contains(needle) {
                    return l;
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    panic!("{needle:?} never came:\n{}", seen.join("\n"));
}

/// A Prometheus answer's result (`/api/v1/query`): each sample's labels
/// and value; None until Prometheus answers.
fn query(prom: SocketAddr, expr: &str) -> Option<Vec<(BTreeMap<String, String>, f64)>> {
    let (code, body) = http_get(
        prom,
        &format!("/api/v1/query?query={}", url_encode(expr)),
        None,
    )?;
    assert_eq!(code, 200, "{expr}: {body}");
    let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{expr}: {e}: {body}"));
    let result = v["data"]["result"].as_array()?;
    Some(
        result
            .iter()
            .map(|s| {
                let labels = serde_json::from_value(s["metric"].clone()).unwrap();
                let value = s["value"][1].as_str().unwrap().parse().unwrap();
                (labels, value)
            })
            .collect(),
    )
}

/// Waits until `what` holds, polling; panics with `said()` at the deadline.
fn wait_until(what: &str, mut holds: impl FnMut() -> bool, said: impl Fn() -> String) {
    let until = Instant::now() + DEADLINE;
    while Instant::now() < until {
        if holds() {
            return;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    panic!("{what} never held: {}", said());
}

fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> String {
    use std::io::Write;
    let mut c = Command::new("kubectl");
    c.arg("--kubeconfig").arg(kubeconfig).args(args);
    c.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut p = c.spawn().unwrap();
    let mut input = p.stdin.take().unwrap();
    input
        .write_all(stdin.unwrap_or_default().as_bytes())
        .unwrap();
    drop(input);
    let out = p.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The dashboard's queries as Grafana sends them: its variables filled
/// (`$namespace` at its default, All, whose value is `.*`; `$__range` the
/// dashboard's time range). (panel title, refId, query)
fn panel_queries() -> Vec<(String, String, String)> {
    let file = std::fs::read_to_string(Path::new(CHART).join("files/dashboard.json")).unwrap();
    let model: Value = serde_json::from_str(&file).unwrap();
    let from = model["time"]["from"].as_str().unwrap();
    let range = humantime::parse_duration(from.strip_prefix("now-").unwrap()).unwrap();
    let all = model["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "namespace")
        .map(|v| v["allValue"].as_str().unwrap().to_string())
        .unwrap();
    let mut out = Vec::new();
    for p in model["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().into_iter().flatten() {
            let expr = t["expr"]
                .as_str()
                .unwrap()
                .replace("$__range", &format!("{}s", range.as_secs()))
                .replace("$namespace", &all);
            assert!(!expr.contains('$'), "a variable left unfilled: {expr}");
            let title = p["title"].as_str().unwrap().to_string();
            out.push((title, t["refId"].as_str().unwrap().to_string(), expr));
        }
    }
    out
}

/// GPUs per (namespace, class) of the claims in `phases`, from the API.
fn claims_gpus(kubeconfig: &Path, phases: &[&str]) -> BTreeMap<(String, String), f64> {
    let list: Value = serde_json::from_str(&kubectl(
        kubeconfig,
        &["get", "gpuclaims", "-A", "-o", "json"],
        None,
    ))
    .unwrap();
    let mut out = BTreeMap::new();
    for c in list["items"].as_array().unwrap() {
        let phase = c["status"]["phase"].as_str().unwrap_or_default();
        if phases.contains(&phase) {
            let key = (
                c["metadata"]["namespace"].as_str().unwrap().to_string(),
                c["spec"]["className"].as_str().unwrap().to_string(),
            );
            *out.entry(key).or_default() += c["spec"]["count"].as_f64().unwrap();
        }
    }
    out
}

/// A recorded series per (namespace, class), as Prometheus has it now.
fn by_tenant(prom: SocketAddr, record: &str) -> BTreeMap<(String, String), f64> {
    query(prom, record)
        .unwrap_or_default()
        .into_iter()
        .filter(|(_, v)| *v != 0.0)
        .map(|(l, v)| ((l["namespace"].clone(), l["class"].clone()), v))
        .collect()
}

#[test]
fn a_real_prometheus_scraping_the_demo_with_the_charts_token_answers_every_rule_and_panel() {
    let Some(helm) = helm() else { return };
    let prometheus = common::available("prometheus", Command::new("prometheus").arg("--version"));
    if !prometheus || !common::kubectl_available() {
        return;
    }
    let docs = render(
        &helm,
        &[
            "monitoring.serviceMonitor.enabled=true",
            "monitoring.prometheusRule.enabled=true",
        ],
    );
    // What the ServiceMonitor scrapes, and as whom.
    let endpoint = &find(&docs, "ServiceMonitor")["spec"]["endpoints"][0];
    let path = endpoint["path"].as_str().unwrap();
    assert_eq!(endpoint["authorization"]["type"], "Bearer");
    let scraper = docs
        .iter()
        .find(|d| d["kind"] == "ServiceAccount" && d["metadata"]["name"] == "gpu-claims-scraper")
        .expect("the scraper's ServiceAccount");
    let access: Vec<Value> = docs
        .iter()
        .filter(|d| {
            ["ClusterRole", "ClusterRoleBinding"].contains(&d["kind"].as_str().unwrap())
                && d["metadata"]["name"] == "gpu-claims-metrics-reader"
        })
        .cloned()
        .collect();
    assert_eq!(access.len(), 2, "the metrics-reader role and its binding");

    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let (metrics, prom) = (common::free_port(), common::free_port());
    let mut demo = Command::new(env!("CARGO_BIN_EXE_gpu-claims"));
    demo.args(["demo", "--serve", "--http-auth", "kubernetes"])
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["--http-addr", &metrics.to_string()])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(dir.path().join("demo.log")).unwrap());
    let mut demo = common::StopOnDrop(demo.spawn().unwrap());
    let (tx, lines) = std::sync::mpsc::channel();
    let out = demo.0.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                return;
            }
        }
    });
    let mut seen = Vec::new();
    wait_line(&lines, "step 1/", &mut seen);

    // The chart's scraper, its role and binding, applied as a user would.
    let namespace = serde_json::json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "gpu-claims"}});
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List",
        "items": [namespace, scraper, access[0], access[1]]});
    kubectl(&kubeconfig, &["apply", "-f", "-"], Some(&list.to_string()));
    let token = kubectl(
        &kubeconfig,
        &["create", "token", "gpu-claims-scraper", "-n", "gpu-claims"],
        None,
    );
    let token = token.trim();
    assert_eq!(
        http_get(metrics, path, None).map(|r| r.0),
        Some(401),
        "no token, no metrics"
    );
    std::fs::write(dir.path().join("token"), token).unwrap();
    write_rules(dir.path(), &find(&docs, "PrometheusRule")["spec"]["groups"]);
    let config = format!(
        "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n\
         rule_files: [rules.yaml]\n\
         scrape_configs:\n\
         - job_name: gpu-claims\n  metrics_path: {path}\n\
         \x20 authorization: {{type: Bearer, credentials_file: token}}\n\
         \x20 static_configs: [{{targets: ['{metrics}']}}]\n"
    );
    std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
    let _prometheus = common::StopOnDrop(
        Command::new("prometheus")
            .current_dir(dir.path())
            .args(["--config.file=prometheus.yml", "--storage.tsdb.path=data"])
            .arg(format!("--web.listen-address={prom}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("prometheus.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    wait_line(&lines, "serving until Ctrl-C", &mut seen);
    let log = || {
        let p = std::fs::read_to_string(dir.path().join("prometheus.log")).unwrap_or_default();
        let tail: Vec<&str> = p.lines().rev().take(20).collect();
        format!("prometheus said (last lines first):\n{}", tail.join("\n"))
    };

    // Two scrapes as the scraper, and the rules evaluated since.
    let up = "count_over_time(up{job=\"gpu-claims\"}[1h]) >= 2 and up{job=\"gpu-claims\"} == 1";
    wait_until(
        "two scrapes",
        || query(prom, up).is_some_and(|r| r.len() == 1),
        log,
    );
    let records: Vec<String> = super::rules_of(&find(&docs, "PrometheusRule")["spec"]["groups"])
        .into_iter()
        .filter_map(|(kind, name)| (kind == "record").then_some(name))
        .collect();
    let empty = |names: &[String]| -> Vec<String> {
        names
            .iter()
            .filter(|r| query(prom, r).is_none_or(|s| s.is_empty()))
            .cloned()
            .collect()
    };
    wait_until(
        "every recording rule has a value",
        || empty(&records).is_empty(),
        || format!("{:?} empty; {}", empty(&records), log()),
    );

    // The controller's figures as Prometheus computes them, against the
    // claims themselves: GPUs held and idle per tenant.
    let held = || claims_gpus(&kubeconfig, &["Bound", "Attached", "Lost"]);
    let idle = || claims_gpus(&kubeconfig, &["Bound"]);
    wait_until(
        "GPUs held per tenant agree",
        || by_tenant(prom, "namespace_class:gpu_claims_gpus_held:sum") == held(),
        || {
            format!(
                "{:?} vs {:?}",
                by_tenant(prom, "namespace_class:gpu_claims_gpus_held:sum"),
                held()
            )
        },
    );
    assert_eq!(
        by_tenant(prom, "namespace_class:gpu_claims_gpus_idle:max"),
        idle()
    );
    assert!(
        !idle().is_empty(),
        "the served world keeps an idle reservation"
    );
    let waiting = query(prom, "sum(namespace_reason:gpu_claims_waiting_sets:max)");
    assert!(
        waiting
            .as_ref()
            .and_then(|w| w.first())
            .is_some_and(|s| s.1 >= 1.0),
        "the served world keeps a set waiting at the gate: {waiting:?}"
    );

    // Every panel's query answers, but those that can only be empty here.
    let mut report = Vec::new();
    let mut nothing = Vec::new();
    for (title, ref_id, expr) in panel_queries() {
        let samples = query(prom, &expr).unwrap_or_default();
        let numbers: Vec<f64> = samples
            .iter()
            .map(|s| s.1)
            .filter(|v| !v.is_nan())
            .collect();
        let expected_empty = EMPTY_IN_THE_DEMO
            .iter()
            .any(|(t, r, _)| *t == title && *r == ref_id);
        report.push(format!(
            "{title} [{ref_id}]: {} series, {numbers:?}",
            samples.len()
        ));
        if numbers.is_empty() != expected_empty {
            nothing.push(format!("{title} [{ref_id}] {expr}: {samples:?}"));
        }
    }
    println!("the dashboard on the demo's world:\n{}", report.join("\n"));
    assert!(
        nothing.is_empty(),
        "panels whose answer is not as expected (empty, or named empty yet answering):\n{}",
        nothing.join("\n")
    );

    // The alert the world calls for: a100 is full and vm-small waits.
    let (code, body) = http_get(prom, "/api/v1/alerts", None).unwrap();
    assert_eq!(code, 200);
    let alerts: Value = serde_json::from_str(&body).unwrap();
    let active: Vec<String> = alerts["data"]["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            format!(
                "{} {}",
                a["labels"]["alertname"].as_str().unwrap(),
                a["labels"]["class"]
            )
        })
        .collect();
    assert!(
        active.contains(&"GPUClaimsClassFullWithWaitingSets \"a100\"".to_string()),
        "{active:?}"
    );
}
