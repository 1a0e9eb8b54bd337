//! Whether each watch is current, for `/readyz` and `/debug`. A watch is
//! healthy from an answer (a list or watch request answered 2xx, seen by a
//! layer on the watch client, or an event) until an attempt fails (an
//! error from the watcher), and again from the next answer. A re-watch
//! that succeeds brings no event on a quiet cluster: only the layer sees
//! that it was answered.

use gpu_claims_actors::ports::Kind;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

/// Whether each watch is current, for `/readyz` and `/debug`: a watch is
/// healthy from its first answer until an attempt to list or watch fails,
/// and again from the next answer.
#[derive(Default)]
pub struct WatchHealth(Mutex<BTreeMap<&'static str, WatchState>>);

#[derive(Clone, Debug, serde::Serialize)]
pub struct WatchState {
    pub healthy: bool,
    /// Failed attempts since the last answer.
    pub failures: u64,
    pub last_error: Option<String>,
}

impl WatchHealth {
    pub(super) fn set(&self, kind: Kind, f: impl FnOnce(&mut WatchState)) {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        f(m.entry(kind.name()).or_insert(WatchState {
            healthy: false,
            failures: 0,
            last_error: Some("not listed yet".into()),
        }));
    }

    pub(super) fn answered(&self, kind: Kind) {
        self.set(kind, |s| {
            *s = WatchState {
                healthy: true,
                failures: 0,
                last_error: None,
            }
        });
    }

    pub(super) fn failed(&self, kind: Kind, error: String) {
        self.set(kind, |s| {
            s.healthy = false;
            s.failures += 1;
            s.last_error = Some(error);
        });
    }

    /// Each watch's state, by kind.
    pub fn states(&self) -> BTreeMap<&'static str, WatchState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The watches that are not current, with why.
    pub fn unhealthy(&self) -> Vec<String> {
        self.states()
            .into_iter()
            .filter(|(_, s)| !s.healthy)
            .map(|(k, s)| format!("{k}: {}", s.last_error.unwrap_or_default()))
            .collect()
    }
}

/// The kind a list or watch request's path is for: its last segment is
/// the resource's plural (the watch client lists and watches cluster-wide).
fn kind_of(path: &str) -> Option<Kind> {
    let plural = path.rsplit('/').next()?;
    Kind::ALL
        .into_iter()
        .find(|k| k.api_resource().plural == plural)
}

/// A layer on the watch client that marks a kind's watch answered when a
/// request for it is answered 2xx.
pub fn layer<S>(health: Arc<WatchHealth>) -> impl tower::Layer<S, Service = Answers<S>> + Clone {
    tower::layer::layer_fn(move |inner| Answers {
        inner,
        health: health.clone(),
    })
}

#[derive(Clone)]
pub struct Answers<S> {
    inner: S,
    health: Arc<WatchHealth>,
}

impl<S, Req, Res> tower::Service<http::Request<Req>> for Answers<S>
where
    S: tower::Service<http::Request<Req>, Response = http::Response<Res>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = futures::future::BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<Req>) -> Self::Future {
        let kind = kind_of(req.uri().path());
        let health = self.health.clone();
        let answer = self.inner.call(req);
        Box::pin(async move {
            let r = answer.await;
            if let (Some(kind), Ok(res)) = (kind, &r)
                && res.status().is_success()
            {
                health.answered(kind);
            }
            r
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_path_names_the_kind_it_lists_or_watches() {
        assert_eq!(kind_of("/api/v1/pods"), Some(Kind::Pod));
        assert_eq!(kind_of("/api/v1/nodes"), Some(Kind::Node));
        assert_eq!(
            kind_of("/apis/kubevirt.io/v1/virtualmachineinstances"),
            Some(Kind::Vmi)
        );
        assert_eq!(
            kind_of("/apis/coordination.k8s.io/v1/namespaces/x/leases"),
            None
        );
    }

    #[test]
    fn a_watch_is_unhealthy_from_a_failure_until_the_next_answer() {
        let h = WatchHealth::default();
        h.set(Kind::Node, |_| {});
        assert_eq!(h.unhealthy(), ["Node: not listed yet"]);
        h.answered(Kind::Node);
        assert!(h.unhealthy().is_empty());
        h.failed(Kind::Node, "connection refused".into());
        h.failed(Kind::Node, "connection refused".into());
        assert_eq!(h.unhealthy(), ["Node: connection refused"]);
        assert_eq!(h.states()["Node"].failures, 2);
        h.answered(Kind::Node);
        assert!(h.unhealthy().is_empty());
    }
}
