//! Every API request has a deadline: a server that does not answer in
//! time costs the caller the deadline, not forever, and the request is
//! counted in `gpu_claims_api_timeouts`.
use gpu_claims::clients::Clients;
use gpu_claims::kube_ports::KubePorts;
use gpu_claims::metrics::Metrics;
use gpu_claims_actors::api::Kind;
use gpu_claims_actors::ports::{ObjRef, ReadError, Reader, WriteError, Writer};
use gpu_claims_actors::rules::RuleId;
use gpu_claims_apiserver::{ApiServer, Faults, Handle};
use gpu_claims_testbed::fixtures::*;
use std::time::Duration;

/// An API server of a cluster with the CRDs.
async fn server() -> Handle {
    ApiServer::builder()
        .store(gpu_claims_testbed::crds::cluster_store())
        .start()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_not_answered_within_its_deadline_times_out_and_is_counted() {
    let server = server().await;
    let deadline = Duration::from_millis(200);
    let clients = Clients::from_kubeconfig(&server.kubeconfig(), deadline)
        .await
        .unwrap();
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = Metrics::register(&mut registry, None);
    let ports = KubePorts::new(clients.requests.clone(), metrics, deadline);
    let what = ObjRef::new(Kind::Claim, Some("t"), "a");
    assert!(
        matches!(ports.get(what.clone()).await, Ok(None)),
        "answered in time"
    );

    // Every answer now comes 5 s late.
    server.set_faults(Faults {
        latency: Duration::from_secs(5),
        ..Faults::default()
    });
    let started = tokio::time::Instant::now();
    assert!(matches!(ports.get(what).await, Err(ReadError::Timeout(_))));
    let write = ports.create(claim("t", "a").obj(), RuleId::L1).await;
    assert!(matches!(write, Err(WriteError::Timeout(_))), "{write:?}");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "gave up at the deadline, not at the answer: {:?}",
        started.elapsed()
    );
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    for line in [
        "gpu_claims_api_timeouts_total{verb=\"get\",kind=\"GPUClaim\"} 1",
        "gpu_claims_api_timeouts_total{verb=\"create\",kind=\"GPUClaim\"} 1",
    ] {
        assert!(text.contains(line), "{line} in\n{text}");
    }
}

/// A process that does not hold the Lease sends no write, even one that
/// reaches the client past the writer's guard: the request client checks
/// the fence at the wire. Reads go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_is_not_sent_while_the_fence_is_closed() {
    let server = server().await;
    gpu_claims_apiserver::namespaces::ensure(&server.store, "t");
    let deadline = Duration::from_secs(5);
    let clients = Clients::from_kubeconfig(&server.kubeconfig_for("replica-1"), deadline)
        .await
        .unwrap();
    let fence = std::sync::Arc::new(gpu_claims::leader::Fence::new(
        Duration::from_secs(10),
        Duration::from_secs(15),
    ));
    let wire = gpu_claims::leader::wire::WireFence::new(fence.clone(), "gpu-claims", "gpu-claims");
    clients.fence.set(wire).ok().unwrap();
    let mut registry = prometheus_client::registry::Registry::default();
    let ports = KubePorts::new(
        clients.requests.clone(),
        Metrics::register(&mut registry, None),
        deadline,
    );
    let write = ports.create(claim("t", "a").obj(), RuleId::L1).await;
    assert!(matches!(write, Err(WriteError::Fenced)), "{write:?}");
    assert!(server.writes().is_empty(), "nothing reached the server");
    let what = ObjRef::new(Kind::Claim, Some("t"), "a");
    assert!(matches!(ports.get(what).await, Ok(None)), "reads go on");
    // Leading: the write goes.
    fence.renewed(tokio::time::Instant::now());
    ports
        .create(claim("t", "a").obj(), RuleId::L1)
        .await
        .unwrap();
    assert_eq!(server.writes().len(), 1);
}
