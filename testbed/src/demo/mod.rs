//! The demo's world and story: a small GPU cluster (`seed`), the story
//! told step by step over it (`story`, `tell`), the claims after each
//! (`view`), and the observer that checks I1-I7 all along and I6 after
//! each step (`Observer`). `gpu-claims demo` runs the operator's controller
//! against it over HTTP; the end-to-end tests run the same story.

pub mod story;
pub mod view;

pub use story::{A, B, CORDONED, CUDA_JOB, DRA_NODES, H200, L40S, OPS, TAINTED};
pub use view::Snapshot;

use crate::fixtures::{MetaBuilder, claim, class, node, pod, quota};
use crate::memory::MemCluster;
use crate::memory::invariants::{Checker, progress};
use crate::memory::store::Store;
use crate::standin::StandIn;
use anyhow::bail;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long one step may take before the demo fails.
const STEP_TIMEOUT: Duration = Duration::from_secs(30);
/// A step has settled when the store has not changed for this long.
const QUIET: Duration = Duration::from_millis(300);
/// How long a settled controller may take to place what a fresh one would (I6).
const PROGRESS: Duration = Duration::from_secs(10);

/// The cluster the story starts from: three GPU nodes the VMs can use
/// (their cpu, memory and pods as a kubelet advertises them), a cordoned
/// and a tainted one placement must skip, two DRA nodes whose GPUs
/// NVIDIA's DRA driver publishes, two classes, a claim, and a CUDA job
/// outside gpu-claims that holds one of gpu-node-1's GPUs.
pub fn seed(cluster: &MemCluster) {
    // The tenants' namespaces, the platform's, and the controller's own (its Lease).
    for ns in [A, B, OPS, "gpu-claims"] {
        gpu_claims_apiserver::namespaces::ensure(&cluster.store, ns);
    }
    let objs = [
        // Each would be the first best fit by name: G3's scheduler filters
        // skip them (the stand-in's pods tolerate neither).
        node(CORDONED)
            .gpus(H200, 4)
            .kubelet("64", "512Gi")
            .cordoned()
            .obj(),
        node(TAINTED)
            .gpus(H200, 4)
            .kubelet("64", "512Gi")
            .taint("dedicated", "ml", "NoSchedule")
            .obj(),
        node("gpu-node-1")
            .gpus(H200, 4)
            .kubelet("64", "128Gi")
            .obj(),
        node("gpu-node-2").gpus(H200, 4).kubelet("128", "1Ti").obj(),
        // DRA nodes (D1-D8): their GPUs are bound to vfio-pci and
        // NVIDIA's DRA driver publishes them in ResourceSlices; no device
        // plugin advertises them.
        node(DRA_NODES[0])
            .passthrough_gpus("NVIDIA H200", 4, "141Gi", "0x2335")
            .kubelet("64", "512Gi")
            .obj(),
        node(DRA_NODES[1])
            .passthrough_gpus("NVIDIA H200", 2, "141Gi", "0x2335")
            .kubelet("64", "512Gi")
            .obj(),
        node("gpu-node-3")
            .gpus(L40S, 2)
            .kubelet("32", "256Gi")
            .obj(),
        class("h200", H200).budget(6).no_finalizer().obj(),
        class("l40s", L40S).no_finalizer().obj(),
        claim(B, "shared-l40s").class("l40s").no_finalizer().obj(),
        // Tenant A's GPUs, as the platform sets them (docs/design.md, "Tenant quotas"): room for
        // what the story starts; its status shows what the tenant holds.
        quota(A, "gpus")
            .hard("h200", 6)
            .hard("l40s", 1)
            .total(8)
            .obj(),
        // A pod outside gpu-claims, bound before the controller ever ran:
        // placement counts its GPU (G3), as the kubelet does.
        pod(OPS, CUDA_JOB)
            .scheduled("gpu-node-1")
            .requests(&[(H200, "1"), ("cpu", "2"), ("memory", "8Gi")])
            .phase("Running")
            .obj(),
    ];
    for o in &objs {
        cluster.seed(o);
    }
}

/// The user the demo's controller acts as.
pub const CONTROLLER_USER: &str = "system:serviceaccount:gpu-claims:gpu-claims";

/// The user the KubeVirt stand-in creates launcher pods as.
pub const KUBEVIRT_USER: &str = "system:serviceaccount:kubevirt:kubevirt-controller";

/// The demo's controller config: the defaults, but for
/// `queueing.headOfLineAfter`, `0s` (strict order at once), so that the
/// story's queue scene plays in seconds.
pub fn config() -> gpu_claims_actors::config::Config {
    let mut c = gpu_claims_actors::config::Config::default();
    c.queueing.head_of_line_after = Some(story::HEAD_OF_LINE_AFTER);
    c
}

/// The same as a config file's lines, for a controller started with one.
pub const CONFIG_QUEUEING: &str = "queueing:\n  headOfLineAfter: 0s\n";

/// A kube client for the kubeconfig text.
pub async fn client_for(kubeconfig: &str) -> anyhow::Result<kube::Client> {
    let kc = kube::config::Kubeconfig::from_yaml(kubeconfig)?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
    Ok(kube::Client::try_from(cfg)?)
}

/// Watches a story unfold: waits for each step's end, checking I1-I5
/// every 50 ms on the way.
pub struct Observer {
    store: Arc<Store>,
    cluster: Arc<MemCluster>,
    checker: Checker,
    /// The controller's config (I6 holds sets back behind a head as its
    /// `queueing` says).
    config: gpu_claims_actors::config::Config,
    checks: usize,
    progress_checks: usize,
}

impl Observer {
    /// An observer for a controller running `config` (I7's grace, I10's
    /// evacuation, I11's `headOfLineAfter`).
    pub fn for_config(
        cluster: Arc<MemCluster>,
        config: &gpu_claims_actors::config::Config,
    ) -> Self {
        Self {
            checker: Checker::for_config(config),
            config: config.clone(),
            ..Self::new(cluster)
        }
    }

    /// An observer for a controller running the demo's config ([`config`]).
    pub fn new(cluster: Arc<MemCluster>) -> Self {
        Self {
            store: cluster.store.clone(),
            cluster,
            checker: Checker::for_config(&config()),
            config: config(),
            checks: 0,
            progress_checks: 0,
        }
    }

    /// How many times the invariants were checked.
    pub fn checks(&self) -> usize {
        self.checks
    }

    pub fn check(&mut self) -> anyhow::Result<()> {
        self.checks += 1;
        let v = self.checker.check(&self.cluster);
        if !v.is_empty() {
            bail!("invariants violated:\n  {}", v.join("\n  "));
        }
        // The server validates as Kubernetes does: a write it refuses as
        // invalid would be refused by a real cluster too.
        let invalid: Vec<String> = self
            .cluster
            .journal()
            .entries
            .iter()
            .filter(|e| e.invalid)
            .map(|e| {
                let ns = e.namespace.as_deref().unwrap_or_default();
                let why = e.error.as_deref().unwrap_or_default();
                format!("{} {} {ns}/{}: {why}", e.op, e.kind, e.name)
            })
            .collect();
        if !invalid.is_empty() {
            bail!(
                "writes the API server refused as invalid:\n  {}",
                invalid.join("\n  ")
            );
        }
        Ok(())
    }

    /// I6, once a step has settled: no set waits that a fresh controller
    /// would place. A controller may still be settling (a retry after an
    /// injected 409 or 500 is due within seconds): it gets `PROGRESS` to.
    pub async fn check_progress(&mut self) -> anyhow::Result<()> {
        let start = Instant::now();
        loop {
            let stuck = progress(&self.cluster, &self.config);
            if stuck.is_empty() {
                self.progress_checks += 1;
                return Ok(());
            }
            if start.elapsed() > PROGRESS {
                bail!("invariant violated:\n  {}", stuck.join("\n  "));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// How many times I6 was checked.
    pub fn progress_checks(&self) -> usize {
        self.progress_checks
    }

    /// The newest resourceVersion among the objects the story is about:
    /// Lease renewals and Events do not keep a step from being quiet.
    fn version(&self) -> u64 {
        gpu_claims_actors::ports::Kind::ALL
            .iter()
            .flat_map(|k| self.store.list(k.name()).0)
            .filter_map(|o| o["metadata"]["resourceVersion"].as_str()?.parse().ok())
            .max()
            .unwrap_or(0)
    }

    /// Waits until `until` holds, for `hold`, on a quiet cluster,
    /// checking the invariants all along.
    pub async fn settle(
        &mut self,
        until: impl Fn(&Snapshot) -> bool,
        hold: Duration,
    ) -> anyhow::Result<Snapshot> {
        let start = Instant::now();
        let mut last = (self.version(), Instant::now());
        let mut held_since: Option<Instant> = None;
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            self.check()?;
            let rv = self.version();
            if rv != last.0 {
                last = (rv, Instant::now());
            }
            let snap = Snapshot::take(&self.store);
            if until(&snap) {
                let since = *held_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= hold && last.1.elapsed() >= QUIET {
                    self.check_progress().await?;
                    return Ok(snap);
                }
            } else {
                held_since = None;
            }
            if start.elapsed() > STEP_TIMEOUT {
                bail!(
                    "the step did not end within {STEP_TIMEOUT:?}; the claims now:\n{}",
                    view::render(&snap)
                );
            }
        }
    }
}

/// How a told story ended.
#[derive(Debug)]
pub struct Told {
    /// The steps of the story.
    pub steps: usize,
    /// The step a change under the story kept from ending (told only when
    /// `keep_going`: a user may change the cluster of a served demo).
    pub disturbed: Option<String>,
}

/// Tells the story over `cluster`: waits for the controller's finalizers,
/// then acts each step and waits for it to end, printing the claims after
/// each. A step that does not end fails the story, unless `keep_going`,
/// when it ends the story as disturbed. A step that shows O3 (what an
/// operator sees) prints what `status` says then.
pub async fn tell(
    w: &mut Observer,
    standin: &StandIn,
    started: Instant,
    keep_going: bool,
    status: &dyn Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = String>>>,
) -> anyhow::Result<Told> {
    let store = w.store.clone();
    let first = w
        .settle(
            |s| s.classes.len() == 2 && s.claims.len() == 1,
            Duration::ZERO,
        )
        .await?;
    println!(
        "Each step names, in brackets, the rules it shows (docs/design.md): L a claim's life \
         (the original controller's), G placement at the gate, Q quotas, D GPUs of a DRA driver, \
         E evacuating a node, O the order at the gate. After each step, the claims that changed.\n"
    );
    println!(
        "[{:>5.1}s] the controller adds its finalizers (L1)",
        started.elapsed().as_secs_f64()
    );
    print!("{}", view::render(&first));
    let mut before = first;
    let steps = story::steps();
    for (i, step) in steps.iter().enumerate() {
        let now = Snapshot::take(&store);
        (step.act)(&story::Ctx {
            standin,
            store: &store,
            now: &now,
        });
        let snap = match w.settle(step.until, step.hold).await {
            Ok(snap) => snap,
            Err(e) if keep_going => {
                return Ok(Told {
                    steps: steps.len(),
                    disturbed: Some(format!("step {}: {}: {e:#}", i + 1, step.title)),
                });
            }
            Err(e) => return Err(e.context(format!("step {}: {}", i + 1, step.title))),
        };
        println!(
            "\n[{:>5.1}s] step {}/{}: {} ({})",
            started.elapsed().as_secs_f64(),
            i + 1,
            steps.len(),
            step.title,
            step.rules
        );
        print!("{}", view::render_changes(&before, &snap));
        before = snap;
        if step.rules.split_whitespace().any(|r| r == "O3") {
            println!("    what `gpu-claims status` shows now:");
            for line in status().await.lines() {
                match line.is_empty() {
                    true => println!(),
                    false => println!("      {line}"),
                }
            }
        }
    }
    println!("\nthe claims at the end:");
    print!("{}", view::render(&before));
    Ok(Told {
        steps: steps.len(),
        disturbed: None,
    })
}
