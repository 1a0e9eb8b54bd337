//! Bad values from the cluster are refused with the reason, never read as
//! some other value: a node's allocatable GPUs that are not a whole number
//! of devices count as none.
mod common;
use common::*;
use gpu_claims_actors::api::{CONDITION_WAITING, ClaimPhase};
use gpu_claims_actors::config::Config;
use gpu_claims_actors::ports::Kind;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

#[test]
fn g3_a_node_whose_allocatable_is_not_a_whole_number_of_devices_serves_none() {
    for bad in ["abc", "-8", "8.5", "18446744073709552k"] {
        let mut n = node("n1");
        n.0.status
            .get_or_insert_default()
            .allocatable
            .get_or_insert_default()
            .insert(H200.into(), Quantity(bad.into()));
        let mut objs = vec![class("h200", H200).obj(), n.obj(), claim("t", "a").obj()];
        objs.extend(vm1_naming("a"));
        settled(Config::default(), objs, |t| {
            let c = t.claim("t/a").unwrap();
            assert_eq!(c.phase(), ClaimPhase::Pending, "{bad}: not placed");
            let waiting = c
                .conditions()
                .iter()
                .find(|x| x.type_ == CONDITION_WAITING)
                .map(|x| x.reason.clone());
            assert_eq!(waiting.as_deref(), Some("NoCapacity"), "{bad}");
        });
    }
}

/// The ClassMissing Events on a claim whose class does not exist, as
/// `class: message`.
fn class_missing_events(t: &TestCluster) -> Vec<String> {
    t.sim
        .cluster
        .events()
        .into_iter()
        .filter(|e| e.reason == "ClassMissing")
        .map(|e| format!("{}: {}", e.regarding.name, e.message))
        .collect()
}

/// G5 before any VM uses it: a new claim of a class that does not exist
/// is told so, with the classes there are; a claim whose class was
/// missing since long before the process first decided on it is not told
/// again (the process before told it); a class deleted under a claim while
/// the process watches is told.
#[test]
fn g5_a_claim_of_a_missing_class_is_told_when_new_or_when_its_class_goes_never_again_on_a_restart()
{
    let mut old = claim("t", "old").class("h20");
    old.0.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        "2020-01-01T00:00:00Z".parse().unwrap(),
    ));
    let objs = world([
        claim("t", "new").class("h20").obj(),
        old.obj(),
        claim("t", "spot").class("h200-spot").obj(),
        class("h200-spot", "nvidia.com/GH100_H200").obj(),
    ]);
    with_world(Config::default(), objs, |mut t| async move {
        t.settle().await;
        assert_eq!(
            class_missing_events(&t),
            ["new: G5: GPUClass h20 does not exist; the classes are h200, h200-spot"]
        );
        t.user_delete(Kind::Class, None, "h200-spot");
        t.settle().await;
        let told = class_missing_events(&t);
        assert_eq!(told.len(), 2, "{told:?}");
        assert_eq!(
            told[1],
            "spot: G5: GPUClass h200-spot does not exist; the classes are h200"
        );
    });
}
