//! What hostile input costs (issue 61, items 3 and 4): the embedded API
//! server refusing a protobuf body of a million empty finalizers, alone
//! and eight at once (time, the process's peak resident set above where
//! it stood, and what stays after), and `plan` reading a dump of pods as
//! one List (time, and peak bytes per pod).
//!
//! Peaks are the kernel's: `VmHWM` of `/proc/self/status`, reset before
//! each measurement by writing 5 to `/proc/self/clear_refs` (the kernel
//! then counts the peak from the resident set of that moment).

use serde::Serialize;
use std::time::{Duration, Instant};

#[derive(Debug, Default, Serialize, Clone)]
pub struct HostileFigures {
    /// Empty finalizers in each body, and its bytes.
    pub finalizers: usize,
    pub body_bytes: usize,
    /// One body: until its answer, the peak above the start, its status.
    pub one_ms: f64,
    pub one_peak_mb: f64,
    pub one_status: u16,
    /// Eight at once.
    pub eight_ms: f64,
    pub eight_peak_mb: f64,
    /// Resident above the start once the answers are in.
    pub left_mb: f64,
    /// `plan` on a List of this many pods (0: not measured).
    pub plan_pods: usize,
    pub plan_list_bytes: usize,
    pub plan_ms: f64,
    pub plan_peak_bytes_per_pod: f64,
}

fn status_kb(field: &str) -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with(field))?;
            line.split_whitespace().nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}

/// The resident set now, and the peak is counted from it on.
fn reset_peak() -> usize {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    super::rss_bytes()
}

fn peak_above(start: usize) -> f64 {
    let peak = status_kb("VmHWM:") * 1024;
    mb(peak.saturating_sub(start))
}

fn mb(b: usize) -> f64 {
    (b as f64 / (1 << 20) as f64 * 10.0).round() / 10.0
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0 * 10.0).round() / 10.0
}

/// A protobuf varint.
fn varint(mut n: u64, out: &mut Vec<u8>) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// A length-delimited field.
fn field(number: u64, bytes: &[u8], out: &mut Vec<u8>) {
    varint(number << 3 | 2, out);
    varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

/// `k8s\0` and a runtime.Unknown around a ConfigMap named `name` whose
/// ObjectMeta (field 1) has `n` empty finalizers (field 14), as client-go
/// writes one.
pub fn finalizers_body(name: &str, n: usize) -> Vec<u8> {
    let mut meta = Vec::with_capacity(2 * n + 16);
    field(1, name.as_bytes(), &mut meta);
    for _ in 0..n {
        field(14, b"", &mut meta);
    }
    let mut cm = Vec::with_capacity(meta.len() + 8);
    field(1, &meta, &mut cm);
    let mut type_meta = Vec::new();
    field(1, b"v1", &mut type_meta);
    field(2, b"ConfigMap", &mut type_meta);
    let mut unknown = Vec::with_capacity(cm.len() + 32);
    field(1, &type_meta, &mut unknown);
    field(2, &cm, &mut unknown);
    let mut out = b"k8s\0".to_vec();
    out.extend(unknown);
    out
}

async fn post(c: &kube::Client, body: Vec<u8>) -> u16 {
    let req = http::Request::post("/api/v1/namespaces/a/configmaps")
        .header("content-type", "application/vnd.kubernetes.protobuf")
        .header("accept", "application/json")
        .body(kube::client::Body::from(body))
        .expect("a request");
    match c.send(req).await {
        Ok(r) => {
            let code = r.status().as_u16();
            let _ = r.into_body().collect_bytes().await;
            code
        }
        Err(_) => 0,
    }
}

/// The server's share of hostile bodies, then `plan`'s of a List of
/// `plan_pods` pods.
pub fn measure(finalizers: usize, plan_pods: usize) -> HostileFigures {
    let mut f = HostileFigures {
        finalizers,
        ..Default::default()
    };
    let rt = crate::runtime();
    rt.block_on(async {
        if finalizers == 0 {
            return;
        }
        let server = gpu_claims_apiserver::ApiServer::builder()
            .namespace("a")
            .start()
            .await
            .expect("the embedded API server starts");
        let c = server.client();
        let body = finalizers_body("many", finalizers);
        f.body_bytes = body.len();
        let start = reset_peak();
        let t = Instant::now();
        f.one_status = post(&c, body.clone()).await;
        f.one_ms = ms(t.elapsed());
        f.one_peak_mb = peak_above(start);
        let t = Instant::now();
        let eight = (0..8).map(|_| post(&c, body.clone()));
        futures::future::join_all(eight).await;
        f.eight_ms = ms(t.elapsed());
        f.eight_peak_mb = peak_above(start);
        drop(body);
        f.left_mb = mb(super::rss_bytes().saturating_sub(start));
    });
    eprintln!(
        "[hostile] {} empty finalizers ({} bytes of protobuf): {} in {} ms, peak +{} MB; eight at once {} ms, peak +{} MB; +{} MB left",
        f.finalizers,
        f.body_bytes,
        f.one_status,
        f.one_ms,
        f.one_peak_mb,
        f.eight_ms,
        f.eight_peak_mb,
        f.left_mb
    );
    if plan_pods > 0 {
        plan(&mut f, plan_pods);
    }
    f
}

/// `plan --snapshot` on one List of `pods` pods outside gpu-claims, each
/// as a cluster's dump has it (kubectl get pods -o json), in a process of
/// its own (this one's allocator keeps what the other measurements freed):
/// its peak resident set, less that of the same process on an empty
/// List, per pod.
fn plan(f: &mut HostileFigures, pods: usize) {
    let dir = std::env::temp_dir().join(format!("gpu-claims-bench-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let write = |name: &str, pods: usize| {
        let path = dir.join(name);
        let items: Vec<serde_json::Value> = (0..pods).map(dumped_pod).collect();
        let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
        let text = serde_json::to_vec(&list).expect("JSON");
        std::fs::write(&path, &text).expect("the dump is written");
        (path, text.len())
    };
    let (empty, _) = write("empty.json", 0);
    let (path, bytes) = write("pods.json", pods);
    f.plan_pods = pods;
    f.plan_list_bytes = bytes;
    // Children's peaks only grow: the empty List first.
    let base = child_peak(&empty);
    let t = Instant::now();
    let peak = child_peak(&path);
    f.plan_ms = ms(t.elapsed());
    eprintln!("[hostile] plan's peak: {peak} B on {pods} pods, {base} B on none");
    f.plan_peak_bytes_per_pod = (peak.saturating_sub(base) as f64 / pods as f64).round();
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!(
        "[hostile] plan on a List of {} pods ({} bytes): {} ms, peak {} B a pod above the start",
        f.plan_pods, f.plan_list_bytes, f.plan_ms, f.plan_peak_bytes_per_pod
    );
}

/// The peak resident set of a child running `plan` on `snapshot`, in
/// bytes, as the child reads its own (`VmHWM` once its plan is done: a
/// child's rusage would count the parent's pages at the fork).
fn child_peak(snapshot: &std::path::Path) -> usize {
    let me = std::env::current_exe().expect("the benchmark's path");
    let out = std::process::Command::new(me)
        .arg("--plan-child")
        .arg(snapshot)
        .output();
    match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
            .trim()
            .parse::<usize>()
            .unwrap_or(0),
        Ok(o) => {
            eprintln!(
                "[hostile] plan on {} failed: {}",
                snapshot.display(),
                String::from_utf8_lossy(&o.stderr)
            );
            0
        }
        Err(e) => {
            eprintln!("[hostile] plan's process: {e}");
            0
        }
    }
}

/// `--plan-child`: `plan` on the snapshot, as `gpu-claims plan
/// --snapshot` runs it; prints this process's peak resident set, in bytes.
pub fn plan_child(snapshot: &std::path::Path) -> anyhow::Result<()> {
    crate::plan::run_snapshot(Default::default(), snapshot, &[], false)?;
    println!("{}", status_kb("VmHWM:") * 1024);
    Ok(())
}

/// A running pod as `kubectl get pods -o json` shows one: about 3 KB.
fn dumped_pod(i: usize) -> serde_json::Value {
    let node = format!("node-{}", i % 500);
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": format!("web-{i}"), "namespace": format!("team-{}", i % 40),
            "uid": format!("00000000-0000-0000-0000-{i:012}"),
            "resourceVersion": (1000 + i).to_string(),
            "creationTimestamp": "2026-12-01T00:00:00Z",
            "labels": {"app": "web", "pod-template-hash": "7d4b9c8f6d"},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-12-01T00:00:00Z"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": "web-7d4b9c8f6d", "uid": "11111111-1111-1111-1111-111111111111",
                "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": {
            "nodeName": node,
            "containers": [{
                "name": "web", "image": "registry.example.com/team/web:1.2.3",
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "env": [{"name": "MODE", "value": "production"},
                        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                "resources": {"requests": {"cpu": "250m", "memory": "256Mi"},
                              "limits": {"cpu": "1", "memory": "512Mi"}},
                "volumeMounts": [{"name": "kube-api-access", "readOnly": true,
                    "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent",
            }],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst", "serviceAccountName": "default",
            "schedulerName": "default-scheduler",
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                "effect": "NoExecute", "tolerationSeconds": 300}],
            "volumes": [{"name": "kube-api-access", "projected": {"defaultMode": 420,
                "sources": [{"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}}]}}],
        },
        "status": {
            "phase": "Running", "hostIP": "10.0.0.1", "podIP": format!("10.1.{}.{}", i / 250 % 250, i % 250),
            "startTime": "2026-12-01T00:00:00Z", "qosClass": "Burstable",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-12-01T00:00:05Z"}],
            "containerStatuses": [{"name": "web", "ready": true, "restartCount": 0,
                "image": "registry.example.com/team/web:1.2.3",
                "imageID": "registry.example.com/team/web@sha256:0123456789abcdef",
                "containerID": "containerd://0123456789abcdef", "started": true,
                "state": {"running": {"startedAt": "2026-12-01T00:00:04Z"}}}],
        },
    })
}
