//! kube-runtime watchers that feed the supervisor: each kind listed, then
//! every change, with backpressure (`send().await` waits when the
//! supervisor's mailbox is full). A relist after an expired
//! resourceVersion arrives as `Relisted`, so deletions missed meanwhile
//! are seen too.

use crate::telemetry::FailureStreak;
use actix::Addr;
use futures::StreamExt;
use gpu_claims_actors::controller::{Supervisor, WorldEvent};
use gpu_claims_actors::ports::{Kind, Obj};
use kube::Client;
use kube::runtime::{WatchStreamExt, watcher};
use read::Watched;
use std::sync::Arc;
use tracing::{Instrument, info, info_span, warn};

mod backoff;
mod health;
mod read;
pub use health::{WatchHealth, WatchState, layer as answers_layer};

/// The server-side timeout of each watch request (timeoutSeconds).
pub const WATCH_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Watches one kind until the process ends.
pub async fn watch(client: Client, kind: Kind, to: Addr<Supervisor>, health: Arc<WatchHealth>) {
    // Each kind's objects are read as its own type (see `read`).
    const _: () = assert!(Kind::ALL.len() == 13);
    let at = Kind::ALL.iter().position(|k| *k == kind);
    match at {
        Some(0) => watch_as::<0>(client, to, health).await,
        Some(1) => watch_as::<1>(client, to, health).await,
        Some(2) => watch_as::<2>(client, to, health).await,
        Some(3) => watch_as::<3>(client, to, health).await,
        Some(4) => watch_as::<4>(client, to, health).await,
        Some(5) => watch_as::<5>(client, to, health).await,
        Some(6) => watch_as::<6>(client, to, health).await,
        Some(7) => watch_as::<7>(client, to, health).await,
        Some(8) => watch_as::<8>(client, to, health).await,
        Some(9) => watch_as::<9>(client, to, health).await,
        Some(10) => watch_as::<10>(client, to, health).await,
        Some(11) => watch_as::<11>(client, to, health).await,
        Some(12) => watch_as::<12>(client, to, health).await,
        _ => warn!(kind = kind.name(), "not a watched kind"),
    }
}

/// Watches `Kind::ALL[K]`.
async fn watch_as<const K: usize>(client: Client, to: Addr<Supervisor>, health: Arc<WatchHealth>) {
    let kind = Watched::<K>::KIND;
    health.set(kind, |_| {});
    // Every pod, not only launchers: G3 counts what pods outside
    // gpu-claims use on each node (docs/design.md, "Objects"); the cache keeps of each only
    // its node and request.
    let config = watcher::Config::default()
        .any_semantic()
        .timeout(WATCH_TIMEOUT.as_secs() as u32);
    let mut listed: Vec<Obj> = Vec::new();
    let mut unreadable = Vec::new();
    let mut streak = FailureStreak::default();
    // An optional kind the cluster does not serve, told once as empty.
    let mut absent = false;
    let versions = versions_of(kind);
    let mut at = 0;
    async move {
        'versions: loop {
        let version = versions.get(at).copied().unwrap_or_default();
        let stream = watcher(api_at::<K>(&client, version), config.clone())
            .backoff(backoff::WatchBackoff::default());
        let mut stream = std::pin::pin!(stream);
        while let Some(ev) = stream.next().await {
            let ev = match ev {
                Ok(ev) => {
                    // Init comes before each attempt to list: only what
                    // follows it says the API server answered.
                    if !matches!(ev, watcher::Event::Init) {
                        health.answered(kind);
                        if let Some(failures) = streak.succeeded() {
                            info!(failures, "watch recovered");
                        }
                    }
                    ev
                }
                Err(error) if optional_not_served(kind, &error) && at + 1 < versions.len() => {
                    // An older Kubernetes serves the kind at an older
                    // version (DeviceTaintRule: v1beta2 in 1.36).
                    at += 1;
                    info!(%error, version = versions[at], "not served at {version}: watching the older version");
                    continue 'versions;
                }
                Err(error) if optional_not_served(kind, &error) => {
                    // GPUQuota's CRD missing (an upgrade whose CRDs were
                    // not applied: Helm does not upgrade them): no quota
                    // applies, and every other rule goes on. A DRA kind
                    // missing (a cluster before 1.34, or with DRA off): DRA
                    // classes say DRAUnavailable. The watcher keeps trying;
                    // once the kind is served, it lists.
                    health.answered(kind);
                    if !absent {
                        absent = true;
                        warn!(%error, "this kind is not served: none exist until it is");
                        if to.send(WorldEvent::NotServed { kind }).await.is_err() {
                            return;
                        }
                    }
                    if versions.len() > 1 {
                        // Every version tried: the newest again after a
                        // while (a cluster upgraded meanwhile).
                        tokio::time::sleep(RETRY_VERSIONS).await;
                        at = 0;
                        continue 'versions;
                    }
                    continue;
                }
                Err(error) => {
                    health.failed(kind, error.to_string());
                    if let Some(failures) = streak.failed() {
                        warn!(%error, failures, "watch failed; retrying with backoff");
                    }
                    continue;
                }
            };
            let out = match ev {
                watcher::Event::Init => {
                    listed.clear();
                    unreadable.clear();
                    None
                }
                watcher::Event::InitApply(o) => {
                    match o.into_result() {
                        Ok(obj) => listed.push(obj),
                        Err(bad) => unreadable.push(bad),
                    }
                    None
                }
                watcher::Event::InitDone => {
                    absent = false;
                    // kube-runtime does not tell the list's resourceVersion.
                    Some(WorldEvent::Relisted {
                        kind,
                        objects: std::mem::take(&mut listed),
                        list_rv: None,
                        unreadable: std::mem::take(&mut unreadable),
                    })
                }
                watcher::Event::Apply(o) => Some(WorldEvent::read(kind, o.into_result(), false)),
                watcher::Event::Delete(o) => Some(WorldEvent::read(kind, o.into_result(), true)),
            };
            if let Some(ev) = out
                && to.send(ev).await.is_err()
            {
                return; // the supervisor is gone: the process is ending
            }
        }
        return;
        }
    }
    .instrument(info_span!("watch", kind = kind.name()))
    .await
}

/// How long a kind no version of which is served waits before the newest
/// is asked for again.
const RETRY_VERSIONS: std::time::Duration = std::time::Duration::from_secs(60);

/// The versions a kind is watched at, newest first: DeviceTaintRule is
/// `resource.k8s.io/v1` from Kubernetes 1.37, `v1beta2` in 1.36, with the
/// same fields (read as v1). Other kinds: their one version.
fn versions_of(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::DeviceTaintRule => &["v1", "v1beta2"],
        _ => &[""],
    }
}

/// The kind's API at `version` ("" for its own).
fn api_at<const K: usize>(client: &Client, version: &str) -> kube::Api<Watched<K>> {
    let mut ar = Watched::<K>::KIND.api_resource();
    if !version.is_empty() {
        ar.api_version = format!("{}/{version}", ar.group);
        ar.version = version.to_string();
    }
    kube::Api::all_with(client.clone(), &ar)
}

/// A list of a kind the controller can do without (GPUQuota, DRA's
/// kinds) answered 404: its CRD is not installed, or the cluster has no DRA.
fn optional_not_served(kind: Kind, error: &watcher::Error) -> bool {
    let optional =
        kind == Kind::Quota || kind == Kind::DeviceTaintRule || Kind::DRA.contains(&kind);
    optional
        && matches!(error, watcher::Error::InitialListFailed(kube::Error::Api(s)) if s.code == 404)
}
