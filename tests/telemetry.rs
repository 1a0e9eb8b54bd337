//! Logs: `trace.claims` switches chosen claims' actors to TRACE at run
//! time; `log.filter` and `log.format` reload; actor lines name their claim.
use gpu_claims::telemetry::{Logging, Sink};
use gpu_claims_actors::Config;
use gpu_claims_testbed::fixtures::*;
use gpu_claims_testbed::memory::sim::{Sim, run_sim};
use std::sync::{Arc, Mutex};

#[derive(Clone, Default)]
struct Buf(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Buf {
    fn take(&self) -> String {
        String::from_utf8(std::mem::take(&mut *self.0.lock().unwrap())).unwrap()
    }
}

/// Logging built as `run` builds it, into a buffer the test reads.
fn capture(config: &Config) -> (Buf, impl tracing::Subscriber + Send + Sync, Logging) {
    let buf = Buf::default();
    let b = buf.clone();
    let (subscriber, logging) = Logging::build(
        config,
        Arc::new(move || {
            let b = b.clone();
            Sink::new(move || b.clone())
        }),
    );
    (buf, subscriber, logging)
}

fn config(traced: &[&str], filter: &str) -> Config {
    let mut c = Config::default();
    c.trace.claims = traced.iter().map(|s| s.to_string()).collect();
    c.log.filter = filter.into();
    c
}

#[test]
fn trace_claims_switches_chosen_actors_to_trace_at_run_time() {
    let (buf, subscriber, mut logging) = capture(&config(&["t/a"], "warn"));
    let _guard = tracing::subscriber::set_default(subscriber);
    run_sim(|| async {
        let objs = vec![
            class("h200", "r").obj(),
            claim("t", "a").no_finalizer().obj(),
            claim("t", "b").no_finalizer().obj(),
        ];
        let mut sim = Sim::start(config(&["t/a"], "warn"), &objs, None);
        sim.settle().await;
        let out = buf.take();
        assert!(out.contains("claim=t/a") && out.contains("TRACE"), "{out}");
        assert!(
            !out.contains("claim=t/b"),
            "t/b is not traced and warn hides its info lines: {out}"
        );
        assert!(
            out.lines()
                .filter(|l| l.contains("TRACE"))
                .all(|l| l.contains("claim=t/a"))
        );

        // Switch to t/b at run time, and JSON lines.
        let mut next = config(&["t/b"], "warn");
        next.log.format = gpu_claims_actors::config::LogFormat::Json;
        logging.apply(&next);
        sim.reload(next);
        sim.settle().await;
        let out = buf.take();
        assert!(out.contains("\"claim\":\"t/b\""), "{out}");
        assert!(!out.contains("t/a"), "{out}");
        assert!(
            out.lines()
                .all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()),
            "{out}"
        );
    });
}

#[test]
fn log_filter_reloads() {
    let (buf, subscriber, mut logging) = capture(&config(&[], "info"));
    let _guard = tracing::subscriber::set_default(subscriber);
    tracing::info!(rule = "L1", "one");
    logging.apply(&config(&[], "warn"));
    tracing::info!(rule = "L1", "two");
    logging.apply(&config(&[], "info"));
    tracing::info!(rule = "L1", "three");
    let out = buf.take();
    assert!(
        out.contains("one") && !out.contains("two") && out.contains("three"),
        "{out}"
    );
}

#[test]
fn every_write_line_of_an_actor_names_its_claim_and_rule() {
    let (buf, subscriber, _logging) = capture(&config(&[], "info"));
    let _guard = tracing::subscriber::set_default(subscriber);
    run_sim(|| async {
        let mut objs = vec![
            class("h200", "r").obj(),
            node("n1").gpus("r", 8).obj(),
            vmi("t", "vm1").uid("u1").phase("Failed").obj(),
        ];
        objs.extend(
            claim("t", "a")
                .attached_phase("n1")
                .attached("vm1")
                .with_allocation("r"),
        );
        objs.extend(claim("t", "b").bound("n1").deleting().with_allocation("r"));
        let sim = Sim::start(Config::default(), &objs, None);
        sim.settle().await;
    });
    let out = buf.take();
    let writes: Vec<&str> = out.lines().filter(|l| l.contains("writing")).collect();
    assert!(writes.len() >= 3, "{out}");
    for l in writes {
        assert!(l.contains("rule="), "{l}");
        assert!(l.contains("claim=t/") || l.contains("class="), "{l}");
    }
}

#[test]
fn text_log_lines_show_a_tenants_control_characters_and_stay_one_line() {
    let (buf, subscriber, _logging) = capture(&config(&[], "info"));
    let _guard = tracing::subscriber::set_default(subscriber);
    let class = "h200\u{1b}[2J\r\nINFO forged line";
    let span = tracing::info_span!("claim", claim = %format!("t/{class}"));
    let _in = span.enter();
    tracing::info!(class = %class, debug = ?class, "class {class} does not exist");
    let out = buf.take();
    assert_eq!(out.lines().count(), 1, "{out:?}");
    assert!(!out.contains(['\u{1b}', '\r']), "{out:?}");
    assert!(
        out.contains("class h200^[[2J\\r\\nINFO forged line does not exist"),
        "{out}"
    );
    assert!(out.contains("claim=t/h200^[[2J"), "{out}");
}
