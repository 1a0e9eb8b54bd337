//! Random small worlds: the controller never panics, settling ends, and
//! I1-I5 hold after every step (I3 above all: no claim is released while
//! a live VMI's pod may hold its GPUs).
mod common;
use common::*;
use gpu_claims_actors::config::Config;
use gpu_claims_actors::ports::{Kind, Obj};
use gpu_claims_testbed::memory::invariants::Checker;
use gpu_claims_testbed::memory::sim::{Sim, run_sim};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct ClaimSpec {
    phase: u8,
    vmi: Option<u8>,
    template: bool,
    owned: bool,
    deleting: bool,
    finalizer: bool,
}

#[derive(Debug, Clone)]
struct VmiSpec {
    phase: u8,
    other_uid: bool,
    pod: u8,
}

fn claim_spec() -> impl Strategy<Value = ClaimSpec> {
    (
        0u8..4,
        proptest::option::of(0u8..3),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(phase, vmi, template, owned, deleting, finalizer)| ClaimSpec {
                phase,
                vmi,
                template,
                owned,
                deleting,
                finalizer,
            },
        )
}

fn vmi_spec() -> impl Strategy<Value = Option<VmiSpec>> {
    proptest::option::of(
        (0u8..5, any::<bool>(), 0u8..5).prop_map(|(phase, other_uid, pod)| VmiSpec {
            phase,
            other_uid,
            pod,
        }),
    )
}

fn build(
    claims: &[ClaimSpec],
    vmis: &[Option<VmiSpec>],
    node_ready: bool,
    class_deleting: bool,
) -> Vec<Obj> {
    let mut c = class("h200", H200);
    if class_deleting {
        c = c.deleting();
    }
    let mut objs = vec![c.obj(), node("n1").gpus(H200, 8).ready(node_ready).obj()];
    for (i, s) in claims.iter().enumerate() {
        let vmi_name = s.vmi.map(|v| format!("vm{v}"));
        let mut b = claim("t", &format!("c{i}"));
        b = match s.phase {
            0 => b,
            1 => b.bound("n1"),
            2 => b.attached_phase("n1"),
            _ => b.lost("n1"),
        };
        if let Some(v) = &vmi_name {
            b = b.attached(v);
            if s.template {
                b = b.template_of(v, &format!("u-{v}"));
            } else if s.owned {
                b = b.owned_by(v, &format!("u-{v}"));
            }
        } else if s.template {
            b = b.template_of("vm0", "u-vm0");
        }
        if !s.finalizer {
            b = b.no_finalizer();
        }
        if s.deleting && s.finalizer {
            b = b.deleting();
        }
        objs.extend(b.with_allocation(H200));
    }
    for (i, v) in vmis.iter().enumerate() {
        let Some(v) = v else { continue };
        let name = format!("vm{i}");
        let uid = if v.other_uid {
            format!("u-other-{i}")
        } else {
            format!("u-{name}")
        };
        let phase = ["Pending", "Scheduling", "Running", "Succeeded", "Failed"][v.phase as usize];
        objs.push(vmi("t", &name).uid(&uid).phase(phase).obj());
        let p = launcher("t", &format!("virt-launcher-{name}"), &name, &uid);
        match v.pod {
            0 => {}
            1 => objs.push(p.gated().obj()),
            2 => objs.push(p.pinned("n1").obj()),
            3 => objs.push(p.pinned("n1").scheduled("n1").obj()),
            _ => objs.push(p.pinned("n2").obj()),
        }
    }
    objs
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn random_worlds_settle_and_keep_the_invariants(
        claims in proptest::collection::vec(claim_spec(), 0..6),
        vmis in proptest::collection::vec(vmi_spec(), 3),
        node_ready in any::<bool>(),
        class_deleting in any::<bool>(),
        stop_vm in 0usize..3,
        enabled in any::<bool>(),
    ) {
        let objs = build(&claims, &vmis, node_ready, class_deleting);
        let mut config = Config::default();
        config.kubevirt.enabled = enabled;
        let violations = run_sim(|| async move {
            let mut sim = Sim::start(config, &objs, None);
            let mut checker = Checker::default();
            let mut v = Vec::new();
            sim.settle().await;
            v.extend(checker.check(&sim.cluster));
            // A VM stops, its pods go, and time passes beyond every grace.
            let name = format!("vm{stop_vm}");
            let _ = sim.store.delete(Kind::Pod.name(), "t", &format!("virt-launcher-{name}"));
            let _ = sim.store.delete(Kind::Vmi.name(), "t", &name);
            sim.settle().await;
            v.extend(checker.check(&sim.cluster));
            sim.advance(secs(150)).await;
            v.extend(checker.check(&sim.cluster));
            // A restart on the settled world writes nothing (I5).
            let writes = sim.writes_on_restart().await;
            v.extend(checker.check(&sim.cluster));
            if writes != 0 {
                v.push(format!("I5: {writes} writes after a restart on a settled world"));
            }
            v
        });
        prop_assert!(violations.is_empty(), "{:#?}", violations);
    }
}
