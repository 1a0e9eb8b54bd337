//! The webhook under a pod storm (issue 23, target 5): launcher pod
//! creations reviewed over TLS connections kept alive, as kube-apiserver
//! calls a webhook (one pooled connection per concurrent call), against
//! `run`'s own webhook (`serve_webhook`: its TLS listener, router and
//! metrics) with every VMI in the cache. Handshakes are timed apart from
//! the reviews; the baseline is the same reviews decided in process
//! (read, admit, answer: no HTTP, no TLS) on the same thread pool.

use crate::webhook::{Admission, WebhookState, admit, read_review, response};
use anyhow::Context as _;
use gpu_claims_actors::ports::Obj;
use gpu_claims_actors::world::{World, WorldWriter};
use gpu_claims_testbed::bench::WebhookFigures;
use gpu_claims_testbed::fixtures::class;
use gpu_claims_testbed::standin::VmSpec;
use gpu_claims_testbed::standin::render::launcher_pod;
use gpu_claims_testbed::standin::vms::vmi_of;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

const H200: &str = "nvidia.com/GH100_H200";

/// Each review's deadline, as the chart's timeoutSeconds sets it.
const DEADLINE: Duration = Duration::from_secs(10);

/// The world the webhook reads (a class, one VMI per review) and the
/// reviews: each VMI's launcher pod as virt-controller renders it.
fn world_and_reviews(reviews: usize) -> (Arc<World>, Vec<Vec<u8>>) {
    let world = WorldWriter::new(Default::default());
    world.load(class("h200", H200).obj());
    // Listed, as the watches have it once synced: the webhook refuses
    // GPU pods until it knows which resources the classes serve.
    world.relisted(gpu_claims_actors::ports::Kind::Class, None);
    world.relisted(gpu_claims_actors::ports::Kind::Vmi, None);
    let spec = VmSpec::sized(4, "16Gi").gpus(H200, 1);
    let template = json!({"metadata": spec.metadata(), "spec": spec.spec()});
    let bodies = (0..reviews)
        .map(|i| {
            let (ns, name) = (format!("tenant-{}", i % 50), format!("vm-{i}"));
            let mut vmi = vmi_of(&ns, &name, &template, None);
            vmi["metadata"]["uid"] = format!("uid-{i}").into();
            let v = serde_json::from_value(vmi.clone()).expect("a VMI");
            world.load(Obj::Vmi(v));
            let review = json!({
                "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "request": {
                    "uid": format!("review-{i}"),
                    "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "resource": {"group": "", "version": "v1", "resource": "pods"},
                    "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
                    "requestResource": {"group": "", "version": "v1", "resource": "pods"},
                    "namespace": ns, "operation": "CREATE",
                    "userInfo": {"username": "system:serviceaccount:kubevirt:kubevirt-controller"},
                    "object": launcher_pod(&vmi, false), "oldObject": null, "dryRun": false,
                    "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
                }
            });
            serde_json::to_vec(&review).expect("a review")
        })
        .collect();
    (world.reader(), bodies)
}

/// Whether an answer gates the pod, as every review here must be.
fn gated(answer: &Value) -> bool {
    answer["response"]["allowed"] == true && answer["response"]["patchType"] == "JSONPatch"
}

/// One connection as kube-apiserver keeps one: TCP and TLS once, then
/// HTTP/1.1 requests one after another.
async fn connect(
    addr: std::net::SocketAddr,
    tls: Arc<rustls::ClientConfig>,
) -> anyhow::Result<(
    hyper::client::conn::http1::SendRequest<axum::body::Body>,
    Duration,
)> {
    let started = Instant::now();
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let name = rustls::pki_types::ServerName::try_from(super::webhook::service_host())?;
    let stream = tokio_rustls::TlsConnector::from(tls)
        .connect(name, tcp)
        .await?;
    let handshake = started.elapsed();
    let (sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok((sender, handshake))
}

/// POSTs one review on a kept connection: its answer.
async fn review(
    sender: &mut hyper::client::conn::http1::SendRequest<axum::body::Body>,
    body: &[u8],
) -> anyhow::Result<Value> {
    sender.ready().await?;
    let req = http::Request::post("/mutate?timeout=10s")
        .header(http::header::HOST, super::webhook::service_host())
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json, */*")
        .body(axum::body::Body::from(body.to_vec()))?;
    let resp = tokio::time::timeout(DEADLINE, sender.send_request(req))
        .await
        .context("no answer within the review's deadline")??;
    anyhow::ensure!(resp.status() == 200, "HTTP {}", resp.status());
    let bytes = axum::body::to_bytes(axum::body::Body::new(resp.into_body()), 1 << 20).await?;
    Ok(serde_json::from_slice(&bytes)?)
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0 * 100.0).round() / 100.0
}

/// The same reviews decided in process: reviews per second.
fn in_process(world: &World, bodies: &[Vec<u8>]) -> f64 {
    let started = Instant::now();
    let mut gated_here = 0;
    for b in bodies {
        let review = read_review(b).expect("a review");
        let request = &review["request"];
        let vmi = crate::webhook::launcher_of(request)
            .and_then(|(ns, name)| world.vmi(&gpu_claims_actors::world::key(&ns, &name)));
        let admission = admit(request, vmi.as_deref(), world);
        let answer = serde_json::to_vec(&response(&review, &admission)).expect("an answer");
        gated_here += usize::from(matches!(admission, Admission::Patch(_)) && !answer.is_empty());
    }
    assert_eq!(gated_here, bodies.len(), "every review is gated in process");
    bodies.len() as f64 / started.elapsed().as_secs_f64()
}

/// Reviews `reviews` launcher pod creations over `connections` kept
/// connections, all at once; checks each answer gates its pod.
pub async fn measure(reviews: usize, connections: usize) -> anyhow::Result<WebhookFigures> {
    let (world, bodies) = world_and_reviews(reviews);
    let baseline = in_process(&world, &bodies);
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    let run = RUNS.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!(
        "gpu-claims-webhook-bench-{}-{run}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir)?;
    let cert = super::webhook::certificate(&dir)?;
    let mut registry = prometheus_client::registry::Registry::default();
    let store = gpu_claims_testbed::crds::cluster_store();
    let state = WebhookState {
        world: world.clone(),
        reader: gpu_claims_testbed::memory::MemCluster::new(store),
        metrics: Some(crate::metrics::Metrics::register(&mut registry, None)),
    };
    let addr = crate::controller::serve_webhook("127.0.0.1:0".parse()?, cert.files, state).await?;
    let tls = super::webhook::client_config(&cert.ca_pem)?;
    // Connections first, their handshakes timed on their own.
    let mut conns = Vec::new();
    let mut handshakes = Vec::new();
    for _ in 0..connections {
        let (sender, took) = connect(addr, tls.clone()).await?;
        conns.push(sender);
        handshakes.push(took);
    }
    let bodies = Arc::new(bodies);
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = conns
        .into_iter()
        .map(|mut sender| {
            let (bodies, next) = (bodies.clone(), next.clone());
            tokio::spawn(async move {
                let mut out = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(body) = bodies.get(i) else {
                        return anyhow::Ok(out);
                    };
                    let t = Instant::now();
                    let answer = review(&mut sender, body).await?;
                    out.push((t.elapsed(), gated(&answer)));
                }
            })
        })
        .collect();
    let mut latencies = Vec::new();
    let mut gated_count = 0;
    for t in tasks {
        for (took, g) in t.await?? {
            latencies.push(took);
            gated_count += usize::from(g);
        }
    }
    let elapsed = started.elapsed();
    let _ = std::fs::remove_dir_all(&dir);
    anyhow::ensure!(latencies.len() == reviews, "every review answered");
    anyhow::ensure!(gated_count == reviews, "{gated_count} of {reviews} gated");
    let per_s = reviews as f64 / elapsed.as_secs_f64();
    let pct = gpu_claims_testbed::bench::percentile;
    Ok(WebhookFigures {
        reviews,
        connections,
        reviews_per_s: per_s.round(),
        p50_ms: ms(pct(&mut latencies, 50.0)),
        p99_ms: ms(pct(&mut latencies, 99.0)),
        max_ms: ms(pct(&mut latencies, 100.0)),
        handshake_ms: ms(pct(&mut handshakes, 50.0)),
        handshake_max_ms: ms(pct(&mut handshakes, 100.0)),
        gated: gated_count,
        in_process_per_s: baseline.round(),
        ratio: (per_s / baseline * 1000.0).round() / 1000.0,
    })
}
