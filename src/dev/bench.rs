//! The operator, as the testbed's cold-start benchmark starts it: over a
//! kubeconfig, exactly as `run` starts it, without election or webhook.

use crate::clients::Clients;
use crate::controller::{Controller, Launch};
use futures::future::LocalBoxFuture;
use gpu_claims_testbed::bench::cold::{Operator, Started};

/// `run`'s controller with the default config.
pub struct RunController;

impl Operator for RunController {
    fn start(&self, kubeconfig: String) -> LocalBoxFuture<'static, Started> {
        Box::pin(async move {
            let config = gpu_claims_actors::config::Config::default();
            let clients = Clients::from_kubeconfig(&kubeconfig, config.api.request_timeout)
                .await
                .expect("a client");
            let c = Controller::start(Launch {
                clients,
                config,
                path: None,
                logging: None,
                webhook: None,
                election: None,
            })
            .await
            .expect("the controller starts");
            Started {
                supervisor: c.supervisor.clone(),
                env: c.env.clone(),
                keep: Box::new(c),
            }
        })
    }

    fn webhook(
        &self,
        reviews: usize,
        connections: usize,
    ) -> LocalBoxFuture<'static, anyhow::Result<gpu_claims_testbed::bench::WebhookFigures>> {
        Box::pin(super::webhook_storm::measure(reviews, connections))
    }
}
