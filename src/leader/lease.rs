//! The Lease as the elector reads and writes it: one object, by name,
//! through kube's API in a cluster and through a double in the tests that
//! pause the clock.

use crate::metrics::Metrics;
use async_trait::async_trait;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, PostParams};
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LeaseError {
    /// 409: someone wrote the Lease between our read and our write.
    #[error("the Lease changed under us")]
    Conflict,
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("{0}")]
    Other(String),
}

fn lease_error(e: kube::Error) -> LeaseError {
    match e {
        kube::Error::Api(s) if s.code == 409 => LeaseError::Conflict,
        e => LeaseError::Other(e.to_string()),
    }
}

#[async_trait]
pub trait LeaseApi: Send + Sync {
    async fn get(&self) -> Result<Option<Lease>, LeaseError>;
    async fn create(&self, lease: &Lease) -> Result<Lease, LeaseError>;
    /// An optimistic update: the resourceVersion of `lease` must be current.
    async fn replace(&self, lease: &Lease) -> Result<Lease, LeaseError>;
}

/// The Lease through kube's API, each request within the deadline and
/// counted in `gpu_claims_api_timeouts` when it is not answered by then.
pub struct KubeLeases {
    api: Api<Lease>,
    name: String,
    deadline: Duration,
    metrics: Arc<Metrics>,
}

impl KubeLeases {
    pub fn new(
        client: kube::Client,
        namespace: &str,
        name: &str,
        deadline: Duration,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
            deadline,
            metrics,
        }
    }

    async fn within<T>(
        &self,
        verb: &str,
        request: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, LeaseError> {
        match tokio::time::timeout(self.deadline, request).await {
            Ok(r) => r.map_err(lease_error),
            Err(_) => {
                self.metrics.timed_out(verb, "Lease");
                Err(LeaseError::Timeout(self.deadline))
            }
        }
    }
}

#[async_trait]
impl LeaseApi for KubeLeases {
    async fn get(&self) -> Result<Option<Lease>, LeaseError> {
        self.within("get", self.api.get_opt(&self.name)).await
    }
    async fn create(&self, lease: &Lease) -> Result<Lease, LeaseError> {
        self.within("create", self.api.create(&PostParams::default(), lease))
            .await
    }
    async fn replace(&self, lease: &Lease) -> Result<Lease, LeaseError> {
        let pp = PostParams::default();
        self.within("update", self.api.replace(&self.name, &pp, lease))
            .await
    }
}
