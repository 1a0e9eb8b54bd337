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

    fn scraper(&self) -> gpu_claims_testbed::bench::scrape::MakeScraper {
        std::sync::Arc::new(scraper)
    }
}

/// `/metrics` over `world` as `run` serves it: the operator's registry,
/// its cluster figures read off the world, encoded to text per scrape.
pub fn scraper(
    world: std::sync::Arc<gpu_claims_actors::world::World>,
) -> gpu_claims_testbed::bench::scrape::Scraper {
    use gpu_claims_actors::ports::Telemetry;
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = crate::metrics::Metrics::register(&mut registry, Some(world));
    // As once the caches have synced: the cluster's figures are reported.
    metrics.synced();
    Box::new(move || {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry)
            .expect("the exposition encodes");
        text
    })
}
