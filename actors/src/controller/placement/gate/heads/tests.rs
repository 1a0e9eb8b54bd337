use super::*;
use crate::rules::queueing::HeadAsk;
use std::cmp::Reverse;

fn at(s: i64) -> Timestamp {
    Timestamp::from_second(1_000_000 + s).unwrap()
}

fn key(vmi: &str, priority: i32, since: i64) -> OrderKey {
    OrderKey {
        priority: Reverse(priority),
        since: at(since),
        vmi: vmi.into(),
    }
}

fn lead(classes: &[&str], over_budget: bool) -> Option<Lead> {
    Some(Lead {
        classes: classes.iter().map(|c| c.to_string()).collect(),
        ask: Arc::new(HeadAsk {
            pods: Vec::new(),
            classes: Vec::new(),
            resources: Vec::new(),
            need: BTreeMap::new(),
            devices: BTreeMap::new(),
            by_class: BTreeMap::new(),
        }),
        over_budget,
    })
}

/// The set at `k` decided at `now` (seconds), leading `lead`'s classes,
/// with no claims that say it led before.
fn decided(h: &mut Heads, k: OrderKey, lead: Option<Lead>, now: i64) -> Vec<HeadMoved> {
    let vmi = k.vmi.clone();
    h.decided(&vmi, k, lead, &BTreeMap::new(), at(now))
}

const FIVE_MIN: Option<Duration> = Some(Duration::from_secs(300));

#[test]
fn o1_the_head_is_the_first_by_priority_then_wait_then_name() {
    let mut h = Heads::default();
    decided(&mut h, key("t/old", 0, 0), lead(&["a100"], false), 10);
    decided(&mut h, key("t/young", 0, 5), lead(&["a100"], false), 10);
    assert_eq!(h.head("a100").unwrap().vmi, "t/old", "older first");
    let moved = decided(&mut h, key("u/urgent", 100, 9), lead(&["a100"], false), 11);
    assert_eq!(
        h.head("a100").unwrap().vmi,
        "u/urgent",
        "higher priority first"
    );
    assert_eq!(moved.len(), 1);
    assert_eq!(moved[0].old.as_ref().unwrap().vmi, "t/old");
    assert_eq!(
        moved[0].new.as_ref().unwrap().since,
        at(11),
        "a new head starts now"
    );
    decided(&mut h, key("a/same", 0, 0), lead(&["a100"], false), 12);
    h.forget("u/urgent", at(13));
    assert_eq!(
        h.head("a100").unwrap().vmi,
        "a/same",
        "then by namespace and name"
    );
}

#[test]
fn o2_a_head_decided_again_keeps_its_start_and_one_restored_takes_its_claims() {
    let mut h = Heads::default();
    decided(&mut h, key("t/big", 0, 0), lead(&["a100"], false), 10);
    let moved = decided(&mut h, key("t/big", 0, 0), lead(&["a100"], false), 50);
    assert!(moved.is_empty());
    assert_eq!(h.head("a100").unwrap().since, at(10));
    // A fresh controller: the claims say it leads since 10.
    let mut fresh = Heads::default();
    let restored = BTreeMap::from([("a100".to_string(), at(10))]);
    fresh.decided(
        "t/big",
        key("t/big", 0, 0),
        lead(&["a100"], false),
        &restored,
        at(400),
    );
    assert_eq!(fresh.head("a100").unwrap().since, at(10));
    assert_eq!(
        fresh.led_by("t/big"),
        BTreeMap::from([("a100".to_string(), at(10))])
    );
}

#[test]
fn o2_a_head_holds_back_only_later_sets_and_only_once_it_has_waited() {
    let mut h = Heads::default();
    decided(&mut h, key("t/big", 0, 0), lead(&["a100"], false), 0);
    let later = key("t/small", 0, 30);
    let classes = vec!["a100".to_string(), "h100".to_string()];
    assert!(
        h.holding(&classes, &later, FIVE_MIN, at(299)).is_empty(),
        "not yet"
    );
    let held = h.holding(&classes, &later, FIVE_MIN, at(300));
    assert_eq!(held.len(), 1);
    assert_eq!(
        (held[0].head.as_str(), held[0].class.as_str()),
        ("t/big", "a100")
    );
    assert!(!held[0].over_budget);
    // Earlier in the order, or higher priority: not held.
    assert!(
        h.holding(&classes, &key("t/older", 0, -1), FIVE_MIN, at(400))
            .is_empty()
    );
    assert!(
        h.holding(&classes, &key("t/vip", 5, 60), FIVE_MIN, at(400))
            .is_empty()
    );
    // The head itself is never held by itself.
    assert!(
        h.holding(&classes, &key("t/big", 0, 0), FIVE_MIN, at(400))
            .is_empty()
    );
    // 0s: strict order at once; off: never.
    assert_eq!(
        h.holding(&classes, &later, Some(Duration::ZERO), at(0))
            .len(),
        1
    );
    assert!(h.holding(&classes, &later, None, at(10_000)).is_empty());
}

#[test]
fn o2_the_next_set_leads_from_when_the_head_goes() {
    let mut h = Heads::default();
    decided(&mut h, key("t/big", 0, 0), lead(&["a100"], true), 0);
    decided(&mut h, key("t/next", 0, 10), lead(&["a100"], false), 20);
    let moved = h.forget("t/big", at(500));
    assert_eq!(moved[0].new.as_ref().unwrap().vmi, "t/next");
    assert_eq!(
        moved[0].new.as_ref().unwrap().since,
        at(500),
        "its own time starts then"
    );
    assert!(
        h.holding(
            &["a100".to_string()],
            &key("t/last", 0, 99),
            FIVE_MIN,
            at(700)
        )
        .is_empty()
    );
    let moved = h.forget("t/next", at(800));
    assert_eq!(moved[0].new, None);
    assert!(h.head("a100").is_none());
}
