//! Where the GPUs are, read off the world at scrape time: the figures of
//! `gpu-claims status` (classes, nodes, quotas, waiting sets) and, per
//! namespace and class, the GPUs its claims hold and the GPU-seconds they
//! held. Nothing is kept on the hot path but the GPU-seconds' step
//! function (`World::gpu_seconds`); a scrape costs one pass over the world,
//! as `status` does.
//!
//! Every replica watches the same cluster and reports the same figures:
//! the chart's recording rules take `max` over replicas. A replica that
//! has just started reports none until its caches have synced: half a
//! world (nodes listed, claims not yet) would count held GPUs as free.
//!
//! Cardinality, worst case (docs/operations.md): classes × 5; nodes ×
//! (resources + DRA classes there) × 4; namespaces × classes × 5;
//! quota limits × 2; namespaces with waiting sets × reasons × 2; classes
//! with a head × 1.

use gpu_claims_actors::status::{Report, report};
use gpu_claims_actors::world::World;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeCounterValue, EncodeGaugeValue, EncodeMetric, MetricEncoder,
    NoLabelSet,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

type Labels = Vec<(&'static str, String)>;
type Gauges = Rows<u64>;
type Seconds = Rows<f64>;
type GpuSeconds = Rows<f64, true>;

/// One family's series for one scrape, in the order they were found:
/// encoded as they are, with none of the hash map, lock and atomic per
/// series that `Family` keeps for metrics updated between scrapes (a
/// scrape at 100,000 claims and 15,000 nodes has 80,000 series).
/// `COUNTER`: the values are counters' totals, else gauges'.
#[derive(Debug, Default)]
struct Rows<V, const COUNTER: bool = false> {
    rows: std::cell::RefCell<Vec<(Labels, V)>>,
}

impl<V, const COUNTER: bool> Rows<V, COUNTER> {
    /// A series; each label set once (the callers' maps are keyed by it).
    fn push(&self, labels: Labels, v: V) {
        self.rows.borrow_mut().push((labels, v));
    }
}

impl<V: EncodeGaugeValue + EncodeCounterValue + std::fmt::Debug, const COUNTER: bool> EncodeMetric
    for Rows<V, COUNTER>
{
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        for (labels, v) in self.rows.borrow().iter() {
            let mut series = encoder.encode_family(labels)?;
            if COUNTER {
                series.encode_counter::<NoLabelSet, _, f64>(v, None)?;
            } else {
                series.encode_gauge(v)?;
            }
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        if COUNTER {
            MetricType::Counter
        } else {
            MetricType::Gauge
        }
    }
}

/// The collector: one `report` and one pass over the claims a scrape.
pub(super) struct ClusterGauges {
    pub(super) world: Arc<World>,
    /// Set once the caches have synced (`Telemetry::synced`): until then
    /// the families are described with no series, so that a replica that
    /// has just started never reports more free GPUs than the cluster has
    /// (the chart's rules take the max over replicas).
    pub(super) synced: Arc<AtomicBool>,
}

impl std::fmt::Debug for ClusterGauges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterGauges")
    }
}

/// The figures of one scrape, each family with its name, help and unit.
#[derive(Default)]
struct Figures {
    claims: Gauges,
    class_capacity: Gauges,
    class_allocated: Gauges,
    class_budget: Gauges,
    class_free: Gauges,
    class_waiting: Gauges,
    node_allocatable: Gauges,
    node_allocated: Gauges,
    node_used_outside: Gauges,
    node_free: Gauges,
    node_placeable: Gauges,
    namespace_gpus: Gauges,
    quota_limit: Gauges,
    quota_used: Gauges,
    waiting_sets: Gauges,
    waiting_longest: Seconds,
    queue_head_waiting: Seconds,
    held_seconds: GpuSeconds,
    attached_seconds: GpuSeconds,
    exclusive_devices: Gauges,
    named_twice: Gauges,
}

fn set(f: &Gauges, labels: Labels, v: u64) {
    f.push(labels, v);
}

impl Figures {
    fn of(w: &World) -> Self {
        let f = Figures::default();
        // D7: whether the pools gpu-claims allocates in are closed to
        // kube-scheduler.
        let on = w.exclusive() == gpu_claims_actors::world::devices::Exclusive::On;
        set(&f.exclusive_devices, Vec::new(), u64::from(on));
        // D8: devices of claims' records another ResourceClaim names.
        let mut twice = 0u64;
        w.for_each_claim(|c| {
            if gpu_claims_actors::rules::taken_device(c, w).is_some() {
                twice += 1;
            }
        });
        set(&f.named_twice, Vec::new(), twice);
        let r = report(w);
        f.classes(w, &r);
        f.nodes(w, &r);
        f.claims(w);
        for q in &r.quotas {
            let labels = vec![
                ("namespace", q.namespace.clone()),
                ("quota", q.name.clone()),
                ("class", q.class.clone().unwrap_or_default()),
            ];
            set(&f.quota_limit, labels.clone(), u64::from(q.hard));
            set(&f.quota_used, labels, q.used);
        }
        let now = k8s_openapi::jiff::Timestamp::now();
        let mut waiting: BTreeMap<(&str, &str), (u64, f64)> = BTreeMap::new();
        for s in &r.waiting {
            let e = waiting.entry((&s.namespace, &s.reason)).or_default();
            e.0 += 1;
            let waited = s
                .since
                .map(|t| now.duration_since(t).as_secs_f64().max(0.0))
                .unwrap_or(0.0);
            e.1 = e.1.max(waited);
        }
        for ((ns, reason), (sets, longest)) in waiting {
            let labels = vec![
                ("namespace", ns.to_string()),
                ("reason", reason.to_string()),
            ];
            set(&f.waiting_sets, labels.clone(), sets);
            f.waiting_longest.push(labels, longest);
        }
        // O3: how long each class's head has led it.
        for h in &r.heads {
            let led = now.duration_since(h.since).as_secs_f64().max(0.0);
            f.queue_head_waiting
                .push(vec![("class", h.class.clone())], led);
        }
        for a in w.gpu_seconds(std::time::Instant::now()) {
            let labels = vec![("namespace", a.namespace), ("class", a.class)];
            f.held_seconds.push(labels.clone(), a.held_seconds);
            f.attached_seconds.push(labels, a.attached_seconds);
        }
        f
    }

    /// Per class: capacity, what its claims hold or owe, its budget, the
    /// GPUs a new claim of it could get now, and its waiting sets.
    fn classes(&self, w: &World, r: &Report) {
        for c in &r.classes {
            let labels = vec![("class", c.name.clone())];
            set(&self.class_capacity, labels.clone(), c.capacity);
            set(&self.class_allocated, labels.clone(), c.allocated);
            set(&self.class_waiting, labels.clone(), c.waiting_sets as u64);
            let on_nodes = match &c.device_class {
                Some(_) => r
                    .devices
                    .iter()
                    .filter(|d| d.class == c.name)
                    .filter(|d| w.node(&d.node).is_some_and(|f| f.skipped().is_none()))
                    .map(|d| d.free)
                    .fold(0u64, u64::saturating_add),
                None => {
                    let selector = w.class(&c.name).and_then(|k| k.spec.node_selector.clone());
                    // Where a set of it could go: not on a node placement
                    // skips (cordoned, tainted, evacuated, not Ready).
                    r.nodes
                        .iter()
                        .filter(|n| n.resource == c.resource)
                        .filter(|n| {
                            w.node(&n.node)
                                .is_some_and(|f| f.matches(selector.as_ref()))
                        })
                        .map(|n| n.placeable)
                        .fold(0u64, u64::saturating_add)
                }
            };
            let free = match c.budget {
                Some(b) => {
                    set(&self.class_budget, labels.clone(), u64::from(b));
                    on_nodes.min(u64::from(b).saturating_sub(c.allocated))
                }
                None => on_nodes,
            };
            set(&self.class_free, labels, free);
        }
    }

    /// Per node: a device plugin resource's GPUs (class empty: whichever
    /// class takes them), and each DRA class's devices (resource: its
    /// DeviceClass). Free is 0 on a node that is not Ready.
    ///
    /// Placeable is the free a new set could get there: 0 on a node
    /// placement skips (cordoned, tainted, evacuated, not Ready), so a
    /// cordoned node's idle GPUs are not counted as room.
    fn nodes(&self, w: &World, r: &Report) {
        let rows = r
            .nodes
            .iter()
            .map(|n| {
                let l = (n.node.clone(), n.resource.clone(), String::new());
                let counts = [n.allocatable, n.allocated, n.used_outside_allocations];
                (l, n.ready, counts, n.free, n.placeable)
            })
            .chain(r.devices.iter().map(|d| {
                let l = (d.node.clone(), d.device_class.clone(), d.class.clone());
                let counts = [d.devices, d.allocated, d.held_outside_allocations];
                let skipped = w.node(&d.node).is_none_or(|f| f.skipped().is_some());
                let placeable = if skipped { 0 } else { d.free };
                (l, d.ready, counts, d.free, placeable)
            }));
        for ((node, resource, class), ready, counts, free, placeable) in rows {
            let [allocatable, allocated, outside] = counts;
            let labels = vec![("node", node), ("resource", resource), ("class", class)];
            set(&self.node_allocatable, labels.clone(), allocatable);
            set(&self.node_allocated, labels.clone(), allocated);
            set(&self.node_used_outside, labels.clone(), outside);
            set(
                &self.node_free,
                labels.clone(),
                if ready { free } else { 0 },
            );
            set(
                &self.node_placeable,
                labels,
                if ready { placeable } else { 0 },
            );
        }
    }

    /// Claims by class and phase, and the GPUs each namespace's claims
    /// hold by class and phase (Bound: held with no VM using them, an idle
    /// reservation; Attached: a VM uses them; Lost: owed, not usable).
    ///
    /// A claim's class is a name its tenant wrote: it labels a series only
    /// where that GPUClass exists, else `class=""`, so bogus class names
    /// make one series, not one each.
    fn claims(&self, w: &World) {
        let mut claims: BTreeMap<(String, &'static str), u64> = BTreeMap::new();
        let mut gpus: BTreeMap<(String, String, &'static str), u64> = BTreeMap::new();
        w.for_each_claim(|c| {
            let phase = c.phase();
            let class = if w.has_class(&c.spec.class_name) {
                c.spec.class_name.clone()
            } else {
                String::new()
            };
            *claims.entry((class.clone(), phase.as_str())).or_default() += 1;
            if phase.counts_against_budget() {
                let ns = c.metadata.namespace.clone().unwrap_or_default();
                let e = gpus.entry((ns, class, phase.as_str())).or_default();
                *e = e.saturating_add(u64::from(c.spec.count));
            }
        });
        for ((class, phase), n) in claims {
            set(
                &self.claims,
                vec![("class", class), ("phase", phase.into())],
                n,
            );
        }
        for ((ns, class, phase), n) in gpus {
            let labels = vec![("namespace", ns), ("class", class), ("phase", phase.into())];
            set(&self.namespace_gpus, labels, n);
        }
    }
}

/// Encodes one family under its name, help and unit.
fn encode(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    family: &dyn EncodeMetric,
) -> Result<(), std::fmt::Error> {
    let m = encoder.encode_descriptor(name, help, unit, family.metric_type())?;
    family.encode(m)
}

impl Collector for ClusterGauges {
    fn encode(&self, mut e: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let f = if self.synced.load(Ordering::Acquire) {
            Figures::of(&self.world)
        } else {
            Figures::default()
        };
        let seconds = Some(&Unit::Seconds);
        #[rustfmt::skip]
        let table: [(&str, &str, Option<&Unit>, &dyn EncodeMetric); 21] = [
            ("gpu_claims_claims", "GPUClaims by class and phase", None, &f.claims),
            ("gpu_claims_class_gpus_capacity", "Per class, the GPUs of its resource (or the devices of its DeviceClass) on Ready nodes it serves", None, &f.class_capacity),
            ("gpu_claims_class_gpus_allocated", "Per class, the GPUs its claims hold or owe (phases Bound, Attached, Lost)", None, &f.class_allocated),
            ("gpu_claims_class_gpus_budget", "Per class with a budget, its budget", None, &f.class_budget),
            ("gpu_claims_class_gpus_free", "Per class, the GPUs a new claim of it could get now: free on the nodes it serves that placement does not skip (not Ready, cordoned, tainted, evacuated), within its budget", None, &f.class_free),
            ("gpu_claims_class_waiting_sets", "Per class, VMIs whose launcher pods wait at the gate with a claim of it", None, &f.class_waiting),
            ("gpu_claims_node_gpus_allocatable", "Per node and resource (a DRA class's: its DeviceClass, with the class), the GPUs the node publishes", None, &f.node_allocatable),
            ("gpu_claims_node_gpus_allocated", "Per node and resource, the GPUs GPUAllocations hold there", None, &f.node_allocated),
            ("gpu_claims_node_gpus_used_outside", "Per node and resource, the GPUs pods or ResourceClaims outside gpu-claims use there", None, &f.node_used_outside),
            ("gpu_claims_node_gpus_free", "Per node and resource, the GPUs no one holds (0 on a node not Ready)", None, &f.node_free),
            ("gpu_claims_node_gpus_placeable", "Per node and resource, the free GPUs a new set could get: 0 on a node placement skips (not Ready, cordoned, tainted, evacuated)", None, &f.node_placeable),
            ("gpu_claims_namespace_gpus", "Per namespace, class and phase, the GPUs its claims hold: Bound (an idle reservation: no VM uses them), Attached, Lost", None, &f.namespace_gpus),
            ("gpu_claims_quota_gpus_limit", "Per GPUQuota limit (class empty: all classes), the limit", None, &f.quota_limit),
            ("gpu_claims_quota_gpus_used", "Per GPUQuota limit, the GPUs the namespace's claims hold or owe", None, &f.quota_used),
            ("gpu_claims_waiting_sets", "VMIs whose launcher pods wait at the gate, by namespace and reason", None, &f.waiting_sets),
            ("gpu_claims_waiting_longest", "By namespace and reason, how long the longest-waiting set has waited (since its oldest launcher pod was made)", seconds, &f.waiting_longest),
            ("gpu_claims_queue_head_waiting", "Per class, how long the set at its head has led it (O2: past queueing.headOfLineAfter, later sets of lower or equal priority wait Queued)", seconds, &f.queue_head_waiting),
            ("gpu_claims_held_gpu_seconds", "Per namespace and class, GPU-seconds its claims held (Bound, Attached, Lost) since this process started", None, &f.held_seconds),
            ("gpu_claims_attached_gpu_seconds", "Per namespace and class, GPU-seconds a VM used its claims' GPUs (Attached) since this process started", None, &f.attached_seconds),
            ("gpu_claims_devices_named_twice", "GPUClaims one of whose record's devices another ResourceClaim names too (D8): given up at once where no VM uses the claim, so what stays is a VM's device someone else holds", None, &f.named_twice),
            ("gpu_claims_dra_exclusive_devices", "1 while the pools gpu-claims allocates DRA devices in are closed to kube-scheduler by its DeviceTaintRules (D7); 0 where they cannot be (turned off, not served, refused)", None, &f.exclusive_devices),
        ];
        for (name, help, unit, family) in table {
            encode(&mut e, name, help, unit, family)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_claims_actors::api::Obj;
    use gpu_claims_actors::world::WorldWriter;
    use prometheus_client::registry::Registry;

    fn scrape(w: &WorldWriter) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(ClusterGauges {
            world: w.reader(),
            synced: Arc::new(AtomicBool::new(true)),
        }));
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
        out
    }

    fn obj<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
        serde_json::from_value(v).unwrap()
    }

    /// Class h200 over the device plugin's nvidia.com/GH100_H200.
    fn h200() -> Obj {
        Obj::Class(obj(serde_json::json!({
            "apiVersion": "gpu.cozystack.io/v1alpha1", "kind": "GPUClass",
            "metadata": {"name": "h200"},
            "spec": {"resourceName": "nvidia.com/GH100_H200"}
        })))
    }

    /// Issue 61, item 2: a tenant who makes claims of a thousand bogus
    /// class names makes one `class=""` series, not a thousand; a class
    /// that exists keeps its own name.
    #[test]
    fn claims_of_classes_that_do_not_exist_share_one_series() {
        let w = WorldWriter::new(Default::default());
        w.apply(h200(), false);
        let claim = |name: &str, class: &str| {
            Obj::Claim(obj(serde_json::json!({
                "apiVersion": "gpu.cozystack.io/v1alpha1", "kind": "GPUClaim",
                "metadata": {"name": name, "namespace": "tenant-a"},
                "spec": {"className": class, "count": 1}
            })))
        };
        w.apply(claim("real", "h200"), false);
        for i in 0..1000 {
            w.apply(claim(&format!("bogus-{i}"), &format!("no-such-{i}")), false);
        }
        let out = scrape(&w);
        // A family's series come in no set order.
        let mut series: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with("gpu_claims_claims{"))
            .collect();
        series.sort();
        assert_eq!(
            series,
            [
                "gpu_claims_claims{class=\"\",phase=\"Pending\"} 1000",
                "gpu_claims_claims{class=\"h200\",phase=\"Pending\"} 1",
            ],
            "{out}"
        );
        assert!(!out.contains("no-such-"), "a tenant's class name: {out}");
    }

    /// Issue 64, item 4: a class's free GPUs are those a set of it could
    /// get: none on a cordoned or tainted node, so that
    /// GPUClaimsClassFullWithWaitingSets fires while its VMs wait.
    #[test]
    fn free_for_a_class_and_placeable_on_a_node_count_only_the_gpus_on_nodes_placement_does_not_skip()
     {
        let w = WorldWriter::new(Default::default());
        w.apply(h200(), false);
        let node = |name: &str, spec: serde_json::Value| {
            Obj::Node(obj(serde_json::json!({
                "metadata": {"name": name},
                "spec": spec,
                "status": {
                    "allocatable": {"nvidia.com/GH100_H200": "4"},
                    "conditions": [{"type": "Ready", "status": "True"}]
                }
            })))
        };
        w.apply(node("open", serde_json::json!({})), false);
        w.apply(
            node("cordoned", serde_json::json!({"unschedulable": true})),
            false,
        );
        let taint = serde_json::json!({"taints": [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]});
        w.apply(node("tainted", taint), false);
        let out = scrape(&w);
        assert!(
            out.contains("gpu_claims_class_gpus_free{class=\"h200\"} 4\n"),
            "{out}"
        );
        // The nodes' own figures stay what no one holds; what a set could
        // get there is only the open node's.
        assert!(
            out.contains("gpu_claims_node_gpus_free{node=\"cordoned\",resource=\"nvidia.com/GH100_H200\",class=\"\"} 4"),
            "{out}"
        );
        for (node, placeable) in [("open", 4), ("cordoned", 0), ("tainted", 0)] {
            let line = format!(
                "gpu_claims_node_gpus_placeable{{node=\"{node}\",resource=\"nvidia.com/GH100_H200\",class=\"\"}} {placeable}\n"
            );
            assert!(out.contains(&line), "{line} in\n{out}");
        }
    }
}
