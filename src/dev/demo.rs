//! `gpu-claims demo`: no cluster needed. The embedded API server on
//! loopback, a kubeconfig for it, the testbed's small GPU cluster, the
//! controller running against it over HTTP as `run` does (its gate webhook
//! registered as the chart registers it), KubeVirt and the kubelet played
//! by the stand-in, and the story told step by step with the claims after
//! each. I1-I5 and I7-I11 are checked all along, I6 after each step; any
//! violation fails the demo.

use crate::clients::Clients;
use crate::controller::{Controller, Election, Launch};
use crate::http::auth::HttpAuth;
use crate::leader::LeaseArgs;
use crate::telemetry::Logging;
use anyhow::Context as _;
use gpu_claims_apiserver::{ApiServer, Faults};
use gpu_claims_testbed::demo::{
    B, CONTROLLER_USER, CORDONED, CUDA_JOB, KUBEVIRT_USER, OPS, Observer, TAINTED, client_for,
    seed, tell,
};
use gpu_claims_testbed::memory::MemCluster;
use gpu_claims_testbed::standin::StandIn;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Instant;

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
    /// Who may read /metrics and /debug: `none` (anyone: the demo runs on
    /// one machine), or `kubernetes`, as `run` and the chart serve them: a
    /// bearer token the embedded API server's TokenReview accepts, of a
    /// user RBAC lets get the path (the chart's metrics-reader role).
    #[arg(long, value_enum, default_value_t = HttpAuth::None)]
    http_auth: HttpAuth,
}

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

pub fn demo(args: DemoArgs) -> anyhow::Result<()> {
    let faults = Faults::parse(&args.faults).map_err(anyhow::Error::msg)?;
    let mut config = gpu_claims_testbed::demo::config();
    config.log.filter = std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into());
    let config_filter = config.log.filter.clone();
    // The controller's log lines go to a file, so that the story reads
    // on the terminal; the file stays when something was logged.
    let log_path = std::env::temp_dir().join(format!("gpu-claims-demo-{}.log", std::process::id()));
    let log_file = std::fs::File::create(&log_path)
        .with_context(|| format!("create {}", log_path.display()))?;
    let logging = Logging::init_file(&config, log_file);
    let sys = gpu_claims_actors::controller::system();
    sys.block_on(async move {
        let started = Instant::now();
        let store = gpu_claims_testbed::crds::cluster_store();
        let cluster = MemCluster::new(store.clone());
        seed(&cluster);
        let server = ApiServer::builder()
            .store(store.clone())
            .addr(args.api_addr)
            .journal(cluster.clone())
            .start()
            .await?;
        server.set_faults(faults.clone());
        let kubeconfig = server.kubeconfig();
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
        println!("  the controller's config: the defaults, and queueing.headOfLineAfter 0s (5m by default), so that the queue scene plays in seconds");
        println!("  the controller's log ({config_filter} and above): {}", log_path.display());
        if faults != Faults::default() {
            println!("  faults injected: {}", args.faults);
        }

        // The gate webhook (G1) as the chart wires it: a serving
        // certificate for its Service, the chart's webhook configuration
        // registered with it, the API server calling it over TLS.
        let tls_dir = std::env::temp_dir().join(format!("gpu-claims-demo-{}-tls", std::process::id()));
        std::fs::create_dir_all(&tls_dir).with_context(|| format!("create {}", tls_dir.display()))?;
        let _tls_dir = RemoveOnDrop(tls_dir.clone());
        let cert = super::webhook::certificate(&tls_dir)?;
        super::webhook::register(&server, &cert.ca_pem);
        // The controller as its own user: the checks judge its writes, not
        // what a user does with the printed kubeconfig meanwhile.
        cluster.journal_only(CONTROLLER_USER);
        let own = server.kubeconfig_for(CONTROLLER_USER);
        let config_timeout = config.api.request_timeout;
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
        let app = controller.router(args.http_auth);
        tokio::spawn(crate::serve::serve(listener, app, std::future::pending()));
        println!("  the controller runs over HTTP; /metrics and /debug at http://{http}");
        if let Some(hook) = controller.webhook_addr() {
            super::webhook::add_endpoint(&server, hook);
            println!("  its gate webhook (G1) at https://{hook}/mutate: the API server calls it for GPU launcher pods, as the chart registers it\n");
        }
        // KubeVirt's stand-in creates launcher pods over HTTP, through the webhook.
        let kubevirt = client_for(&server.kubeconfig_for(KUBEVIRT_USER)).await?;
        let standin = StandIn::through_api(store.clone(), kubevirt);
        standin.spawn();

        let mut w = Observer::new(cluster.clone());
        // O3: the queue as `gpu-claims status` shows it, read over HTTP as
        // the command reads it (its waiting sets and its heads).
        let user = kubeconfig.clone();
        let timeout = config_timeout;
        let status = move || -> std::pin::Pin<Box<dyn std::future::Future<Output = String>>> {
            let user = user.clone();
            Box::pin(async move { queue_status(&user, timeout).await.unwrap_or_else(|e| format!("status: {e:#}")) })
        };
        let told = tell(&mut w, &standin, started, args.serve, &status).await?;
        if let Some(why) = &told.disturbed {
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
        if told.disturbed.is_none() {
        println!(
            "\ndone in {:.1}s: {} steps; invariants I1-I5 and I7-I11 checked {} times and I6 after each step, none violated; \
             the controller wrote {writes} times over HTTP ({refused} refused), none that changed nothing; \
             its webhook put {gated} launcher pods at the gate",
            started.elapsed().as_secs_f64(),
            told.steps,
            w.checks(),
        );
        }
        // What a dashboard would show of it, from the controller's /metrics.
        match controller.metrics_text() {
            Ok(text) => println!(
                "\nwhat a dashboard of this cluster shows (from http://{http}/metrics):\n\n{}",
                super::dashboard::summary(&text).trim_end()
            ),
            Err(e) => println!("\n/metrics could not be read: {e}"),
        }
        if args.serve {
            // Listening before saying so: a Ctrl-C right after the line is
            // a clean stop, not the default kill.
            let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
            let curl = match args.http_auth {
                HttpAuth::None => format!("curl http://{http}/metrics"),
                // As a Prometheus scrapes it: a token RBAC lets get /metrics.
                HttpAuth::Kubernetes => format!("curl -H \"Authorization: Bearer $TOKEN\" http://{http}/metrics"),
            };
            println!("\nserving until Ctrl-C:\n  kubectl --kubeconfig {} get gpuclaims -A\n  {curl}", path.display());
            interrupt.recv().await;
        }
        controller.stop().await;
        drop(server);
        let logged = std::fs::read_to_string(&log_path).map(|t| t.lines().count()).unwrap_or(0);
        if logged == 0 {
            let _ = std::fs::remove_file(&log_path);
        } else {
            println!("\nthe controller logged {logged} lines at {} and above: {}", config_filter, log_path.display());
        }
        Ok(())
    })
}

/// The sections of `gpu-claims status` about the queue (O3): its waiting
/// sets in order, and the head of each class.
async fn queue_status(kubeconfig: &str, timeout: std::time::Duration) -> anyhow::Result<String> {
    let clients = Clients::from_kubeconfig(kubeconfig, timeout).await?;
    let (world, _) =
        crate::status::read_world(&clients, &gpu_claims_actors::ports::Kind::ALL).await?;
    let table = crate::status::table(
        &gpu_claims_actors::status::report(&world),
        k8s_openapi::jiff::Timestamp::now(),
    );
    let sections: Vec<&str> = table
        .split("\n\n")
        .filter(|s| s.starts_with("WAITING AT THE GATE") || s.starts_with("QUEUE HEADS"))
        .collect();
    Ok(sections.join("\n\n"))
}
