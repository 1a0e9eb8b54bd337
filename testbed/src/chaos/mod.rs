//! The chaos harness: replicas of `gpu-claims run` as separate processes
//! against the embedded API server (with write faults and cut watches),
//! VM churn around them, and again and again the leader is killed, frozen
//! past the lease duration, or cut off the server. I1-I5 are checked
//! every 100 ms throughout; the server's write log says whether any
//! replica wrote outside its term; at the end the faults stop and the
//! cluster must converge. `tests/chaos.rs` runs it in CI for a few
//! minutes, `gpu-claims-chaos` for as long as asked.

mod churn;
pub mod replicas;
mod report;

pub use replicas::{Launcher, LeaseTimes};
pub use report::Report;

use crate::cluster::{LocalCluster, replica_name};
use crate::memory::invariants::{Checker, progress};
use anyhow::Context as _;
use churn::Churn;
use gpu_claims_actors::ports::Kind;
use gpu_claims_apiserver::Faults;
use replicas::{Replica, http_get};
use std::path::PathBuf;
use std::time::Duration;
use tokio::time::Instant;

pub struct Options {
    pub duration: Duration,
    pub replicas: usize,
    pub lease: LeaseTimes,
    pub seed: u64,
    /// The API server's faults while the chaos lasts.
    pub faults: String,
    /// Where the kubeconfigs, the config and the replicas' logs go.
    pub dir: PathBuf,
    pub launcher: Launcher,
    /// How long the cluster may take to converge once the chaos stops.
    pub converge_within: Duration,
}

impl Options {
    /// 10% of writes refused (409, 429, 500), watches cut every 5 s.
    pub const FAULTS: &str = "conflict=0.04,throttle=0.03,error=0.03,cut=5s";
}

/// What the harness did to the leader.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Disruption {
    Kill,
    Pause,
    Partition,
}

/// A disruption and when (on the server's clock).
#[derive(Clone, Debug, serde::Serialize)]
pub struct Done {
    pub what: Disruption,
    /// The leader's Lease identity.
    pub victim: String,
    pub at_s: f64,
}

/// What undoes a disruption, and when.
enum Undo {
    Restart(usize),
    Resume(usize),
    Heal(String),
}

/// The replicas' config: json logs, a short attachment grace (L6 acts
/// within the run).
const CONFIG: &str = "attachmentGrace: 3s\nlog: {filter: info, format: json}\n";

pub fn run(o: Options) -> anyhow::Result<Report> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let mut h = Harness::start(&o).await?;
        let report = h.run(&o).await;
        h.stop();
        report
    })
}

/// The controller's Lease: namespace and name.
const LEASE: (&str, &str) = ("gpu-claims", "gpu-claims");

struct Harness {
    cluster: LocalCluster,
    replicas: Vec<Replica>,
    checker: Checker,
    checks: usize,
    violations: Vec<String>,
    violation_count: usize,
    churn: Churn,
    done: Vec<Done>,
    undo: Vec<(Instant, Undo)>,
}

impl Harness {
    async fn start(o: &Options) -> anyhow::Result<Self> {
        let faults = Faults::parse(&o.faults).map_err(anyhow::Error::msg)?;
        std::fs::create_dir_all(&o.dir).with_context(|| format!("create {}", o.dir.display()))?;
        let config = o.dir.join("config.yaml");
        std::fs::write(&config, CONFIG)?;
        let cluster = LocalCluster::start("127.0.0.1:0".parse()?, crate::demo::seed).await?;
        cluster.server.set_faults(faults);
        let mut replicas = Vec::new();
        for i in 1..=o.replicas {
            let name = replica_name(i);
            let kubeconfig = cluster.kubeconfig(&o.dir, &name)?;
            let mut r = Replica::new(name, kubeconfig, config.clone(), &o.dir);
            r.start(&o.launcher, o.lease)
                .with_context(|| format!("start {}", o.launcher.program.display()))?;
            replicas.push(r);
        }
        let churn = Churn::new(o.seed, cluster.store.clone(), cluster.standin.clone());
        Ok(Self {
            cluster,
            replicas,
            checker: Checker::default(),
            checks: 0,
            violations: Vec::new(),
            violation_count: 0,
            churn,
            done: Vec::new(),
            undo: Vec::new(),
        })
    }

    /// Seconds on the server's clock, as its write log counts them.
    fn now_s(&self) -> f64 {
        self.cluster.server.elapsed().as_secs_f64()
    }

    fn check(&mut self) {
        self.checks += 1;
        let v = self.checker.check(&self.cluster.journal);
        self.violation_count += v.len();
        for line in v {
            if self.violations.len() < 20 {
                self.violations.push(format!("{:.3}s {line}", self.now_s()));
            }
        }
    }

    /// The holder of the Lease (its replica, and its identity), when its
    /// replica is up, leads by its own account, and is neither frozen nor
    /// cut off: a leader to disrupt.
    async fn leader(&mut self) -> Option<(usize, String)> {
        let lease = self.cluster.store.get("Lease", LEASE.0, LEASE.1)?;
        let holder = lease["spec"]["holderIdentity"].as_str()?.to_string();
        let pod = crate::terms::pod_of(&holder);
        let i = self.replicas.iter().position(|r| r.name == pod)?;
        let r = &mut self.replicas[i];
        if r.paused || !r.alive() || !self.undo.is_empty() {
            return None;
        }
        let (code, body) = http_get(r.http, "/debug").await?;
        let d: serde_json::Value = serde_json::from_str(&body).ok()?;
        (code == 200
            && d["leader"]["leading"] == true
            && d["leader"]["identity"] == holder.as_str())
        .then_some((i, holder))
    }

    fn disrupt(&mut self, what: Disruption, (i, victim): (usize, String), o: &Options) {
        let at_s = self.now_s();
        let pod = self.replicas[i].name.clone();
        let later = Instant::now() + o.lease.duration + Duration::from_secs(2);
        match what {
            Disruption::Kill => {
                self.replicas[i].kill();
                // The kubelet starts it again.
                self.undo
                    .push((Instant::now() + Duration::from_secs(1), Undo::Restart(i)));
            }
            Disruption::Pause => {
                self.replicas[i].pause();
                self.undo.push((later, Undo::Resume(i)));
            }
            Disruption::Partition => {
                self.cluster.server.partition(&pod, true);
                self.undo.push((later, Undo::Heal(pod)));
            }
        }
        tracing::info!(?what, %victim, at_s, "chaos: disrupted the leader");
        self.done.push(Done { what, victim, at_s });
        // Work for the next leader, so that its first write says when it took over.
        self.churn.start_vm();
    }

    fn undo_due(&mut self, o: &Options, all: bool) -> anyhow::Result<()> {
        let now = Instant::now();
        let (due, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.undo)
            .into_iter()
            .partition(|(at, _)| all || *at <= now);
        self.undo = keep;
        for (_, u) in due {
            match u {
                Undo::Restart(i) => self.replicas[i].start(&o.launcher, o.lease)?,
                Undo::Resume(i) => self.replicas[i].resume(),
                Undo::Heal(user) => self.cluster.server.partition(&user, false),
            }
        }
        // A replica that exited by itself (it must not) comes back too.
        for (i, r) in self.replicas.iter_mut().enumerate() {
            if !r.alive()
                && !self
                    .undo
                    .iter()
                    .any(|(_, u)| matches!(u, Undo::Restart(j) if *j == i))
            {
                tracing::warn!(replica = %r.name, "chaos: a replica exited; starting it again");
                r.start(&o.launcher, o.lease)?;
            }
        }
        Ok(())
    }

    async fn run(&mut self, o: &Options) -> anyhow::Result<Report> {
        let start = Instant::now();
        let period = o.lease.duration * 2 + Duration::from_secs(4);
        let mut next_disruption = start + o.lease.duration * 2;
        let mut next_churn = start;
        let order = [Disruption::Kill, Disruption::Pause, Disruption::Partition];
        let mut turn = 0;
        while start.elapsed() < o.duration {
            tokio::time::sleep(Duration::from_millis(100)).await;
            self.check();
            self.undo_due(o, false)?;
            if Instant::now() >= next_churn {
                self.churn.step();
                next_churn = Instant::now() + self.churn.pause();
            }
            if Instant::now() >= next_disruption
                && self.undo.is_empty()
                && let Some(leader) = self.leader().await
            {
                self.disrupt(order[turn % order.len()], leader, o);
                turn += 1;
                next_disruption = Instant::now() + period;
            }
        }
        // The chaos stops: every process runs, the network is whole, the
        // faults are off, the churn ends; the cluster must converge.
        let chaos_s = start.elapsed().as_secs_f64();
        self.undo_due(o, true)?;
        self.churn.settle();
        self.cluster.server.set_faults(Faults::default());
        let converged = self.converge(o).await;
        let mut report = self.report(o, chaos_s, converged);
        if !report.clean() {
            report.logs = self.logs();
        }
        Ok(report)
    }

    /// The newest resourceVersion among the controller's and the
    /// tenants' objects (Lease renewals and Events aside).
    fn version(&self) -> u64 {
        Kind::ALL
            .iter()
            .flat_map(|k| self.cluster.store.list(k.name()).0)
            .filter_map(|o| o["metadata"]["resourceVersion"].as_str()?.parse().ok())
            .max()
            .unwrap_or(0)
    }

    /// Converged: a leader whose actors have settled, a store quiet for
    /// 2 s, no set waiting that a fresh controller would place (I6), and a
    /// fresh controller on the final objects would write nothing.
    async fn converge(&mut self, o: &Options) -> bool {
        let start = Instant::now();
        let mut last = (self.version(), Instant::now());
        while start.elapsed() < o.converge_within {
            tokio::time::sleep(Duration::from_millis(100)).await;
            self.check();
            let _ = self.undo_due(o, false);
            let v = self.version();
            if v != last.0 {
                last = (v, Instant::now());
                continue;
            }
            if last.1.elapsed() < Duration::from_secs(2) || !self.settled_leader().await {
                continue;
            }
            let config = gpu_claims_actors::Config::parse(CONFIG).unwrap_or_default();
            if !progress(&self.cluster.journal, &config).is_empty() {
                continue;
            }
            if self.fresh_controller_writes().await == 0 {
                return true;
            }
        }
        false
    }

    async fn settled_leader(&mut self) -> bool {
        for r in &self.replicas {
            if let Some((200, body)) = http_get(r.http, "/debug").await
                && let Ok(d) = serde_json::from_str::<serde_json::Value>(&body)
                && d["leader"]["leading"] == true
                && d["settled"] == true
            {
                return true;
            }
        }
        false
    }

    /// The writes a controller started fresh on the objects now would make at once.
    async fn fresh_controller_writes(&self) -> usize {
        let objects: Vec<_> = Kind::ALL
            .iter()
            .flat_map(|k| {
                self.cluster
                    .store
                    .list(k.name())
                    .0
                    .into_iter()
                    .filter_map(move |v| gpu_claims_actors::api::from_json(*k, v).ok())
            })
            .collect();
        let config = gpu_claims_actors::Config::parse(CONFIG).unwrap_or_default();
        tokio::task::spawn_blocking(move || crate::plan::simulate(config, objects, &[]).0.len())
            .await
            .unwrap_or(usize::MAX)
    }

    fn report(&self, o: &Options, chaos_s: f64, converged: bool) -> Report {
        Report::new(report::Inputs {
            o,
            chaos_s,
            log: &self.cluster.server.writes(),
            done: &self.done,
            checks: self.checks,
            violations: self.violation_count,
            violation_lines: &self.violations,
            converged,
            actions: &self.churn.actions,
            restarts: self
                .replicas
                .iter()
                .map(|r| r.starts.saturating_sub(1))
                .sum(),
        })
    }

    /// Stops every replica (thawed first, so that it can die).
    fn stop(&mut self) {
        for r in &mut self.replicas {
            r.resume();
            r.kill();
        }
    }

    /// The replicas' log tails, for a failure.
    fn logs(&self) -> String {
        self.replicas
            .iter()
            .map(|r| format!("--- {}\n{}\n", r.name, r.log_tail(40)))
            .collect()
    }
}
