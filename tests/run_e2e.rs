//! The real `gpu-claims run` binary against the embedded API server over
//! HTTP, through a kubeconfig: the lifecycle rules act, the endpoints
//! answer, and a restart on the converged cluster writes nothing (I5).
mod common;
use common::{free_port, http_get};
use gpu_claims_actors::ports::{Kind, Obj, ObjRef};
use gpu_claims_testbed::fixtures::*;
use gpu_claims_testbed::memory::MemCluster;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const H200: &str = "nvidia.com/GH100_H200";

struct Controller(Child);

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether the controller's actors have all decided with no write in flight.
fn settled(http: SocketAddr) -> bool {
    http_get(http, "/debug").is_some_and(|(c, body)| {
        c == 200
            && serde_json::from_str::<serde_json::Value>(&body).is_ok_and(|d| d["settled"] == true)
    })
}

fn start(dir: &std::path::Path, http: SocketAddr) -> Controller {
    let log = std::fs::File::create(dir.join(format!("controller-{}.log", http.port()))).unwrap();
    Controller(
        Command::new(env!("CARGO_BIN_EXE_gpu-claims"))
            .args([
                "run",
                "--config",
                dir.join("config.yaml").to_str().unwrap(),
                "--http-addr",
                &http.to_string(),
                "--http-auth=none",
                // This test counts every write to the store; a Lease renews.
                "--leader-elect=false",
            ])
            .env("KUBECONFIG", dir.join("kubeconfig"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    )
}

#[test]
fn run_over_http_applies_the_lifecycle_and_restarts_without_writes() {
    let rt = gpu_claims_testbed::runtime();
    let store = gpu_claims_testbed::crds::cluster_store();
    let cluster = MemCluster::new(store.clone());
    let mut objs = vec![
        class("h200", H200).no_finalizer().obj(),
        class("retired", H200).deleting().obj(),
        node("n1").gpus(H200, 8).obj(),
    ];
    objs.push(claim("t", "fresh").no_finalizer().obj());
    objs.extend(
        claim("t", "running")
            .bound("n1")
            .attached("vm-a")
            .with_allocation(H200),
    );
    objs.push(vmi("t", "vm-a").uid("u-a").obj());
    objs.extend(
        claim("t", "stopped")
            .attached_phase("n1")
            .attached("vm-b")
            .with_allocation(H200),
    );
    objs.push(vmi("t", "vm-b").uid("u-b").phase("Succeeded").obj());
    objs.extend(
        claim("t", "old")
            .class("retired")
            .bound("n1")
            .deleting()
            .with_allocation(H200),
    );
    // A VM asking for 2 GPUs of h200, its launcher pod at the gate.
    objs.push(
        vmi("t", "vm-c")
            .uid("u-c")
            .phase("Scheduling")
            .annotate(gpu_claims_actors::api::CLASS_ANNOTATION, "h200")
            .annotate(gpu_claims_actors::api::COUNT_ANNOTATION, "2")
            .obj(),
    );
    objs.push(
        launcher("t", "virt-launcher-vm-c", "vm-c", "u-c")
            .gated()
            .obj(),
    );
    for o in &objs {
        cluster.seed(o);
    }
    let server = rt
        .block_on(
            gpu_claims_apiserver::ApiServer::builder()
                .store(store.clone())
                .start(),
        )
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("kubeconfig"), server.kubeconfig()).unwrap();
    std::fs::write(
        dir.path().join("config.yaml"),
        "attachmentGrace: 2m\nlog: {filter: info, format: json}\n",
    )
    .unwrap();

    let claim_of = |name: &str| match cluster.get(&ObjRef::new(Kind::Claim, Some("t"), name)) {
        Some(Obj::Claim(c)) => Some(c),
        _ => None,
    };
    let http = free_port();
    let controller = start(dir.path(), http);
    wait_for("L1 on the fresh claim", || {
        claim_of("fresh").is_some_and(|c| c.metadata.finalizers.is_some())
    });
    wait_for("L4 on the running claim", || {
        claim_of("running").is_some_and(|c| c.phase().as_str() == "Attached")
    });
    wait_for("L5 on the stopped claim", || {
        claim_of("stopped").is_some_and(|c| c.attached_vmi_name().is_none())
    });
    wait_for("L8 on the deleting claim", || claim_of("old").is_none());
    wait_for("L11 on the retired class", || {
        cluster
            .get(&ObjRef::new(Kind::Class, None, "retired"))
            .is_none()
    });
    // G2-G4 over HTTP: the template claim, its record, the status, the pod pinned and ungated.
    wait_for("G4 on vm-c's pod", || {
        match cluster.get(&ObjRef::new(Kind::Pod, Some("t"), "virt-launcher-vm-c")) {
            Some(Obj::Pod(p)) => {
                !gpu_claims_actors::api::pod::is_gated(&p)
                    && gpu_claims_actors::api::pod::pinned_node(&p).as_deref() == Some("n1")
            }
            _ => false,
        }
    });
    let placed = claim_of("vm-c-gpu").unwrap();
    assert_eq!(
        (placed.node_name(), placed.attached_vmi_name()),
        (Some("n1"), Some("vm-c"))
    );
    assert!(
        cluster
            .get(&ObjRef::new(Kind::Allocation, Some("t"), "vm-c-gpu"))
            .is_some()
    );

    // The VM stops while the controller runs.
    let mut vm = vmi("t", "vm-a").uid("u-a").phase("Succeeded").0;
    vm.metadata.resource_version = None;
    let v = gpu_claims_actors::api::to_json(&Obj::Vmi(vm));
    store
        .update(
            "VirtualMachineInstance",
            v,
            gpu_claims_testbed::memory::store::Subresource::Status,
        )
        .unwrap();
    wait_for("L5 on the running claim", || {
        claim_of("running").is_some_and(|c| c.phase().as_str() == "Bound")
    });

    wait_for("readyz", || {
        http_get(http, "/readyz").is_some_and(|(c, _)| c == 200)
    });
    let (_, metrics) = http_get(http, "/metrics").unwrap();
    assert!(metrics.contains("gpu_claims_writes_total{op=\"update_status\",kind=\"GPUClaim\",rule=\"L5\",result=\"ok\"}"), "{metrics}");
    let (code, trace) = http_get(http, "/debug/claims/t/stopped").unwrap();
    assert_eq!(code, 200);
    assert!(trace.contains("\"rule\":\"L5\""), "{trace}");
    assert_eq!(http_get(http, "/debug/claims/t/nope").unwrap().0, 404);

    // I5: a restart on the converged cluster makes no write.
    wait_for("the controller settled", || settled(http));
    let converged = store.resource_version();
    drop(controller);
    let http2 = free_port();
    let _again = start(dir.path(), http2);
    wait_for("readyz after the restart", || {
        http_get(http2, "/readyz").is_some_and(|(c, _)| c == 200)
    });
    // Every actor of the new process decided, and none wrote.
    wait_for("the restarted controller settled", || settled(http2));
    assert_eq!(
        store.resource_version(),
        converged,
        "no write after a restart"
    );

    let log = std::fs::read_to_string(dir.path().join(format!("controller-{}.log", http.port())))
        .unwrap();
    let write_lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("\"message\":\"writing\""))
        .collect();
    assert!(!write_lines.is_empty());
    for l in write_lines {
        assert!(
            l.contains("\"rule\":"),
            "every write line says its rule: {l}"
        );
        assert!(
            [
                "\"claim\":\"t/",
                "\"class\":",
                "\"record\":\"t/",
                "\"pod\":\"t/"
            ]
            .iter()
            .any(|o| l.contains(o)),
            "every actor line names its object: {l}"
        );
    }
}
