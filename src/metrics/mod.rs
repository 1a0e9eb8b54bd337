//! The controller's Prometheus metrics: writes by op, kind, rule and
//! result; conflicts; the latency from a world change to its write; how
//! long launcher pods wait at the gate; actors alive; config reloads;
//! leadership; and where the GPUs are (`cluster`: classes, nodes,
//! tenants, quotas, waiting sets, GPU-seconds, read from the world at
//! scrape time).

mod cluster;
mod process;

use gpu_claims_actors::ports::{Kind, Telemetry, WriteOp};
use gpu_claims_actors::rules::RuleId;
use gpu_claims_actors::world::World;
use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Metric, Registry, Unit};
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    pub op: String,
    pub kind: String,
    pub rule: String,
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReloadLabels {
    /// ok or refused.
    pub result: String,
    /// Why a file was refused (read, yaml, invalid); empty when ok.
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NodeStateLabels {
    pub node: String,
    /// live, under_way or blocked.
    pub state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RuleLabel {
    pub rule: String,
}

/// `count` bucket bounds from `start`, each `factor` times the last,
/// rounded to 9 significant digits, so that they print as written
/// (`le="0.15"`, not `le="0.15000000000000002"`).
pub fn buckets(start: f64, factor: f64, count: u16) -> Vec<f64> {
    (0..count)
        .map(|i| {
            let x = start * factor.powi(i32::from(i));
            format!("{x:.8e}").parse().unwrap_or(x)
        })
        .collect()
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WebhookLabels {
    /// allowed, gated, denied, or bad_request.
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AuthLabels {
    /// allowed, unauthenticated, forbidden, or error.
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: String,
}

pub struct Metrics {
    pub writes: Family<WriteLabels, Counter>,
    pub conflicts: Family<KindLabel, Counter>,
    pub reloads: Family<ReloadLabels, Counter>,
    pub change_to_write: Family<RuleLabel, Histogram>,
    pub gate_wait: Histogram,
    pub actors: Family<KindLabel, Gauge>,
    /// G7: pinned launcher pods the scheduler reports Unschedulable.
    pub unschedulable_pods: Gauge,
    /// E3: per evacuating node, its GPU VMs by state.
    pub evacuation_vms: Family<NodeStateLabels, Gauge>,
    /// The nodes last reported, so a node no longer evacuated loses its series.
    evacuating: std::sync::Mutex<Vec<String>>,
    /// Whether the caches have synced: the cluster's figures wait for it.
    synced: Arc<std::sync::atomic::AtomicBool>,
    pub leader: Gauge,
    /// API requests that got no answer within their deadline.
    pub timeouts: Family<VerbKindLabels, Counter>,
    /// Admission reviews the gate webhook answered, by result.
    pub webhook_requests: Family<WebhookLabels, Counter>,
    /// How long the webhook took to answer a review.
    pub webhook_latency: Histogram,
    /// Requests to /metrics and /debug, by what authentication and
    /// authorization decided.
    pub http_auth: Family<AuthLabels, Counter>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerbKindLabels {
    pub verb: String,
    pub kind: String,
}

/// A row of the table `Metrics::register` registers: name, help, unit,
/// the metric.
type Row = (&'static str, &'static str, Option<Unit>, Box<dyn Metric>);

/// A metric of the table `Metrics::register` registers.
#[derive(Debug)]
struct Described(Box<dyn Metric>);

impl EncodeMetric for Described {
    fn encode(&self, encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        self.0.encode(encoder)
    }
    fn metric_type(&self) -> MetricType {
        self.0.metric_type()
    }
}

impl Metrics {
    pub fn register(registry: &mut Registry, world: Option<Arc<World>>) -> Arc<Self> {
        let m = Metrics {
            writes: Family::default(),
            conflicts: Family::default(),
            reloads: Family::default(),
            // 10 µs, 40 µs, ... 41.9 s (4^11 × 10 µs)
            change_to_write: Family::new_with_constructor(|| {
                Histogram::new(buckets(0.000_01, 4.0, 12))
            }),
            // 50 ms, 150 ms, ... 8857 s (3^11 × 50 ms, about 2.5 h)
            gate_wait: Histogram::new(buckets(0.05, 3.0, 12)),
            actors: Family::default(),
            unschedulable_pods: Gauge::default(),
            evacuation_vms: Family::default(),
            evacuating: std::sync::Mutex::default(),
            synced: Arc::default(),
            leader: Gauge::default(),
            timeouts: Family::default(),
            webhook_requests: Family::default(),
            // 1 ms, 2.5 ms, ... 5.96 s (2.5^9 ms): the API server waits
            // timeoutSeconds (5 s by default) for an answer.
            webhook_latency: Histogram::new(buckets(0.001, 2.5, 10)),
            http_auth: Family::default(),
        };
        let build = Family::<BuildLabels, Gauge>::default();
        build
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION").into(),
            })
            .set(1);
        registry.register(
            "gpu_claims_build_info",
            "1, labelled with the version this process runs",
            build,
        );
        let seconds = Some(Unit::Seconds);
        // One row a metric: name, help, unit, the metric.
        #[rustfmt::skip]
        let described: [Row; 13] = [
            ("gpu_claims_webhook_requests", "Admission reviews the gate webhook (G1) answered, by result: allowed, gated, denied, bad_request", None, Box::new(m.webhook_requests.clone())),
            ("gpu_claims_webhook_latency", "How long the gate webhook took to answer a review", seconds.clone(), Box::new(m.webhook_latency.clone())),
            ("gpu_claims_http_auth", "Requests to /metrics and /debug by what delegated authentication and authorization decided: allowed, unauthenticated, forbidden, error", None, Box::new(m.http_auth.clone())),
            ("gpu_claims_writes", "Writes to the API server by op, kind, rule and result", None, Box::new(m.writes.clone())),
            ("gpu_claims_conflicts", "Writes answered 409 Conflict (a newer object, a failed precondition, or AlreadyExists)", None, Box::new(m.conflicts.clone())),
            ("gpu_claims_config_reloads", "Config reloads by result", None, Box::new(m.reloads.clone())),
            ("gpu_claims_change_to_write", "From a world change entering the supervisor to the write it caused, by rule", seconds.clone(), Box::new(m.change_to_write.clone())),
            ("gpu_claims_gate_wait", "How long launcher pods waited at the scheduling gate, from creation to release (G4)", seconds, Box::new(m.gate_wait.clone())),
            ("gpu_claims_actors", "Actors alive, by kind", None, Box::new(m.actors.clone())),
            ("gpu_claims_unschedulable_pods", "Launcher pods placement pinned that the scheduler reports Unschedulable (G7 deletes their VMI after unschedulableGrace)", None, Box::new(m.unschedulable_pods.clone())),
            ("gpu_claims_evacuation_vms", "Per node being evacuated (gpu.cozystack.io/evacuate), its GPU VMs: live there, restarts under way, blocked (no VirtualMachine owner, or a restarted VM waiting at the gate) (E2, E3)", None, Box::new(m.evacuation_vms.clone())),
            ("gpu_claims_api_timeouts", "API requests that got no answer within their deadline, by verb and kind", None, Box::new(m.timeouts.clone())),
            ("gpu_claims_leader", "1 while this process holds the leader Lease and writes, 0 on standby", None, Box::new(m.leader.clone())),
        ];
        for (name, help, unit, metric) in described {
            match unit {
                Some(unit) => registry.register_with_unit(name, help, unit, Described(metric)),
                None => registry.register(name, help, Described(metric)),
            }
        }
        for result in ["allowed", "gated", "denied", "bad_request"] {
            let _ = m.webhook_requests.get_or_create(&WebhookLabels {
                result: result.into(),
            });
        }
        for result in ["allowed", "unauthenticated", "forbidden", "error"] {
            let _ = m.http_auth.get_or_create(&AuthLabels {
                result: result.into(),
            });
        }
        // Series that exist from the start, at 0, so that rates and alerts
        // on them work before the first conflict or reload.
        for (result, reason) in [
            ("ok", ""),
            ("refused", "read"),
            ("refused", "yaml"),
            ("refused", "invalid"),
        ] {
            let _ = m.reloads.get_or_create(&ReloadLabels {
                result: result.into(),
                reason: reason.into(),
            });
        }
        for kind in gpu_claims_actors::ports::Kind::ALL {
            let _ = m.conflicts.get_or_create(&KindLabel {
                kind: kind.name().into(),
            });
        }
        if let Some(w) = world {
            registry.register_collector(Box::new(cluster::ClusterGauges {
                world: w,
                synced: m.synced.clone(),
            }));
        }
        registry.register_collector(Box::new(process::ProcessCollector));
        Arc::new(m)
    }

    pub fn write(&self, op: WriteOp, kind: Kind, rule: RuleId, result: &str) {
        let kind = kind.name();
        let l = WriteLabels {
            op: op.as_str().into(),
            kind: kind.into(),
            rule: rule.as_str().into(),
            result: result.into(),
        };
        self.writes.get_or_create(&l).inc();
        if result == "conflict" {
            self.conflicts
                .get_or_create(&KindLabel { kind: kind.into() })
                .inc();
        }
    }

    /// An API request that got no answer within its deadline.
    pub fn timed_out(&self, verb: &str, kind: &str) {
        self.timeouts
            .get_or_create(&VerbKindLabels {
                verb: verb.into(),
                kind: kind.into(),
            })
            .inc();
    }

    /// A config reload: applied, or refused for this reason.
    pub fn reload(&self, refused: Option<&crate::config::ConfigError>) {
        let (result, reason) = match refused {
            None => ("ok", ""),
            Some(e) => ("refused", e.metric_label()),
        };
        self.reloads
            .get_or_create(&ReloadLabels {
                result: result.into(),
                reason: reason.into(),
            })
            .inc();
    }
}

impl Telemetry for Metrics {
    fn change_to_write(&self, took: Duration, rule: RuleId) {
        self.change_to_write
            .get_or_create(&RuleLabel {
                rule: rule.as_str().into(),
            })
            .observe(took.as_secs_f64());
    }

    fn gate_wait(&self, waited: Duration) {
        self.gate_wait.observe(waited.as_secs_f64());
    }

    fn unschedulable_pods(&self, pods: usize) {
        self.unschedulable_pods.set(pods as i64);
    }

    fn synced(&self) {
        self.synced
            .store(true, std::sync::atomic::Ordering::Release);
    }

    fn evacuation(&self, nodes: &[gpu_claims_actors::ports::EvacuationFigures]) {
        let mut last = self.evacuating.lock().unwrap_or_else(|e| e.into_inner());
        for gone in last.iter().filter(|n| !nodes.iter().any(|f| &&f.node == n)) {
            for state in ["live", "under_way", "blocked"] {
                self.evacuation_vms.remove(&NodeStateLabels {
                    node: gone.clone(),
                    state: state.into(),
                });
            }
        }
        for f in nodes {
            for (state, n) in [
                ("live", f.live),
                ("under_way", f.under_way),
                ("blocked", f.blocked),
            ] {
                self.evacuation_vms
                    .get_or_create(&NodeStateLabels {
                        node: f.node.clone(),
                        state: state.into(),
                    })
                    .set(n as i64);
            }
        }
        *last = nodes.iter().map(|f| f.node.clone()).collect();
    }

    fn actors(&self, claims: usize, classes: usize) {
        for (kind, n) in [("claim", claims), ("class", classes)] {
            self.actors
                .get_or_create(&KindLabel { kind: kind.into() })
                .set(n as i64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_bounds_print_as_written_and_build_info_is_exposed() {
        assert_eq!(
            buckets(0.05, 3.0, 4),
            [0.05, 0.15, 0.45, 1.35],
            "exact decimal bounds"
        );
        let mut registry = Registry::default();
        let m = Metrics::register(&mut registry, None);
        m.gate_wait.observe(0.1);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
        assert!(out.contains("le=\"0.15\""), "{out}");
        assert!(!out.contains("0000000"), "a bound printed inexactly: {out}");
        assert!(
            out.contains(&format!(
                "gpu_claims_build_info{{version=\"{}\"",
                env!("CARGO_PKG_VERSION")
            )),
            "{out}"
        );
    }

    /// A replica that has listed the nodes but not yet the claims would
    /// count held GPUs free, and the rules' max over replicas would take
    /// its figure: the cluster's families have no series until the
    /// caches have synced, then the world's.
    #[test]
    fn the_clusters_figures_wait_for_the_caches_to_sync() {
        let w = gpu_claims_actors::world::WorldWriter::new(Default::default());
        let node: k8s_openapi::api::core::v1::Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "gpu-node-1"},
            "status": {
                "allocatable": {"nvidia.com/GH100_H200": "4"},
                "conditions": [{"type": "Ready", "status": "True"}]
            }
        }))
        .unwrap();
        w.apply(gpu_claims_actors::api::Obj::Node(node), false);
        let class = serde_json::from_value(serde_json::json!({
            "apiVersion": "gpu.cozystack.io/v1alpha1", "kind": "GPUClass",
            "metadata": {"name": "h200"},
            "spec": {"resourceName": "nvidia.com/GH100_H200"}
        }))
        .unwrap();
        w.apply(gpu_claims_actors::api::Obj::Class(class), false);
        let mut registry = Registry::default();
        let m = Metrics::register(&mut registry, Some(w.reader()));
        let scrape = || {
            let mut out = String::new();
            prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
            out
        };
        let before = scrape();
        assert!(
            before.contains("# TYPE gpu_claims_node_gpus_free gauge"),
            "{before}"
        );
        assert!(!before.contains("gpu_claims_node_gpus_free{"), "{before}");
        m.synced();
        let after = scrape();
        assert!(
            after.contains("gpu_claims_node_gpus_free{node=\"gpu-node-1\",resource=\"nvidia.com/GH100_H200\",class=\"\"} 4"),
            "{after}"
        );
    }
}
