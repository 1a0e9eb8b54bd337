//! Clients nobody here wrote, against the embedded API server with the
//! controller running: Debian's (or any) kubectl, and the official Python
//! client. `.ci/run` installs both and sets GPU_CLAIMS_REQUIRE_REAL_CLIENTS,
//! so there they must run; elsewhere a missing client skips its test loudly.
mod common;

use common::Cluster;
use gpu_claims::demo::{self, A, B};
use std::process::{Command, Stdio};
use std::time::Duration;

const CONFIG: &str = "log: {filter: info, format: json}\n";

fn started() -> (Cluster, common::Controller) {
    let mut c = Cluster::new(demo::seed, CONFIG);
    let ctl = c.start_controller();
    c.settle(
        "L1 on the seeded claim",
        |s| {
            s.claim(B, "shared-l40s")
                .is_some_and(|x| x.metadata.finalizers.is_some())
        },
        Duration::ZERO,
    );
    (c, ctl)
}

/// A child's output, line by line, as it comes.
fn lines_of(out: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                return;
            }
        }
    });
    rx
}

/// The lines up to and including the first that contains `what`; panics
/// after 30 s.
fn wait_line(lines: &std::sync::mpsc::Receiver<String>, what: &str) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut seen = String::new();
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match lines.recv_timeout(left) {
            Ok(l) => {
                seen.push_str(&l);
                seen.push('\n');
                if l.contains(what) {
                    return seen;
                }
            }
            Err(e) => panic!("no line with {what} ({e}); saw: {seen}"),
        }
    }
}

/// The client's minor version (`kubectl version --client -o json`).
fn kubectl_minor() -> u32 {
    let out = Command::new("kubectl")
        .args(["version", "--client", "-o", "json"])
        .output()
        .expect("kubectl runs");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    v["clientVersion"]["minor"]
        .as_str()
        .unwrap_or_default()
        .trim_end_matches('+')
        .parse()
        .unwrap_or(0)
}

struct Kubectl(std::path::PathBuf);

impl Kubectl {
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new("kubectl");
        c.arg("--kubeconfig").arg(&self.0).args(args);
        c
    }

    /// Runs kubectl; its stdout, or a panic with its stderr.
    fn run(&self, args: &[&str]) -> String {
        let out = self.cmd(args).output().expect("kubectl runs");
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

const CLAIM_YAML: &str = "apiVersion: gpu.cozystack.io/v1alpha1
kind: GPUClaim
metadata:
  name: from-kubectl
  namespace: tenant-a
  labels: {team: ml}
spec:
  className: h200
  count: 1
";

#[test]
fn kubectl_gets_applies_watches_and_deletes() {
    if !common::available(
        "kubectl",
        Command::new("kubectl").args(["version", "--client"]),
    ) {
        return;
    }
    let (mut c, _ctl) = started();
    let k = Kubectl(c.dir.path().join("kubeconfig"));

    // get: discovery, then a Table with the CRD's printer columns.
    let table = k.run(&["get", "gpuclaims", "-A"]);
    assert!(
        table.contains("CLASS") && table.contains("PHASE"),
        "{table}"
    );
    assert!(
        table.contains("shared-l40s") && table.contains("l40s"),
        "{table}"
    );
    let nodes = k.run(&["get", "nodes", "-o", "name"]);
    assert_eq!(nodes.lines().count(), 5, "{nodes}");

    // apply: create, then unchanged, then a change (a merge patch).
    let file = c.dir.path().join("claim.yaml");
    std::fs::write(&file, CLAIM_YAML).unwrap();
    let f = file.to_str().unwrap();
    assert!(
        k.run(&["apply", "--validate=false", "-f", f])
            .contains("created")
    );
    c.settle(
        "L1 on the applied claim",
        |s| {
            s.claim(A, "from-kubectl")
                .is_some_and(|x| x.metadata.finalizers.is_some())
        },
        Duration::ZERO,
    );
    assert!(
        k.run(&["apply", "--validate=false", "-f", f])
            .contains("unchanged")
    );
    std::fs::write(&file, CLAIM_YAML.replace("team: ml", "team: ai")).unwrap();
    assert!(
        k.run(&["apply", "--validate=false", "-f", f])
            .contains("configured")
    );
    let by_label = k.run(&["get", "gpuclaims", "-n", A, "-l", "team=ai", "-o", "name"]);
    assert_eq!(by_label.trim(), "gpuclaim.gpu.cozystack.io/from-kubectl");
    // The CRD's short name; server-side dry runs that change nothing.
    let short = k.run(&["get", "gc", "-n", A, "-o", "name"]);
    assert!(
        short.contains("gpuclaim.gpu.cozystack.io/from-kubectl"),
        "{short}"
    );
    k.run(&[
        "label",
        "gpuclaim",
        "from-kubectl",
        "-n",
        A,
        "extra=1",
        "--dry-run=server",
    ]);
    k.run(&[
        "delete",
        "gpuclaim",
        "from-kubectl",
        "-n",
        A,
        "--dry-run=server",
    ]);
    let labels = k.run(&[
        "get",
        "gpuclaim",
        "from-kubectl",
        "-n",
        A,
        "-o",
        "jsonpath={.metadata.labels}",
    ]);
    assert!(
        labels.contains("team") && !labels.contains("extra"),
        "a dry run changed the claim: {labels}"
    );
    assert_eq!(k.run(&["get", "--raw", "/readyz"]).trim(), "ok");
    // kubectl explain reads OpenAPI v3 from kubectl 1.27 on (before, v2,
    // which the server does not serve).
    if kubectl_minor() >= 27 {
        let explained = k.run(&["explain", "gpuclaims.spec"]);
        assert!(
            explained.contains("className") && explained.contains("-required-"),
            "{explained}"
        );
    }
    // The controller's Events (recorded through events.k8s.io) in
    // `kubectl get events` and `kubectl describe`, as on a real cluster.
    let start = std::time::Instant::now();
    loop {
        let described = k.run(&["describe", "gpuclaim", "from-kubectl", "-n", A]);
        let events = k.run(&["get", "events", "-n", A]);
        if described.contains("FinalizerAdded") && events.contains("gpuclaim/from-kubectl") {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no L1 Event shown:\n{described}\n{events}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let fin = k.run(&[
        "get",
        "gpuclaim",
        "from-kubectl",
        "-n",
        A,
        "-o",
        "jsonpath={.metadata.finalizers[0]}",
    ]);
    assert_eq!(
        fin, "gpu.cozystack.io/claim-protection",
        "the controller's L1"
    );

    // get -w sees the delete the controller completes (L8 removes the finalizer).
    let mut watch = k
        .cmd(&["get", "gpuclaims", "-n", A, "-w", "--output-watch-events"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = lines_of(watch.stdout.take().unwrap());
    // The watch has started once it has listed the claim as ADDED.
    let mut seen = wait_line(&lines, "ADDED");
    k.run(&[
        "delete",
        "gpuclaim",
        "from-kubectl",
        "-n",
        A,
        "--wait=true",
        "--timeout=30s",
    ]);
    seen.push_str(&wait_line(&lines, "DELETED"));
    let _ = watch.kill();
    let _ = watch.wait();
    assert!(
        seen.contains("ADDED") && seen.contains("DELETED"),
        "watch saw: {seen}"
    );
    assert!(c.snapshot().claim(A, "from-kubectl").is_none());
}

const PYTHON: &str = r#"
import json, sys
from kubernetes import client, config, watch
config.load_kube_config(config_file=sys.argv[1])
co, core = client.CustomObjectsApi(), client.CoreV1Api()
out = {}
claims = co.list_cluster_custom_object("gpu.cozystack.io", "v1alpha1", "gpuclaims")
out["claims"] = sorted(c["metadata"]["name"] for c in claims["items"])
out["nodes"] = sorted(n.metadata.name for n in core.list_node().items)
page = core.list_node(limit=2)
out["first_page"] = len(page.items)
out["rest"] = len(core.list_node(limit=2, _continue=page.metadata._continue).items)
body = {"apiVersion": "gpu.cozystack.io/v1alpha1", "kind": "GPUClaim",
        "metadata": {"name": "from-python", "namespace": "tenant-a"},
        "spec": {"className": "h200", "count": 1}}
created = co.create_namespaced_custom_object("gpu.cozystack.io", "v1alpha1", "tenant-a", "gpuclaims", body)
events = []
w = watch.Watch()
for ev in w.stream(co.list_namespaced_custom_object, "gpu.cozystack.io", "v1alpha1", "tenant-a",
                   "gpuclaims", resource_version=created["metadata"]["resourceVersion"], timeout_seconds=3):
    fins = ev["object"]["metadata"].get("finalizers") or []
    events.append([ev["type"], ev["object"]["metadata"]["name"], fins])
    if fins:
        w.stop()
out["events"] = events
pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "from-python"},
       "spec": {"containers": [{"name": "c", "image": "i"}]}}
core.create_namespaced_pod("tenant-a", pod)
out["deleted_pod"] = core.delete_namespaced_pod("from-python", "tenant-a").metadata.name
print(json.dumps(out))
"#;

#[test]
fn the_python_client_lists_pages_creates_and_watches() {
    if !common::available(
        "the Python kubernetes client",
        Command::new("python3").args(["-c", "import kubernetes"]),
    ) {
        return;
    }
    let (c, _ctl) = started();
    let out = common::succeed(
        Command::new("python3")
            .args(["-c", PYTHON])
            .arg(c.dir.path().join("kubeconfig")),
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["claims"], serde_json::json!(["shared-l40s"]));
    assert_eq!(
        v["nodes"],
        serde_json::json!([
            "gpu-node-0",
            "gpu-node-1",
            "gpu-node-2",
            "gpu-node-3",
            "gpu-node-4"
        ])
    );
    assert_eq!(
        (v["first_page"].as_u64(), v["rest"].as_u64()),
        (Some(2), Some(2))
    );
    // The watch from the create's version sees the controller's L1 write.
    let events = v["events"].as_array().unwrap();
    assert!(
        events.iter().any(|e| e[0] == "MODIFIED"
            && e[1] == "from-python"
            && e[2][0] == "gpu.cozystack.io/claim-protection"),
        "{events:?}"
    );
    // A pod's delete answers with the pod, which the typed client reads.
    assert_eq!(v["deleted_pod"], "from-python");
}
