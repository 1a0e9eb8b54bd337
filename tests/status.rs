//! `gpu-claims status` (README, "Commands") through the real binary against the
//! demo's cluster over HTTP: per class, node and quota, and each set
//! waiting at the gate with its reason; also as the kubectl plugin.
mod common;

use common::Cluster;
use gpu_claims_testbed::demo::{self, B};
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

const CONFIG: &str = "attachmentGrace: 2m\n";

fn status(kubeconfig: &std::path::Path, output: &str) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_gpu-claims"))
        .args([
            "status",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "-o",
            output,
        ])
        .output()
        .expect("the binary runs")
}

/// `gpu-claims status -o json`, which must succeed.
fn status_json(kubeconfig: &std::path::Path) -> Value {
    let out = status(kubeconfig, "json");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The demo's cluster with the controller running, and vm-big asking
/// seven h200: over the class's budget of 6, it waits OverBudget (G5).
fn vm_big_over_budget() -> (Cluster, common::Controller) {
    let mut c = Cluster::new(demo::seed, CONFIG);
    let ctl = c.start_controller();
    c.standin.start_vm(B, "vm-big", "h200", 7);
    c.settle(
        "G5 OverBudget on vm-big's claim",
        |s| waits(s, B, "vm-big-gpu", "OverBudget"),
        Duration::ZERO,
    );
    (c, ctl)
}

/// Whether claim `ns/name` waits for `reason`.
fn waits(s: &gpu_claims_testbed::demo::Snapshot, ns: &str, name: &str, reason: &str) -> bool {
    s.claim(ns, name).is_some_and(|x| {
        x.conditions()
            .iter()
            .any(|k| k.type_ == "Waiting" && k.reason == reason)
    })
}

#[test]
fn status_shows_classes_nodes_quotas_and_the_sets_waiting_at_the_gate() {
    let (c, _ctl) = vm_big_over_budget();
    let kubeconfig = c.dir.path().join("kubeconfig");
    let r = status_json(&kubeconfig);
    let class = |name: &str| {
        r["classes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("class {name} in {r}"))
    };
    let h200 = class("h200");
    assert_eq!(
        (
            &h200["capacity"],
            &h200["allocated"],
            &h200["budget"],
            &h200["waitingSets"]
        ),
        (&16.into(), &0.into(), &6.into(), &1.into()),
        "{h200}"
    );
    // The CUDA job outside gpu-claims holds one of gpu-node-1's four.
    let node1 = r["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == "gpu-node-1")
        .cloned()
        .unwrap();
    assert_eq!(
        (
            &node1["allocatable"],
            &node1["allocated"],
            &node1["usedOutsideAllocations"],
            &node1["free"]
        ),
        (&4.into(), &0.into(), &1.into(), &3.into()),
        "{node1}"
    );
    // Issue 64, item 4: free GPUs where placement puts no set are told
    // apart, with why; FREE stays what no one holds.
    assert_eq!(
        (&node1["placeable"], node1.get("skipped")),
        (&3.into(), None)
    );
    for (name, why) in [
        ("gpu-node-0", "cordoned"),
        ("gpu-node-4", "tainted dedicated=ml:NoSchedule"),
    ] {
        let n = r["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["node"] == name)
            .cloned()
            .unwrap();
        assert_eq!(
            (&n["free"], &n["placeable"], &n["skipped"]),
            (&4.into(), &0.into(), &why.into()),
            "{n}"
        );
    }
    let quotas: Vec<(String, u64, u64)> = r["quotas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| {
            (
                q["class"].as_str().unwrap_or("(all)").to_string(),
                q["used"].as_u64().unwrap(),
                q["hard"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        quotas,
        [
            ("h200".into(), 0, 6),
            ("l40s".into(), 0, 1),
            ("(all)".into(), 0, 8)
        ]
    );
    let waiting = &r["waiting"][0];
    assert_eq!(
        (&waiting["namespace"], &waiting["vmi"], &waiting["reason"]),
        (&B.into(), &"vm-big".into(), &"OverBudget".into()),
        "{r}"
    );
    assert!(waiting["message"].as_str().unwrap().contains("budget of 6"));
    // The same as a table and as YAML.
    let table = String::from_utf8(status(&kubeconfig, "table").stdout).unwrap();
    for says in [
        "CLASSES",
        "gpu-node-1",
        "tenant-a",
        "OverBudget",
        "PLACEABLE",
        "cordoned",
    ] {
        assert!(table.contains(says), "{says} in\n{table}");
    }
    let yaml = status(&kubeconfig, "yaml");
    assert!(yaml.status.success());
    assert!(String::from_utf8_lossy(&yaml.stdout).contains("waitingSets: 1"));
    // As the kubectl plugin: the binary on the PATH as kubectl-gpu_claims.
    if common::kubectl_available() {
        let (_bin, path) = common::plugin_path(env!("CARGO_BIN_EXE_gpu-claims"));
        let plugin = Command::new("kubectl")
            .args([
                "gpu-claims",
                "status",
                "--kubeconfig",
                kubeconfig.to_str().unwrap(),
            ])
            .env("PATH", path)
            .output()
            .unwrap();
        assert!(
            plugin.status.success(),
            "{}",
            String::from_utf8_lossy(&plugin.stderr)
        );
        // The same table, but for how long the sets have waited (read a
        // moment later, it may be a second more).
        assert_eq!(
            without_waited(&String::from_utf8(plugin.stdout).unwrap()),
            without_waited(&table)
        );
    }
}

/// A status table with the WAITED column of its waiting sets left out,
/// its columns single-spaced.
fn without_waited(table: &str) -> String {
    let mut waiting = false;
    let mut out = String::new();
    for line in table.lines() {
        let mut words: Vec<&str> = line.split_whitespace().collect();
        if words.first() == Some(&"#") && words.get(3) == Some(&"WAITED") {
            waiting = true;
        } else if words.is_empty() || !line.starts_with("  ") {
            waiting = false;
        }
        if waiting && words.len() > 3 {
            words.remove(3);
        }
        out.push_str(&words.join(" "));
        out.push('\n');
    }
    out
}

#[test]
fn status_with_a_kubeconfig_it_cannot_read_says_so_and_fails() {
    let out = status(std::path::Path::new("/nonexistent/kubeconfig"), "table");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/kubeconfig"), "{err}");
}

/// D1, D2 in `status`: a DRA class by its DeviceClass, its devices per
/// node (allocated, held by other claims, free, by name: a GPU the driver
/// tainted is neither), and a template VM waiting for room.
#[test]
fn d2_status_shows_a_dra_classs_devices_per_node_and_its_waiting_sets() {
    use gpu_claims_testbed::demo::{A, DRA_NODES};
    use gpu_claims_testbed::standin::{VmSpec, nvidia};
    let mut c = Cluster::new(demo::seed, CONFIG);
    let _ctl = c.start_controller();
    let vfio = "vfio.gpu.nvidia.com";
    c.store
        .create(
            "GPUClass",
            serde_json::json!({"apiVersion": "gpu.cozystack.io/v1alpha1", "kind": "GPUClass",
                "metadata": {"name": "h200-dra"}, "spec": {"deviceClassName": vfio}}),
        )
        .unwrap();
    for (name, count) in [("two", 2), ("four", 4)] {
        c.store
            .create(
                "ResourceClaimTemplate",
                serde_json::json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                    "metadata": {"name": name, "namespace": A},
                    "spec": {"spec": {"devices": {"requests": [
                        {"name": "gpu", "exactly": {"deviceClassName": vfio, "count": count}}]}}}}),
            )
            .unwrap();
    }
    // dra-node-1's first GPU fails: tainted NoExecute, never free.
    let mut n = c.store.get("Node", "", DRA_NODES[0]).unwrap();
    n["metadata"]["annotations"][nvidia::FAILED_GPUS] = "gpu-vfio-0".into();
    c.store
        .update(
            "Node",
            n,
            gpu_claims_testbed::memory::store::Subresource::Main,
        )
        .unwrap();
    // Both nodes' devices in the controller's view (the class counts 3 +
    // 2 free of them) before a VM comes: else vm-two may be placed while
    // only dra-node-1's slices are in, a machine under load shows.
    c.settle(
        "h200-dra counts both nodes' devices",
        |s| {
            s.classes.iter().any(|k| {
                k.metadata.name.as_deref() == Some("h200-dra")
                    && k.status.as_ref().and_then(|st| st.capacity) == Some(5)
            })
        },
        Duration::ZERO,
    );
    let vm = |t: &str| VmSpec::sized(4, "16Gi").gpus_through_template(t, "gpu");
    c.standin.create_vmi(A, "vm-two", &vm("two"));
    c.settle(
        "vm-two placed on dra-node-2",
        |s| s.phase(A, "vm-two-gpu") == "Attached",
        Duration::ZERO,
    );
    c.standin.create_vmi(A, "vm-four", &vm("four"));
    c.settle(
        "vm-four waits: no node has four free",
        |s| waits(s, A, "vm-four-gpu", "NoCapacity"),
        Duration::ZERO,
    );
    let kubeconfig = c.dir.path().join("kubeconfig");
    let r = status_json(&kubeconfig);
    let class = r["classes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "h200-dra")
        .cloned()
        .unwrap();
    assert_eq!(
        (
            &class["deviceClass"],
            &class["capacity"],
            &class["allocated"],
            &class["waitingSets"]
        ),
        (&vfio.into(), &5.into(), &2.into(), &1.into()),
        "{class}"
    );
    let row = |node: &str| {
        r["devices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["node"] == node)
            .cloned()
            .unwrap_or_else(|| panic!("{node} in {r}"))
    };
    let (n1, n2) = (row(DRA_NODES[0]), row(DRA_NODES[1]));
    let figures = |d: &Value| {
        (
            d["devices"].as_u64(),
            d["allocated"].as_u64(),
            d["heldOutsideAllocations"].as_u64(),
            d["free"].as_u64(),
        )
    };
    assert_eq!(figures(&n1), (Some(4), Some(0), Some(0), Some(3)), "{n1}");
    assert_eq!(
        n1["freeDevices"],
        serde_json::json!([
            "dra-node-1/gpu-vfio-1",
            "dra-node-1/gpu-vfio-2",
            "dra-node-1/gpu-vfio-3"
        ])
    );
    assert_eq!(figures(&n2), (Some(2), Some(2), Some(0), Some(0)), "{n2}");
    let table = String::from_utf8(status(&kubeconfig, "table").stdout).unwrap();
    for says in [
        "DRA DEVICES",
        "deviceclass/vfio.gpu.nvidia.com",
        "vm-four",
        "NoCapacity",
    ] {
        assert!(table.contains(says), "{says} in\n{table}");
    }
}

/// D4 in `status`: each DRA claim's devices by PCI address, the VMI that
/// uses them or none, and per node the devices kept for a stopped VM (its
/// backing ResourceClaim holds them; no other pod may take them).
#[test]
fn d4_status_shows_each_dra_claims_devices_and_those_kept_for_a_stopped_vm() {
    use gpu_claims_testbed::demo::story::{self, RAG_CLAIM};
    use gpu_claims_testbed::demo::{A, DRA_NODES};
    let mut c = Cluster::new(demo::seed, CONFIG);
    let _ctl = c.start_controller();
    c.settle("L1", |s| s.classes.len() == 2, Duration::ZERO);
    // The story until vm-rag has stopped, its claim Bound.
    for step in story::steps() {
        c.act(&step);
        let s = c.settle(step.title, step.until, step.hold);
        if s.phase(A, RAG_CLAIM) == "Bound" {
            break;
        }
    }
    let kubeconfig = c.dir.path().join("kubeconfig");
    let r = status_json(&kubeconfig);
    let claim = |name: &str| {
        r["claimDevices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} in {r}"))
    };
    let rag = claim(RAG_CLAIM);
    assert_eq!(
        (&rag["phase"], &rag["node"], &rag["vmi"]),
        (&"Bound".into(), &DRA_NODES[0].into(), &Value::Null),
        "{rag}"
    );
    assert_eq!(
        rag["devices"],
        serde_json::json!([
            "dra-node-1/gpu-vfio-0 (0000:18:00.0)",
            "dra-node-1/gpu-vfio-1 (0000:2a:00.0)"
        ])
    );
    let llm = claim("vm-llm-gpu");
    assert_eq!(
        (&llm["phase"], &llm["vmi"]),
        (&"Attached".into(), &"vm-llm".into())
    );
    let node = |n: &str| {
        r["devices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["node"] == n)
            .cloned()
            .unwrap()
    };
    assert_eq!(
        node(DRA_NODES[0])["keptForStoppedVms"],
        serde_json::json!(["dra-node-1/gpu-vfio-0", "dra-node-1/gpu-vfio-1"])
    );
    // vm-llm runs on dra-node-2's: nothing kept there.
    assert_eq!(
        node(DRA_NODES[1])["keptForStoppedVms"],
        serde_json::json!([])
    );
    let table = String::from_utf8(status(&kubeconfig, "table").stdout).unwrap();
    for says in [
        "DRA CLAIMS",
        "KEPT FOR STOPPED VMS",
        "tenant-a/rag-h200-pair",
        "- (stopped)",
        "0000:18:00.0",
    ] {
        assert!(table.contains(says), "{says} in\n{table}");
    }
}

#[test]
fn o3_status_lists_the_waiting_sets_in_order_and_the_head_of_each_class() {
    use gpu_claims_testbed::demo::story;
    let mut c = Cluster::new(demo::seed, CONFIG);
    let _ctl = c.start_controller();
    c.settle("L1", |s| s.classes.len() == 2, Duration::ZERO);
    // The story until vm-small waits Queued behind vm-big (the queue scene).
    let queued = |s: &gpu_claims_testbed::demo::Snapshot| waits(s, B, "vm-small-gpu", "Queued");
    for step in story::steps() {
        c.act(&step);
        let s = c.settle(step.title, step.until, step.hold);
        if queued(&s) {
            break;
        }
    }
    let kubeconfig = c.dir.path().join("kubeconfig");
    let r = status_json(&kubeconfig);
    let order: Vec<&str> = r["waiting"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["vmi"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["vm-big", "vm-small"], "O1's order: {r}");
    assert_eq!(r["waiting"][1]["reason"], "Queued");
    assert_eq!(r["waiting"][0]["priority"], 0);
    let heads = r["heads"].as_array().expect("QUEUE HEADS");
    assert_eq!(heads.len(), 1, "{heads:?}");
    assert_eq!(
        (&heads[0]["class"], &heads[0]["vmi"]),
        (&"a100".into(), &"vm-big".into())
    );
    let out = status(&kubeconfig, "table");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("QUEUE HEADS"), "{table}");
    // WAITING AT THE GATE, numbered in O1's order; QUEUE HEADS, per class.
    let row = |needle: &str| {
        table
            .lines()
            .find(|l| l.trim_start().starts_with(needle))
            .unwrap_or_else(|| panic!("no line starting {needle:?}: {table}"))
            .to_string()
    };
    assert!(row("1 ").contains("tenant-b/vm-big"), "{table}");
    assert!(row("2 ").contains("tenant-b/vm-small") && row("2 ").contains("Queued"));
    let heads = table.split("QUEUE HEADS").nth(1).unwrap_or_default();
    assert!(
        heads
            .lines()
            .any(|l| l.trim_start().starts_with("a100 ") && l.contains("tenant-b/vm-big")),
        "{table}"
    );
}

/// `kubectl` as a tenant runs it, against the binary over HTTP.
fn kubectl(kubeconfig: &std::path::Path, args: &[&str]) -> String {
    let out = common::succeed(
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(args),
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The Warning Events of namespace `ns` about `name`, as `reason: note`.
fn warnings(kubeconfig: &std::path::Path, ns: &str, name: &str) -> Vec<String> {
    let list: Value = serde_json::from_str(&kubectl(
        kubeconfig,
        &["get", "events", "-n", ns, "-o", "json"],
    ))
    .unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "Warning" && e["involvedObject"]["name"] == name)
        .map(|e| {
            format!(
                "{}: {}",
                e["reason"].as_str().unwrap(),
                e["message"].as_str().unwrap()
            )
        })
        .collect()
}

/// Issue 64, item 2: a tenant sees why its VM waits where it looks.
/// `kubectl get gpuclaims` prints the claim Pending with its REASON; the
/// VMI has a Warning Event with the reason and what would help; a claim
/// of a class that does not exist is told so at once, with the classes
/// there are, before any VM uses it (G5).
#[test]
fn g5_a_tenant_sees_why_its_vm_waits_in_kubectl_get_and_its_events() {
    if !common::kubectl_available() {
        return;
    }
    let (c, _ctl) = vm_big_over_budget();
    let kubeconfig = c.dir.path().join("kubeconfig");
    let table = kubectl(&kubeconfig, &["get", "gpuclaims", "-n", B, "vm-big-gpu"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME", "CLASS", "COUNT", "PHASE", "REASON", "NODE", "VMI", "AGE"
        ],
        "{table}"
    );
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(
        &row[..5],
        ["vm-big-gpu", "h200", "7", "Pending", "OverBudget"],
        "{table}"
    );
    // Its wait, once (the stand-in may also have said FailedCreate, had
    // it made the pod before the webhook listened).
    let told: Vec<String> = warnings(&kubeconfig, B, "vm-big")
        .into_iter()
        .filter(|w| w.starts_with("OverBudget: "))
        .collect();
    assert_eq!(told.len(), 1, "{told:?}");
    assert!(told[0].contains("budget of 6"), "{told:?}");
    assert!(
        told[0].contains("raise the class's budget"),
        "what helps: {told:?}"
    );

    // A typo in a claim no VM uses yet: said at once, with the classes.
    let typo = "apiVersion: gpu.cozystack.io/v1alpha1\nkind: GPUClaim\n\
                metadata: {name: typo, namespace: tenant-b}\nspec: {className: h20, count: 1}\n";
    std::fs::write(c.dir.path().join("typo.yaml"), typo).unwrap();
    let typo_file = c.dir.path().join("typo.yaml");
    kubectl(&kubeconfig, &["create", "-f", typo_file.to_str().unwrap()]);
    let until = std::time::Instant::now() + Duration::from_secs(60);
    let told = loop {
        let told = warnings(&kubeconfig, B, "typo");
        if !told.is_empty() || std::time::Instant::now() > until {
            break told;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(
        told,
        ["ClassMissing: G5: GPUClass h20 does not exist; the classes are h200, l40s"],
        "{told:?}"
    );
}

/// Issue 64, item 6: the plugin takes kubectl's global flags (kubectl
/// passes a plugin's flags through) and its help lists what a kubectl
/// user runs.
#[test]
fn the_kubectl_plugin_takes_kubectls_context_and_namespace_flags_and_lists_its_own_commands() {
    if !common::kubectl_available() {
        return;
    }
    let (c, _ctl) = vm_big_over_budget();
    // A kubeconfig whose current context is a cluster that is not there.
    let text = std::fs::read_to_string(c.dir.path().join("kubeconfig")).unwrap();
    let mut kc: Value = gpu_claims_actors::yaml::from_str(&text).unwrap();
    kc["clusters"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!(
        {"name": "closed", "cluster": {"server": format!("http://{}", common::free_port())}}));
    kc["contexts"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!(
        {"name": "closed", "context": {"cluster": "closed", "user": "embedded"}}));
    kc["current-context"] = "closed".into();
    let kubeconfig = c.dir.path().join("two-contexts");
    std::fs::write(&kubeconfig, kc.to_string()).unwrap();
    let (_bin, path) = common::plugin_path(env!("CARGO_BIN_EXE_gpu-claims"));
    let plugin = |args: &[&str]| {
        Command::new("kubectl")
            .arg("gpu-claims")
            .args(args)
            .env("PATH", &path)
            .env("KUBECONFIG", &kubeconfig)
            .output()
            .unwrap()
    };
    let out = plugin(&["status", "--context", "embedded", "-n", B, "-o", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["waiting"][0]["vmi"], "vm-big", "{r}");
    // -n: only that namespace's sets and quotas (tenant-a has the quota).
    let out = plugin(&[
        "status",
        "--context",
        "embedded",
        "-n",
        "tenant-a",
        "-o",
        "json",
    ]);
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["waiting"], serde_json::json!([]), "{r}");
    assert_eq!(r["quotas"][0]["namespace"], "tenant-a", "{r}");
    // --cluster and --user pick those of the kubeconfig, as kubectl's do.
    let out = plugin(&["status", "--cluster", "embedded", "--user", "embedded"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Without them, the current context: the closed cluster, named.
    let out = plugin(&["status"]);
    assert!(!out.status.success());
    // Help: what a kubectl user runs, under kubectl's name for it.
    let help = String::from_utf8(plugin(&["--help"]).stdout).unwrap();
    assert!(help.contains("Usage: kubectl gpu-claims"), "{help}");
    for shown in ["status", "drain", "uncordon"] {
        assert!(help.contains(&format!("  {shown} ")), "{shown}: {help}");
    }
    for hidden in ["run", "crd", "demo", "plan", "cluster"] {
        assert!(!help.contains(&format!("  {hidden} ")), "{hidden}: {help}");
    }
}
