//! The kube clients a controller talks through, each with deadlines: kube
//! sets no read timeout by default, and a request that is never answered
//! would hold an actor (or a Lease renewal) forever.
//!
//! Two clients, because a watch is a request that is meant to stay open:
//! - requests (gets, writes, the Lease, Events): each call is bounded by
//!   `api.requestTimeout` where it is made (so that it fails typed, as a
//!   timeout, and is counted); the client's own connect, write and read
//!   timeouts are half as long again, a net under what has no such bound;
//! - watches: the server ends each after `WATCH_TIMEOUT` (timeoutSeconds),
//!   and the client gives up reading `requestTimeout` later, so a silent
//!   server (a cut network, a frozen process) is noticed then, and the
//!   list that starts each watch has a deadline too.

use crate::leader::wire::FenceSlot;
use crate::watch::{WATCH_TIMEOUT, WatchHealth};
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone)]
pub struct Clients {
    /// The API server's address, for messages that say which one.
    pub url: String,
    pub requests: kube::Client,
    pub watches: kube::Client,
    pub request_timeout: Duration,
    /// Whether each watch is current: the watch client's answers and the
    /// watchers' failures keep it.
    pub watch_health: Arc<WatchHealth>,
    /// The fence the request client checks each write against at the wire,
    /// once this process elects.
    pub fence: FenceSlot,
}

impl Clients {
    /// From the kubeconfig or the pod's service account.
    pub async fn infer(request_timeout: Duration) -> Result<Self, crate::Error> {
        let config = kube::Config::infer()
            .await
            .map_err(|e| crate::Error::Kubeconfig(Box::new(e)))?;
        Self::new(config, request_timeout)
    }

    /// From a kubeconfig's text (the demo's, the tests').
    pub async fn from_kubeconfig(
        text: &str,
        request_timeout: Duration,
    ) -> Result<Self, crate::Error> {
        let kc = kube::config::Kubeconfig::from_yaml(text)
            .map_err(|e| crate::Error::Kubeconfig(Box::new(e)))?;
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .map_err(|e| crate::Error::Kubeconfig(Box::new(e)))?;
        Self::new(config, request_timeout)
    }

    pub fn new(config: kube::Config, request_timeout: Duration) -> Result<Self, crate::Error> {
        let net = request_timeout + request_timeout / 2;
        let url = config.cluster_url.to_string();
        let mut requests = config.clone();
        requests.connect_timeout = Some(net);
        requests.write_timeout = Some(net);
        requests.read_timeout = Some(net);
        // A pooled connection's idle time does not count against a request.
        requests.reset_reader_on_write = true;
        // A 429 or 503 is retried by the caller (an actor's backoff, the
        // elector's next round), each attempt passing the fence again;
        // kube's own retry would resend past it.
        requests.default_retry = false;
        let mut watches = config;
        watches.connect_timeout = Some(request_timeout);
        watches.write_timeout = Some(request_timeout);
        watches.read_timeout = Some(WATCH_TIMEOUT + request_timeout);
        watches.reset_reader_on_write = true;
        let watch_health = Arc::new(WatchHealth::default());
        let answers = crate::watch::answers_layer(watch_health.clone());
        let fence = FenceSlot::default();
        Ok(Self {
            url,
            requests: kube::client::ClientBuilder::try_from(requests)?
                .with_layer(&crate::leader::wire::layer(fence.clone()))
                .build(),
            watches: kube::client::ClientBuilder::try_from(watches)?
                .with_layer(&answers)
                .build(),
            request_timeout,
            watch_health,
            fence,
        })
    }
}
