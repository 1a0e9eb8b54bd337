//! Cold start over HTTP: the embedded API server holds a converged world;
//! the controller starts against it (over a kubeconfig, as `run` does)
//! until its caches are synced and every actor has decided; the floor is
//! a bare kube-rs reflector per kind listing and watching the same objects
//! from the same server. Sides alternate; medians are reported.

use super::world::Layout;
use super::{converged_store, in_system};
use crate::memory::MemCluster;
use futures::StreamExt;
use futures::future::LocalBoxFuture;
use gpu_claims_actors::controller::{Env, StatsQuery, Supervisor};
use gpu_claims_actors::ports::Kind;
use gpu_claims_apiserver::ApiServer;
use kube::api::{Api, DynamicObject};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde::Serialize;
use std::time::{Duration, Instant};

#[derive(Serialize, Debug)]
pub struct ColdFigures {
    pub claims: usize,
    pub controller_s: f64,
    pub reflector_s: f64,
    pub ratio: f64,
    pub runs: usize,
    /// Writes the controller made on the converged world (must be 0).
    pub controller_writes: usize,
}

/// Lists and watches every kind the controller watches, until each store is ready.
async fn reflectors(kubeconfig: String) -> Duration {
    let client = crate::demo::client_for(&kubeconfig)
        .await
        .expect("a client");
    let start = Instant::now();
    let mut ready = Vec::new();
    for kind in Kind::ALL {
        let ar = kind.api_resource();
        let a: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        let writer = reflector::store::Writer::new(ar);
        let reader = writer.as_reader();
        // Every pod, as the controller watches them.
        let config = watcher::Config::default().any_semantic();
        let stream = watcher(a, config).default_backoff().reflect(writer);
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while stream.next().await.is_some() {}
        });
        ready.push(reader);
    }
    for r in ready {
        r.wait_until_ready().await.expect("the reflector syncs");
    }
    start.elapsed()
}

/// The operator a cold start measures, started by whoever can link it (the
/// testbed sits below the operator): it starts the controller against
/// `kubeconfig` and answers its supervisor and environment once started.
pub trait Operator: Send + Sync + 'static {
    fn start(&self, kubeconfig: String) -> LocalBoxFuture<'static, Started>;
    /// The gate webhook's storm: `reviews` launcher pod reviews over
    /// `connections` kept TLS connections (the webhook is the operator's).
    fn webhook(
        &self,
        reviews: usize,
        connections: usize,
    ) -> LocalBoxFuture<'static, anyhow::Result<super::WebhookFigures>>;
    /// `/metrics` over a world, as the operator serves it.
    fn scraper(&self) -> super::scrape::MakeScraper;
}

/// A started controller: what the measurement watches, and what keeps it
/// running until dropped.
pub struct Started {
    pub supervisor: actix::Addr<Supervisor>,
    pub env: std::sync::Arc<Env>,
    pub keep: Box<dyn std::any::Any>,
}

/// Starts the controller; the time until it has synced and decided.
async fn controller(operator: std::sync::Arc<dyn Operator>, kubeconfig: String) -> Duration {
    let start = Instant::now();
    let c = operator.start(kubeconfig).await;
    loop {
        if c.supervisor.send(StatsQuery).await.is_ok_and(|s| s.synced) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    // Converged: every actor poked at sync has decided, which shows as the
    // activity counters at rest. The time is that of the last activity,
    // not of the quiet spell that proves it.
    let activity = &c.env.activity;
    let mut last = (activity.ticks(), start.elapsed());
    loop {
        tokio::time::sleep(Duration::from_millis(1)).await;
        let t = activity.ticks();
        if t != last.0 || activity.in_flight() != 0 {
            last = (t, start.elapsed());
        } else if start.elapsed() - last.1 > Duration::from_millis(100) {
            return last.1;
        }
    }
}

pub fn measure(
    claims: usize,
    runs: usize,
    operator: std::sync::Arc<dyn Operator>,
) -> anyhow::Result<ColdFigures> {
    let layout = Layout::new(claims, 0);
    eprintln!("[cold start] building and converging {claims} claims");
    let store = converged_store(&layout);
    measure_store(store, claims, runs, operator)
}

/// The cold start over a converged `store` (`claims` claims).
pub fn measure_store(
    store: std::sync::Arc<crate::memory::store::Store>,
    claims: usize,
    runs: usize,
    operator: std::sync::Arc<dyn Operator>,
) -> anyhow::Result<ColdFigures> {
    // The server lives on its own runtime for the whole measurement.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let journal = MemCluster::new(store.clone());
    let server = rt.block_on(
        ApiServer::builder()
            .store(store)
            .namespace("gpu-claims")
            .journal(journal.clone())
            .start(),
    )?;
    let kubeconfig = server.kubeconfig();
    eprintln!("[cold start] {runs} runs, the reflectors first in each");
    let (mut ctl, mut refl) = (Vec::new(), Vec::new());
    for run in 0..runs {
        let k = kubeconfig.clone();
        let r = in_system(move || Box::pin(reflectors(k)));
        let k = kubeconfig.clone();
        let o = operator.clone();
        let c = in_system(move || Box::pin(controller(o, k)));
        eprintln!("[cold start] run {run}: reflector {r:?}, controller {c:?}");
        refl.push(r);
        ctl.push(c);
    }
    let writes = journal.journal().entries.len();
    // A converged world gets no write: any is a defect, said in full.
    for e in &journal.journal().entries {
        eprintln!(
            "[cold start] write: {} {} {:?}/{} ({}) {:?}",
            e.op, e.kind, e.namespace, e.name, e.rule, e.status
        );
    }
    let c = super::percentile(&mut ctl, 50.0).as_secs_f64();
    let r = super::percentile(&mut refl, 50.0).as_secs_f64();
    drop(server);
    Ok(ColdFigures {
        claims,
        controller_s: (c * 1000.0).round() / 1000.0,
        reflector_s: (r * 1000.0).round() / 1000.0,
        ratio: (c / r * 100.0).round() / 100.0,
        runs,
        controller_writes: writes,
    })
}
