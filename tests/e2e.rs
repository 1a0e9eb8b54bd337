//! End to end: the real `gpu-claims run` binary against the embedded API
//! server over HTTP, with the KubeVirt stand-in moving VMIs and pods.
//! Every wait checks I1-I5 every 50 ms (see `common::Cluster::settle`).
#[path = "e2e/cluster_metrics.rs"]
mod cluster_metrics;
mod common;
#[path = "e2e/device_taint_rules.rs"]
mod device_taint_rules;
#[path = "e2e/hgx_partitions_and_moves.rs"]
mod hgx_partitions_and_moves;
#[path = "e2e/managed_pools.rs"]
mod managed_pools;
#[path = "e2e/stopped_vm_devices.rs"]
mod stopped_vm_devices;

use common::Cluster;
use gpu_claims_actors::api::is_deleting;
use gpu_claims_apiserver::Faults;
use gpu_claims_testbed::demo::story;
use gpu_claims_testbed::demo::{self, A, B, H200, Snapshot};
use gpu_claims_testbed::fixtures::{MetaBuilder, claim, class, node};
use std::time::Duration;

const CONFIG: &str = "attachmentGrace: 2m\nlog: {filter: info, format: json}\n";
const NOW: Duration = Duration::ZERO;
const HOLD: Duration = Duration::from_millis(1500);

fn small(c: &gpu_claims_testbed::memory::MemCluster) {
    for o in [
        node("n1").gpus(H200, 4).kubelet("32", "256Gi").obj(),
        node("n2").gpus(H200, 4).kubelet("32", "256Gi").obj(),
        class("h200", H200).no_finalizer().obj(),
        claim(A, "named").count(2).no_finalizer().obj(),
    ] {
        c.seed(&o);
    }
}

fn started(c: &mut Cluster) {
    c.finalized("L1 on the seeded objects", A, "named");
}

/// The small world with its controller, past L1.
fn small_started() -> (Cluster, common::Controller) {
    let mut c = Cluster::new(small, CONFIG);
    let ctl = c.start_controller();
    started(&mut c);
    (c, ctl)
}

/// Starts VM `vm` naming claim `named`; settles until the claim is Attached.
fn vm_attached(c: &mut Cluster) -> Snapshot {
    c.standin.start_vm_with_claims(A, "vm", &["named"]);
    named_becomes(c, "Attached", "G3-G4 then L4: placed and Attached")
}

/// Settles until claim `named` is in `phase` (`why`: the rule that brings it there).
fn named_becomes(c: &mut Cluster, phase: &str, why: &str) -> Snapshot {
    c.settle(why, |s| s.phase(A, "named") == phase, NOW)
}

/// Settles until `claim` is gone, and its allocation with it (L8).
fn released(c: &mut Cluster, why: &str, claim: &str) {
    c.settle(why, |s| s.phase(A, claim) == "gone", NOW);
    assert!(
        c.store.get("GPUAllocation", A, claim).is_none(),
        "L8: the allocation goes with the claim"
    );
}

#[test]
fn e2e_a_vm_starts_attached_and_stops_bound() {
    let (mut c, _ctl) = small_started();
    let s = vm_attached(&mut c);
    let claim = s.claim(A, "named").unwrap();
    assert_eq!(claim.attached_vmi_name(), Some("vm"));
    assert!(claim.node_name().is_some());
    c.standin.stop_vm(A, "vm");
    let s = named_becomes(&mut c, "Bound", "L5: detached to Bound");
    assert_eq!(s.claim(A, "named").unwrap().attached_vmi_name(), None);
}

#[test]
fn e2e_without_the_gpuquota_crd_no_quota_applies_and_vms_are_placed_all_the_same() {
    // An upgrade whose CRDs were not applied (Helm does not upgrade them):
    // the controller must not stop placing because one kind is missing.
    let mut c = Cluster::new(small, CONFIG);
    c.store
        .delete("CustomResourceDefinition", "", "gpuquotas.gpu.cozystack.io")
        .unwrap();
    let ctl = c.start_controller();
    started(&mut c);
    ctl.wait_ready();
    c.standin.start_vm_with_claims(A, "vm", &["named"]);
    named_becomes(&mut c, "Attached", "G3-G4 then L4 with no GPUQuota served");
}

#[test]
fn e2e_a_template_claim_goes_with_its_vmi() {
    let (mut c, _ctl) = small_started();
    c.standin.start_vm(A, "vm", "h200", 3);
    c.settle(
        "G2 creates the template claim, placed and Attached",
        |s| s.phase(A, "vm-gpu") == "Attached",
        NOW,
    );
    c.standin.stop_vm(A, "vm");
    c.standin.delete_vm(A, "vm");
    released(
        &mut c,
        "L3/L5 then L8: the claim and its record are gone",
        "vm-gpu",
    );
}

#[test]
fn e2e_a_lost_node_makes_its_claims_lost_and_its_return_attaches_them() {
    let (mut c, _ctl) = small_started();
    let s = vm_attached(&mut c);
    let n = s
        .claim(A, "named")
        .unwrap()
        .node_name()
        .unwrap()
        .to_string();
    c.standin.set_node_ready(&n, false);
    named_becomes(&mut c, "Lost", "G6: Lost");
    assert!(
        c.store.get("GPUAllocation", A, "named").is_some(),
        "G6: the record stays"
    );
    c.standin.set_node_ready(&n, true);
    named_becomes(&mut c, "Attached", "L4: Attached again");
}

#[test]
fn e2e_a_claims_deletion_waits_for_its_vm() {
    let (mut c, _ctl) = small_started();
    vm_attached(&mut c);
    c.store.delete("GPUClaim", A, "named").unwrap();
    c.settle(
        "L9: the deleting claim is held while its VM runs",
        |s| {
            s.claim(A, "named")
                .is_some_and(|x| is_deleting(&x.metadata) && x.phase().as_str() == "Attached")
        },
        HOLD,
    );
    c.standin.stop_vm(A, "vm");
    released(&mut c, "L8: released once the VM stopped", "named");
}

#[test]
fn e2e_a_class_deletion_waits_for_its_claims() {
    let (mut c, _ctl) = small_started();
    vm_attached(&mut c);
    c.store.delete("GPUClass", "", "h200").unwrap();
    c.settle(
        "L11: the class waits while a claim holds it",
        |s| s.class("h200").is_some_and(|k| is_deleting(&k.metadata)),
        HOLD,
    );
    c.standin.stop_vm(A, "vm");
    c.store.delete("GPUClaim", A, "named").unwrap();
    c.settle(
        "L8 then L11: claim and class released",
        |s| s.phase(A, "named") == "gone" && s.class("h200").is_none(),
        NOW,
    );
}

#[test]
fn e2e_an_attachment_grace_change_reaches_the_running_process() {
    // A claim attached to a VMI that never appears: L6 detaches it after the grace.
    let seed = |c: &gpu_claims_testbed::memory::MemCluster| {
        small(c);
        for o in claim(A, "ghostly")
            .bound("n1")
            .attached("ghost")
            .with_allocation(H200)
        {
            c.seed(&o);
        }
    };
    let mut c = Cluster::new(seed, "attachmentGrace: 1h\n");
    let _ctl = c.start_controller();
    started(&mut c);
    c.settle(
        "within the 1h grace the attachment stays",
        |s| s.claim(A, "ghostly").unwrap().attached_vmi_name() == Some("ghost"),
        HOLD,
    );
    c.rewrite_config("attachmentGrace: 1s\n");
    c.settle(
        "L6 with the reloaded 1s grace: detached",
        |s| s.claim(A, "ghostly").unwrap().attached_vmi_name().is_none(),
        NOW,
    );
}

/// Plays the demo's story against the binary; `between` runs after each
/// step is acted on and before it is awaited.
fn play(c: &mut Cluster, mut between: impl FnMut(usize, &mut Cluster)) {
    c.settle("L1", |s| s.classes.len() == 2, NOW);
    for (i, step) in story::steps().iter().enumerate() {
        c.act(step);
        between(i, c);
        c.settle(step.title, step.until, step.hold);
    }
}

#[test]
fn e2e_a_controller_killed_mid_story_converges_without_duplicate_writes() {
    let mut c = Cluster::new(demo::seed, CONFIG);
    let mut ctl = Some(c.start_controller());
    play(&mut c, |i, c| {
        // Killed right after steps that make many writes start.
        if i == 0 || i == 5 {
            ctl.take().unwrap().kill();
            ctl = Some(c.start_controller());
        }
    });
    // I5 was checked all along (no write changed nothing). A converged
    // cluster gets no write from yet another start: the new process leads
    // (after the killed one's Lease expires), every actor decides, and
    // none writes.
    let ctl = ctl.unwrap();
    ctl.wait_settled();
    let before = c.writes();
    drop(ctl);
    let ctl = c.start_controller();
    ctl.wait_settled();
    assert_eq!(ctl.debug().unwrap()["leader"]["leading"], true);
    assert_eq!(c.writes(), before, "I5: no write on restart");
}

#[test]
fn e2e_with_faults_injected_the_story_converges_and_keeps_the_invariants() {
    let mut c = Cluster::new(demo::seed, CONFIG);
    c.server.set_faults(
        Faults::parse("conflict=0.1,throttle=0.05,error=0.1,latency=1ms,cut=2s").unwrap(),
    );
    let _ctl = c.start_controller();
    play(&mut c, |i, c| {
        if i == 3 {
            // The API server restarts, keeping its data but not its watch
            // cache: every watcher must relist.
            let server = c.server.clone();
            c.rt.block_on(server.restart(Duration::from_millis(300)))
                .unwrap();
        }
    });
    let refused = c
        .journal
        .journal()
        .entries
        .iter()
        .filter(|e| {
            e.error
                .as_deref()
                .is_some_and(|e| e.starts_with("injected"))
        })
        .count();
    assert!(refused > 0, "faults were injected");
}

/// Issue 37, item 4: the VMs and VMIs the story writes (the stand-in as
/// KubeVirt's controllers, the tenant's kubectl, gpu-claims' evacuation)
/// are kept as written by KubeVirt's published schemas: nothing pruned,
/// nothing a cluster would refuse.
#[test]
fn e2e_every_vm_and_vmi_of_the_story_is_kept_as_written_by_kubevirts_published_schemas() {
    let mut c = Cluster::new(demo::seed, CONFIG);
    let (mut changes, _) = c.store.watch();
    let _ctl = c.start_controller();
    play(&mut c, |_, _| {});
    let mut judged = std::collections::BTreeMap::<&str, usize>::new();
    while let Ok(e) = changes.try_recv() {
        if e.type_ == gpu_claims_testbed::memory::store::EventType::Deleted {
            continue;
        }
        let Some(v) =
            gpu_claims_testbed::crds::kubevirt_verdict(&e.kind, &e.object, e.prev.as_ref())
        else {
            continue;
        };
        let name = e.object["metadata"]["name"].as_str().unwrap_or_default();
        assert!(v.kept_as_sent(), "{} {name}: {v:?}\n{}", e.kind, e.object);
        *judged
            .entry(if e.kind == "VirtualMachine" {
                "VM"
            } else {
                "VMI"
            })
            .or_default() += 1;
    }
    assert!(
        judged.get("VM").is_some_and(|n| *n > 5) && judged.get("VMI").is_some_and(|n| *n > 20),
        "the story writes VMs and VMIs: {judged:?}"
    );
}

fn lease_holder(c: &Cluster) -> Option<(String, i64)> {
    let l = c.store.get("Lease", "gpu-claims", "gpu-claims")?;
    Some((
        l["spec"]["holderIdentity"].as_str()?.to_string(),
        l["spec"]["leaseTransitions"].as_i64().unwrap_or(0),
    ))
}

fn metrics_of(ctl: &common::Controller) -> String {
    ctl.get("/metrics")
        .map(|(_, body)| body)
        .unwrap_or_default()
}

/// The sum of a metric's samples whose line starts with `prefix`.
fn metric_sum(text: &str, prefix: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn e2e_a_standby_writes_nothing_and_takes_over_when_the_leader_dies() {
    let mut c = Cluster::new(demo::seed, CONFIG);
    let leader = c.start_controller();
    c.settle("L1", |s| s.classes.len() == 2, NOW);
    let (first, _) = lease_holder(&c).expect("the first process leads");
    let standby = c.start_controller();
    standby.wait_ready();
    let standby = Some(standby);
    let mut leader = Some(leader);
    play(&mut c, |i, c| {
        if i == 2 {
            let s = standby.as_ref().unwrap();
            let m = metrics_of(s);
            assert!(m.contains("gpu_claims_leader 0"), "{m}");
            assert_eq!(
                metric_sum(&m, "gpu_claims_writes_total"),
                0.0,
                "a standby writes nothing: {m}"
            );
            // The leader dies mid-story; the standby must finish it.
            leader.take().unwrap().kill();
            let _ = c;
        }
    });
    let (now, transitions) = lease_holder(&c).unwrap();
    assert_ne!(now, first, "the standby holds the Lease");
    assert!(transitions >= 1);
    let m = metrics_of(standby.as_ref().unwrap());
    assert!(m.contains("gpu_claims_leader 1"), "{m}");
    assert!(metric_sum(&m, "gpu_claims_writes_total") > 0.0, "{m}");
}

#[test]
fn e2e_readyz_follows_the_watches_and_a_standby_says_who_leads() {
    let c = Cluster::new(demo::seed, CONFIG);
    let leader = c.start_controller();
    leader.wait_settled();
    let standby = c.start_controller();
    standby.wait_ready();
    let id = leader.debug().unwrap()["leader"]["identity"].clone();
    let d = standby.debug().unwrap();
    assert_eq!(d["leader"]["leading"], false, "{d}");
    assert_eq!(d["leader"]["holder"], id, "{d}");
    // The standby runs no claim actors; it says who does.
    let (code, body) = standby
        .get(&format!("/debug/claims/{B}/shared-l40s"))
        .unwrap();
    assert_eq!(code, 503, "{body}");
    assert!(body.contains(id.as_str().unwrap()), "{body}");
    assert_eq!(
        leader
            .get(&format!("/debug/claims/{B}/shared-l40s"))
            .unwrap()
            .0,
        200
    );

    // The API server goes away for a while: both processes turn unready,
    // naming the failing watches, and ready again once it is back.
    let server = c.server.clone();
    let down =
        c.rt.spawn(async move { server.restart(Duration::from_secs(4)).await });
    for ctl in [&leader, &standby] {
        let start = std::time::Instant::now();
        loop {
            let (code, body) = ctl.get("/readyz").unwrap();
            if code == 503 {
                assert!(body.contains("watches failing"), "{body}");
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(4),
                "still ready: {body}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    c.rt.block_on(down).unwrap().unwrap();
    leader.wait_ready();
    standby.wait_ready();
    let d = standby.debug().unwrap();
    assert!(
        d["watches"]
            .as_object()
            .unwrap()
            .values()
            .all(|w| w["healthy"] == true),
        "{d}"
    );
}

#[test]
fn e2e_metrics_show_real_activity() {
    let mut c = Cluster::new(demo::seed, CONFIG);
    let ctl = c.start_controller();
    play(&mut c, |_, _| {});
    let m = metrics_of(&ctl);
    for (metric, why) in [
        (
            "gpu_claims_writes_total{",
            "writes by op, kind, rule and result",
        ),
        (
            "gpu_claims_change_to_write_seconds_count{",
            "change-to-write latency",
        ),
        ("gpu_claims_gate_wait_seconds_count", "gate wait"),
        ("gpu_claims_actors{", "actors alive"),
        ("gpu_claims_claims{", "claims by class and phase"),
        ("gpu_claims_leader", "leadership"),
    ] {
        assert!(metric_sum(&m, metric) > 0.0, "{why}: {metric} in\n{m}");
    }
    assert!(
        m.contains("gpu_claims_claims{class=\"h200\",phase=\"Attached\"} 3"),
        "{m}"
    );
    assert!(m.contains("# TYPE gpu_claims_conflicts counter"), "{m}");
    assert!(
        m.contains("# TYPE gpu_claims_config_reloads counter"),
        "{m}"
    );
    // The story's Events are there, each with its rule.
    // Written as core/v1 Events (and served as events.k8s.io too).
    let (events, _) = c.store.list("Event");
    let reasons: Vec<&str> = events.iter().filter_map(|e| e["reason"].as_str()).collect();
    for r in ["FinalizerAdded", "Attached", "Bound", "Lost", "Released"] {
        assert!(reasons.contains(&r), "an Event {r} in {reasons:?}");
    }
    assert!(
        events
            .iter()
            .all(|e| e["action"].as_str().is_some_and(|a| !a.is_empty()))
    );
}

/// Issue 13, item 5: /metrics and /debug are the cluster's to open. An
/// anonymous caller, an unknown token and a user RBAC does not allow are
/// refused; the chart's reader ClusterRoles open exactly their paths; the
/// probes stay open; the guard counts what it decided.
#[test]
fn e2e_anonymous_debug_is_refused_and_rbac_decides_who_reads_metrics_and_debug() {
    let c = Cluster::new(demo::seed, CONFIG);
    let ctl = c.start_controller();
    ctl.wait_ready();
    let get = |path: &str, token: Option<&str>| common::http_get_as(ctl.http, path, token).unwrap();

    for path in [
        "/debug",
        "/metrics",
        &format!("/debug/claims/{B}/shared-l40s"),
    ] {
        let (code, body) = get(path, None);
        assert_eq!(code, 401, "anonymous {path}: {body}");
        assert!(!body.contains(B), "nothing of a tenant leaks: {body}");
    }
    assert_eq!(get("/debug", Some("a-token-nobody-was-given")).0, 401);
    for path in ["/healthz", "/readyz"] {
        assert_eq!(get(path, None).0, 200, "{path} is the kubelet's, open");
    }

    // A tenant's token: known to the API server, allowed nothing here.
    let tenant = c.server.add_user("system:serviceaccount:tenant-b:default");
    let (code, body) = get("/debug", Some(&tenant));
    assert_eq!(code, 403, "{body}");
    assert!(
        body.contains("User \"system:serviceaccount:tenant-b:default\" cannot get path \"/debug\""),
        "{body}"
    );

    // Prometheus, bound to metrics-reader alone: /metrics, not /debug.
    let prom = c
        .server
        .add_user("system:serviceaccount:monitoring:prometheus");
    c.store.seed(
        "ClusterRoleBinding",
        serde_json::json!({
            "metadata": {"name": "prometheus"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gpu-claims-metrics-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": "monitoring"}],
        }),
    );
    assert_eq!(get("/metrics", Some(&prom)).0, 200);
    assert_eq!(get("/debug", Some(&prom)).0, 403);

    // The operator, bound to both readers (common::Cluster).
    ctl.wait_settled();
    let (code, body) = ctl.get(&format!("/debug/claims/{B}/shared-l40s")).unwrap();
    assert_eq!(code, 200, "{body}");
    let m = metrics_of(&ctl);
    for (result, at_least) in [
        ("allowed", 2.0),
        ("unauthenticated", 4.0),
        ("forbidden", 2.0),
    ] {
        let n = metric_sum(
            &m,
            &format!("gpu_claims_http_auth_total{{result=\"{result}\"}}"),
        );
        assert!(n >= at_least, "{result}: {n} in\n{m}");
    }
}

/// The launcher pods a VMI controls, as stored.
fn launchers(
    store: &gpu_claims_testbed::memory::store::Store,
    ns: &str,
    vmi: &str,
) -> Vec<serde_json::Value> {
    let Some(v) = store.get("VirtualMachineInstance", ns, vmi) else {
        return Vec::new();
    };
    store
        .list("Pod")
        .0
        .into_iter()
        .filter(|p| p["metadata"]["ownerReferences"][0]["uid"] == v["metadata"]["uid"])
        .collect()
}

/// The message of the FailedCreate Event on a VMI, if there is one.
fn failed_create(
    store: &gpu_claims_testbed::memory::store::Store,
    ns: &str,
    vmi: &str,
) -> Option<String> {
    let e = store.get("Event", ns, &format!("{vmi}.failedcreate"))?;
    Some(e["message"].as_str()?.to_string())
}

/// Issue 13, item 7 (G1): the API server calls `run`'s webhook over
/// TLS as the chart registers it. With every replica down, a VM without
/// GPUs still starts (matchConditions never send its pod) while a GPU
/// VM's pod is refused (failurePolicy Fail) and retried; once a
/// controller runs, the GPU VM's pod is created at the gate by the
/// webhook (the stand-in puts no gate on it).
#[test]
fn e2e_g1_with_the_controller_down_only_gpu_launcher_pods_are_refused_and_then_arrive_gated() {
    let mut c = Cluster::new(small, CONFIG);
    let ctl = c.start_controller();
    started(&mut c);
    ctl.kill();

    c.standin.start_vm_without_gpus(A, "plain");
    c.standin.start_vm_with_claims(A, "gpu-vm", &["named"]);
    let store = c.store.clone();
    c.settle(
        "a VM without GPUs gets its pod, a GPU VM's pod is refused",
        |_| {
            launchers(&store, A, "plain").len() == 1 && failed_create(&store, A, "gpu-vm").is_some()
        },
        Duration::ZERO,
    );
    let why = failed_create(&store, A, "gpu-vm").unwrap();
    assert!(
        why.contains("failed calling webhook \"gate.gpu.cozystack.io\""),
        "{why}"
    );
    assert!(
        launchers(&store, A, "gpu-vm").is_empty(),
        "no GPU pod slips through"
    );
    let plain = &launchers(&store, A, "plain")[0];
    assert!(plain["spec"].get("schedulingGates").is_none(), "{plain}");

    // A controller again: the next retry goes through its webhook.
    let (mut added, _) = store.watch();
    let ctl = c.start_controller();
    c.settle(
        "the GPU VM's pod is created",
        |_| !launchers(&store, A, "gpu-vm").is_empty(),
        Duration::ZERO,
    );
    let mut first = None;
    while let Ok(ev) = added.try_recv() {
        if ev.kind == "Pod"
            && ev.object["metadata"]["ownerReferences"][0]["name"] == "gpu-vm"
            && first.is_none()
        {
            first = Some(ev.object);
        }
    }
    let first = first.expect("the pod's creation was seen");
    assert_eq!(
        first["spec"]["schedulingGates"][0]["name"],
        gpu_claims_actors::api::SCHEDULING_GATE,
        "created at the gate: {first}"
    );
    // Only the GPU pod went to the webhook.
    let m = metrics_of(&ctl);
    assert_eq!(
        metric_sum(&m, "gpu_claims_webhook_requests_total"),
        1.0,
        "{m}"
    );
    assert_eq!(
        metric_sum(&m, "gpu_claims_webhook_requests_total{result=\"gated\"}"),
        1.0,
        "{m}"
    );
}

/// A GET over TLS trusting `ca_pem` for `server_name`: the status code and
/// the body; None when no TLS session could be made.
async fn https_get(
    addr: std::net::SocketAddr,
    ca_pem: &str,
    server_name: &str,
    path: &str,
    token: Option<&str>,
) -> Option<(u16, String)> {
    use rustls::pki_types::pem::PemObject;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(c.ok()?).ok()?;
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .ok()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await.ok()?;
    let name = rustls::pki_types::ServerName::try_from(server_name.to_string()).ok()?;
    let mut tls = connector.connect(name, tcp).await.ok()?;
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let req =
        format!("GET {path} HTTP/1.1\r\nHost: {server_name}\r\n{auth}Connection: close\r\n\r\n");
    tls.write_all(req.as_bytes()).await.ok()?;
    let mut out = Vec::new();
    let _ = tls.read_to_end(&mut out).await;
    let text = String::from_utf8_lossy(&out);
    let code = text.split_whitespace().nth(1)?.parse().ok()?;
    Some((
        code,
        text.split("\r\n\r\n")
            .nth(1)
            .unwrap_or_default()
            .to_string(),
    ))
}

/// Issue 13, item 5: served over TLS (as the chart serves them, with the
/// webhook's certificate), /metrics and /debug carry callers' tokens
/// encrypted; plain HTTP gets no answer, and the probes answer over TLS.
#[test]
fn e2e_metrics_and_debug_are_served_over_tls_with_a_certificate_of_their_own() {
    let c = Cluster::new(demo::seed, CONFIG);
    let (cert, key) = (c.dir.path().join("tls.crt"), c.dir.path().join("tls.key"));
    let ctl = c.start_controller_with(&[
        "--http-tls-cert-file",
        cert.to_str().unwrap(),
        "--http-tls-key-file",
        key.to_str().unwrap(),
    ]);
    let ca = std::fs::read_to_string(&cert).unwrap();
    let host = "gpu-claims.gpu-claims.svc";
    let get = |path: &str, token: Option<&str>| {
        c.rt.block_on(https_get(ctl.http, &ca, host, path, token))
    };
    // Ready over TLS, waited on as a condition.
    let start = std::time::Instant::now();
    while get("/readyz", None).is_none_or(|(code, _)| code != 200) {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "not ready over TLS"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (code, body) = get("/metrics", Some(&c.reader_token)).unwrap();
    assert_eq!(code, 200);
    assert!(body.contains("gpu_claims_leader"), "{body}");
    assert_eq!(get("/debug", None).unwrap().0, 401);
    // Plain HTTP is not spoken there.
    assert!(
        common::http_get(ctl.http, "/readyz").is_none_or(|(code, _)| code == 0),
        "plain HTTP answered"
    );
}
