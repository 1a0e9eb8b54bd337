//! Every API request has a deadline: a server that does not answer in
//! time costs the caller the deadline, not forever, and the request is
//! counted in `gpu_claims_api_timeouts`.
use gpu_claims::apiserver::{self, ApiServer, Faults};
use gpu_claims::clients::Clients;
use gpu_claims::kube_ports::KubePorts;
use gpu_claims::metrics::Metrics;
use gpu_claims_actors::api::Kind;
use gpu_claims_actors::fixtures::*;
use gpu_claims_actors::ports::{ObjRef, ReadError, Reader, WriteError, Writer};
use gpu_claims_actors::rules::RuleId;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_not_answered_within_its_deadline_times_out_and_is_counted() {
    let server = ApiServer::start(apiserver::new_store(), "127.0.0.1:0".parse().unwrap(), None)
        .await
        .unwrap();
    let deadline = Duration::from_millis(200);
    let clients = Clients::from_kubeconfig(&apiserver::kubeconfig(&server.url()), deadline)
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
