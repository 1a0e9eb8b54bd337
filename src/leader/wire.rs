//! The fence again, at the wire: a layer on the request client that
//! refuses a mutating request (not the Lease's own) when the fence is
//! closed, checked when the request is made and again when it is first
//! polled, just before it is sent. The writer's guard refuses writes
//! typed and first; this catches what passes it and is sent later (an
//! Event whose recorder makes several requests, a request the process
//! was frozen in the middle of).

use super::Fence;
use http::Method;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

/// Where the fence goes once the process elects (set once), with the
/// Lease it guards.
pub type FenceSlot = Arc<OnceLock<WireFence>>;

/// The fence, and the paths of the Lease the elector writes whatever the
/// fence says: exactly those, never a path that merely contains `leases`
/// (a tenant's namespace or claim may be named so).
pub struct WireFence {
    pub fence: Arc<Fence>,
    /// `/apis/coordination.k8s.io/v1/namespaces/<ns>/leases`, where the
    /// Lease is made.
    lease_collection: String,
    /// The same and `/<name>`: the Lease renewed, taken and released.
    lease: String,
}

impl WireFence {
    pub fn new(fence: Arc<Fence>, lease_namespace: &str, lease_name: &str) -> Self {
        let lease_collection =
            format!("/apis/coordination.k8s.io/v1/namespaces/{lease_namespace}/leases");
        let lease = format!("{lease_collection}/{lease_name}");
        Self {
            fence,
            lease_collection,
            lease,
        }
    }

    /// The Lease's own requests: its create, and its writes.
    fn lease_request(&self, method: &Method, path: &str) -> bool {
        (*method == Method::POST && path == self.lease_collection) || path == self.lease
    }
}

/// The reviews a standby's /metrics guard makes: they change nothing.
const REVIEWS: [&str; 2] = [
    "/apis/authentication.k8s.io/v1/tokenreviews",
    "/apis/authorization.k8s.io/v1/subjectaccessreviews",
];

/// The request was not sent: the fence is closed.
#[derive(Debug, thiserror::Error)]
#[error("not sent: this process does not hold the leader Lease")]
pub struct Fenced;

/// Whether the fence, once set, stands in `req`'s way: a mutating request
/// other than the Lease's own (the elector must renew, take and release
/// it whatever the fence says) and the reviews (which change nothing),
/// matched by their exact paths.
fn fenced_request<B>(slot: &FenceSlot, req: &http::Request<B>) -> bool {
    let Some(f) = slot.get() else {
        return false;
    };
    let method = req.method();
    let mutating = matches!(
        *method,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    );
    let path = req.uri().path();
    mutating && !f.lease_request(method, path) && !REVIEWS.contains(&path)
}

fn closed(slot: &FenceSlot) -> bool {
    slot.get().is_some_and(|f| !f.fence.open())
}

pub fn layer<S>(slot: FenceSlot) -> impl tower::Layer<S, Service = AtTheWire<S>> + Clone {
    tower::layer::layer_fn(move |inner| AtTheWire {
        inner,
        slot: slot.clone(),
    })
}

#[derive(Clone)]
pub struct AtTheWire<S> {
    inner: S,
    slot: FenceSlot,
}

impl<S, B> tower::Service<http::Request<B>> for AtTheWire<S>
where
    S: tower::Service<http::Request<B>>,
    S::Future: Send + 'static,
    S::Error: Into<tower::BoxError>,
{
    type Response = S::Response;
    type Error = tower::BoxError;
    type Future = futures::future::BoxFuture<'static, Result<S::Response, tower::BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let checked = fenced_request(&self.slot, &req);
        if checked && closed(&self.slot) {
            return Box::pin(async { Err(Fenced.into()) });
        }
        let slot = self.slot.clone();
        let sent = self.inner.call(req);
        Box::pin(async move {
            // Polled for the first time: nothing has been sent yet.
            if checked && closed(&slot) {
                return Err(Fenced.into());
            }
            sent.await.map_err(Into::into)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;
    use tower::{Layer, Service, ServiceExt};

    /// A server that counts what reaches it; as hyper's client, a request
    /// is sent when its future is polled, not when it is made.
    #[derive(Clone, Default)]
    struct Counting(Arc<AtomicUsize>);

    impl tower::Service<http::Request<()>> for Counting {
        type Response = http::Response<()>;
        type Error = tower::BoxError;
        type Future = futures::future::BoxFuture<'static, Result<Self::Response, Self::Error>>;
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }
        fn call(&mut self, _: http::Request<()>) -> Self::Future {
            let n = self.0.clone();
            Box::pin(async move {
                n.fetch_add(1, Ordering::SeqCst);
                Ok(http::Response::new(()))
            })
        }
    }

    /// One request through the layer, once it is ready.
    async fn send<S>(svc: &mut S, method: Method, path: &str) -> Result<S::Response, S::Error>
    where
        S: Service<http::Request<()>>,
    {
        svc.ready().await?.call(req(method, path)).await
    }

    fn req(method: Method, path: &str) -> http::Request<()> {
        http::Request::builder()
            .method(method)
            .uri(path)
            .body(())
            .unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn a_closed_fence_stops_writes_at_the_wire_but_not_reads_the_lease_or_reviews() {
        let fence = Arc::new(Fence::new(Duration::from_secs(10), Duration::from_secs(15)));
        let slot: FenceSlot = Arc::default();
        let server = Counting::default();
        let mut svc = layer(slot.clone()).layer(server.clone());
        let write = "/apis/gpu.cozystack.io/v1alpha1/namespaces/t/gpuclaims";
        // Not electing: nothing is fenced.
        send(&mut svc, Method::POST, write).await.unwrap();
        slot.set(WireFence::new(fence.clone(), "g", "gpu-claims"))
            .ok()
            .unwrap();
        // Electing, not leading: writes stop, reads and the Lease pass.
        let refused = send(&mut svc, Method::POST, write).await;
        assert!(refused.unwrap_err().is::<Fenced>());
        send(&mut svc, Method::GET, write).await.unwrap();
        let lease = "/apis/coordination.k8s.io/v1/namespaces/g/leases/gpu-claims";
        send(&mut svc, Method::PUT, lease).await.unwrap();
        for review in [
            "/apis/authentication.k8s.io/v1/tokenreviews",
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        ] {
            send(&mut svc, Method::POST, review).await.unwrap();
        }
        assert_eq!(server.0.load(Ordering::SeqCst), 5);
        // Leading: writes pass; made then, sent after the term lapsed: refused.
        fence.renewed(tokio::time::Instant::now());
        send(&mut svc, Method::DELETE, write).await.unwrap();
        let late = svc.ready().await.unwrap().call(req(Method::PATCH, write));
        tokio::time::advance(Duration::from_secs(11)).await;
        assert!(late.await.unwrap_err().is::<Fenced>());
        assert_eq!(server.0.load(Ordering::SeqCst), 6);
    }

    /// Issue 59, item 7: a tenant's namespace, or claim, named `leases`
    /// or `tokenreviews` is no way past the fence: only the Lease's own
    /// paths and the reviews' are exempt, matched whole.
    #[tokio::test(start_paused = true)]
    async fn a_tenant_namespace_named_leases_is_fenced_as_any_other() {
        let fence = Arc::new(Fence::new(Duration::from_secs(10), Duration::from_secs(15)));
        let slot: FenceSlot = Arc::default();
        slot.set(WireFence::new(fence, "g", "gpu-claims"))
            .ok()
            .unwrap();
        let server = Counting::default();
        let mut svc = layer(slot).layer(server.clone());
        for (method, path) in [
            (
                Method::POST,
                "/apis/gpu.cozystack.io/v1alpha1/namespaces/leases/gpuclaims",
            ),
            (
                Method::PUT,
                "/apis/gpu.cozystack.io/v1alpha1/namespaces/leases/gpuclaims/a/status",
            ),
            (
                Method::DELETE,
                "/apis/gpu.cozystack.io/v1alpha1/namespaces/t/gpuclaims/tokenreviews",
            ),
            (
                Method::PATCH,
                "/api/v1/namespaces/subjectaccessreviews/pods/p",
            ),
            // Another Lease than the elector's: a write like any other.
            (
                Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/g/leases/someone-else",
            ),
            (
                Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/t/leases/gpu-claims",
            ),
        ] {
            let refused = send(&mut svc, method.clone(), path).await;
            assert!(refused.unwrap_err().is::<Fenced>(), "{method} {path}");
        }
        assert_eq!(server.0.load(Ordering::SeqCst), 0);
        // The elector's own Lease, made and renewed, passes.
        send(
            &mut svc,
            Method::POST,
            "/apis/coordination.k8s.io/v1/namespaces/g/leases",
        )
        .await
        .unwrap();
        send(
            &mut svc,
            Method::PUT,
            "/apis/coordination.k8s.io/v1/namespaces/g/leases/gpu-claims",
        )
        .await
        .unwrap();
        assert_eq!(server.0.load(Ordering::SeqCst), 2);
    }
}
