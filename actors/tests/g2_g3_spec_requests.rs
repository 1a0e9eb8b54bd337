//! G2 and G3 with what the VMI's spec requests (docs/design.md, "Objects"): a VMI that asks
//! for GPUs only in `spec.domain.devices.gpus[]` gets its template claim
//! of the one class serving them; a set that does not match the spec
//! waits with `RequestMismatch` and the VMI is told, with both numbers.
mod common;
use common::*;
use gpu_claims_actors::api::pod::is_gated;
use gpu_claims_actors::api::{CLASS_ANNOTATION, COUNT_ANNOTATION, ClaimPhase};
use gpu_claims_actors::config::Config;
use gpu_claims_actors::ports::{Kind, Obj, ObjRef};

const L40S: &str = "nvidia.com/AD102GL_L40S";

/// VMI vm1 (u1) at the gate whose spec lists `n` GPUs of `device`.
fn spec_vm(device: &str, n: u32) -> Vec<Obj> {
    vec![
        vmi("t", "vm1")
            .uid("u1")
            .phase("Scheduling")
            .gpus(device, n)
            .obj(),
        launcher("t", "virt-launcher-vm1", "vm1", "u1")
            .gated()
            .requests(&[(device, &n.to_string())])
            .obj(),
    ]
}

fn pod_gated(t: &TestCluster) -> bool {
    match t
        .sim
        .cluster
        .get(&ObjRef::new(Kind::Pod, Some("t"), "virt-launcher-vm1"))
    {
        Some(Obj::Pod(p)) => is_gated(&p),
        _ => panic!("the launcher pod"),
    }
}

fn warnings_on_vm1(t: &TestCluster) -> Vec<String> {
    t.sim
        .cluster
        .events()
        .into_iter()
        .filter(|e| e.warning && e.regarding.kind == Kind::Vmi && e.regarding.name == "vm1")
        .map(|e| format!("{}: {}", e.reason, e.message))
        .collect()
}

#[test]
fn g2_a_vmi_asking_only_in_its_spec_gets_the_template_claim_of_the_class_serving_it_and_runs() {
    let mut objs = world(spec_vm(H200, 3));
    objs.push(class("l40s", L40S).obj());
    settled(Config::default(), objs, |t| {
        let c = t.claim("t/vm1-gpu").expect("G2: the template claim");
        assert!(c.is_template());
        assert_eq!((c.spec.class_name.as_str(), c.spec.count), ("h200", 3));
        assert_eq!(c.phase(), ClaimPhase::Attached);
        assert_eq!(c.node_name(), Some("n1"));
        assert!(!pod_gated(t), "G4: pinned and out of the gate");
        assert!(warnings_on_vm1(t).is_empty());
    });
}

#[test]
fn g2_a_spec_request_two_classes_serve_makes_no_claim_and_says_so() {
    let mut objs = world(spec_vm(H200, 1));
    objs.push(class("h200-spot", H200).obj());
    settled(Config::default(), objs, |t| {
        assert!(t.claim("t/vm1-gpu").is_none());
        assert!(pod_gated(t), "its pod stays at the gate");
        let w = warnings_on_vm1(t);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("InvalidGPURequest"), "{w:?}");
        assert!(w[0].contains("h200, h200-spot all serve"), "{w:?}");
    });
}

/// Issue 64, item 5: classes over one resource say so on each, with
/// what it breaks; the condition goes with the second class.
#[test]
fn g2_classes_sharing_a_resource_each_say_so_until_one_goes() {
    let shared = |t: &TestCluster, name: &str| {
        t.class(name).and_then(|c| {
            c.status?
                .conditions
                .into_iter()
                .find(|x| x.type_ == "SharedResource" && x.status == "True")
                .map(|x| x.message)
        })
    };
    let mut objs = world(spec_vm(H200, 1));
    objs.push(class("h200-spot", H200).obj());
    objs.push(class("l40s", L40S).obj());
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        let said = shared(&t, "h200").expect("h200 says it shares its resource");
        assert!(
            said.starts_with("another GPUClass serves nvidia.com/GH100_H200 too")
                && said.contains("InvalidGPURequest"),
            "{said}"
        );
        assert!(shared(&t, "h200-spot").is_some());
        assert_eq!(shared(&t, "l40s"), None, "alone on its resource");
        t.user_delete(Kind::Class, None, "h200-spot");
        t.settle().await;
        assert_eq!(shared(&t, "h200"), None, "alone again");
        // And the VM that asks in its spec alone gets its claim of h200.
        assert!(t.claim("t/vm1-gpu").is_some());
    });
}

/// G2: among three classes of a resource, one deleted tells no sibling
/// (both left still share it, and say so); a second deleted leaves the
/// last alone, which says so no more; one made again makes it share.
#[test]
fn g2_three_classes_sharing_a_resource_say_so_as_they_go_one_by_one_and_come_back() {
    let shared = |t: &TestCluster, name: &str| {
        t.class(name).is_some_and(|c| {
            c.status.is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|x| x.type_ == "SharedResource" && x.status == "True")
            })
        })
    };
    let mut objs = world(spec_vm(H200, 1));
    objs.push(class("h200-spot", H200).obj());
    objs.push(class("h200-b", H200).obj());
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        for name in ["h200", "h200-spot", "h200-b"] {
            assert!(shared(&t, name), "{name} shares its resource with two");
        }
        t.user_delete(Kind::Class, None, "h200-b");
        t.settle().await;
        assert!(
            shared(&t, "h200") && shared(&t, "h200-spot"),
            "two still share"
        );
        t.user_delete(Kind::Class, None, "h200-spot");
        t.settle().await;
        assert!(!shared(&t, "h200"), "h200 alone");
        t.user_create(class("h200-b", H200).obj());
        t.settle().await;
        assert!(shared(&t, "h200") && shared(&t, "h200-b"), "two again");
    });
}

/// Issue 64, item 5: `status` says why such a set waits, though no
/// claim of it exists to say so.
#[test]
fn g2_status_says_a_spec_request_two_classes_serve_is_invalid_not_undecided() {
    let mut objs = world(spec_vm(H200, 1));
    objs.push(class("h200-spot", H200).obj());
    let w = gpu_claims_actors::world::WorldWriter::new(Config::default());
    for o in objs {
        w.load(o);
    }
    let r = gpu_claims_actors::status::report(&w);
    assert_eq!(r.waiting.len(), 1, "{:?}", r.waiting);
    assert_eq!(r.waiting[0].reason, "InvalidGPURequest");
    assert!(
        r.waiting[0].message.contains("h200, h200-spot all serve"),
        "{}",
        r.waiting[0].message
    );
}

#[test]
fn g2_a_spec_request_of_two_gpu_resources_makes_no_claim_and_says_so() {
    let mut objs = world([
        vmi("t", "vm1")
            .uid("u1")
            .phase("Scheduling")
            .gpus(H200, 1)
            .gpus(L40S, 1)
            .obj(),
        launcher("t", "virt-launcher-vm1", "vm1", "u1")
            .gated()
            .obj(),
    ]);
    objs.push(class("l40s", L40S).obj());
    settled(Config::default(), objs, |t| {
        assert!(t.claim("t/vm1-gpu").is_none());
        let w = warnings_on_vm1(t);
        assert!(
            w.iter().any(|m| m.contains("several GPU resources")),
            "{w:?}"
        );
    });
}

#[test]
fn g2_a_spec_request_whose_only_class_is_being_deleted_makes_no_claim_and_says_so() {
    let objs = vec![
        class("h200", H200).deleting().obj(),
        node("n1").gpus(H200, 8).obj(),
    ]
    .into_iter()
    .chain(spec_vm(H200, 1))
    .collect();
    settled(Config::default(), objs, |t| {
        assert!(t.claim("t/vm1-gpu").is_none());
        let w = warnings_on_vm1(t);
        assert!(
            w.iter()
                .any(|m| m.contains("no GPUClass that is not being deleted")),
            "{w:?}"
        );
    });
}

#[test]
fn g2_a_class_made_later_gives_a_vmi_asking_in_its_spec_its_claim() {
    let objs = vec![node("n1").gpus(H200, 8).obj()]
        .into_iter()
        .chain(spec_vm(H200, 2))
        .collect();
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        assert!(t.claim("t/vm1-gpu").is_none(), "no class serves it yet");
        t.user_create(class("h200", H200).obj());
        t.settle().await;
        let c = t.claim("t/vm1-gpu").expect("G2 once a class serves it");
        assert_eq!(c.spec.count, 2);
        assert_eq!(c.phase(), ClaimPhase::Attached);
    });
}

#[test]
fn g2_devices_no_class_serves_ask_for_nothing() {
    let objs = world(spec_vm("mellanox.com/cx7", 1));
    settled(Config::default(), objs, |t| {
        assert!(t.claim("t/vm1-gpu").is_none());
        assert!(warnings_on_vm1(t).is_empty(), "not gpu-claims' business");
    });
}

#[test]
fn g3_a_set_that_does_not_match_the_spec_waits_request_mismatch_and_the_vmi_is_told_once() {
    let objs = world([
        vmi("t", "vm1")
            .uid("u1")
            .phase("Scheduling")
            .annotate(CLASS_ANNOTATION, "h200")
            .annotate(COUNT_ANNOTATION, "2")
            .gpus(H200, 4)
            .obj(),
        launcher("t", "virt-launcher-vm1", "vm1", "u1")
            .gated()
            .obj(),
    ]);
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        let c = t
            .claim("t/vm1-gpu")
            .expect("G2 made the claim the annotation asks for");
        assert_eq!(c.phase(), ClaimPhase::Pending);
        assert_eq!(waiting_reason(&c).as_deref(), Some("RequestMismatch"));
        assert!(pod_gated(&t));
        let w = warnings_on_vm1(&t);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("its spec requests 4 nvidia.com/GH100_H200, its claims hold 2"),
            "{w:?}"
        );
        // Nothing changes: no more writes and no second Event.
        t.writes();
        t.advance(secs(60)).await;
        assert!(t.writes().iter().all(|w| !w.contains("G5")), "no rewrite");
        assert_eq!(warnings_on_vm1(&t).len(), 1);
    });
}

#[test]
fn g3_a_set_matching_the_spec_again_is_placed() {
    let objs = world([
        vmi("t", "vm1")
            .uid("u1")
            .phase("Scheduling")
            .annotate(gpu_claims_actors::api::CLAIMS_ANNOTATION, "a")
            .gpus(H200, 2)
            .obj(),
        launcher("t", "virt-launcher-vm1", "vm1", "u1")
            .gated()
            .obj(),
        claim("t", "a").obj(),
    ]);
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        assert_eq!(
            waiting_reason(&t.claim("t/a").unwrap()).as_deref(),
            Some("RequestMismatch")
        );
        // The tenant names a second claim: 1 + 1 matches the spec's 2.
        t.user_create(claim("t", "b").obj());
        t.user_update(
            vmi("t", "vm1")
                .uid("u1")
                .phase("Scheduling")
                .annotate(gpu_claims_actors::api::CLAIMS_ANNOTATION, "a,b")
                .gpus(H200, 2)
                .obj(),
        );
        t.settle().await;
        for c in ["t/a", "t/b"] {
            assert_eq!(t.phase(c), ClaimPhase::Attached, "{c}");
        }
        assert!(!pod_gated(&t));
    });
}

/// Pod `ml/cuda-job`, outside gpu-claims, on n1 with `gpus` H200.
fn cuda_job(gpus: &str) -> PodBuilder {
    pod("ml", "cuda-job")
        .scheduled("n1")
        .requests(&[(H200, gpus)])
}

/// Class h200, n1 with 2 GPUs, `job` there, and vm1 asking in its spec
/// for 2 at the gate.
fn beside_a_job(job: PodBuilder) -> Vec<Obj> {
    let mut objs = vec![
        class("h200", H200).obj(),
        node("n1").gpus(H200, 2).obj(),
        job.obj(),
    ];
    objs.extend(spec_vm(H200, 2));
    objs
}

#[test]
fn g3_room_a_pod_outside_gpu_claims_frees_lets_a_waiting_set_be_placed() {
    let objs = beside_a_job(cuda_job("2").phase("Running"));
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        let c = t.claim("t/vm1-gpu").unwrap();
        assert_eq!(waiting_reason(&c).as_deref(), Some("NoCapacity"));
        assert!(
            c.conditions()[0]
                .message
                .contains("no node has 2 nvidia.com/GH100_H200 free"),
            "{:?}",
            c.conditions()
        );
        // The job finishes: its GPUs are free.
        t.user_update(cuda_job("2").phase("Succeeded").obj());
        t.settle().await;
        assert_eq!(t.phase("t/vm1-gpu"), ClaimPhase::Attached);
        assert!(!pod_gated(&t));
    });
}

#[test]
fn g3_a_pod_outside_gpu_claims_deleted_frees_its_room_too() {
    let objs = beside_a_job(cuda_job("1"));
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        assert_eq!(t.phase("t/vm1-gpu"), ClaimPhase::Pending);
        t.user_delete(Kind::Pod, Some("ml"), "cuda-job");
        t.settle().await;
        assert_eq!(t.phase("t/vm1-gpu"), ClaimPhase::Attached);
    });
}

#[test]
fn g3_a_memory_heavy_vm_is_placed_where_its_memory_fits() {
    let objs = vec![
        class("h200", H200).obj(),
        node("small").gpus(H200, 2).sized("32", "64Gi", 110).obj(),
        node("big").gpus(H200, 8).sized("128", "2Ti", 110).obj(),
        vmi("t", "vm1")
            .uid("u1")
            .phase("Scheduling")
            .gpus(H200, 2)
            .obj(),
        launcher("t", "virt-launcher-vm1", "vm1", "u1")
            .gated()
            .requests(&[(H200, "2"), ("cpu", "6400m"), ("memory", "513Gi")])
            .obj(),
    ];
    settled(Config::default(), objs, |t| {
        let c = t.claim("t/vm1-gpu").unwrap();
        assert_eq!(c.node_name(), Some("big"), "not the tightest GPU fit");
    });
}
