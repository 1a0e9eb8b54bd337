//! L1: every GPUClass and GPUClaim not being deleted carries its finalizer.
mod common;
use common::*;
use gpu_claims_actors::config::Config;

#[test]
fn l1_claim_without_finalizer_gets_it() {
    settled(
        Config::default(),
        world([claim("t", "a").no_finalizer().obj()]),
        |t| {
            assert_eq!(
                t.writes(),
                [
                    "add_finalizer GPUClaim a L1",
                    "update_status GPUClass h200 class-status"
                ]
            );
            assert!(
                t.claim("t/a")
                    .unwrap()
                    .metadata
                    .finalizers
                    .unwrap()
                    .contains(&"gpu.cozystack.io/claim-protection".into())
            );
        },
    );
}

#[test]
fn l1_class_without_finalizer_gets_it() {
    let objs = vec![
        class("h200", H200).no_finalizer().obj(),
        node("n1").gpus(H200, 8).obj(),
    ];
    assert_eq!(
        settled_writes(objs),
        [
            "add_finalizer GPUClass h200 L1",
            "update_status GPUClass h200 class-status"
        ]
    );
}

#[test]
fn l1_deleting_claim_gets_no_finalizer() {
    settled(
        Config::default(),
        world([claim("t", "a").no_finalizer().deleting().obj()]),
        |t| {
            assert!(!t.writes().iter().any(|w| w.contains("GPUClaim")));
        },
    );
}

#[test]
fn l1_deleting_class_gets_no_finalizer() {
    let objs = vec![class("h200", H200).no_finalizer().deleting().obj()];
    assert_eq!(settled_writes(objs), Vec::<String>::new());
}

#[test]
fn l1_finalizer_is_added_with_integration_off() {
    settled(off(), world([claim("t", "a").no_finalizer().obj()]), |t| {
        assert!(
            t.writes()
                .contains(&"add_finalizer GPUClaim a L1".to_string())
        );
    });
}
