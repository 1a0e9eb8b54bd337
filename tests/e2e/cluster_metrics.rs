//! Issue 38: the figures a dashboard reads (`gpu_claims_class_*`,
//! `_node_gpus_*`, `_namespace_gpus`, `_quota_gpus_*`, `_waiting_*`,
//! GPU-seconds), read from `/metrics` of the real controller as the
//! demo's story runs, and compared after every step with what the
//! objects in the API server say, counted here from the objects alone.

use super::{CONFIG, NOW, common, metrics_of};
use gpu_claims_actors::api::{SCHEDULING_GATE, is_deleting};
use gpu_claims_testbed::demo::story;
use gpu_claims_testbed::demo::{self, Snapshot};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use gpu_claims::dev::dashboard::samples;

/// Figures by the values of their labels.
type Figures = BTreeMap<Vec<String>, u64>;

/// `name`'s samples summed by (the values of `keys`), zeros left out (a
/// figure at 0 and one not shown say the same).
fn by(text: &str, name: &str, keys: &[&str]) -> Figures {
    gpu_claims::dev::dashboard::by(text, name, keys)
        .into_iter()
        .filter(|(_, v)| *v != 0.0)
        .map(|(k, v)| (k, v as u64))
        .collect()
}

fn nonzero(m: Figures) -> Figures {
    m.into_iter().filter(|(_, v)| *v != 0).collect()
}

fn key(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

/// What the objects say, counted from them alone.
struct Expected {
    class_capacity: Figures,
    class_allocated: Figures,
    class_budget: Figures,
    namespace_gpus: Figures,
    quota_limit: Figures,
    quota_used: Figures,
    node_allocatable: Figures,
    node_allocated: Figures,
    waiting_by_namespace: Figures,
    /// Per namespace, the reasons its claims' Waiting conditions give.
    waiting_reasons: BTreeMap<String, BTreeSet<String>>,
    /// Device plugin GPUs pods other than launcher pods use, per node and resource.
    node_used_outside: Figures,
    /// Nodes that are Ready.
    ready: BTreeSet<String>,
    /// Per namespace, how long its oldest waiting set has waited (seconds).
    oldest_wait: BTreeMap<String, f64>,
}

fn expected(c: &common::Cluster, s: &Snapshot) -> Expected {
    let mut e = Expected {
        class_capacity: BTreeMap::new(),
        class_allocated: BTreeMap::new(),
        class_budget: BTreeMap::new(),
        namespace_gpus: BTreeMap::new(),
        quota_limit: BTreeMap::new(),
        quota_used: BTreeMap::new(),
        node_allocatable: BTreeMap::new(),
        node_allocated: BTreeMap::new(),
        waiting_by_namespace: BTreeMap::new(),
        waiting_reasons: BTreeMap::new(),
        node_used_outside: BTreeMap::new(),
        ready: BTreeSet::new(),
        oldest_wait: BTreeMap::new(),
    };
    let mut resources = BTreeSet::new();
    for k in &s.classes {
        let name = k.metadata.name.clone().unwrap();
        let st = k.status.clone().unwrap_or_default();
        e.class_capacity
            .insert(key(&[&name]), st.capacity.unwrap_or(0));
        e.class_allocated
            .insert(key(&[&name]), st.allocated.unwrap_or(0));
        if let Some(b) = k.spec.budget {
            e.class_budget.insert(key(&[&name]), u64::from(b));
        }
        if k.spec.device_class_name.is_none() {
            resources.insert(k.spec.resource_name.clone());
        }
    }
    for cl in &s.claims {
        let phase = cl.phase();
        if phase.counts_against_budget() {
            let ns = cl.metadata.namespace.clone().unwrap();
            *e.namespace_gpus
                .entry(key(&[&ns, &cl.spec.class_name, phase.as_str()]))
                .or_default() += u64::from(cl.spec.count);
        }
        if let Some(w) = cl.waiting() {
            let ns = cl.metadata.namespace.clone().unwrap();
            e.waiting_reasons
                .entry(ns)
                .or_default()
                .insert(w.reason.clone());
        }
    }
    for q in &s.quotas {
        let ns = q.metadata.namespace.clone().unwrap();
        let name = q.metadata.name.clone().unwrap();
        let st = q.status.clone().unwrap_or_default();
        for (class, hard) in &q.spec.hard {
            e.quota_limit
                .insert(key(&[&ns, &name, class]), u64::from(*hard));
            e.quota_used.insert(
                key(&[&ns, &name, class]),
                st.used.get(class).copied().unwrap_or(0),
            );
        }
        if let Some(total) = q.spec.total {
            e.quota_limit
                .insert(key(&[&ns, &name, ""]), u64::from(total));
            e.quota_used
                .insert(key(&[&ns, &name, ""]), st.used_total.unwrap_or(0));
        }
    }
    for n in &s.nodes {
        let name = n.metadata.name.clone().unwrap();
        let conditions = n
            .status
            .as_ref()
            .and_then(|st| st.conditions.clone())
            .unwrap_or_default();
        if conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
        {
            e.ready.insert(name.clone());
        }
        let alloc = n
            .status
            .as_ref()
            .and_then(|st| st.allocatable.clone())
            .unwrap_or_default();
        for r in &resources {
            let v = alloc
                .get(r)
                .and_then(|q| q.0.parse::<u64>().ok())
                .unwrap_or(0);
            e.node_allocatable.insert(key(&[&name, r, ""]), v);
        }
    }
    for a in &s.allocations {
        let sp = &a.spec;
        let k = match &sp.device_class_name {
            Some(dc) => key(&[&sp.node_name, dc, &sp.class_name]),
            None => key(&[&sp.node_name, &sp.resource_name, ""]),
        };
        *e.node_allocated.entry(k).or_default() += u64::from(sp.count);
    }
    // A DRA class's devices per node: those of its DeviceClass's driver
    // in the node's slices (the demo's class selects them all).
    let slices = c.store.list("ResourceSlice").0;
    for k in s
        .classes
        .iter()
        .filter(|k| k.spec.device_class_name.is_some())
    {
        let dc = k.spec.device_class_name.clone().unwrap();
        let class = k.metadata.name.clone().unwrap();
        for sl in &slices {
            let node = sl["spec"]["nodeName"].as_str().unwrap_or_default();
            let n = sl["spec"]["devices"]
                .as_array()
                .map_or(0, |d| d.len() as u64);
            *e.node_allocatable
                .entry(key(&[node, &dc, &class]))
                .or_default() += n;
        }
    }
    // Sets at the gate: live VMIs whose launcher pods all carry our gate.
    let mut sets: BTreeMap<(String, String), bool> = BTreeMap::new();
    let mut created: BTreeMap<(String, String), k8s_openapi::jiff::Timestamp> = BTreeMap::new();
    let pods = c.store.list("Pod").0;
    for p in &pods {
        let launcher = p["metadata"]["labels"]["kubevirt.io"] == "virt-launcher";
        let terminal = matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed"));
        let Some(node) = p["spec"]["nodeName"]
            .as_str()
            .filter(|_| !launcher && !terminal)
        else {
            continue;
        };
        for ctr in p["spec"]["containers"].as_array().into_iter().flatten() {
            let r = &ctr["resources"];
            for res in &resources {
                // An extended resource's request defaults to its limit.
                let q = r["requests"][res.as_str()]
                    .as_str()
                    .or(r["limits"][res.as_str()].as_str());
                if let Some(n) = q.and_then(|q| q.parse::<u64>().ok()) {
                    *e.node_used_outside
                        .entry(key(&[node, res, ""]))
                        .or_default() += n;
                }
            }
        }
    }
    for p in &pods {
        let Some(vmi) = p["metadata"]["ownerReferences"]
            .as_array()
            .and_then(|o| o.iter().find(|r| r["kind"] == "VirtualMachineInstance"))
            .and_then(|r| r["name"].as_str())
        else {
            continue;
        };
        let ns = p["metadata"]["namespace"].as_str().unwrap().to_string();
        let gated = p["spec"]["schedulingGates"]
            .as_array()
            .is_some_and(|g| g.iter().any(|g| g["name"] == SCHEDULING_GATE));
        if let Some(t) = p["metadata"]["creationTimestamp"]
            .as_str()
            .and_then(|t| t.parse().ok())
        {
            let oldest = created.entry((ns.clone(), vmi.to_string())).or_insert(t);
            *oldest = (*oldest).min(t);
        }
        let all = sets.entry((ns, vmi.to_string())).or_insert(true);
        *all &= gated;
    }
    let now = k8s_openapi::jiff::Timestamp::now();
    for ((ns, vmi), all_gated) in sets {
        let Some(v) = c.store.get("VirtualMachineInstance", &ns, &vmi) else {
            continue;
        };
        let meta: kube::api::ObjectMeta = serde_json::from_value(v["metadata"].clone()).unwrap();
        let phase = v["status"]["phase"].as_str().unwrap_or_default();
        if all_gated && !is_deleting(&meta) && !matches!(phase, "Succeeded" | "Failed") {
            *e.waiting_by_namespace.entry(key(&[&ns])).or_default() += 1;
            if let Some(t) = created.get(&(ns.clone(), vmi.clone())) {
                let waited = now.duration_since(*t).as_secs_f64();
                let w = e.oldest_wait.entry(ns.clone()).or_default();
                *w = w.max(waited);
            }
        }
    }
    e
}

/// Where the figures on `/metrics` differ from the objects, if anywhere.
fn mismatch(text: &str, e: &Expected) -> Option<String> {
    let checks: [(&str, &str, &[&str], &Figures); 9] = [
        (
            "capacity",
            "gpu_claims_class_gpus_capacity",
            &["class"],
            &e.class_capacity,
        ),
        (
            "allocated",
            "gpu_claims_class_gpus_allocated",
            &["class"],
            &e.class_allocated,
        ),
        (
            "budget",
            "gpu_claims_class_gpus_budget",
            &["class"],
            &e.class_budget,
        ),
        (
            "tenants",
            "gpu_claims_namespace_gpus",
            &["namespace", "class", "phase"],
            &e.namespace_gpus,
        ),
        (
            "quota limits",
            "gpu_claims_quota_gpus_limit",
            &["namespace", "quota", "class"],
            &e.quota_limit,
        ),
        (
            "quota use",
            "gpu_claims_quota_gpus_used",
            &["namespace", "quota", "class"],
            &e.quota_used,
        ),
        (
            "node allocatable",
            "gpu_claims_node_gpus_allocatable",
            &["node", "resource", "class"],
            &e.node_allocatable,
        ),
        (
            "node allocated",
            "gpu_claims_node_gpus_allocated",
            &["node", "resource", "class"],
            &e.node_allocated,
        ),
        (
            "waiting sets",
            "gpu_claims_waiting_sets",
            &["namespace"],
            &e.waiting_by_namespace,
        ),
    ];
    for (what, name, keys, want) in checks {
        // Summed over the labels not named (waiting sets over reasons:
        // the objects say which VMIs wait, not why).
        let got = by(text, name, keys);
        let want = nonzero(want.clone());
        if got != want {
            return Some(format!(
                "{what} ({name}): /metrics {got:?}, objects {want:?}"
            ));
        }
    }
    // Each waiting set's reason is one its namespace's claims give.
    for (l, _) in samples(text, "gpu_claims_waiting_sets") {
        let (ns, reason) = (&l["namespace"], &l["reason"]);
        let given = e
            .waiting_reasons
            .get(ns)
            .is_some_and(|r| r.contains(reason));
        if !given && reason != "Undecided" {
            return Some(format!(
                "a set of {ns} waits for {reason}, which no claim says"
            ));
        }
    }
    // The longest wait is shown exactly where sets wait.
    let longest = by(
        text,
        "gpu_claims_waiting_longest_seconds",
        &["namespace", "reason"],
    );
    let sets = by(text, "gpu_claims_waiting_sets", &["namespace", "reason"]);
    if longest.keys().any(|k| !sets.contains_key(k)) {
        return Some(format!("a longest wait with no set: {longest:?} {sets:?}"));
    }
    // Device plugin GPUs outside gpu-claims, and each node's free ones.
    let outside = by(
        text,
        "gpu_claims_node_gpus_used_outside",
        &["node", "resource", "class"],
    );
    let plugin_outside: BTreeMap<_, _> = outside
        .iter()
        .filter(|(k, _)| k[2].is_empty())
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    if plugin_outside != nonzero(e.node_used_outside.clone()) {
        return Some(format!(
            "used outside: /metrics {plugin_outside:?}, pods {:?}",
            e.node_used_outside
        ));
    }
    let allocatable = by(
        text,
        "gpu_claims_node_gpus_allocatable",
        &["node", "resource", "class"],
    );
    let recorded = by(
        text,
        "gpu_claims_node_gpus_allocated",
        &["node", "resource", "class"],
    );
    let free = by(
        text,
        "gpu_claims_node_gpus_free",
        &["node", "resource", "class"],
    );
    for (k, a) in &allocatable {
        let taken = recorded.get(k).copied().unwrap_or(0) + outside.get(k).copied().unwrap_or(0);
        let want = if e.ready.contains(&k[0]) {
            a.saturating_sub(taken)
        } else {
            0
        };
        let got = free.get(k).copied().unwrap_or(0);
        // A DRA node's free devices also leave out tainted ones.
        let fits = if k[2].is_empty() {
            got == want
        } else {
            got <= want
        };
        if !fits {
            return Some(format!("node {k:?}: free {got}, objects leave {want}"));
        }
    }
    // The longest wait is the oldest waiting launcher pod's age (its
    // creationTimestamp has seconds; the scrape came a moment before).
    let mut longest_by_ns: BTreeMap<String, f64> = BTreeMap::new();
    for (l, v) in samples(text, "gpu_claims_waiting_longest_seconds") {
        let w = longest_by_ns.entry(l["namespace"].clone()).or_default();
        *w = w.max(v);
    }
    for (ns, want) in &e.oldest_wait {
        let got = longest_by_ns.get(ns).copied().unwrap_or(0.0);
        if (got - want).abs() > 5.0 {
            return Some(format!(
                "{ns}: the longest wait is {got}s, its oldest pod waits {want}s"
            ));
        }
    }
    // Free: within what capacity, allocation and budget leave.
    let cap = by(text, "gpu_claims_class_gpus_capacity", &["class"]);
    let alloc = by(text, "gpu_claims_class_gpus_allocated", &["class"]);
    let budget = by(text, "gpu_claims_class_gpus_budget", &["class"]);
    for (k, free) in by(text, "gpu_claims_class_gpus_free", &["class"]) {
        let a = alloc.get(&k).copied().unwrap_or(0);
        let room = cap.get(&k).copied().unwrap_or(0).saturating_sub(a);
        let budget_room = budget.get(&k).map_or(u64::MAX, |b| b.saturating_sub(a));
        if free > room.min(budget_room) {
            return Some(format!(
                "class {k:?} free {free}, room {room}, budget room {budget_room}"
            ));
        }
    }
    None
}

/// GPU-seconds per (namespace, class): (held, attached).
fn gpu_seconds(text: &str) -> BTreeMap<(String, String), (f64, f64)> {
    let mut out: BTreeMap<(String, String), (f64, f64)> = BTreeMap::new();
    for (i, name) in [
        "gpu_claims_held_gpu_seconds_total",
        "gpu_claims_attached_gpu_seconds_total",
    ]
    .iter()
    .enumerate()
    {
        for (l, v) in samples(text, name) {
            let e = out
                .entry((l["namespace"].clone(), l["class"].clone()))
                .or_default();
            if i == 0 { e.0 = v } else { e.1 = v }
        }
    }
    out
}

#[test]
fn e2e_the_dashboards_figures_on_metrics_match_the_objects_at_every_step_of_the_story() {
    let mut c = common::Cluster::new(demo::seed, CONFIG);
    let ctl = c.start_controller();
    c.settle("L1", |s| s.classes.len() == 2, NOW);
    let mut seconds_before = BTreeMap::new();
    let (mut saw_idle, mut saw_waiting, mut saw_lost, mut saw_dra) = (false, false, false, false);
    for step in story::steps() {
        c.act(&step);
        c.settle(step.title, step.until, step.hold);
        // The controller's world trails the API server by a watch event:
        // wait until the two agree (or say where they do not).
        let deadline = Instant::now() + Duration::from_secs(60);
        let text = loop {
            let text = metrics_of(&ctl);
            let why = mismatch(&text, &expected(&c, &c.snapshot()));
            match why {
                None => break text,
                Some(why) if Instant::now() > deadline => {
                    panic!("{}: {why}\n{text}", step.title)
                }
                Some(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        };
        let tenants = by(&text, "gpu_claims_namespace_gpus", &["phase"]);
        saw_idle |= tenants.contains_key(&key(&["Bound"]));
        saw_lost |= tenants.contains_key(&key(&["Lost"]));
        saw_waiting |= !by(&text, "gpu_claims_waiting_sets", &[]).is_empty();
        saw_dra |= samples(&text, "gpu_claims_node_gpus_allocatable")
            .iter()
            .any(|(l, _)| l["resource"] == "vfio.gpu.nvidia.com");
        // GPU-seconds only grow; a VM uses no more than its claims hold.
        let seconds = gpu_seconds(&text);
        for (k, (held, attached)) in &seconds {
            assert!(
                attached <= &(held + 1e-6),
                "{}: {k:?} attached {attached} > held {held}",
                step.title
            );
            if let Some((h0, a0)) = seconds_before.get(k) {
                assert!(
                    held >= h0 && attached >= a0,
                    "{}: {k:?} went back",
                    step.title
                );
            }
        }
        for k in seconds_before.keys() {
            assert!(
                seconds.contains_key(k),
                "{}: the counter of {k:?} vanished",
                step.title
            );
        }
        seconds_before = seconds;
    }
    assert!(
        saw_idle && saw_waiting && saw_lost && saw_dra,
        "the story shows each figure"
    );
    // Every tenant that held GPUs was charged for them.
    for ns in [demo::A, demo::B] {
        assert!(
            seconds_before
                .iter()
                .any(|((n, _), (held, _))| n == ns && *held > 0.0),
            "{ns}: {seconds_before:?}"
        );
    }
}
