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

/// Where log lines go: stderr in the binary, a buffer in tests.
pub type Sink = tracing_subscriber::fmt::writer::BoxMakeWriter;

/// Handles to change logging at run time.
pub struct Logging {
    sink: std::sync::Arc<dyn Fn() -> Sink + Send + Sync>,
    ansi: bool,
    filter: reload::Handle<
        EnvFilter,
        tracing_subscriber::layer::Layered<reload::Layer<Fmt, Registry>, Registry>,
    >,
    format: reload::Handle<Fmt, Registry>,
    current: LogFormat,
}

/// kube-client logs every failed request at ERROR; our watchers and the
/// leader election say it already, once per backoff step. Unless the
/// filter names kube_client itself, its per-request line is off.
const KUBE_CLIENT_FAILURES: &str = "kube_client::client::builder=off";

/// `RUST_LOG`, when set and not empty: it overrides the config's
/// `log.filter` (at start and on every reload), as Rust users expect.
pub fn rust_log() -> Option<String> {
    std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty())
}

/// The filter in force: `RUST_LOG`'s, else the config's.
pub fn filter_text(config: &Config, rust_log: Option<&str>) -> String {
    rust_log.map_or_else(|| config.log.filter.clone(), str::to_string)
}

pub fn filter_of(config: &Config) -> EnvFilter {
    let text = filter_text(config, rust_log().as_deref());
    let mut base = EnvFilter::try_new(&text).unwrap_or_else(|_| EnvFilter::new("info"));
    if !text.contains("kube_client") {
        base = base.add_directive(KUBE_CLIENT_FAILURES.parse().expect("a valid directive"));
    }
    base.add_directive(
        format!("{CLAIM_TRACE_TARGET}=trace")
            .parse()
            .expect("a valid directive"),
    )
}

fn fmt_of(format: LogFormat, sink: Sink, ansi: bool) -> Fmt {
    match format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_ansi(ansi)
            .fmt_fields(text_fields())
            .with_writer(sink)
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_writer(sink)
            .boxed(),
    }
}

/// The text format's fields, as tracing-subscriber writes them (the
/// message, then `name=value` separated by spaces), with every value shown
/// through `printable`: names and messages a tenant wrote (a claim's
/// class, a VMI's annotation) can hold ESC, CR or newline, and a raw one
/// would forge log lines or act on the operator's terminal. JSON escapes
/// them already.
fn text_fields() -> impl for<'w> tracing_subscriber::fmt::FormatFields<'w> + Send + Sync + 'static {
    use tracing_subscriber::field::MakeExt;
    tracing_subscriber::fmt::format::debug_fn(|w, field, value| {
        let shown = format!("{value:?}");
        let shown = gpu_claims_actors::printable::printable(&shown);
        if field.name() == "message" {
            w.write_str(&shown)
        } else {
            write!(w, "{}={shown}", field.name())
        }
    })
    .delimited(" ")
}

impl Logging {
    /// Installs the global subscriber, writing to stderr.
    pub fn init(config: &Config) -> Logging {
        let (subscriber, mut logging) =
            Self::build(config, std::sync::Arc::new(|| Sink::new(std::io::stderr)));
        // Colour only for a person at a terminal: files and collectors get plain text.
        logging.ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
        logging
            .format
            .reload(fmt_of(config.log.format, (logging.sink)(), logging.ansi))
            .ok();
        let _ = subscriber.try_init();
        if let Some(v) = rust_log() {
            tracing::info!(
                rust_log = %v,
                config_filter = %config.log.filter,
                "RUST_LOG is set: it overrides the config's log.filter until the process restarts without it"
            );
        }
        logging
    }

    /// Installs the global subscriber, writing to `file` (the demo's: its
    /// story on the terminal, the controller's lines apart).
    pub fn init_file(config: &Config, file: std::fs::File) -> Logging {
        let file = std::sync::Arc::new(file);
        let (subscriber, logging) =
            Self::build(config, std::sync::Arc::new(move || Sink::new(file.clone())));
        let _ = subscriber.try_init();
        logging
    }

    /// The subscriber and its handles, writing to `sink`.
    pub fn build(
        config: &Config,
        sink: std::sync::Arc<dyn Fn() -> Sink + Send + Sync>,
    ) -> (impl tracing::Subscriber + Send + Sync, Logging) {
        let (fmt, format) = reload::Layer::new(fmt_of(config.log.format, sink(), false));
        let (filter, filter_handle) = reload::Layer::new(filter_of(config));
        let subscriber = Registry::default().with(fmt).with(filter);
        (
            subscriber,
            Logging {
                sink,
                ansi: false,
                filter: filter_handle,
                format,
                current: config.log.format,
            },
        )
    }

    /// Applies a new config's log settings.
    pub fn apply(&mut self, config: &Config) {
        if let Err(e) = self.filter.reload(filter_of(config)) {
            tracing::warn!(error = %e, "log filter not reloaded");
        }
        if config.log.format != self.current {
            if let Err(e) = self
                .format
                .reload(fmt_of(config.log.format, (self.sink)(), self.ansi))
            {
                tracing::warn!(error = %e, "log format not reloaded");
            }
            self.current = config.log.format;
        }
    }
}

/// A run of failures of one thing (a watch, the Lease), told as the
/// backoff grows rather than on every retry: the 1st, 2nd, 4th, 8th...
/// failure is logged with the count, and the recovery once. An API server
/// that is down for an hour costs a dozen lines, not tens of thousands.
#[derive(Debug, Default)]
pub struct FailureStreak {
    failures: u64,
}

impl FailureStreak {
    /// One more failure: Some(count) when this one is to be told.
    pub fn failed(&mut self) -> Option<u64> {
        self.failures += 1;
        self.failures.is_power_of_two().then_some(self.failures)
    }

    /// A success: Some(count) when it ends a streak of failures.
    pub fn succeeded(&mut self) -> Option<u64> {
        let n = std::mem::take(&mut self.failures);
        (n > 0).then_some(n)
    }
}

#[cfg(test)]
mod filter_tests {
    use super::*;

    #[test]
    fn rust_log_overrides_the_configs_filter() {
        let mut config = Config::default();
        config.log.filter = "info".into();
        assert_eq!(filter_text(&config, None), "info");
        assert_eq!(
            filter_text(&config, Some("gpu_claims=trace")),
            "gpu_claims=trace"
        );
    }
}

#[cfg(test)]
mod streak_tests {
    use super::FailureStreak;

    #[test]
    fn a_streak_of_failures_is_told_as_the_backoff_doubles() {
        let mut s = FailureStreak::default();
        let told: Vec<u64> = (0..100).filter_map(|_| s.failed()).collect();
        assert_eq!(told, [1, 2, 4, 8, 16, 32, 64]);
        assert_eq!(s.succeeded(), Some(100));
        assert_eq!(s.succeeded(), None);
        assert_eq!(s.failed(), Some(1), "a new streak is told from its start");
    }
}
