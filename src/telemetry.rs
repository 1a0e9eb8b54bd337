//! Logging: structured lines (text or JSON) behind reload handles, so that
//! `log.filter`, `log.format` and `trace.claims` change at run time.
//!
//! Per-claim tracing: actors of claims in `trace.claims` emit TRACE lines
//! under the target `gpu_claims::claim_trace`, which the filter always
//! lets through; other actors emit none, so the cost is one bool per line.

use gpu_claims_actors::config::{Config, LogFormat};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry, reload};

pub const CLAIM_TRACE_TARGET: &str = "gpu_claims::claim_trace";

type Fmt = Box<dyn Layer<Registry> + Send + Sync>;

/// Handles to change logging at run time.
pub struct Logging {
    filter: reload::Handle<
        EnvFilter,
        tracing_subscriber::layer::Layered<reload::Layer<Fmt, Registry>, Registry>,
    >,
    format: reload::Handle<Fmt, Registry>,
    current: LogFormat,
}

fn filter_of(config: &Config) -> EnvFilter {
    let base = EnvFilter::try_new(&config.log.filter).unwrap_or_else(|_| EnvFilter::new("info"));
    base.add_directive(
        format!("{CLAIM_TRACE_TARGET}=trace")
            .parse()
            .expect("a valid directive"),
    )
}

fn fmt_of(format: LogFormat) -> Fmt {
    match format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_writer(std::io::stderr)
            .boxed(),
    }
}

impl Logging {
    /// Installs the global subscriber.
    pub fn init(config: &Config) -> Logging {
        let (fmt, format) = reload::Layer::new(fmt_of(config.log.format));
        let (filter, filter_handle) = reload::Layer::new(filter_of(config));
        let _ = Registry::default().with(fmt).with(filter).try_init();
        Logging {
            filter: filter_handle,
            format,
            current: config.log.format,
        }
    }

    /// Applies a new config's log settings.
    pub fn apply(&mut self, config: &Config) {
        if let Err(e) = self.filter.reload(filter_of(config)) {
            tracing::warn!(error = %e, "log filter not reloaded");
        }
        if config.log.format != self.current {
            if let Err(e) = self.format.reload(fmt_of(config.log.format)) {
                tracing::warn!(error = %e, "log format not reloaded");
            }
            self.current = config.log.format;
        }
    }
}
