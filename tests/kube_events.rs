//! The controller's Events over HTTP, as an API server keeps them: core/v1
//! Events with a first and last timestamp and a count, so that `kubectl
//! get events --sort-by=.lastTimestamp` sorts them and a repeat is one
//! Event counted, not a new line each time.
use gpu_claims::clients::Clients;
use gpu_claims::kube_events::KubeRecorder;
use gpu_claims_actors::api::Kind;
use gpu_claims_actors::ports::{Event, ObjRef, Recorder};
use gpu_claims_actors::rules::RuleId;
use gpu_claims_apiserver::{ApiServer, Handle};
use serde_json::Value;
use std::time::Duration;

async fn server() -> Handle {
    let server = ApiServer::builder()
        .store(gpu_claims_testbed::crds::cluster_store())
        .start()
        .await
        .unwrap();
    gpu_claims_apiserver::namespaces::ensure(&server.store, "t");
    server
}

fn waiting(message: &str) -> Event {
    Event {
        regarding: ObjRef::new(Kind::Vmi, Some("t"), "vm1"),
        uid: Some("u-vm1".into()),
        warning: true,
        reason: "NoCapacity".into(),
        message: message.into(),
        rule: RuleId::G5,
        related: None,
    }
}

/// The stored (core/v1) Events about `name`.
fn events_about(server: &Handle, name: &str) -> Vec<Value> {
    let (events, _) = server.store.list("Event");
    events
        .into_iter()
        .filter(|e| e["involvedObject"]["name"] == name)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_has_the_timestamps_kubectl_sorts_by_and_a_repeat_is_counted_on_it() {
    let server = server().await;
    let clients = Clients::from_kubeconfig(&server.kubeconfig(), Duration::from_secs(10))
        .await
        .unwrap();
    let recorder = KubeRecorder::new(clients.requests.clone(), None);
    recorder.publish(waiting("no node has 4 free h200")).await;
    let first = events_about(&server, "vm1");
    assert_eq!(first.len(), 1, "{first:#?}");
    let e = &first[0];
    assert_eq!(e["apiVersion"], "v1");
    assert_eq!(e["count"], 1);
    assert_eq!(e["type"], "Warning");
    assert_eq!(e["action"], "G5");
    assert_eq!(e["source"]["component"], "gpu-claims");
    assert_eq!(e["involvedObject"]["kind"], "VirtualMachineInstance");
    assert_eq!(e["involvedObject"]["uid"], "u-vm1");
    let first_seen = e["firstTimestamp"].as_str().unwrap().to_string();
    assert_eq!(e["lastTimestamp"].as_str(), Some(first_seen.as_str()));

    // Told again (a minute later, in a cluster; here at once): the same
    // Event, counted, its last timestamp moved on.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    recorder.publish(waiting("no node has 4 free h200")).await;
    let again = events_about(&server, "vm1");
    assert_eq!(again.len(), 1, "a repeat is no new Event: {again:#?}");
    assert_eq!(again[0]["count"], 2);
    assert_eq!(
        again[0]["firstTimestamp"].as_str(),
        Some(first_seen.as_str())
    );
    assert!(
        again[0]["lastTimestamp"].as_str().unwrap() > first_seen.as_str(),
        "{:#?}",
        again[0]
    );

    // Another message is another Event.
    recorder.publish(waiting("no node has 2 free h200")).await;
    assert_eq!(events_about(&server, "vm1").len(), 2);

    // An Event the server let go of (its TTL) is written anew on a repeat.
    let name = again[0]["metadata"]["name"].as_str().unwrap().to_string();
    server.store.delete("Event", "t", &name).unwrap();
    recorder.publish(waiting("no node has 4 free h200")).await;
    let after = events_about(&server, "vm1");
    assert_eq!(after.len(), 2, "{after:#?}");
    assert!(after.iter().all(|e| e["count"] == 1), "{after:#?}");

    // A cluster-scoped object's Event lives in `default`, as upstream's.
    recorder
        .publish(Event {
            regarding: ObjRef::new(Kind::Class, None, "h200"),
            uid: None,
            warning: false,
            reason: "SharedResource".into(),
            message: "another class counts the same GPUs".into(),
            rule: RuleId::G2,
            related: None,
        })
        .await;
    let class = events_about(&server, "h200");
    assert_eq!(class.len(), 1);
    assert_eq!(class[0]["metadata"]["namespace"], "default");

    // Served as events.k8s.io too, with the timestamps under their names there.
    let client = clients.requests.clone();
    let api: kube::Api<k8s_openapi::api::events::v1::Event> = kube::Api::namespaced(client, "t");
    let listed = api.list(&Default::default()).await.unwrap();
    assert!(
        listed
            .items
            .iter()
            .all(|e| e.deprecated_last_timestamp.is_some() && e.deprecated_count.is_some()),
        "{listed:#?}"
    );
}
