//! Clients nobody here wrote, against the embedded API server with the
//! controller running: Debian's (or any) kubectl, and the official Python
//! client. `.ci/run` installs both and sets GPU_CLAIMS_REQUIRE_REAL_CLIENTS,
//! so there they must run; elsewhere a missing client skips its test loudly.
mod common;

use common::Cluster;
use gpu_claims_testbed::demo::{self, A, B};
use std::process::{Command, Stdio};
use std::time::Duration;

const CONFIG: &str = "log: {filter: info, format: json}\n";

/// The demo's cluster and its controller, and kubectl for it; None (the
/// test skipped) where kubectl is not installed and not required.
fn started_for_kubectl() -> Option<(Cluster, common::Controller, Kubectl)> {
    if !common::kubectl_available() {
        return None;
    }
    let (c, ctl) = started();
    let k = Kubectl(c.dir.path().join("kubeconfig"));
    Some((c, ctl, k))
}

fn started() -> (Cluster, common::Controller) {
    let mut c = Cluster::new(demo::seed, CONFIG);
    let ctl = c.start_controller();
    c.finalized("L1 on the seeded claim", B, "shared-l40s");
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

/// Writes `text` to `name` in the cluster's directory; its path, for
/// `kubectl -f`.
fn write_in(c: &Cluster, name: &str, text: &str) -> String {
    let path = c.dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
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

#[test]
fn kubectl_shows_a_tenants_gpu_quota_with_its_columns_and_explains_it() {
    let Some((mut c, _ctl, k)) = started_for_kubectl() else {
        return;
    };
    // Q2: the controller writes what the tenant holds (nothing yet).
    c.settle(
        "Q2 on the demo's quota",
        |s| {
            s.quota(A, "gpus")
                .is_some_and(|q| q.status.as_ref().is_some_and(|st| st.used_total == Some(0)))
        },
        Duration::ZERO,
    );
    let table = k.run(&["get", "gpuquotas", "-n", A]);
    let mut lines = table.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(header, ["NAME", "USED", "TOTAL", "AGE"], "{table}");
    let row: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(row[..3], ["gpus", "0", "8"], "{table}");
    if kubectl_minor() >= 27 {
        let explained = k.run(&["explain", "gpuquotas.spec"]);
        assert!(
            explained.contains("hard") && explained.contains("total"),
            "{explained}"
        );
    }
}

/// A tenant's VM with a GPU, as `kubectl create -f` sends it; `devices`
/// is the text of `spec.template.spec.domain.devices`.
fn vm_yaml(name: &str, devices: &str) -> String {
    format!(
        "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {{name: {name}, namespace: {A}}}\n\
         spec:\n  runStrategy: Halted\n  template:\n    spec:\n      domain:\n        \
         devices: {devices}\n        resources: {{requests: {{memory: 1Gi}}}}\n"
    )
}

/// Issue 37, item 4: KubeVirt's CRDs carry its published schemas, so a
/// tenant's kubectl meets what a cluster answers: `explain` in KubeVirt's
/// words, a misspelt field refused by name (kubectl validates strictly),
/// a VMI without a domain refused, a good VM created and listed with
/// KubeVirt's columns.
#[test]
fn kubectl_meets_kubevirts_published_schemas_for_vms_and_vmis() {
    let Some((c, _ctl, k)) = started_for_kubectl() else {
        return;
    };
    if kubectl_minor() >= 27 {
        let explained = k.run(&["explain", "vm.spec.runStrategy"]);
        assert!(
            explained.contains("Running state indicates the requested running state"),
            "{explained}"
        );
    }
    let write = |name: &str, text: &str| write_in(&c, name, text);
    let typo = write(
        "typo.yaml",
        &vm_yaml(
            "typo",
            "{gpu: [{name: gpu1, deviceName: nvidia.com/GH100_H200}]}",
        ),
    );
    let out = k.cmd(&["create", "-f", &typo]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a misspelt field was accepted");
    assert!(
        err.contains("unknown field \"spec.template.spec.domain.devices.gpu\""),
        "{err}"
    );
    let bare = write(
        "bare.yaml",
        &format!(
            "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {{name: bare, namespace: {A}}}\nspec: {{}}\n"
        ),
    );
    let out = k.cmd(&["create", "-f", &bare]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a VMI without a domain was accepted");
    assert!(err.contains("spec.domain: Required value"), "{err}");
    let good = write(
        "good.yaml",
        &vm_yaml(
            "good",
            "{gpus: [{name: gpu1, deviceName: nvidia.com/GH100_H200}]}",
        ),
    );
    let created = k.run(&["create", "-f", &good]);
    assert!(
        created.contains("virtualmachine.kubevirt.io/good created"),
        "{created}"
    );
    let stored = c.store.get("VirtualMachine", A, "good").unwrap();
    assert_eq!(
        stored["spec"]["template"]["spec"]["domain"]["devices"]["gpus"][0]["deviceName"],
        "nvidia.com/GH100_H200",
        "kept as written"
    );
    let table = k.run(&["get", "vm", "good", "-n", A]);
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(header, ["NAME", "AGE", "STATUS", "READY"], "{table}");
}

/// Issue 35, item 1: kubectl finds DRA's kinds where a 1.37 cluster
/// serves them, applies a slice, lists slices with their node, driver and
/// pool, selects them by node, and explains a claim's spec.
#[test]
fn kubectl_serves_dra_kinds_as_a_cluster_does() {
    let Some((c, _ctl, k)) = started_for_kubectl() else {
        return;
    };
    let listed = k.run(&["api-resources", "--api-group=resource.k8s.io", "-o", "name"]);
    let mut names: Vec<&str> = listed.lines().collect();
    names.sort();
    assert_eq!(
        names,
        [
            "deviceclasses.resource.k8s.io",
            "devicetaintrules.resource.k8s.io",
            "resourceclaims.resource.k8s.io",
            "resourceclaimtemplates.resource.k8s.io",
            "resourceslices.resource.k8s.io",
        ],
        "{listed}"
    );
    let path = write_in(
        &c,
        "slice.yaml",
        "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: n1-gpu.nvidia.com-x1}\n\
         spec:\n  driver: gpu.nvidia.com\n  nodeName: n1\n  pool: {name: n1, generation: 1, resourceSliceCount: 1}\n  \
         devices: [{name: gpu-0, attributes: {type: {string: vfio}}}]\n",
    );
    let applied = k.run(&["apply", "-f", &path]);
    assert!(
        applied.contains("resourceslice.resource.k8s.io/n1-gpu.nvidia.com-x1 created"),
        "{applied}"
    );
    let table = k.run(&[
        "get",
        "resourceslices",
        "--field-selector",
        "spec.nodeName=n1",
    ]);
    let mut lines = table.lines();
    let header: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(header, ["NAME", "NODE", "DRIVER", "POOL", "AGE"], "{table}");
    let row: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        row[..4],
        ["n1-gpu.nvidia.com-x1", "n1", "gpu.nvidia.com", "n1"],
        "{table}"
    );
    if kubectl_minor() >= 27 {
        let explained = k.run(&["explain", "resourceclaims.spec.devices"]);
        assert!(explained.contains("requests"), "{explained}");
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
    let Some((mut c, _ctl, k)) = started_for_kubectl() else {
        return;
    };

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
    assert_eq!(nodes.lines().count(), 7, "{nodes}");

    // apply, validated by the server (fieldValidation=Strict): create,
    // then unchanged, then a change (a merge patch).
    let file = c.dir.path().join("claim.yaml");
    std::fs::write(&file, CLAIM_YAML).unwrap();
    let f = file.to_str().unwrap();
    assert!(k.run(&["apply", "-f", f]).contains("created"));
    c.finalized("L1 on the applied claim", A, "from-kubectl");
    assert!(k.run(&["apply", "-f", f]).contains("unchanged"));
    std::fs::write(&file, CLAIM_YAML.replace("team: ml", "team: ai")).unwrap();
    assert!(k.run(&["apply", "-f", f]).contains("configured"));
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
    // The controller's Events (core/v1, with their timestamps) in
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
    // Sorted as platform engineers sort them: each has a last timestamp.
    let sorted = k.run(&["get", "events", "-A", "--sort-by=.lastTimestamp"]);
    assert!(
        sorted.contains("gpuclaim/from-kubectl") && !sorted.contains("<unknown>"),
        "{sorted}"
    );
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
    if !common::python_client_available() {
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
            "dra-node-1",
            "dra-node-2",
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

const WIDGET_CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, minimum: 1}
";

/// Issue 12: what a user does with kubectl, with kubectl's own defaults:
/// the CRDs applied with validation on, a CRD created and its resource
/// served at once, an unknown field refused as Strict refuses it, `diff`
/// against the server, `wait` for a condition, a built-in kind applied.
#[test]
fn kubectl_applies_validated_diffs_waits_and_serves_a_crd_it_creates() {
    if !common::kubectl_available() {
        return;
    }
    let (c, _ctl) = started();
    let k = Kubectl(c.dir.path().join("kubeconfig"));
    let write = |name: &str, text: &str| write_in(&c, name, text);

    let established = |crd: &str| {
        k.run(&[
            "wait",
            "--for=condition=Established",
            &format!("crd/{crd}"),
            "--timeout=10s",
        ])
    };
    // `yaml` applied from `file` is created (kubectl says `made`), and
    // `kubectl get <resource>` in tenant-a shows `name`.
    let created = |file: &str, yaml: &str, made: &str, resource: &str, name: &str| {
        let f = write(file, yaml);
        assert!(k.run(&["apply", "-f", &f]).contains(made));
        assert!(k.run(&["get", resource, "-n", "tenant-a"]).contains(name));
    };

    // The project's CRDs, as the README says to install them.
    let applied = k.run(&["apply", "-f", "deploy/crds/"]);
    assert_eq!(applied.lines().count(), 4, "{applied}");
    established("gpuclaims.gpu.cozystack.io");

    // A new CRD: established, then its resource is served.
    let crd = write("widget-crd.yaml", WIDGET_CRD);
    k.run(&["apply", "-f", &crd]);
    established("widgets.example.com");
    created(
        "widget.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: tenant-a}\nspec: {size: 2}\n",
        "widget.example.com/w created",
        "wd",
        "w",
    );
    // Its schema is enforced: a field it does not declare is refused.
    let bad = write(
        "bad-widget.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: bad, namespace: tenant-a}\nspec: {size: 2, colour: red}\n",
    );
    let out = k.cmd(&["apply", "-f", &bad]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "an unknown field was accepted");
    assert!(
        err.contains("strict decoding error: unknown field \"spec.colour\""),
        "{err}"
    );

    // diff: against the server's dry run; exit 1 when it would change.
    let changed = write(
        "widget2.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: tenant-a}\nspec: {size: 3}\n",
    );
    let out = k.cmd(&["diff", "-f", &changed]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let diff = String::from_utf8_lossy(&out.stdout);
    assert!(
        diff.contains("-  size: 2") && diff.contains("+  size: 3"),
        "{diff}"
    );
    assert!(
        k.run(&[
            "get",
            "widget",
            "w",
            "-n",
            "tenant-a",
            "-o",
            "jsonpath={.spec.size}"
        ]) == "2"
    );

    // A built-in kind the server stores as it is.
    created(
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: tenant-a}\ndata: {a: \"1\"}\n",
        "configmap/settings created",
        "cm",
        "settings",
    );

    // Deleting the CRD takes its objects.
    k.run(&["delete", "-f", &crd]);
    let gone = k.cmd(&["get", "widgets", "-A"]).output().unwrap();
    assert!(!gone.status.success(), "widgets are still served");
    assert!(c.store.list("Widget").0.is_empty());
}

const CERT_MANAGER_CRDS: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: issuers.cert-manager.io}
spec:
  group: cert-manager.io
  scope: Namespaced
  names: {plural: issuers, singular: issuer, kind: Issuer}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: certificates.cert-manager.io}
spec:
  group: cert-manager.io
  scope: Namespaced
  names: {plural: certificates, singular: certificate, kind: Certificate, shortNames: [cert]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
";

/// Issue 12: `helm install` and `helm uninstall` of the chart, as a
/// platform team runs them: helm reads discovery and OpenAPI v2 (as
/// protobuf) to build the objects, creates every kind the chart renders,
/// keeps its release in a Secret, and deletes it all again. Once without
/// cert-manager (a caBundle given), once with its CRDs applied first.
#[test]
fn helm_installs_and_uninstalls_the_chart() {
    let helm = std::env::var("GPU_CLAIMS_HELM").unwrap_or_else(|_| "helm".into());
    if !common::available("helm", Command::new(&helm).arg("version")) {
        return;
    }
    let (c, _ctl) = started();
    let kubeconfig = c.dir.path().join("kubeconfig");
    let k = Kubectl(kubeconfig.clone());
    let helm_run = |args: &[&str]| {
        let mut helm = Command::new(&helm);
        let out = common::succeed(helm.arg("--kubeconfig").arg(&kubeconfig).args(args));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let chart = "deploy/helm/gpu-claims";
    for (release, sets) in [
        (
            "plain",
            vec![
                "--set",
                "webhook.certs.certManager=false",
                "--set",
                "webhook.certs.caBundle=Zm9v",
            ],
        ),
        ("managed", vec![]),
    ] {
        if release == "managed" {
            let f = c.dir.path().join("cert-manager-crds.yaml");
            std::fs::write(&f, CERT_MANAGER_CRDS).unwrap();
            k.run(&["apply", "-f", f.to_str().unwrap()]);
        }
        let mut args = vec![
            "install",
            release,
            chart,
            "--namespace",
            "gpu-claims",
            "--wait=false",
        ];
        args.extend(sets.iter().copied());
        assert!(helm_run(&args).contains("STATUS: deployed"));
        assert!(helm_run(&["list", "-n", "gpu-claims"]).contains(release));
        let deploy = k.run(&[
            "get",
            "deployment",
            release,
            "-n",
            "gpu-claims",
            "-o",
            "jsonpath={.spec.replicas}",
        ]);
        assert_eq!(deploy, "2");
        k.run(&["get", "mutatingwebhookconfiguration", release]);
        k.run(&["get", "clusterrole", &format!("{release}-metrics-reader")]);
        if release == "managed" {
            k.run(&[
                "get",
                "certificate",
                "-n",
                "gpu-claims",
                &format!("{release}-webhook"),
            ]);
        }
        helm_run(&["uninstall", release, "--namespace", "gpu-claims"]);
        let left = k.run(&[
            "get",
            "deployments,configmaps,services,serviceaccounts",
            "-n",
            "gpu-claims",
            "-o",
            "name",
        ]);
        assert!(!left.contains(release), "left behind: {left}");
        assert!(
            c.store
                .get("MutatingWebhookConfiguration", "", release)
                .is_none()
        );
    }
}

/// kubectl's typed commands send protobuf bodies, and `kubectl drain`
/// cordons the node, lists its pods and evicts each through
/// `pods/eviction`, which a PodDisruptionBudget holds (issue 25): the
/// commands a newcomer types first, and what a GPU node's maintenance
/// starts with.
#[test]
fn kubectl_creates_in_protobuf_and_drains_a_node_through_evictions_a_budget_holds() {
    let Some((c, _ctl, k)) = started_for_kubectl() else {
        return;
    };
    assert!(
        k.run(&["create", "namespace", "x"])
            .contains("namespace/x created")
    );
    let cm = k.run(&["create", "configmap", "c", "-n", "x", "--from-literal=a=b"]);
    assert!(cm.contains("configmap/c created"), "{cm}");
    assert_eq!(
        k.run(&["get", "cm", "c", "-n", "x", "-o", "jsonpath={.data.a}"]),
        "b"
    );
    let d = k.run(&["create", "deployment", "d", "-n", "x", "--image=x"]);
    assert!(d.contains("deployment.apps/d created"), "{d}");
    let shape = "jsonpath={.spec.replicas}/{.spec.template.spec.containers[0].image}";
    assert_eq!(
        k.run(&["get", "deploy", "d", "-n", "x", "-o", shape]),
        "1/x"
    );

    // A ReplicaSet's pod on gpu-node-2, which its kubelet runs, and a
    // budget that wants it up.
    let file = c.dir.path().join("web.yaml");
    std::fs::write(&file, WEB_REPLICASET).unwrap();
    k.run(&["apply", "-f", file.to_str().unwrap()]);
    let uid = k.run(&[
        "get",
        "rs",
        "web",
        "-n",
        "x",
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    std::fs::write(&file, WEB_POD.replace("RS_UID", &uid)).unwrap();
    k.run(&["apply", "-f", file.to_str().unwrap()]);
    let ready = "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}";
    wait_for("the kubelet runs web-1", || {
        k.run(&["get", "pod", "web-1", "-n", "x", "-o", ready]) == "True"
    });
    std::fs::write(&file, WEB_BUDGET).unwrap();
    k.run(&["apply", "-f", file.to_str().unwrap()]);
    let allowed = "jsonpath={.status.currentHealthy}/{.status.disruptionsAllowed}";
    wait_for("the budget counts web-1", || {
        k.run(&["get", "pdb", "web", "-n", "x", "-o", allowed]) == "1/0"
    });
    let table = k.run(&["get", "pdb", "-n", "x"]);
    assert!(
        table.contains("MIN AVAILABLE") && table.contains("ALLOWED DISRUPTIONS"),
        "{table}"
    );

    // Held: the eviction is refused (429) until drain's timeout.
    let drain = [
        "drain",
        "gpu-node-2",
        "--ignore-daemonsets",
        "--delete-emptydir-data",
    ];
    let held = k
        .cmd(&[&drain[..], &["--timeout=3s"]].concat())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&held.stderr);
    assert!(!held.status.success(), "{said}");
    assert!(said.contains("disruption budget"), "{said}");
    assert_eq!(
        k.run(&[
            "get",
            "node",
            "gpu-node-2",
            "-o",
            "jsonpath={.spec.unschedulable}"
        ]),
        "true"
    );
    assert_eq!(
        k.run(&["get", "pod", "web-1", "-n", "x", "-o", ready]),
        "True"
    );

    // Let go: evicted, and drain waits until the kubelet has stopped it.
    k.run(&["delete", "pdb", "web", "-n", "x"]);
    let out = k.run(&[&drain[..], &["--timeout=60s"]].concat());
    assert!(
        out.contains("pod/web-1 evicted") && out.contains("node/gpu-node-2 drained"),
        "{out}"
    );
    let left = k.cmd(&["get", "pod", "web-1", "-n", "x"]).output().unwrap();
    assert!(String::from_utf8_lossy(&left.stderr).contains("NotFound"));
}

/// Polls `done` (each call a kubectl round trip) until it holds; fails
/// after 30 s.
fn wait_for(what: &str, done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "never: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

const WEB_REPLICASET: &str = "apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web, namespace: x}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: x}]}
";

const WEB_POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: web-1
  namespace: x
  labels: {app: web}
  ownerReferences:
  - {apiVersion: apps/v1, kind: ReplicaSet, name: web, uid: RS_UID, controller: true}
spec:
  nodeName: gpu-node-2
  containers: [{name: c, image: x}]
";

const WEB_BUDGET: &str = "apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: x}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: web}}
";
