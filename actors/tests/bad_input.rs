//! Bad values from the cluster are refused with the reason, never read as
//! some other value: a node's allocatable GPUs that are not a whole number
//! of devices count as none.
mod common;
use common::*;
use gpu_claims_actors::api::{CONDITION_WAITING, ClaimPhase};
use gpu_claims_actors::config::Config;
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
