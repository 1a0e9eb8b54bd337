//! G1: the gate webhook. Real AdmissionReview JSON through the decision,
//! and the real server over HTTPS, with a certificate rotated on disk.
use base64::Engine;
use gpu_claims::controller::serve_webhook;
use gpu_claims::webhook::{Admission, CertFiles, WebhookState, admit, response};
use gpu_claims_actors::api::{CLAIMS_ANNOTATION, CLASS_ANNOTATION, SCHEDULING_GATE};
use gpu_claims_actors::ports::Kind;
use gpu_claims_actors::world::WorldWriter;
use gpu_claims_actors::{Config, api::Vmi};
use gpu_claims_testbed::fixtures::{MetaBuilder, class, vmi};
use gpu_claims_testbed::memory::MemCluster;
use gpu_claims_testbed::memory::sim::STATUS_KINDS;
use gpu_claims_testbed::memory::store::Store;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// An AdmissionReview as the API server sends it for a virt-launcher pod.
fn review(gates: Option<Value>) -> Value {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "generateName": "virt-launcher-vm1-", "namespace": "t",
            "labels": {"kubevirt.io": "virt-launcher", "vm.kubevirt.io/name": "vm1"},
            "ownerReferences": [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "name": "vm1",
                "uid": "u1", "controller": true, "blockOwnerDeletion": true}]
        },
        "spec": {"containers": [{"name": "compute", "image": "quay.io/kubevirt/virt-launcher:v1.5.0"}]}
    });
    if let Some(g) = gates {
        pod["spec"]["schedulingGates"] = g;
    }
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "t", "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kubevirt:kubevirt-controller"},
            "object": pod, "oldObject": null, "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
        }
    })
}

const H200: &str = "nvidia.com/GH100_H200";

/// The controller's world with its classes listed: class h200 serves H200.
fn classes() -> WorldWriter {
    let w = WorldWriter::new(Config::default());
    w.load(class("h200", H200).obj());
    w.relisted(Kind::Class, None);
    w
}

/// A review of a launcher pod whose compute container requests `gpus` of `resource`.
fn review_requesting(resource: &str, gpus: u32) -> Value {
    let mut r = review(None);
    r["request"]["object"]["spec"]["containers"][0]["resources"] = json!({
        "limits": {resource: gpus.to_string(), "devices.kubevirt.io/kvm": "1"},
        "requests": {resource: gpus.to_string(), "cpu": "100m"},
    });
    r
}

#[test]
fn g1_a_launcher_requesting_a_class_resource_is_gated_whatever_its_vmi_says() {
    let plain = vmi("t", "vm1").uid("u1").0;
    let r = review_requesting(H200, 2);
    assert!(matches!(
        admit(&r["request"], Some(&plain), &classes()),
        Admission::Patch(_)
    ));
    assert!(
        matches!(admit(&r["request"], None, &classes()), Admission::Patch(_)),
        "its VMI not found yet: gated all the same"
    );
}

#[test]
fn g1_a_launcher_requesting_devices_no_class_serves_is_left_alone() {
    let plain = vmi("t", "vm1").uid("u1").0;
    let r = review_requesting("mellanox.com/cx7", 1);
    assert_eq!(
        admit(&r["request"], Some(&plain), &classes()),
        Admission::Allow
    );
}

#[test]
fn g1_a_vmi_asking_only_in_its_spec_gets_its_pod_gated() {
    let spec_only = vmi("t", "vm1").uid("u1").gpus(H200, 1).0;
    assert!(matches!(
        admit(&review(None)["request"], Some(&spec_only), &classes()),
        Admission::Patch(_)
    ));
    let nic = vmi("t", "vm1")
        .uid("u1")
        .host_devices("mellanox.com/cx7", 1)
        .0;
    assert_eq!(
        admit(&review(None)["request"], Some(&nic), &classes()),
        Admission::Allow
    );
}

#[test]
fn g1_before_the_classes_are_listed_a_pod_that_may_ask_for_devices_is_refused() {
    let unlisted = WorldWriter::new(Config::default());
    let r = review_requesting(H200, 1);
    let Admission::Deny(m) = admit(&r["request"], None, &unlisted) else {
        panic!("a refusal")
    };
    assert!(m.contains("not listed the GPUClasses"), "{m}");
    // D5: so is one whose claims come through DRA, by template or by a
    // name that may be a GPUClaim's.
    for entry in [
        json!({"name": "gpu", "resourceClaimTemplateName": "two-h200"}),
        json!({"name": "train", "resourceClaimName": "train"}),
    ] {
        let mut r = review(None);
        r["request"]["object"]["spec"]["resourceClaims"] = json!([entry]);
        assert!(
            matches!(admit(&r["request"], None, &unlisted), Admission::Deny(_)),
            "{entry}"
        );
    }
    // One that asks by annotation only is gated as before.
    assert!(matches!(
        admit(&review(None)["request"], Some(&asking()), &unlisted),
        Admission::Patch(_)
    ));
}

fn asking() -> Vmi {
    vmi("t", "vm1")
        .uid("u1")
        .annotate(CLASS_ANNOTATION, "h200")
        .0
}

#[test]
fn g1_a_launcher_of_a_vmi_asking_for_gpus_gets_the_gate() {
    let r = review(None);
    let Admission::Patch(p) = admit(&r["request"], Some(&asking()), &classes()) else {
        panic!("a patch")
    };
    assert_eq!(
        p,
        json!([{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": SCHEDULING_GATE}]}])
    );
    let out = response(&r, &Admission::Patch(p.clone()));
    assert_eq!(
        out["response"]["uid"],
        "705ab4f5-6393-11e8-b7cc-42010a800002"
    );
    assert_eq!(out["response"]["patchType"], "JSONPatch");
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(out["response"]["patch"].as_str().unwrap())
        .unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&decoded).unwrap(), p);
}

#[test]
fn g1_other_gates_are_kept_and_ours_appended() {
    let r = review(Some(json!([{"name": "example.com/other"}])));
    let named = vmi("t", "vm1").uid("u1").annotate(CLAIMS_ANNOTATION, "a").0;
    assert_eq!(
        admit(&r["request"], Some(&named), &classes()),
        Admission::Patch(
            json!([{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": SCHEDULING_GATE}}])
        )
    );
}

#[test]
fn g1_an_already_gated_pod_is_left_alone() {
    let r = review(Some(json!([{"name": SCHEDULING_GATE}])));
    assert_eq!(
        admit(&r["request"], Some(&asking()), &classes()),
        Admission::Allow
    );
}

#[test]
fn g1_a_vmi_asking_for_no_gpus_is_left_alone() {
    assert_eq!(
        admit(
            &review(None)["request"],
            Some(&vmi("t", "vm1").uid("u1").0),
            &classes()
        ),
        Admission::Allow
    );
}

#[test]
fn g1_an_unreadable_request_still_gates_the_pod() {
    let bad = vmi("t", "vm1")
        .uid("u1")
        .annotate(CLASS_ANNOTATION, "h200")
        .annotate("gpu.cozystack.io/count", "two")
        .0;
    assert!(matches!(
        admit(&review(None)["request"], Some(&bad), &classes()),
        Admission::Patch(_)
    ));
}

#[test]
fn g1_a_launcher_whose_vmi_is_not_found_is_refused() {
    let Admission::Deny(m) = admit(&review(None)["request"], None, &classes()) else {
        panic!("a refusal")
    };
    assert!(m.contains("t/vm1"), "{m}");
    let out = response(&review(None), &Admission::Deny(m));
    assert_eq!(out["response"]["allowed"], false);
}

#[test]
fn g1_pods_that_are_not_launchers_and_other_operations_are_left_alone() {
    let mut r = review(None);
    r["request"]["object"]["metadata"]["labels"] = json!({"app": "web"});
    assert_eq!(admit(&r["request"], None, &classes()), Admission::Allow);
    let mut r = review(None);
    r["request"]["operation"] = "UPDATE".into();
    assert_eq!(admit(&r["request"], None, &classes()), Admission::Allow);
}

fn write_cert(dir: &std::path::Path) -> Vec<u8> {
    let c =
        rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .unwrap();
    std::fs::write(dir.join("tls.crt"), c.cert.pem()).unwrap();
    std::fs::write(dir.join("tls.key"), c.signing_key.serialize_pem()).unwrap();
    c.cert.der().to_vec()
}

/// POSTs a review over HTTPS; returns the response body and the server's certificate.
async fn post(addr: std::net::SocketAddr, trusted: &[Vec<u8>], body: &Value) -> (Value, Vec<u8>) {
    let (_, json, peer) = post_text(addr, trusted, &body.to_string()).await;
    (json, peer)
}

/// POSTs any body over HTTPS; returns the status code, the JSON answer and
/// the server's certificate.
async fn post_text(
    addr: std::net::SocketAddr,
    trusted: &[Vec<u8>],
    payload: &str,
) -> (u16, Value, Vec<u8>) {
    let mut tls = tls_to(addr, trusted).await;
    let peer = tls.get_ref().1.peer_certificates().unwrap()[0].to_vec();
    let req = format!(
        "POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{payload}",
        payload.len()
    );
    let (code, body) = exchange(&mut tls, &req).await;
    (
        code,
        serde_json::from_str(&body).unwrap_or(Value::Null),
        peer,
    )
}

/// A TLS connection to `addr` that trusts `trusted`, as the API server
/// dials a webhook.
async fn tls_to(
    addr: std::net::SocketAddr,
    trusted: &[Vec<u8>],
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    for der in trusted {
        roots
            .add(rustls::pki_types::CertificateDer::from(der.clone()))
            .unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    connector.connect(name, tcp).await.unwrap()
}

/// Sends one request that closes the connection: the status code (0 when
/// none came) and the body.
async fn exchange(
    tls: &mut tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
    req: &str,
) -> (u16, String) {
    tls.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tls.read_to_end(&mut out).await.ok();
    let text = String::from_utf8_lossy(&out);
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text.split("\r\n\r\n").nth(1).unwrap_or_default();
    (code, body.to_string())
}

/// The metrics text a registry exposes holds each of `lines`.
fn exposes(registry: &prometheus_client::registry::Registry, lines: &[&str]) {
    let mut m = String::new();
    prometheus_client::encoding::text::encode(&mut m, registry).unwrap();
    for line in lines {
        assert!(m.contains(line), "{line} in\n{m}");
    }
}

/// A webhook over HTTPS on loopback, with its certificate's DER and the
/// registry of its metrics.
async fn webhook_at(
    dir: &std::path::Path,
) -> (
    std::net::SocketAddr,
    Vec<u8>,
    prometheus_client::registry::Registry,
) {
    let cert = write_cert(dir);
    let store = Arc::new(Store::new(
        Arc::new(k8s_openapi::jiff::Timestamp::now),
        STATUS_KINDS,
    ));
    MemCluster::new(store.clone()).seed(&gpu_claims_actors::ports::Obj::Vmi(asking()));
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = gpu_claims::metrics::Metrics::register(&mut registry, None);
    let state = WebhookState {
        world: WorldWriter::new(Config::default()).reader(),
        reader: MemCluster::new(store),
        metrics: Some(metrics),
    };
    let files = CertFiles {
        cert: dir.join("tls.crt"),
        key: dir.join("tls.key"),
    };
    let addr = serve_webhook("127.0.0.1:0".parse().unwrap(), files, state)
        .await
        .unwrap();
    (addr, cert, registry)
}

/// Connections that never start their TLS handshake delay no review: each
/// handshake runs on its own, with its own deadline. (One at a time in the
/// accept loop, three idle connections held every review for 30 s, past
/// the API server's 5 s timeout: every GPU VM start failed meanwhile.)
#[test]
fn g1_idle_connections_do_not_hold_up_a_review() {
    gpu_claims_testbed::runtime().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let (addr, cert, registry) = webhook_at(dir.path()).await;
        let mut idle = Vec::new();
        for _ in 0..3 {
            idle.push(tokio::net::TcpStream::connect(addr).await.unwrap());
        }
        let (code, out, _) = post_text(addr, &[cert], &review(None).to_string()).await;
        assert_eq!(code, 200);
        assert_eq!(out["response"]["allowed"], true);
        // Answered while the idle connections are still within their
        // handshake deadline: the server has not dropped any of them, so
        // the review did not wait for them to time out.
        for c in &idle {
            let mut buf = [0u8; 1];
            match c.try_read(&mut buf) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                other => {
                    panic!("an idle connection was already closed ({other:?}): the review waited")
                }
            }
        }
        exposes(
            &registry,
            &[
                "gpu_claims_webhook_requests_total{result=\"gated\"} 1",
                "gpu_claims_webhook_latency_seconds_count 1",
            ],
        );
    });
}

/// Idle connections that never send a byte, reopened as the server drops
/// them, as an attacker (or a broken load balancer) keeps them: with 600
/// of them, reviews are still answered well within the API server's
/// `timeoutSeconds` (5 s), each handshake waiting on no other. (With a
/// global cap of 256 handshakes of 3 s each, a review waited 0.9-3.1 s at
/// the median and one in five went unanswered for 15 s.)
/// `n` idle connections to `addr` that never send a byte, each reopened
/// as the server drops it; they stop when the flag is set.
async fn idle_flood(addr: std::net::SocketAddr, n: usize) -> Flood {
    use std::sync::atomic::Ordering::SeqCst;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let open = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut idlers = Vec::new();
    for _ in 0..n {
        let (stop, open) = (stop.clone(), open.clone());
        idlers.push(tokio::spawn(async move {
            let mut counted = false;
            while !stop.load(SeqCst) {
                let Ok(mut c) = tokio::net::TcpStream::connect(addr).await else {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                };
                if !counted {
                    open.fetch_add(1, SeqCst);
                    counted = true;
                }
                // Says nothing; waits for the server to give up on it.
                let mut buf = [0u8; 1];
                let _ = c.read(&mut buf).await;
            }
        }));
    }
    while open.load(SeqCst) < n {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Flood { stop, idlers }
}

/// The idle connections of [`idle_flood`].
struct Flood {
    stop: Arc<std::sync::atomic::AtomicBool>,
    idlers: Vec<tokio::task::JoinHandle<()>>,
}

impl Flood {
    /// Stops reopening them, and closes them all.
    fn end(self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        for t in self.idlers {
            t.abort();
        }
    }
}

/// `n` requests made one after another by `request`, each answered
/// within `limit` (else a panic naming it); their answers. The median and
/// the slowest times are printed: a figure, not an assertion (a debug
/// build on a shared machine).
async fn each_within<T>(
    what: &str,
    n: usize,
    limit: Duration,
    mut request: impl AsyncFnMut() -> T,
) -> Vec<T> {
    let mut took = Vec::new();
    let mut answers = Vec::new();
    for i in 0..n {
        let start = std::time::Instant::now();
        let Ok(answer) = tokio::time::timeout(limit, request()).await else {
            panic!("{what} {i} unanswered within {limit:?}")
        };
        took.push(start.elapsed());
        answers.push(answer);
    }
    took.sort();
    eprintln!(
        "600 idle connections: {what} p50 {:?}, slowest {:?}",
        took[n / 2],
        took[n - 1]
    );
    answers
}

#[test]
fn g1_six_hundred_idle_connections_reopened_hold_up_no_review() {
    gpu_claims_testbed::runtime().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let (addr, cert, _) = webhook_at(dir.path()).await;
        let flood = idle_flood(addr, 600).await;
        // Within the API server's 5 s, over a new TLS connection each.
        let trusted = std::slice::from_ref(&cert);
        let answers = each_within("review", 10, Duration::from_secs(5), async || {
            post_text(addr, trusted, &review(None).to_string()).await
        })
        .await;
        for (code, out, _) in answers {
            assert_eq!(code, 200, "{out}");
            assert_eq!(out["response"]["allowed"], true);
        }
        flood.end();
    });
}

/// The metrics port over TLS (the chart's default, `http.tls`) shares the
/// listener's code: under the same flood, kubelet-style probes (1 s
/// timeout) of `/healthz` are all answered.
#[test]
fn http_probes_over_tls_are_answered_under_six_hundred_idle_connections() {
    gpu_claims_testbed::runtime().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let cert = write_cert(dir.path());
        let files = CertFiles {
            cert: dir.path().join("tls.crt"),
            key: dir.path().join("tls.key"),
        };
        let resolver = gpu_claims::webhook::Resolver::new(files).unwrap();
        let listener =
            gpu_claims::webhook::TlsListener::bind("127.0.0.1:0".parse().unwrap(), &resolver)
                .await
                .unwrap();
        let addr = axum::serve::Listener::local_addr(&listener).unwrap();
        let app = axum::Router::new().route("/healthz", axum::routing::get(|| async { "ok" }));
        tokio::spawn(gpu_claims::serve::serve(
            listener,
            app,
            std::future::pending(),
        ));
        let flood = idle_flood(addr, 600).await;
        // Each within a kubelet probe's 1 s timeout.
        let trusted = std::slice::from_ref(&cert);
        let codes = each_within("/healthz probe", 12, Duration::from_secs(1), async || {
            get_text(addr, trusted, "/healthz").await
        })
        .await;
        assert!(codes.iter().all(|c| *c == 200), "{codes:?}");
        flood.end();
    });
}

/// A GET over TLS: the status code.
async fn get_text(addr: std::net::SocketAddr, trusted: &[Vec<u8>], path: &str) -> u16 {
    let mut tls = tls_to(addr, trusted).await;
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    exchange(&mut tls, &req).await.0
}

/// A client that sends its request headers a byte at a time is cut off
/// after the header read timeout, not held forever.
#[test]
fn g1_headers_sent_slowly_are_cut_off() {
    gpu_claims_testbed::runtime().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let (addr, cert, _) = webhook_at(dir.path()).await;
        let tls = tls_to(addr, &[cert]).await;
        let (mut rd, mut wr) = tokio::io::split(tls);
        let dribble = tokio::spawn(async move {
            for b in b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nX-Slow: "
                .iter()
                .cycle()
            {
                if wr.write_all(&[*b]).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
        // The server closes the connection (its answer, if any, then EOF)
        // once the headers have not come within its timeout.
        let mut out = Vec::new();
        let closed = tokio::time::timeout(
            gpu_claims::serve::HEADER_READ_TIMEOUT + Duration::from_secs(10),
            rd.read_to_end(&mut out),
        )
        .await;
        assert!(
            closed.is_ok(),
            "the connection was held past the header timeout"
        );
        dribble.abort();
    });
}

/// A body that is not an AdmissionReview with a request is never allowed:
/// 400, or a denial with the request's uid where it has one.
#[test]
fn g1_a_malformed_review_is_refused_never_allowed() {
    gpu_claims_testbed::runtime().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let (addr, cert, registry) = webhook_at(dir.path()).await;
        for body in [
            "[]",
            "null",
            "{}",
            "not json",
            r#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}"#,
            r#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": null}"#,
        ] {
            let (code, out, _) = post_text(addr, std::slice::from_ref(&cert), body).await;
            assert_eq!(code, 400, "{body}: {out}");
            assert_eq!(out["reason"], "BadRequest", "{body}: {out}");
            assert_ne!(out["response"]["allowed"], true, "{body}");
        }
        // A request with a uid but not the rest: denied, with its uid.
        let body = r#"{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "abc"}}"#;
        let (code, out, _) = post_text(addr, &[cert], body).await;
        assert_eq!(code, 200, "{out}");
        assert_eq!(out["response"]["uid"], "abc");
        assert_eq!(out["response"]["allowed"], false);
        assert_eq!(out["response"]["status"]["code"], 400);
        // Each counted as a bad request; none allowed.
        exposes(
            &registry,
            &[
                "gpu_claims_webhook_requests_total{result=\"bad_request\"} 7",
                "gpu_claims_webhook_requests_total{result=\"allowed\"} 0",
            ],
        );
    });
}

#[test]
fn g1_over_https_with_a_certificate_rotated_on_disk() {
    let rt = gpu_claims_testbed::runtime();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let first = write_cert(dir.path());
        let world = WorldWriter::new(Config::default()).reader();
        let store = Arc::new(Store::new(
            Arc::new(k8s_openapi::jiff::Timestamp::now),
            STATUS_KINDS,
        ));
        // Not in the cache yet: the webhook reads the VMI live.
        MemCluster::new(store.clone()).seed(&gpu_claims_actors::ports::Obj::Vmi(asking()));
        let state = WebhookState {
            world,
            reader: MemCluster::new(store),
            metrics: None,
        };
        let files = CertFiles {
            cert: dir.path().join("tls.crt"),
            key: dir.path().join("tls.key"),
        };
        let addr = serve_webhook("127.0.0.1:0".parse().unwrap(), files, state)
            .await
            .unwrap();

        let (out, peer) = post(addr, std::slice::from_ref(&first), &review(None)).await;
        assert_eq!(peer, first);
        assert_eq!(out["response"]["allowed"], true);
        assert_eq!(out["response"]["patchType"], "JSONPatch");

        let second = write_cert(dir.path());
        let mut served = Vec::new();
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            served = post(addr, &[first.clone(), second.clone()], &review(None))
                .await
                .1;
            if served == second {
                break;
            }
        }
        assert_eq!(
            served, second,
            "the rotated certificate is served without a restart"
        );
    });
}

#[test]
fn g1_a_certificate_that_does_not_match_its_key_is_refused_and_the_old_stays() {
    let dir = tempfile::tempdir().unwrap();
    write_cert(dir.path());
    let files = CertFiles {
        cert: dir.path().join("tls.crt"),
        key: dir.path().join("tls.key"),
    };
    let resolver = gpu_claims::webhook::Resolver::new(files).unwrap();
    let other = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    std::fs::write(dir.path().join("tls.crt"), other.cert.pem()).unwrap();
    let e = resolver.reload().unwrap_err();
    assert!(
        matches!(e, gpu_claims::webhook::TlsError::Mismatch { .. }),
        "{e}"
    );
    assert!(e.to_string().contains("do not match"), "{e}");
}

/// The certificate watch reloads once per change of the files, written in
/// place or swapped as a Secret mount swaps them (`tls.crt -> ..data/tls.crt`,
/// `..data` renamed over): its own read of them is no change. (It woke
/// itself and reloaded several times a second, for ever.)
#[test]
fn g1_the_certificate_is_reloaded_once_per_change() {
    for swapped in [false, true] {
        gpu_claims_testbed::runtime().block_on(async {
            let dir = tempfile::tempdir().unwrap();
            let d = dir.path();
            let mut n = 0;
            // A new pair (or one that does not match, `other`), written in
            // place or swapped in as a mount's new data.
            let mut put = |other: bool| {
                n += 1;
                let target = if swapped {
                    let data = d.join(format!("..data-{n}"));
                    std::fs::create_dir(&data).unwrap();
                    data
                } else {
                    d.to_path_buf()
                };
                write_cert(&target);
                if other {
                    let o =
                        rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
                    std::fs::write(target.join("tls.crt"), o.cert.pem()).unwrap();
                }
                if swapped {
                    let tmp = d.join("..data_tmp");
                    std::os::unix::fs::symlink(&target, &tmp).unwrap();
                    std::fs::rename(&tmp, d.join("..data")).unwrap();
                    for f in ["tls.crt", "tls.key"] {
                        if std::fs::symlink_metadata(d.join(f)).is_err() {
                            std::os::unix::fs::symlink(d.join("..data").join(f), d.join(f))
                                .unwrap();
                        }
                    }
                }
            };
            put(false);
            let files = CertFiles {
                cert: d.join("tls.crt"),
                key: d.join("tls.key"),
            };
            let resolver = gpu_claims::webhook::Resolver::new(files).unwrap();
            let watch = tokio::spawn(gpu_claims::webhook::watch_certs(resolver.clone()));
            let until = async |n: u64| {
                let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
                while resolver.reloads() < n {
                    assert!(
                        tokio::time::Instant::now() < deadline,
                        "swapped={swapped}: reload {n} came"
                    );
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            };
            // A certificate that does not match its key: refused, once.
            put(true);
            until(1).await;
            // Matching pairs: each reload is one change.
            put(false);
            until(2).await;
            put(false);
            until(3).await;
            // The negative needs a window: for five times the watcher's
            // debounce after the last change, no reload comes (the loop
            // made one every ~200 ms).
            tokio::time::sleep(Duration::from_secs(1)).await;
            assert_eq!(
                resolver.reloads(),
                3,
                "swapped={swapped}: one reload per change"
            );
            watch.abort();
        });
    }
}

/// A VMI asking through `spec.resourceClaims` with the template `t`.
fn through_template(t: &str) -> Vmi {
    serde_json::from_value(json!({"metadata": {"name": "vm1", "namespace": "t", "uid": "u1"},
        "spec": {"domain": {"devices": {"gpus": [{"name": "gpu1", "claimName": "gpu", "requestName": "gpu"}]}},
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": t}]}}))
    .unwrap()
}

#[test]
fn d5_a_launcher_of_a_vmi_asking_through_a_template_of_a_dra_class_is_gated_and_an_unseen_template_refused()
 {
    let w = WorldWriter::new(Config::default());
    w.load(gpu_claims_testbed::fixtures::dra_class("h200-dra", "vfio.gpu.nvidia.com").obj());
    w.relisted(Kind::Class, None);
    w.relisted(Kind::ResourceClaimTemplate, None);
    // The template is not seen yet: refused, to be retried.
    let Admission::Deny(m) = admit(&review(None)["request"], Some(&through_template("two")), &w)
    else {
        panic!("a refusal")
    };
    assert!(
        m.contains("ResourceClaimTemplate t/two is not seen yet"),
        "{m}"
    );
    // Seen, asking the class's DeviceClass: gated.
    let template = json!({"metadata": {"name": "two", "namespace": "t"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu",
            "exactly": {"deviceClassName": "vfio.gpu.nvidia.com", "count": 2}}]}}}});
    w.load(gpu_claims_actors::api::from_json(Kind::ResourceClaimTemplate, template).unwrap());
    assert!(matches!(
        admit(&review(None)["request"], Some(&through_template("two")), &w),
        Admission::Patch(_)
    ));
    // A template of another DeviceClass (a NIC's) is not gpu-claims' business.
    let nic = json!({"metadata": {"name": "nic", "namespace": "t"},
        "spec": {"spec": {"devices": {"requests": [{"name": "nic",
            "exactly": {"deviceClassName": "sriov.example.com"}}]}}}});
    w.load(gpu_claims_actors::api::from_json(Kind::ResourceClaimTemplate, nic).unwrap());
    assert_eq!(
        admit(&review(None)["request"], Some(&through_template("nic")), &w),
        Admission::Allow
    );
}
