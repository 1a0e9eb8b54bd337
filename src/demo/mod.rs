//! `gpu-claims demo`: no cluster needed. The embedded API server on
//! loopback, a kubeconfig for it, a small GPU cluster, the controller
//! running against it over HTTP as `run` does, KubeVirt and the kubelet
//! played by the stand-in, and a story told step by step with the claims
//! after each. I1-I5 are checked all along; any violation fails the demo.

pub mod story;
pub mod view;

pub use story::{A, B, CORDONED, CUDA_JOB, H200, L40S, OPS, TAINTED};
pub use view::Snapshot;

use crate::apiserver::{self, ApiServer, Faults};
use crate::clients::Clients;
use crate::controller::{Controller, Election, Launch};
use crate::leader::LeaseArgs;
use crate::standin::StandIn;
use crate::telemetry::Logging;
use anyhow::{Context as _, bail};
use gpu_claims_actors::fixtures::{MetaBuilder, claim, class, node, pod};
use gpu_claims_actors::memory::MemCluster;
use gpu_claims_actors::memory::invariants::{Checker, progress};
use gpu_claims_actors::memory::store::Store;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct DemoArgs {
    /// Keep the API server and the controller up after the story (Ctrl-C stops).
    #[arg(long)]
    serve: bool,
    /// Where to write the kubeconfig of the embedded API server.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Where the embedded API server listens.
    #[arg(long, default_value = "127.0.0.1:0")]
    api_addr: SocketAddr,
    /// Where the controller's /metrics, /healthz, /readyz and /debug listen.
    #[arg(long, default_value = "127.0.0.1:0")]
    http_addr: SocketAddr,
    /// Faults the API server injects, e.g. `conflict=0.1,error=0.05,latency=2ms,cut=5s`.
    #[arg(long, default_value = "")]
    faults: String,
}

/// How long one step may take before the demo fails.
const STEP_TIMEOUT: Duration = Duration::from_secs(30);
/// A step has settled when the store has not changed for this long.
const QUIET: Duration = Duration::from_millis(300);
/// How long a settled controller may take to place what a fresh one would (I6).
const PROGRESS: Duration = Duration::from_secs(10);

/// The cluster the story starts from: three GPU nodes the VMs can use
/// (their cpu, memory and pods as a kubelet advertises them), a cordoned
/// and a tainted one placement must skip, two classes, a claim, and a
/// CUDA job outside gpu-claims that holds one of gpu-node-1's GPUs.
pub fn seed(cluster: &MemCluster) {
    // The tenants' namespaces, the platform's, and the controller's own (its Lease).
    for ns in [A, B, OPS, "gpu-claims"] {
        crate::apiserver::namespaces::ensure(&cluster.store, ns);
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
        node("gpu-node-3")
            .gpus(L40S, 2)
            .kubelet("32", "256Gi")
            .obj(),
        class("h200", H200).budget(6).no_finalizer().obj(),
        class("l40s", L40S).no_finalizer().obj(),
        claim(B, "shared-l40s").class("l40s").no_finalizer().obj(),
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

/// Writes `text` readable by its owner only: a kubeconfig carries a token.
fn write_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(text.as_bytes())
}

/// A file removed when the value goes: the demo's own kubeconfig.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = if self.0.is_dir() {
            std::fs::remove_dir_all(&self.0)
        } else {
            std::fs::remove_file(&self.0)
        };
    }
}

/// The user the KubeVirt stand-in creates launcher pods as.
pub const KUBEVIRT_USER: &str = "system:serviceaccount:kubevirt:kubevirt-controller";

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
    checks: usize,
    progress_checks: usize,
}

impl Observer {
    /// An observer for a controller whose `unschedulableGrace` is `grace` (I7).
    pub fn with_unschedulable_grace(cluster: Arc<MemCluster>, grace: Duration) -> Self {
        Self {
            checker: Checker::with_unschedulable_grace(grace),
            ..Self::new(cluster)
        }
    }

    pub fn new(cluster: Arc<MemCluster>) -> Self {
        Self {
            store: cluster.store.clone(),
            cluster,
            checker: Checker::default(),
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
            let stuck = progress(&self.cluster);
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

pub fn demo(args: DemoArgs) -> anyhow::Result<()> {
    let faults = Faults::parse(&args.faults).map_err(anyhow::Error::msg)?;
    let mut config = crate::config::parse("{}")?;
    config.log.filter = std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into());
    let logging = Logging::init(&config);
    let sys = crate::run::system();
    sys.block_on(async move {
        let started = Instant::now();
        let store = crate::crd::cluster_store();
        let cluster = MemCluster::new(store.clone());
        seed(&cluster);
        let server = ApiServer::start(store.clone(), args.api_addr, Some(cluster.clone()))
            .await
            .with_context(|| format!("listen on {}", args.api_addr))?;
        server.set_faults(faults.clone());
        let kubeconfig = apiserver::kubeconfig(&server.url());
        // A kubeconfig the user did not ask for goes with the demo, however it ends.
        let (path, _ours) = match args.kubeconfig {
            Some(p) => (p, None),
            None => {
                let p = std::env::temp_dir().join(format!("gpu-claims-demo-{}.kubeconfig", std::process::id()));
                (p.clone(), Some(RemoveOnDrop(p)))
            }
        };
        write_private(&path, &kubeconfig).with_context(|| format!("write {}", path.display()))?;
        println!("gpu-claims demo: an embedded API server at {}, kubeconfig {}", server.url(), path.display());
        println!("  3 nodes: gpu-node-1 (4 x H200, 128Gi), gpu-node-2 (4 x H200, 1Ti), gpu-node-3 (2 x L40S, 256Gi)");
        println!("  and 2 nodes placement skips: {CORDONED} (cordoned) and {TAINTED} (tainted dedicated=ml:NoSchedule), 4 x H200 each");
        println!("  classes h200 (budget 6) and l40s; claim {B}/shared-l40s");
        println!("  a CUDA job outside gpu-claims, {OPS}/{CUDA_JOB}, holds 1 H200 on gpu-node-1");
        if faults != Faults::default() {
            println!("  faults injected: {}", args.faults);
        }

        // The gate webhook (G1) as the chart wires it: a serving
        // certificate for its Service, the chart's webhook configuration
        // registered with it, the API server calling it over TLS.
        let tls_dir = std::env::temp_dir().join(format!("gpu-claims-demo-{}-tls", std::process::id()));
        std::fs::create_dir_all(&tls_dir).with_context(|| format!("create {}", tls_dir.display()))?;
        let _tls_dir = RemoveOnDrop(tls_dir.clone());
        let cert = crate::webhook::local::certificate(&tls_dir)?;
        crate::webhook::local::register(&server, &cert.ca_pem);
        // The controller as its own user: the checks judge its writes, not
        // what a user does with the printed kubeconfig meanwhile.
        cluster.journal_only(CONTROLLER_USER);
        let own = server.kubeconfig_for(CONTROLLER_USER);
        let clients = Clients::from_kubeconfig(&own, config.api.request_timeout).await?;
        // The demo's controller elects as `run`'s does (the Lease is free: it leads at once).
        let controller = Controller::start(Launch {
            clients,
            config,
            path: None,
            logging: Some(logging),
            webhook: Some(("127.0.0.1:0".parse()?, cert.files)),
            election: Some(Election {
                lease: LeaseArgs::default(),
                identity: crate::leader::identity(),
            }),
        })
        .await?;
        let listener = tokio::net::TcpListener::bind(args.http_addr)
            .await
            .with_context(|| format!("listen on {}", args.http_addr))?;
        let http = listener.local_addr()?;
        // The demo runs on one machine: its endpoints are open.
        let app = controller.router(crate::http::auth::HttpAuth::None);
        tokio::spawn(crate::serve::serve(listener, app, std::future::pending()));
        println!("  the controller runs over HTTP; /metrics and /debug at http://{http}");
        if let Some(hook) = controller.webhook_addr() {
            crate::webhook::local::add_endpoint(&server, hook);
            println!("  its gate webhook (G1) at https://{hook}/mutate: the API server calls it for GPU launcher pods, as the chart registers it\n");
        }
        // KubeVirt's stand-in creates launcher pods over HTTP, through the webhook.
        let kubevirt = client_for(&server.kubeconfig_for(KUBEVIRT_USER)).await?;
        let standin = StandIn::through_api(store.clone(), kubevirt);
        standin.spawn();

        let mut w = Observer::new(cluster.clone());
        let first = w.settle(|s| s.classes.len() == 2 && s.claims.len() == 1, Duration::ZERO).await?;
        println!("[{:>5.1}s] the controller adds its finalizers (L1)", started.elapsed().as_secs_f64());
        print!("{}", view::render(&first));
        let steps = story::steps();
        let mut disturbed = None;
        for (i, step) in steps.iter().enumerate() {
            let now = Snapshot::take(&store);
            (step.act)(&story::Ctx { standin: &standin, store: &store, now: &now });
            let snap = match w.settle(step.until, step.hold).await {
                Ok(snap) => snap,
                // Serving, a user may have changed the cluster under the
                // story: say so, and keep serving.
                Err(e) if args.serve => {
                    disturbed = Some(format!("step {}: {}: {e:#}", i + 1, step.title));
                    break;
                }
                Err(e) => return Err(e).with_context(|| format!("step {}: {}", i + 1, step.title)),
            };
            println!("\n[{:>5.1}s] step {}/{}: {} ({})", started.elapsed().as_secs_f64(), i + 1, steps.len(), step.title, step.rules);
            print!("{}", view::render(&snap));
        }
        if let Some(why) = &disturbed {
            println!("\nthe story was disturbed (the cluster changed under it, by you?), and the demo keeps serving:\n  {why}");
        }
        let (writes, refused) = {
            let journal = cluster.journal();
            // The Lease's renewals are leader election's, not the controller's decisions.
            let entries: Vec<_> = journal.entries.iter().filter(|e| e.kind != "Lease").collect();
            let refused = entries.iter().filter(|e| e.error.is_some()).count();
            (entries.len(), refused)
        };
        let gated = controller
            .metrics
            .webhook_requests
            .get_or_create(&crate::metrics::WebhookLabels { result: "gated".into() })
            .get();
        if disturbed.is_none() {
        println!(
            "\ndone in {:.1}s: {} steps; invariants I1-I5 and I7 checked {} times and I6 after each step, none violated; \
             the controller wrote {writes} times over HTTP ({refused} refused), none that changed nothing; \
             its webhook put {gated} launcher pods at the gate",
            started.elapsed().as_secs_f64(),
            steps.len(),
            w.checks(),
        );
        }
        if args.serve {
            // Listening before saying so: a Ctrl-C right after the line is
            // a clean stop, not the default kill.
            let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
            println!("\nserving until Ctrl-C:\n  kubectl --kubeconfig {} get gpuclaims -A\n  curl http://{http}/metrics", path.display());
            interrupt.recv().await;
        }
        controller.stop().await;
        drop(server);
        Ok(())
    })
}
