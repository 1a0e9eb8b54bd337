//! Tables of cases for the pure decisions: the least powerful tests, no
//! actors, no cluster.

use gpu_claims_actors::api::pod::pinned_node;
use gpu_claims_actors::api::{CLAIM_FINALIZER, GPUClaim, GpuRequest, Obj};
use gpu_claims_actors::config::Config;
use gpu_claims_actors::rules::*;
use gpu_claims_actors::world::WorldWriter;
use gpu_claims_testbed::fixtures::*;
use std::time::Duration;

/// A world of the claims, VMIs and launcher pods among `objs` (the tables
/// here judge claims; their classes and nodes do not matter).
fn world_of(objs: Vec<Obj>) -> WorldWriter {
    let w = WorldWriter::new(Config::default());
    for o in objs {
        if matches!(o, Obj::Claim(_) | Obj::Vmi(_) | Obj::Pod(_)) {
            w.load(o);
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
        let g = Grace::default().counting("vm", t0);
        let (used, _) = used_by_vmi(&c, &w, &Config::default(), t0 + elapsed, &g);
        assert_eq!(used, want, "{what}");
    }
}

/// L10: the answer after the live read (what a failed read means is the
/// claim actor's `live_vmi`, tested there).
#[test]
fn l10_vmi_holds_table() {
    let c = claim("t", "c")
        .bound("n")
        .attached("vm")
        .owned_by("vm", "u")
        .build();
    let v =
        |uid: &str, phase: &str| LiveVmi::Found(Box::new(vmi("t", "vm").uid(uid).phase(phase).0));
    let cases: Vec<(&str, LiveVmi, Option<bool>)> = vec![
        (
            "not found, or the kind not served",
            LiveVmi::Absent,
            Some(false),
        ),
        ("a read that failed", LiveVmi::Unknown, None),
        ("owner UID differs", v("other", "Running"), Some(false)),
        ("final", v("u", "Succeeded"), Some(false)),
        ("live", v("u", "Running"), Some(true)),
        ("unknown is not final", v("u", "Unknown"), Some(true)),
    ];
    for (what, live, want) in cases {
        assert_eq!(vmi_holds(&c, &live), want, "{what}");
    }
}

#[test]
fn pinned_node_table() {
    use k8s_openapi::api::core::v1::{
        Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    };
    let term = |values: &[&str]| NodeSelectorTerm {
        match_expressions: Some(vec![NodeSelectorRequirement {
            key: gpu_claims_actors::api::HOSTNAME_LABEL.into(),
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

/// The VMI annotations (docs/design.md, "Objects"): spaces and empty entries ignored, a name
/// listed twice counted once; a bad name, class or count is refused with
/// what is wrong (placement says it in a Warning Event on the VMI).
#[test]
fn gpu_request_annotations_table() {
    use gpu_claims_actors::api::{
        CLAIMS_ANNOTATION as CLAIMS, CLASS_ANNOTATION as CLASS, COUNT_ANNOTATION as COUNT,
        RequestError,
    };
    let req = |pairs: &[(&str, &str)]| {
        let mut v = vmi("t", "vm");
        for (k, val) in pairs {
            v = v.annotate(k, val);
        }
        v.0.gpu_request()
    };
    let claims = |names: &[&str]| {
        Ok(GpuRequest {
            claims: names.iter().map(|n| n.to_string()).collect(),
            class: None,
        })
    };
    let class = |c: &str, n: u32| {
        Ok(GpuRequest {
            claims: vec![],
            class: Some((c.into(), n)),
        })
    };
    let bad_name = |n: &str| Err(RequestError::ClaimName { name: n.into() });
    let bad_count = |n: &str| Err(RequestError::Count { count: n.into() });
    type Case<'a> = (
        &'a str,
        Vec<(&'a str, &'a str)>,
        Result<GpuRequest, RequestError>,
    );
    let cases: Vec<Case> = vec![
        ("no annotations", vec![], Ok(GpuRequest::default())),
        (
            "two names, one twice, spaces",
            vec![(CLAIMS, "a, b,a")],
            claims(&["a", "b"]),
        ),
        ("a trailing comma", vec![(CLAIMS, "a,")], claims(&["a"])),
        ("a leading comma", vec![(CLAIMS, ",a")], claims(&["a"])),
        (
            "an empty entry between",
            vec![(CLAIMS, "a,,b")],
            claims(&["a", "b"]),
        ),
        (
            "only commas and spaces",
            vec![(CLAIMS, " , ,")],
            claims(&[]),
        ),
        (
            "a name that is not an object name",
            vec![(CLAIMS, "a,Bad_Name")],
            bad_name("Bad_Name"),
        ),
        (
            "a class, count 1 by default",
            vec![(CLASS, "h200")],
            class("h200", 1),
        ),
        (
            "a class and a count",
            vec![(CLASS, "h200"), (COUNT, "4")],
            class("h200", 4),
        ),
        (
            "a count with spaces",
            vec![(CLASS, "h200"), (COUNT, " 2 ")],
            class("h200", 2),
        ),
        (
            "an empty class",
            vec![(CLASS, " ")],
            Err(RequestError::ClassName { class: "".into() }),
        ),
        (
            "a class that is not a name",
            vec![(CLASS, "H 200")],
            Err(RequestError::ClassName {
                class: "H 200".into(),
            }),
        ),
    ];
    for (case, pairs, want) in cases {
        assert_eq!(req(&pairs), want, "{case}");
    }
    // A count that is not a positive whole number is refused, as it is.
    for count in ["0", "-1", "two", "1.5"] {
        let pairs = [(CLASS, "h200"), (COUNT, count)];
        assert_eq!(req(&pairs), bad_count(count), "count {count:?}");
    }
    assert_eq!(
        RequestError::Count { count: "0".into() }.to_string(),
        "gpu.cozystack.io/count \"0\" is not a positive whole number"
    );
}

#[test]
fn l1_needs_finalizer_table() {
    let c = |b: ClaimBuilder| b.build().metadata;
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

/// E2: what a restart mark on a node stands for, for each branch of
/// `judge_mark`. The mark is for the VMI `u-old` of VM `t/vm`, deleted at
/// `at`; restarts time out after 10 minutes.
#[test]
fn e2_judge_mark_table() {
    use gpu_claims_actors::api::{CLAIMS_ANNOTATION, EVACUATE_TAINT, RestartMark};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;
    let at = Timestamp::from_second(1_800_000_000).unwrap();
    let timeout = Duration::from_secs(600);
    let mark = RestartMark {
        vm: "t/vm".into(),
        at: Time(at),
    };
    let n1 = |evacuating: bool| {
        let n = node("n1").gpus("nvidia.com/GH100_H200", 8);
        if evacuating {
            n.taint(EVACUATE_TAINT, "", "NoSchedule").obj()
        } else {
            n.obj()
        }
    };
    let old_vmi = || {
        vmi("t", "vm")
            .uid("u-old")
            .of_vm("vm")
            .annotate(CLAIMS_ANNOTATION, "c")
            .obj()
    };
    let new_vmi = |phase: &str| {
        vmi("t", "vm")
            .uid("u-new")
            .of_vm("vm")
            .annotate(CLAIMS_ANNOTATION, "c")
            .phase(phase)
            .obj()
    };
    let held = || claim("t", "c").attached_phase("n1").attached("vm").obj();
    let bound = || claim("t", "c").bound("n1").obj();
    let waiting = || claim("t", "c").bound("n1").waiting("NoCapacity").obj();
    let minute = k8s_openapi::jiff::SignedDuration::from_secs(60);
    let soon = at.checked_add(minute).unwrap();
    let late = at.checked_add(minute * 11).unwrap();
    type Case = (
        &'static str,
        Option<RestartMark>,
        Vec<Obj>,
        Timestamp,
        &'static str,
    );
    let cases: Vec<Case> = vec![
        (
            "a value no one can read",
            None,
            vec![n1(true)],
            soon,
            "Unreadable",
        ),
        (
            "its VMI live, still held on the evacuated node: the delete was not made",
            Some(mark.clone()),
            vec![n1(true), old_vmi(), held()],
            soon,
            "NotBegun",
        ),
        (
            "its VMI live, the node no longer evacuated: no restart",
            Some(mark.clone()),
            vec![n1(false), old_vmi(), held()],
            soon,
            "Abandoned",
        ),
        (
            "its VMI live, its claims no longer attached to it: no restart",
            Some(mark.clone()),
            vec![n1(true), old_vmi(), bound()],
            soon,
            "Abandoned",
        ),
        (
            "its VMI gone, within the timeout",
            Some(mark.clone()),
            vec![n1(true), bound()],
            soon,
            "UnderWay",
        ),
        (
            "its VMI deleting, within the timeout",
            Some(mark.clone()),
            vec![n1(true), deleting(old_vmi()), held()],
            soon,
            "UnderWay",
        ),
        (
            "the VM's new VMI runs",
            Some(mark.clone()),
            vec![n1(true), new_vmi("Running"), bound()],
            soon,
            "Ran",
        ),
        (
            "the VM's new VMI runs, past the timeout",
            Some(mark.clone()),
            vec![n1(true), new_vmi("Running"), bound()],
            late,
            "Ran",
        ),
        (
            "past the timeout, the new VMI not yet placed and not waiting",
            Some(mark.clone()),
            vec![n1(true), new_vmi("Scheduling"), bound()],
            late,
            "TimedOut { waits: false }",
        ),
        (
            "past the timeout, the new VMI's set waits at the gate",
            Some(mark.clone()),
            vec![n1(true), new_vmi("Scheduling"), waiting()],
            late,
            "TimedOut { waits: true }",
        ),
    ];
    for (name, m, objs, now, want) in cases {
        let w = WorldWriter::new(Config::default());
        for o in objs {
            w.load(o);
        }
        let got = judge_mark(&w, "n1", "u-old", m.as_ref(), now, timeout);
        let got = match got {
            MarkState::NotBegun(e) => {
                assert_eq!(
                    (e.uid.as_str(), e.vm.as_deref()),
                    ("u-old", Some("t/vm")),
                    "{name}"
                );
                "NotBegun".to_string()
            }
            other => format!("{other:?}"),
        };
        assert_eq!(got, want, "{name}");
    }
}

/// A VMI as it is while being deleted (a finalizer holds it).
fn deleting(o: Obj) -> Obj {
    let Obj::Vmi(mut v) = o else { unreachable!() };
    v.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).unwrap(),
    ));
    v.metadata.finalizers = Some(vec!["kubevirt.io/foregroundDeleteVirtualMachine".into()]);
    Obj::Vmi(v)
}

use gpu_claims_actors::api::{CONDITION_LOST, ClaimPhase};

/// The device plugin resource of the G6 table.
const H200: &str = "nvidia.com/GH100_H200";

/// What G6 decides for one claim: the phase and Lost reason it writes,
/// or nothing.
#[derive(Debug, PartialEq)]
enum Lost {
    Write(RuleId, ClaimPhase, Option<String>),
    Nothing,
}

fn lost_decision(step: Step<ClaimIntent>) -> Lost {
    match step {
        Step::Do(rule, ClaimIntent::WriteStatus(s)) => {
            let reason = s
                .conditions
                .iter()
                .find(|c| c.type_ == CONDITION_LOST && c.status == "True")
                .map(|c| c.reason.clone());
            Lost::Write(rule, s.phase.unwrap_or_default(), reason)
        }
        Step::Idle => Lost::Nothing,
        other => panic!("G6 decides a status or nothing, not {other:?}"),
    }
}

/// G6: each branch of `decide_lost`, with the claim `t/a` of class h200
/// recorded on n1 (2 GPUs) and n1 as each row leaves it.
#[test]
fn g6_decide_lost_table() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    let n1 = || node("n1").gpus(H200, 8);
    let bound = || claim("t", "a").count(2).bound("n1");
    let lost = |reason: &str| Lost::Write(RuleId::G6, ClaimPhase::Lost, Some(reason.into()));
    let rows: Vec<(&str, Option<NodeBuilder>, ClaimBuilder, Lost)> = vec![
        (
            "Bound on a healthy node",
            Some(n1()),
            bound(),
            Lost::Nothing,
        ),
        ("Bound, node deleted", None, bound(), lost("NodeDeleted")),
        (
            "Bound, node not Ready",
            Some(n1().ready(false)),
            bound(),
            lost("NodeNotReady"),
        ),
        (
            "Bound, lost taint on the resource",
            Some(n1().lost_taint(H200)),
            bound(),
            lost("DevicesLost"),
        ),
        (
            "Bound, lost taint on every resource",
            Some(n1().lost_taint("")),
            bound(),
            lost("DevicesLost"),
        ),
        (
            "Bound, another resource's lost taint",
            Some(n1().lost_taint("nvidia.com/OTHER")),
            bound(),
            Lost::Nothing,
        ),
        (
            "Bound, allocatable below the records",
            Some(node("n1").gpus(H200, 1)),
            bound(),
            lost("DevicesLost"),
        ),
        (
            "Attached, node not Ready",
            Some(n1().ready(false)),
            claim("t", "a").count(2).attached_phase("n1").attached("vm"),
            lost("NodeNotReady"),
        ),
        (
            "Lost, unattached, node back",
            Some(n1()),
            claim("t", "a").count(2).lost("n1"),
            Lost::Write(RuleId::G6, ClaimPhase::Bound, None),
        ),
        (
            "Lost, unattached, node still not Ready",
            Some(n1().ready(false)),
            claim("t", "a").count(2).lost("n1"),
            Lost::Nothing,
        ),
        (
            "Lost, attached, node back (L4 brings it back)",
            Some(n1()),
            claim("t", "a").count(2).lost("n1").attached("vm"),
            Lost::Nothing,
        ),
        ("Pending", None, claim("t", "a").count(2), Lost::Nothing),
    ];
    for (case, node, claim, want) in rows {
        let w = WorldWriter::new(Config::default());
        w.load(class("h200", H200).obj());
        if let Some(n) = node {
            w.load(n.obj());
        }
        let objs = claim.with_allocation(H200);
        let c = objs
            .iter()
            .find_map(|o| match o {
                Obj::Claim(c) => Some(c.clone()),
                _ => None,
            })
            .expect("the claim");
        for o in objs {
            w.load(o);
        }
        let got = lost_decision(decide_lost(&c, &w, Time(Default::default())));
        assert_eq!(got, want, "{case}");
    }
}

/// L12: each branch of `unschedulable_vmi`, with the claim `t/a` attached
/// to `t/vm1` (uid `uid-t-vm1`) and recorded on n1, and vm1's launcher
/// pod as each row leaves it.
#[test]
fn l12_unschedulable_vmi_table() {
    let pod = || launcher("t", "virt-launcher-vm1", "vm1", "uid-t-vm1");
    let lost = || claim("t", "a").lost("n1").attached("vm1");
    let delete = Some(ClaimIntent::DeleteVmi {
        name: "vm1".into(),
        uid: "uid-t-vm1".into(),
        resource_version: String::new(),
    });
    let issued_for = |uid: &str| Some((uid.to_string(), String::new()));
    type Row = (
        &'static str,
        ClaimBuilder,
        Option<Obj>,
        Option<PodBuilder>,
        IssuedVmiDelete,
        Option<ClaimIntent>,
    );
    let rows: Vec<Row> = vec![
        (
            "Lost, its pod pinned to its node and out of the gate: the VMI is deleted",
            lost(),
            Some(vmi("t", "vm1").obj()),
            Some(pod().pinned("n1")),
            None,
            delete.clone(),
        ),
        (
            "not Lost: nothing",
            claim("t", "a").attached_phase("n1").attached("vm1"),
            Some(vmi("t", "vm1").obj()),
            Some(pod().pinned("n1")),
            None,
            None,
        ),
        (
            "Lost, its VMI gone: nothing",
            lost(),
            None,
            Some(pod().pinned("n1")),
            None,
            None,
        ),
        (
            "Lost, its VMI final: nothing",
            lost(),
            Some(vmi("t", "vm1").phase("Failed").obj()),
            Some(pod().pinned("n1")),
            None,
            None,
        ),
        (
            "Lost, its VMI being deleted: nothing",
            lost(),
            Some(deleting(vmi("t", "vm1").obj())),
            Some(pod().pinned("n1")),
            None,
            None,
        ),
        (
            "Lost, the delete of this VMI version already issued: nothing",
            lost(),
            Some(vmi("t", "vm1").obj()),
            Some(pod().pinned("n1")),
            issued_for("uid-t-vm1"),
            None,
        ),
        (
            "Lost, a delete issued for an earlier VMI: this one is deleted",
            lost(),
            Some(vmi("t", "vm1").obj()),
            Some(pod().pinned("n1")),
            issued_for("uid-of-an-earlier-vm1"),
            delete.clone(),
        ),
        (
            "Lost, its pod still gated: nothing (placement moves it)",
            lost(),
            Some(vmi("t", "vm1").obj()),
            Some(pod().pinned("n1").gated()),
            None,
            None,
        ),
        (
            "Lost, its pod scheduled: nothing (it runs)",
            lost(),
            Some(vmi("t", "vm1").obj()),
            Some(pod().pinned("n1").scheduled("n1")),
            None,
            None,
        ),
        (
            "Lost, its pod pinned to another node: nothing",
            lost(),
            Some(vmi("t", "vm1").obj()),
            Some(pod().pinned("n2")),
            None,
            None,
        ),
        (
            "Lost, no launcher pod: nothing",
            lost(),
            Some(vmi("t", "vm1").obj()),
            None,
            None,
            None,
        ),
    ];
    for (name, c, v, p, issued, want) in rows {
        let c = c.build();
        let mut objs = vec![Obj::Claim(c.clone())];
        objs.extend(v);
        objs.extend(p.map(PodBuilder::obj));
        let w = world_of(objs);
        assert_eq!(unschedulable_vmi(&c, &w, &issued), want, "{name}");
    }
}
