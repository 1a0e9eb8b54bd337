//! Tables for the decisions of the object actors, each a pure function
//! (the object, the world, the time and what the actor remembers in; the
//! step and what to remember out): every branch a row, the write
//! asserted as a value.

use gpu_claims_actors::api::{
    CONDITION_ALLOCATION_MISSING, CONDITION_CLASS_MISSING, CONDITION_LOST, ClaimPhase, GPUClaim,
    GPUClass, Obj, RequestError, condition_is_true, set_condition,
};
use gpu_claims_actors::config::Config;
use gpu_claims_actors::rules::*;
use gpu_claims_actors::world::WorldWriter;
use gpu_claims_testbed::fixtures::*;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use std::time::Duration;
use tokio::time::Instant;

fn world_of(objs: Vec<Obj>) -> WorldWriter {
    let w = WorldWriter::new(Config::default());
    for o in objs {
        w.load(o);
    }
    w
}

fn wall() -> Time {
    Time(gpu_claims_actors::ports::sim_epoch())
}

/// A claim's step as a value: what it writes, not how the status is spelt.
#[derive(Debug, PartialEq)]
enum Did {
    Idle,
    /// Decide again this long after `now`.
    WaitFor(RuleId, Duration),
    Delete(RuleId),
    /// The status written: its phase, the VMI it is attached to, and the
    /// conditions that are True.
    Status(RuleId, Option<ClaimPhase>, Option<String>, Vec<String>),
    AddFinalizer(RuleId),
    Release(RuleId),
    /// L9: read these launcher pods live, then release unless one runs.
    ReadPods(RuleId, Vec<String>),
    /// L10: read this VMI live, then release unless it holds the claim.
    ReadVmi(RuleId, String),
    DeleteVmi(RuleId, String),
    /// D4: our finalizer off the claim's backing claim.
    LetGoBackingClaim(RuleId),
}

fn did(step: Step<ClaimIntent>, now: Instant) -> Did {
    match step {
        Step::Idle => Did::Idle,
        Step::WaitUntil(rule, at) => Did::WaitFor(rule, at - now),
        Step::Do(rule, ClaimIntent::Delete) => Did::Delete(rule),
        Step::Do(rule, ClaimIntent::WriteStatus(s)) => Did::Status(
            rule,
            s.phase,
            s.attached_to.map(|a| a.vmi),
            s.conditions
                .iter()
                .filter(|c| c.status == "True")
                .map(|c| c.type_.clone())
                .collect(),
        ),
        Step::Do(rule, ClaimIntent::AddFinalizer) => Did::AddFinalizer(rule),
        Step::Do(rule, ClaimIntent::Release) => Did::Release(rule),
        Step::Do(rule, ClaimIntent::ReleaseUnlessPodsLeft { names }) => Did::ReadPods(rule, names),
        Step::Do(rule, ClaimIntent::ReleaseUnlessVmiHolds { name }) => Did::ReadVmi(rule, name),
        Step::Do(rule, ClaimIntent::DeleteVmi { name, .. }) => Did::DeleteVmi(rule, name),
        Step::Do(rule, ClaimIntent::LetGoBackingClaim) => Did::LetGoBackingClaim(rule),
    }
}

fn status(rule: RuleId, phase: ClaimPhase, vmi: Option<&str>, conditions: &[&str]) -> Did {
    Did::Status(
        rule,
        Some(phase),
        vmi.map(str::to_string),
        conditions.iter().map(|c| c.to_string()).collect(),
    )
}

fn running(name: &str) -> Obj {
    vmi("t", name).phase("Running").obj()
}

/// What it is, the claim, the world, the grace before, the step, the grace after.
type AttachmentRow = (&'static str, GPUClaim, Vec<Obj>, Grace, Did, Grace);

/// L2-L7: every branch of `decide_attachment`, with L6's grace in and out.
#[test]
fn l2_l7_decide_attachment_table() {
    let now = Instant::now();
    let grace = Config::default().attachment_grace;
    let node = || node("n").gpus("r", 8).obj();
    let counting = |vmi: &str, ago: Duration| Grace::default().counting(vmi, now - ago);
    let none = Grace::default;
    let template = || claim("t", "vm-gpu").template_of("vm", "uid-t-vm");
    #[rustfmt::skip]
    let cases: Vec<AttachmentRow> = vec![
        ("L2: a claim not attached is left alone",
            claim("t", "c").bound("n").build(), vec![], none(), Did::Idle, none()),
        ("L3: a template claim whose VMI is gone is deleted",
            template().bound("n").build(), vec![], none(), Did::Delete(RuleId::L3), none()),
        ("L3: a template claim whose VMI lives stays",
            template().bound("n").build(), vec![running("vm")], none(), Did::Idle, none()),
        ("L3: a template claim being deleted is not deleted again",
            template().bound("n").deleting().build(), vec![], none(), Did::Idle, none()),
        ("L4: a Bound claim whose VMI runs becomes Attached",
            claim("t", "c").bound("n").attached("vm").build(), vec![running("vm")], none(),
            status(RuleId::L4, ClaimPhase::Attached, Some("vm"), &[]), none()),
        ("L4: an Attached claim whose VMI runs is left alone",
            claim("t", "c").attached_phase("n").attached("vm").build(), vec![running("vm")], none(),
            Did::Idle, none()),
        ("L4: a Lost claim whose node is not back stays Lost",
            claim("t", "c").lost("n").attached("vm").build(), vec![running("vm")], none(),
            Did::Idle, none()),
        ("L4: a Lost claim whose node is back is Attached, its Lost condition gone",
            claim("t", "c").lost("n").attached("vm").build(),
            vec![running("vm"), node(), class("h200", "r").obj()], none(),
            status(RuleId::L4, ClaimPhase::Attached, Some("vm"), &[]), none()),
        ("L4: a VMI that shows up within the grace ends it",
            claim("t", "c").bound("n").attached("vm").build(), vec![running("vm")],
            counting("vm", grace / 2),
            status(RuleId::L4, ClaimPhase::Attached, Some("vm"), &[]), none()),
        ("L5: a claim whose VMI is final is detached to Bound",
            claim("t", "c").attached_phase("n").attached("vm").build(),
            vec![vmi("t", "vm").phase("Succeeded").obj()], none(),
            status(RuleId::L5, ClaimPhase::Bound, None, &[]), none()),
        ("L5: an Attached claim whose VMI is absent is detached",
            claim("t", "c").attached_phase("n").attached("vm").build(), vec![], none(),
            status(RuleId::L5, ClaimPhase::Bound, None, &[]), none()),
        ("L5: a claim its VMI owns, that VMI absent, is detached without a grace",
            claim("t", "c").bound("n").attached("vm").owned_by("vm", "u").build(), vec![], none(),
            status(RuleId::L5, ClaimPhase::Bound, None, &[]), none()),
        ("L5/L7: a template claim whose VMI is final is deleted, not detached",
            template().attached_phase("n").attached("vm").build(),
            vec![vmi("t", "vm").phase("Failed").obj()], none(), Did::Delete(RuleId::L5), none()),
        ("L7: a Lost claim detached keeps Lost",
            claim("t", "c").lost("n").attached("vm").build(),
            vec![vmi("t", "vm").phase("Failed").obj()], none(),
            status(RuleId::L5, ClaimPhase::Lost, None, &[CONDITION_LOST]), none()),
        ("L6: a VMI never seen starts the grace and waits it out",
            claim("t", "c").bound("n").attached("vm").build(), vec![], none(),
            Did::WaitFor(RuleId::L6, grace), counting("vm", Duration::ZERO)),
        ("L6: a grace half gone waits the rest, remembered as it was",
            claim("t", "c").bound("n").attached("vm").build(), vec![], counting("vm", grace / 2),
            Did::WaitFor(RuleId::L6, grace - grace / 2), counting("vm", grace / 2)),
        ("L6: a grace that is over detaches",
            claim("t", "c").bound("n").attached("vm").build(), vec![], counting("vm", grace),
            status(RuleId::L6, ClaimPhase::Bound, None, &[]), counting("vm", grace)),
        ("L6: a grace counted for another VMI starts afresh",
            claim("t", "c").bound("n").attached("vm").build(), vec![], counting("old", grace * 2),
            Did::WaitFor(RuleId::L6, grace), counting("vm", Duration::ZERO)),
    ];
    for (what, c, objs, before, want, remembered) in cases {
        let w = world_of(objs);
        let (step, after) = decide_attachment(&c, &w, &Config::default(), now, &before);
        assert_eq!(did(step, now), want, "{what}");
        assert_eq!(after, remembered, "{what}: the grace remembered");
    }
}

/// What it is, the claim and its world, since when missing before, the step, after.
type ReportRow = (
    &'static str,
    (GPUClaim, Vec<Obj>),
    Option<Instant>,
    Did,
    Option<Instant>,
);

/// Allocations: every branch of `decide_allocation_report`, with since
/// when the allocation is missing in and out.
#[test]
fn allocations_decide_allocation_report_table() {
    let now = Instant::now();
    let marked = |c: GPUClaim| {
        let mut c = c;
        let s = c.status.get_or_insert_default();
        set_condition(
            &mut s.conditions,
            condition(CONDITION_ALLOCATION_MISSING, "NoAllocation"),
        );
        c
    };
    let bound = || claim("t", "c").bound("n");
    let with_allocation = |c: GPUClaim| {
        let a = Obj::Allocation(allocation_of(&c, "r"));
        (c, vec![a])
    };
    let half = ALLOCATION_GRACE / 2;
    let ago = |d: Duration| Some(now - d);
    let missing = CONDITION_ALLOCATION_MISSING;
    #[rustfmt::skip]
    let cases: Vec<ReportRow> = vec![
        ("a claim with its allocation is left alone",
            with_allocation(bound().build()), None, Did::Idle, None),
        ("a claim with its allocation again loses the mark",
            with_allocation(marked(bound().build())), ago(half),
            status(RuleId::Allocations, ClaimPhase::Bound, None, &[]), None),
        ("a missing allocation, first seen, is waited for",
            (bound().build(), vec![]), None,
            Did::WaitFor(RuleId::Allocations, ALLOCATION_GRACE), Some(now)),
        ("a missing allocation waited for half the time waits the rest",
            (bound().build(), vec![]), ago(half),
            Did::WaitFor(RuleId::Allocations, ALLOCATION_GRACE - half), ago(half)),
        ("a missing allocation past the wait marks the claim",
            (bound().build(), vec![]), ago(ALLOCATION_GRACE),
            status(RuleId::Allocations, ClaimPhase::Bound, None, &[missing]), ago(ALLOCATION_GRACE)),
        ("a claim marked already is not written again",
            (marked(bound().build()), vec![]), ago(ALLOCATION_GRACE * 2),
            Did::Idle, ago(ALLOCATION_GRACE * 2)),
        ("an allocation of another claim of that name does not count",
            (bound().build(), vec![Obj::Allocation(allocation_of(&claim("t", "c").bound("n").build(), "r"))
                .with_claim_uid("someone-else")]), None,
            Did::WaitFor(RuleId::Allocations, ALLOCATION_GRACE), Some(now)),
        ("a Pending claim owes no allocation",
            (claim("t", "c").build(), vec![]), None, Did::Idle, None),
        ("a claim being deleted is not reported",
            (bound().deleting().build(), vec![]), None, Did::Idle, None),
    ];
    for (what, (c, objs), before, want, remembered) in cases {
        let w = world_of(objs);
        let (step, after) = decide_allocation_report(&c, &w, now, wall(), before);
        assert_eq!(did(step, now), want, "{what}");
        assert_eq!(after, remembered, "{what}: since when missing");
    }
}

/// Sets the claim uid an allocation says it is of.
trait WithClaimUid {
    fn with_claim_uid(self, uid: &str) -> Obj;
}

impl WithClaimUid for Obj {
    fn with_claim_uid(self, uid: &str) -> Obj {
        match self {
            Obj::Allocation(mut a) => {
                a.spec.claim_uid = uid.into();
                Obj::Allocation(a)
            }
            other => other,
        }
    }
}

/// A class's step as a value.
#[derive(Debug, PartialEq)]
enum ClassDid {
    Idle,
    AddFinalizer(RuleId),
    RemoveFinalizer(RuleId),
    /// Capacity and allocated written.
    Status(RuleId, Option<u64>, Option<u64>),
}

fn class_did(step: Step<ClassIntent>) -> ClassDid {
    match step {
        Step::Idle | Step::WaitUntil(..) => ClassDid::Idle,
        Step::Do(rule, ClassIntent::AddFinalizer) => ClassDid::AddFinalizer(rule),
        Step::Do(rule, ClassIntent::RemoveFinalizer) => ClassDid::RemoveFinalizer(rule),
        Step::Do(rule, ClassIntent::WriteStatus(s)) => {
            ClassDid::Status(rule, s.capacity, s.allocated)
        }
    }
}

/// What it is, the class, the world, its capacity, claims released unseen, the step.
type ClassRow = (&'static str, GPUClass, Vec<Obj>, u64, u64, ClassDid);

/// L1, L11 and the class status: every branch of `decide_class`.
#[test]
fn l1_l11_decide_class_table() {
    let holder = || claim("t", "c").bound("n").with_allocation("r");
    let shown = |capacity, allocated| class("h200", "r").status(capacity, allocated).0;
    #[rustfmt::skip]
    let cases: Vec<ClassRow> = vec![
        ("L1: a class without the finalizer gets it",
            class("h200", "r").no_finalizer().0, vec![], 8, 0,
            ClassDid::AddFinalizer(RuleId::L1)),
        ("L1: a class being deleted is not given the finalizer",
            class("h200", "r").no_finalizer().deleting().0, vec![], 8, 0, ClassDid::Idle),
        ("L11: a deleting class no claim holds is released",
            class("h200", "r").deleting().0, vec![], 8, 0,
            ClassDid::RemoveFinalizer(RuleId::L11)),
        ("L11: a deleting class a claim holds stays",
            class("h200", "r").deleting().0, holder(), 8, 0, ClassDid::Idle),
        ("L11: its last holder released this round, unseen by the cache: released",
            class("h200", "r").deleting().0, holder(), 8, 1,
            ClassDid::RemoveFinalizer(RuleId::L11)),
        ("L11: its finalizer gone already: nothing",
            class("h200", "r").deleting().finalizer("other").no_finalizer_of_ours(), vec![], 8, 0,
            ClassDid::Idle),
        ("status: capacity and allocated are written when they differ",
            shown(4, 0), holder(), 8, 0, ClassDid::Status(RuleId::ClassStatus, Some(8), Some(1))),
        ("status: as shown already: nothing",
            shown(8, 1), holder(), 8, 0, ClassDid::Idle),
    ];
    for (what, c, objs, capacity, released, want) in cases {
        let w = world_of(objs);
        let step = decide_class(&c, &w, capacity, released, wall());
        assert_eq!(class_did(step), want, "{what}");
    }
}

/// A class with another controller's finalizer and not ours.
trait NotOurs {
    fn no_finalizer_of_ours(self) -> GPUClass;
}

impl NotOurs for ClassBuilder {
    fn no_finalizer_of_ours(self) -> GPUClass {
        let mut c = self.0;
        if let Some(f) = c.metadata.finalizers.as_mut() {
            f.retain(|f| f == "other");
        }
        c
    }
}

/// What it is, the quota, the world, and what the status says: used of
/// h200, used in all, whether a class is missing.
type QuotaRow = (&'static str, Obj, Vec<Obj>, (u64, u64, bool));

/// Q2: every branch of `decide_quota`; the status written, then fed back
/// in, is not written again.
#[test]
fn q2_decide_quota_table() {
    let holder = || claim("t", "c").count(2).bound("n").with_allocation("r");
    let h200 = || class("h200", "r").obj();
    #[rustfmt::skip]
    let cases: Vec<QuotaRow> = vec![
        ("what the namespace's claims hold is written",
            quota("t", "q").hard("h200", 4).obj(), [holder(), vec![h200()]].concat(),
            (2, 2, false)),
        ("a quota of a namespace without claims shows none used",
            quota("t", "q").hard("h200", 4).obj(), vec![h200()], (0, 0, false)),
        ("claims of another namespace do not count",
            quota("u", "q").hard("h200", 4).obj(), [holder(), vec![h200()]].concat(),
            (0, 0, false)),
        ("a quota naming a class that does not exist says so",
            quota("t", "q").hard("h200", 4).obj(), holder(), (2, 2, true)),
    ];
    for (what, q, objs, want) in cases {
        let Obj::Quota(q) = q else { unreachable!() };
        let w = world_of(objs);
        let step = decide_quota(&q, &w, wall());
        let Step::Do(rule, status) = step else {
            panic!("{what}: {step:?}, not a write");
        };
        assert_eq!(rule, RuleId::Q2, "{what}");
        let (used, total, class_missing) = want;
        assert_eq!(status.used.get("h200"), Some(&used), "{what}");
        assert_eq!(status.used_total, Some(total), "{what}");
        assert_eq!(
            condition_is_true(&status.conditions, CONDITION_CLASS_MISSING),
            class_missing,
            "{what}"
        );
        let mut shown = q.clone();
        shown.status = Some(status);
        assert_eq!(
            decide_quota(&shown, &w, wall()),
            Step::Idle,
            "{what}: written once"
        );
    }
}

/// G2: every branch of `decide_template`.
#[test]
fn g2_decide_template_table() {
    use gpu_claims_actors::api::{CLASS_ANNOTATION, COUNT_ANNOTATION};
    let asking = || vmi("t", "vm").uid("u1").annotate(CLASS_ANNOTATION, "h200");
    let h200 = || class("h200", "r").obj();
    let old_claim = || claim("t", "vm-gpu").template_of("vm", "u0").obj();
    let ours = || claim("t", "vm-gpu").template_of("vm", "u1").obj();
    #[derive(Debug, PartialEq)]
    enum Want {
        Create { class: &'static str, count: u32 },
        WaitForOld,
        Nothing,
        BadRequest,
    }
    #[rustfmt::skip]
    let cases: Vec<(&str, Obj, Vec<Obj>, Want)> = vec![
        ("a VMI that asks for a class gets its template claim",
            asking().obj(), vec![h200()], Want::Create { class: "h200", count: 1 }),
        ("with the count it asks for",
            asking().annotate(COUNT_ANNOTATION, "4").obj(), vec![h200()],
            Want::Create { class: "h200", count: 4 }),
        ("a VMI that asks for no class gets none",
            vmi("t", "vm").uid("u1").obj(), vec![h200()], Want::Nothing),
        ("a final VMI gets none",
            asking().phase("Succeeded").obj(), vec![h200()], Want::Nothing),
        ("a VMI being deleted gets none",
            asking().deleting().obj(), vec![h200()], Want::Nothing),
        ("its claim is there already: nothing",
            asking().obj(), vec![h200(), ours()], Want::Nothing),
        ("an earlier VMI's claim of that name is waited out (L3 deletes it)",
            asking().obj(), vec![h200(), old_claim()], Want::WaitForOld),
        ("a count that is not a number is bad input",
            asking().annotate(COUNT_ANNOTATION, "many").obj(), vec![h200()], Want::BadRequest),
    ];
    for (what, v, objs, want) in cases {
        let Obj::Vmi(v) = v else { unreachable!() };
        let w = world_of(objs);
        let got = match decide_template(&v, &w) {
            TemplateStep::Create(c) => {
                let owner = gpu_claims_actors::api::vmi_owner(&c.metadata);
                assert_eq!(owner, Some(("vm", "u1")), "{what}: owned by its VMI");
                assert_eq!(c.metadata.name.as_deref(), Some("vm-gpu"), "{what}");
                assert!(c.is_template(), "{what}: labelled a template claim");
                let class: &'static str = if c.spec.class_name == "h200" {
                    "h200"
                } else {
                    "?"
                };
                Want::Create {
                    class,
                    count: c.spec.count,
                }
            }
            TemplateStep::WaitForOld => Want::WaitForOld,
            TemplateStep::Nothing => Want::Nothing,
            TemplateStep::BadRequest(e) => {
                let _: RequestError = e;
                Want::BadRequest
            }
        };
        assert_eq!(got, want, "{what}");
    }
}

/// The order `decide_claim` asks the rules in (L1, G6, L2-L7, L12, then
/// L8-L10, then the allocation report) and what it remembers after.
#[test]
fn decide_claim_order_and_memory_table() {
    let now = Instant::now();
    let on = Config::default();
    let mut off = Config::default();
    off.kubevirt.enabled = false;
    let grace = on.attachment_grace;
    let ready = || node("n").gpus("r", 8).obj();
    let h200 = || class("h200", "r").obj();
    let attached = || claim("t", "c").attached_phase("n").attached("vm");
    let placed = |c: ClaimBuilder, mut objs: Vec<Obj>| {
        objs.extend(c.with_allocation("r"));
        objs
    };
    let gated = || {
        launcher("t", "virt-launcher-vm-x", "vm", "uid-t-vm")
            .gated()
            .obj()
    };
    type Remembered = (Option<Grace>, Option<Instant>);
    #[rustfmt::skip]
    let cases: Vec<(&str, &Config, Vec<Obj>, Did, Remembered)> = vec![
        ("L1 comes first, whatever else holds",
            &on, placed(attached().no_finalizer(), vec![h200()]),
            Did::AddFinalizer(RuleId::L1), (None, None)),
        ("G6 comes before the attachment rules: a claim whose node is gone is Lost",
            &on, placed(claim("t", "c").bound("n").attached("vm"), vec![h200(), running("vm")]),
            status(RuleId::G6, ClaimPhase::Lost, Some("vm"), &[CONDITION_LOST]), (None, None)),
        ("L4 when nothing comes before it",
            &on, placed(claim("t", "c").bound("n").attached("vm"), vec![h200(), ready(), running("vm")]),
            status(RuleId::L4, ClaimPhase::Attached, Some("vm"), &[]), (None, None)),
        ("L6 asks for a timer and its grace is remembered",
            &on, placed(claim("t", "c").bound("n").attached("vm"), vec![h200(), ready()]),
            Did::WaitFor(RuleId::L6, grace), (Some(Grace::default().counting("vm", now)), None)),
        ("integration off: no attachment rule runs",
            &off, placed(attached(), vec![h200(), ready()]), Did::Idle, (None, None)),
        ("L8: a deleting claim no VMI uses is released",
            &on, placed(claim("t", "c").bound("n").deleting(), vec![h200(), ready()]),
            Did::Release(RuleId::L8), (None, None)),
        ("L8 waits while a running VMI uses the claim",
            &on, placed(attached().deleting(), vec![h200(), ready(), running("vm")]),
            Did::Idle, (None, None)),
        ("L9: every launcher pod gated in the cache: they are read live",
            &on, placed(attached().deleting(), vec![h200(), ready(), running("vm"), gated()]),
            Did::ReadPods(RuleId::L9, vec!["virt-launcher-vm-x".into()]), (None, None)),
        ("L10: integration off: the VMI is read live",
            &off, placed(attached().deleting(), vec![h200(), ready()]),
            Did::ReadVmi(RuleId::L10, "vm".into()), (None, None)),
        ("the allocation report comes last, since when missing remembered",
            &on, vec![h200(), ready(), claim("t", "c").bound("n").obj()],
            Did::WaitFor(RuleId::Allocations, ALLOCATION_GRACE), (None, Some(now))),
    ];
    for (what, cfg, objs, want, (grace, since)) in cases {
        let w = world_of(objs);
        let c = w.claim("t/c").expect("the table's claim");
        let wall = gpu_claims_actors::ports::sim_epoch();
        let (step, mem) = decide_claim(&c, &w, cfg, now, wall, &ClaimMemory::default());
        assert_eq!(did(step, now), want, "{what}");
        assert_eq!(mem.grace, grace.unwrap_or_default(), "{what}: the grace");
        assert_eq!(
            mem.allocation_missing_since, since,
            "{what}: since when missing"
        );
    }
}

/// How the table's backing claim stands.
#[derive(Clone, Copy)]
enum Backing {
    Deleting,
    DeletingReserved,
    Standing,
    DeletingWithoutOurFinalizer,
    DeletingOfAnotherGPUClaim,
    DeletingOrphaned,
}

/// D4: `decide_claim` takes our finalizer off a backing claim someone
/// deleted once no pod holds it, and only then; L8 does it for a claim
/// being deleted.
#[test]
fn d4_decide_claim_lets_go_of_a_backing_claim_being_deleted_that_no_pod_holds_table() {
    use k8s_openapi::api::resource::v1::ResourceClaimConsumerReference;
    let now = Instant::now();
    let Obj::Class(k) = dra_class("h200", "vfio.gpu.nvidia.com").obj() else {
        unreachable!("a class")
    };
    let backing_of = |c: &GPUClaim, how: Backing| {
        let mut rc = backing_claim(c, &k);
        rc.metadata.uid = Some("rc-uid".into());
        if !matches!(how, Backing::Standing) {
            rc.metadata.deletion_timestamp = Some(wall());
        }
        match how {
            Backing::DeletingReserved => {
                rc.status.get_or_insert_default().reserved_for =
                    Some(vec![ResourceClaimConsumerReference {
                        resource: "pods".into(),
                        name: "virt-launcher-vm-x".into(),
                        uid: "pod-uid".into(),
                        api_group: None,
                    }]);
            }
            Backing::DeletingWithoutOurFinalizer => {
                rc.metadata.finalizers =
                    Some(vec!["resource.kubernetes.io/delete-protection".into()]);
            }
            Backing::DeletingOfAnotherGPUClaim => {
                rc.metadata
                    .owner_references
                    .iter_mut()
                    .flatten()
                    .for_each(|o| {
                        o.uid = "an-earlier-gpuclaim".into();
                    });
                rc.metadata.annotations = None;
            }
            Backing::DeletingOrphaned => rc.metadata.owner_references = None,
            _ => {}
        }
        Obj::ResourceClaim(rc)
    };
    let bound = || claim("t", "c").class("h200").bound("n");
    #[rustfmt::skip]
    let cases: Vec<(&str, ClaimBuilder, Backing, Did)> = vec![
        ("D4: deleted by someone, held by no pod: our finalizer comes off",
            bound(), Backing::Deleting, Did::LetGoBackingClaim(RuleId::D4)),
        ("D4: deleted, orphaned by an orphaning delete yet made for this claim: ours still",
            bound(), Backing::DeletingOrphaned, Did::LetGoBackingClaim(RuleId::D4)),
        ("D4: deleted while a pod holds it: the finalizer stays",
            bound(), Backing::DeletingReserved, Did::Idle),
        ("D4: not being deleted: left alone",
            bound(), Backing::Standing, Did::Idle),
        ("D4: deleted without our finalizer: nothing of ours to take off",
            bound(), Backing::DeletingWithoutOurFinalizer, Did::Idle),
        ("D4: another GPUClaim's (an earlier one of the name): not ours to let go",
            bound(), Backing::DeletingOfAnotherGPUClaim, Did::Idle),
        ("L8 comes first for a claim being deleted: its release lets go",
            bound().deleting(), Backing::Deleting, Did::Release(RuleId::L8)),
    ];
    for (what, c, how, want) in cases {
        let built = c.clone().build();
        let mut objs = vec![
            dra_class("h200", "vfio.gpu.nvidia.com").obj(),
            node("n")
                .passthrough_gpus("NVIDIA H200", 2, "141Gi", "0x2335")
                .obj(),
            backing_of(&built, how),
        ];
        objs.extend(c.with_allocation("r"));
        let w = world_of(objs);
        let c = w.claim("t/c").expect("the table's claim");
        let wall = gpu_claims_actors::ports::sim_epoch();
        let (step, _) = decide_claim(
            &c,
            &w,
            &Config::default(),
            now,
            wall,
            &ClaimMemory::default(),
        );
        assert_eq!(did(step, now), want, "{what}");
    }
}
