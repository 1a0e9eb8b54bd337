//! The chart's rules and dashboard as a real Prometheus evaluates them
//! (issue 62): `promtool test rules` on every rule group as the chart
//! renders it, with cases that fail when a rule breaks (`rules`), and a
//! Prometheus scraping `gpu-claims demo --serve` as the chart's
//! ServiceMonitor would, every recording rule and dashboard query asked of
//! it (`demo`). Prometheus and promtool are Debian's `prometheus`
//! package, which `.ci/run` installs.
#[path = "../common/mod.rs"]
mod common;
mod demo;
mod rules;

use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// The chart's directory and the promtool test files, from the crate root.
const CHART: &str = "deploy/helm/gpu-claims";
const PROMTOOL_TESTS: &str = "tests/prometheus/promtool";

fn helm() -> Option<String> {
    let helm = std::env::var("GPU_CLAIMS_HELM").unwrap_or_else(|_| "helm".into());
    common::available("helm", Command::new(&helm).arg("version")).then_some(helm)
}

fn promtool() -> bool {
    common::available("promtool", Command::new("promtool").arg("--version"))
}

/// The chart rendered with `sets`, as its documents.
fn render(helm: &str, sets: &[&str]) -> Vec<Value> {
    let mut c = Command::new(helm);
    c.args(["template", "gpu-claims", CHART, "--namespace", "gpu-claims"]);
    c.args(["--kube-version", "1.37.0"]);
    for s in sets {
        c.args(["--set", s]);
    }
    let out = common::succeed(&mut c);
    gpu_claims_actors::yaml::documents(&String::from_utf8_lossy(&out.stdout)).unwrap()
}

fn find<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("the render has a {kind}"))
}

/// A rules file as Prometheus reads it, of a PrometheusRule's or VMRule's
/// groups. JSON is YAML: promtool and Prometheus read it as written.
fn write_rules(dir: &Path, groups: &Value) -> std::path::PathBuf {
    let path = dir.join("rules.yaml");
    let file = serde_json::json!({ "groups": groups });
    std::fs::write(&path, serde_json::to_string_pretty(&file).unwrap()).unwrap();
    path
}

/// A GET with HTTP/1.0 (a Go server then answers without chunks and
/// closes), under a deadline: its status and body.
fn http_get(addr: std::net::SocketAddr, path: &str, token: Option<&str>) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let deadline = Duration::from_secs(10);
    let mut s = std::net::TcpStream::connect_timeout(&addr, deadline).ok()?;
    s.set_read_timeout(Some(deadline)).ok()?;
    s.set_write_timeout(Some(deadline)).ok()?;
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n{auth}\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let code = out.split_whitespace().nth(1)?.parse().ok()?;
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b.to_string());
    Some((code, body.unwrap_or_default()))
}

/// `text` as a URL's query value (RFC 3986: unreserved bytes as they are).
fn url_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The rules of a group list: ("alert" or "record", its name).
fn rules_of(groups: &Value) -> Vec<(&'static str, String)> {
    let rules = groups.as_array().unwrap().iter();
    rules
        .flat_map(|g| g["rules"].as_array().unwrap())
        .map(|r| match (r["alert"].as_str(), r["record"].as_str()) {
            (Some(a), _) => ("alert", a.to_string()),
            (_, Some(name)) => ("record", name.to_string()),
            _ => panic!("a rule is an alert or a record: {r}"),
        })
        .collect()
}
