//! Issue 21: what one tenant does cannot hold up another's placement. A
//! VMI naming more claims than any node holds is bad input, refused at
//! once with a Warning Event; a tenant flooding placement with work gets
//! one decision per round, as every namespace with work does. Counted in
//! decisions and writes, never timed.
mod common;
use common::*;
use gpu_claims_actors::api::{ClaimPhase, MAX_CLAIMS};
use gpu_claims_actors::config::Config;
use gpu_claims_actors::ports::{Kind, Obj};

#[test]
fn a_vmi_naming_twenty_thousand_claims_is_refused_with_a_warning_and_the_rest_goes_on() {
    let names: Vec<String> = (0..20_000).map(|i| format!("claim-{i}")).collect();
    let mut objs = world(naming("hostile", "vm", &names.join(",")));
    objs.push(claim("quiet", "a").obj());
    objs.extend(naming("quiet", "vm", "a"));
    settled(Config::default(), objs, |t| {
        let told: Vec<String> = t
            .sim
            .cluster
            .events()
            .into_iter()
            .filter(|e| {
                e.regarding.kind == Kind::Vmi && e.regarding.namespace.as_deref() == Some("hostile")
            })
            .map(|e| e.message)
            .collect();
        assert_eq!(told.len(), 1, "{told:?}");
        assert!(
            told[0].contains(&format!("more than {MAX_CLAIMS} claims")),
            "{told:?}"
        );
        assert_eq!(t.phase("quiet/a"), ClaimPhase::Attached);
    });
}

/// 300 VMIs of one tenant, each waiting (its claim's class does not
/// exist: a G5 write each), and one of another tenant that fits.
fn flood_and_a_quiet_tenant() -> Vec<Obj> {
    let mut objs = world([]);
    for i in 0..300 {
        let c = format!("c{i}");
        objs.push(claim("flood", &c).class("nonexistent").obj());
        objs.extend(naming("flood", &format!("vm{i:03}"), &c));
    }
    objs.push(claim("quiet", "a").obj());
    objs.extend(naming("quiet", "vm", "a"));
    objs
}

/// Of the writes before the quiet tenant's allocation, how many are the
/// flood's; and the flood's G5 writes in all.
fn flood_writes(t: &TestCluster) -> (usize, usize) {
    let journal = t.all_entries();
    let placed = journal
        .iter()
        .position(|e| e.op == "create" && e.kind == "GPUAllocation" && e.name == "a")
        .expect("the quiet tenant's set is placed");
    let before = journal[..placed]
        .iter()
        .filter(|e| e.namespace.as_deref() == Some("flood"))
        .count();
    let waits = journal
        .iter()
        .filter(|e| e.namespace.as_deref() == Some("flood") && e.rule == "G5")
        .count();
    (before, waits)
}

#[test]
fn a_tenant_flooding_placement_gets_one_decision_per_round_and_another_is_placed_at_once() {
    // One write at a time, so that the writes' order is the decisions'
    // order: at sync every VMI is queued, the flooding tenant's first by
    // name, and the quiet tenant's is the next decision.
    let mut one_write = Config::default();
    one_write.placement.writes_in_flight = 1;
    with_world(one_write, flood_and_a_quiet_tenant(), |mut t| async move {
        t.settle().await;
        let (before, waits) = flood_writes(&t);
        assert!(
            before <= 2,
            "{before} of the flooding tenant's writes came first"
        );
        assert_eq!(waits, 300, "the flood is still decided, all of it");
    });
}

#[test]
fn with_many_writes_in_flight_a_flood_still_lets_another_tenant_be_placed_and_is_decided_in_full() {
    // The first sync's wake-ups fill every write slot as they arrive, before
    // the quiet tenant's wake does; from then on each slot that frees
    // takes the next namespace's turn.
    settled(Config::default(), flood_and_a_quiet_tenant(), |t| {
        let (before, waits) = flood_writes(t);
        assert!(
            before < 300,
            "the quiet tenant is placed before the flood is done ({before} first)"
        );
        assert_eq!(waits, 300, "the flood is still decided, all of it");
    });
}

/// D5: the claims a VMI names by `resourceClaimName` count against the
/// same bound as the annotation's: 300 GPUClaims of a DRA class named in
/// one spec are refused with a Warning, and nothing of them is placed.
#[test]
fn d5_a_vmi_naming_more_dra_claims_than_any_node_holds_is_refused_with_a_warning() {
    let mut objs = vec![
        node("n1")
            .passthrough_gpus("NVIDIA H200", 8, "141Gi", "0x2335")
            .obj(),
        dra_class("h200", "vfio.gpu.nvidia.com").obj(),
    ];
    let names: Vec<String> = (0..300).map(|i| format!("c{i}")).collect();
    objs.extend(names.iter().map(|n| claim("hostile", n).obj()));
    let entries: Vec<serde_json::Value> = names
        .iter()
        .map(|n| serde_json::json!({"name": n, "resourceClaimName": n}))
        .collect();
    let gpus: Vec<serde_json::Value> = names
        .iter()
        .map(|n| serde_json::json!({"name": n, "claimName": n, "requestName": "gpu"}))
        .collect();
    let vmi = serde_json::json!({"metadata": {"name": "vm", "namespace": "hostile", "uid": "u1"},
        "spec": {"domain": {"devices": {"gpus": gpus}}, "resourceClaims": entries},
        "status": {"phase": "Scheduling"}});
    objs.push(gpu_claims_actors::api::from_json(Kind::Vmi, vmi).unwrap());
    settled(Config::default(), objs, |t| {
        let told: Vec<String> = t
            .sim
            .cluster
            .events()
            .into_iter()
            .filter(|e| e.regarding.kind == Kind::Vmi)
            .map(|e| e.message)
            .collect();
        assert_eq!(told.len(), 1, "{told:?}");
        assert!(
            told[0].contains(&format!("more than {MAX_CLAIMS} GPUClaims")),
            "{told:?}"
        );
        assert!(
            t.sim.store.list("GPUAllocation").0.is_empty(),
            "nothing placed"
        );
    });
}
