//! A class's status (its capacity, what its claims hold) is written once
//! for a burst of changes, not once for the first of them and again for
//! the rest: a rack of nodes failing at once costs each class one write.
//! I5: no write beyond what the world's changes need.
mod common;
use common::*;
use gpu_claims_actors::config::Config;
use gpu_claims_actors::ports::Obj;

fn rack() -> Vec<Obj> {
    let mut objs = vec![class("h200", H200).obj(), class("other", H200).obj()];
    for i in 1..=6 {
        objs.push(node(&format!("n{i}")).gpus(H200, 4).obj());
    }
    objs
}

#[test]
fn i5_a_rack_failing_at_once_costs_each_class_one_status_write() {
    with_world(Config::default(), world(rack()), |mut t| async move {
        t.settle().await;
        t.writes();
        for i in 1..=6 {
            t.user_update(node(&format!("n{i}")).gpus(H200, 4).ready(false).obj());
        }
        t.settle().await;
        let mut writes = t.writes();
        writes.sort();
        assert_eq!(
            writes,
            [
                "update_status GPUClass h200 class-status",
                "update_status GPUClass other class-status",
            ]
        );
    });
}
