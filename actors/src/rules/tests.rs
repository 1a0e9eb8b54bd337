//! Tables of cases for the pure decisions: the least powerful tests, no
//! actors, no cluster.

use super::*;
use crate::api::pod::pinned_node;
use crate::api::{GpuRequest, LauncherPod};
use crate::fixtures::*;
use crate::ports::Obj;
use crate::world::{World, key};
use std::sync::Arc;
use std::time::Duration;

fn world_of(objs: Vec<Obj>) -> World {
    let w = World::new(Config::default());
    for o in objs {
        match o {
            Obj::Claim(c) => {
                let k = key(
                    c.metadata.namespace.as_deref().unwrap(),
                    c.metadata.name.as_deref().unwrap(),
                );
                w.put_claim(&k, Some(Arc::new(c)));
            }
            Obj::Vmi(v) => {
                let k = key(
                    v.metadata.namespace.as_deref().unwrap(),
                    v.metadata.name.as_deref().unwrap(),
                );
                w.put_vmi(&k, Some(Arc::new(v)));
            }
            Obj::Pod(p) => {
                let lp = LauncherPod::from_pod(&p).unwrap();
                w.put_pod(&key(&lp.namespace, &lp.name), Some(Arc::new(lp)));
            }
            _ => {}
        }
    }
    w
}

/// L9: the in-cache answer for each branch of the seed's usedByVMI.
#[test]
fn l9_used_by_vmi_table() {
    let t0 = tokio::time::Instant::now();
    let grace = Duration::from_secs(120);
    let live = || vmi("t", "vm").uid("u").obj();
    let cases: Vec<(&str, GPUClaim, Vec<Obj>, Duration, Used)> = vec![
        (
            "no attachment",
            claim("t", "c").bound("n").build(),
            vec![],
            Duration::ZERO,
            Used::No,
        ),
        (
            "fresh attachment, within grace",
            claim("t", "c").bound("n").attached("vm").build(),
            vec![],
            Duration::ZERO,
            Used::Yes,
        ),
        (
            "fresh attachment, grace over",
            claim("t", "c").bound("n").attached("vm").build(),
            vec![],
            grace,
            Used::No,
        ),
        (
            "absent VMI, claim Attached",
            claim("t", "c").attached_phase("n").attached("vm").build(),
            vec![],
            Duration::ZERO,
            Used::No,
        ),
        (
            "absent VMI, claim VMI-owned",
            claim("t", "c")
                .bound("n")
                .attached("vm")
                .owned_by("vm", "u")
                .build(),
            vec![],
            Duration::ZERO,
            Used::No,
        ),
        (
            "final VMI",
            claim("t", "c").bound("n").attached("vm").build(),
            vec![vmi("t", "vm").uid("u").phase("Failed").obj()],
            Duration::ZERO,
            Used::No,
        ),
        (
            "live VMI, no launcher pods",
            claim("t", "c").bound("n").attached("vm").build(),
            vec![live()],
            Duration::ZERO,
            Used::Yes,
        ),
        (
            "live VMI, an ungated pod",
            claim("t", "c").bound("n").attached("vm").build(),
            vec![
                live(),
                launcher("t", "p1", "vm", "u").gated().obj(),
                launcher("t", "p2", "vm", "u").pinned("n").obj(),
            ],
            Duration::ZERO,
            Used::Yes,
        ),
        (
            "live VMI, every pod gated: read live",
            claim("t", "c").bound("n").attached("vm").build(),
            vec![live(), launcher("t", "p1", "vm", "u").gated().obj()],
            Duration::ZERO,
            Used::ReadPods {
                namespace: "t".into(),
                names: vec!["p1".into()],
            },
        ),
        (
            "VMI of another UID than the owner",
            claim("t", "c")
                .bound("n")
                .attached("vm")
                .owned_by("vm", "other")
                .build(),
            vec![live()],
            Duration::ZERO,
            Used::No,
        ),
    ];
    for (what, c, objs, elapsed, want) in cases {
        let w = world_of(objs);
        let mut g = Grace::default();
        g.since("vm", t0);
        assert_eq!(
            used_by_vmi(&c, &w, &Config::default(), t0 + elapsed, &mut g),
            want,
            "{what}"
        );
    }
}

/// L10: the answer after the live read.
#[test]
fn l10_vmi_holds_table() {
    use crate::ports::ReadError;
    let c = claim("t", "c")
        .bound("n")
        .attached("vm")
        .owned_by("vm", "u")
        .build();
    let v = |uid: &str, phase: &str| Ok(Some(vmi("t", "vm").uid(uid).phase(phase).0));
    type Live = Result<Option<crate::api::Vmi>, ReadError>;
    let cases: Vec<(&str, Live, LiveAnswer)> = vec![
        ("not found", Ok(None), Ok(false)),
        ("kind not served", Err(ReadError::NotServed), Ok(false)),
        (
            "another error",
            Err(ReadError::Other("x".into())),
            Err("x".into()),
        ),
        ("owner UID differs", v("other", "Running"), Ok(false)),
        ("final", v("u", "Succeeded"), Ok(false)),
        ("live", v("u", "Running"), Ok(true)),
        ("unknown is not final", v("u", "Unknown"), Ok(true)),
    ];
    for (what, live, want) in cases {
        assert_eq!(vmi_holds(&c, live), want, "{what}");
    }
}

#[test]
fn pinned_node_table() {
    use k8s_openapi::api::core::v1::{
        Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    };
    let term = |values: &[&str]| NodeSelectorTerm {
        match_expressions: Some(vec![NodeSelectorRequirement {
            key: crate::api::HOSTNAME_LABEL.into(),
            operator: "In".into(),
            values: Some(values.iter().map(|s| s.to_string()).collect()),
        }]),
        match_fields: None,
    };
    let with_terms = |terms: Vec<NodeSelectorTerm>| {
        let mut p = launcher("t", "p", "vm", "u").0;
        p.spec.as_mut().unwrap().affinity = Some(Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                    node_selector_terms: terms,
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
        p
    };
    assert_eq!(
        pinned_node(&launcher("t", "p", "vm", "u").pinned("n1").0),
        Some("n1".into()),
        "nodeSelector"
    );
    assert_eq!(
        pinned_node(&launcher("t", "p", "vm", "u").0),
        None,
        "nothing"
    );
    assert_eq!(
        pinned_node(&with_terms(vec![term(&["n1"]), term(&["n1"])])),
        Some("n1".into()),
        "every term pins n1"
    );
    assert_eq!(
        pinned_node(&with_terms(vec![term(&["n1"]), term(&["n2"])])),
        None,
        "terms disagree"
    );
    assert_eq!(
        pinned_node(&with_terms(vec![term(&["n1", "n2"])])),
        None,
        "two values do not pin"
    );
}

#[test]
fn gpu_request_annotations_table() {
    let req = |pairs: &[(&str, &str)]| {
        let mut v = vmi("t", "vm");
        for (k, val) in pairs {
            v = v.annotate(k, val);
        }
        v.0.gpu_request()
    };
    assert_eq!(req(&[]), Ok(GpuRequest::default()));
    assert_eq!(
        req(&[(crate::api::CLAIMS_ANNOTATION, "a, b,a")]),
        Ok(GpuRequest {
            claims: vec!["a".into(), "b".into()],
            class: None
        })
    );
    assert_eq!(
        req(&[(crate::api::CLASS_ANNOTATION, "h200")]),
        Ok(GpuRequest {
            claims: vec![],
            class: Some(("h200".into(), 1))
        })
    );
    assert_eq!(
        req(&[
            (crate::api::CLASS_ANNOTATION, "h200"),
            (crate::api::COUNT_ANNOTATION, "4")
        ]),
        Ok(GpuRequest {
            claims: vec![],
            class: Some(("h200".into(), 4))
        })
    );
    assert!(
        req(&[
            (crate::api::CLASS_ANNOTATION, "h200"),
            (crate::api::COUNT_ANNOTATION, "0")
        ])
        .is_err()
    );
    assert!(
        req(&[
            (crate::api::CLASS_ANNOTATION, "h200"),
            (crate::api::COUNT_ANNOTATION, "two")
        ])
        .is_err()
    );
    assert!(req(&[(crate::api::CLAIMS_ANNOTATION, "a,,b")]).is_err());
    assert!(req(&[(crate::api::CLASS_ANNOTATION, " ")]).is_err());
}

#[test]
fn l1_needs_finalizer_table() {
    let c = |b: ClaimB| b.build().metadata;
    assert!(needs_finalizer(
        &c(claim("t", "a").no_finalizer()),
        CLAIM_FINALIZER
    ));
    assert!(!needs_finalizer(&c(claim("t", "a")), CLAIM_FINALIZER));
    assert!(!needs_finalizer(
        &c(claim("t", "a").no_finalizer().deleting()),
        CLAIM_FINALIZER
    ));
}
