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

/// Where the fence goes once the process elects (set once).
pub type FenceSlot = Arc<OnceLock<Arc<Fence>>>;

/// The request was not sent: the fence is closed.
#[derive(Debug, thiserror::Error)]
#[error("not sent: this process does not hold the leader Lease")]
pub struct Fenced;

fn fenced_request<B>(req: &http::Request<B>) -> bool {
    let mutating = matches!(
        *req.method(),
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    );
    // The elector must renew, take and release the Lease whatever the
    // fence says; a review (a standby's /metrics guard) changes nothing.
    let path = req.uri().path();
    let exempt = ["/leases", "/tokenreviews", "/subjectaccessreviews"];
    mutating && !exempt.iter().any(|e| path.contains(e))
}

fn closed(slot: &FenceSlot) -> bool {
    slot.get().is_some_and(|f| !f.open())
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
        let checked = fenced_request(&req);
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
        slot.set(fence.clone()).ok().unwrap();
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
}
