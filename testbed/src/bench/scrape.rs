//! `/metrics` as a Prometheus scrapes it: the operator's whole exposition
//! (every family, the cluster's figures read off the world) encoded to
//! text on a thread of its own, as the HTTP server's worker encodes it,
//! beside the actors deciding on the same world. A scrape every second
//! while the single changes flow, in alternate blocks of changes, so that
//! the change latency with scrapes and without is measured side by side on
//! the same world, in the same minute.

use gpu_claims_actors::world::World;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One scrape: the exposition's text. The operator builds it (the testbed
/// sits below the operator's metrics).
pub type Scraper = Box<dyn Fn() -> String + Send + Sync>;

/// Builds a scraper over a world.
pub type MakeScraper = Arc<dyn Fn(Arc<World>) -> Scraper + Send + Sync>;

/// How often Prometheus scrapes while the changes flow (the issue's "every
/// second"; a dashboard's is 15-30 s, two replicas each).
pub const EVERY: Duration = Duration::from_secs(1);

/// How many changes run with scrapes on, then off, in turn.
pub const BLOCK: usize = 100;

#[derive(Serialize, Debug, Clone, Default)]
pub struct ScrapeFigures {
    /// Scrapes of the world at rest, and while the changes flowed.
    pub scrapes: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub bytes: usize,
    pub series: usize,
    /// The first-write p99 of the changes made with scrapes every second,
    /// and of those made without, alternating blocks of `BLOCK` changes.
    pub change_p99_us_scraped: f64,
    pub change_p99_us_unscraped: f64,
    pub change_p99_ratio: f64,
    /// Scrapes that ran while the changes flowed.
    pub scrapes_during_changes: usize,
}

/// One scrape's cost.
#[derive(Clone, Copy, Debug)]
pub struct Scrape {
    pub took: Duration,
    pub bytes: usize,
    pub series: usize,
}

/// Times one scrape.
pub fn scrape_once(scraper: &Scraper) -> Scrape {
    let start = Instant::now();
    let text = scraper();
    let took = start.elapsed();
    let series = text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .count();
    Scrape {
        took,
        bytes: text.len(),
        series,
    }
}

/// A Prometheus on its own thread: scrapes every `EVERY` while on.
pub struct Scraping {
    on: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    scrapes: Arc<Mutex<Vec<Scrape>>>,
    thread: Option<std::thread::JoinHandle<Scraper>>,
}

impl Scraping {
    pub fn start(scraper: Scraper) -> Self {
        let on = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let scrapes = Arc::new(Mutex::new(Vec::new()));
        let (o, s, out) = (on.clone(), stop.clone(), scrapes.clone());
        let thread = std::thread::spawn(move || {
            let mut next = Instant::now();
            while !s.load(Ordering::Acquire) {
                if !o.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(5));
                    next = Instant::now();
                    continue;
                }
                let now = Instant::now();
                if now < next {
                    std::thread::sleep((next - now).min(Duration::from_millis(5)));
                    continue;
                }
                let one = scrape_once(&scraper);
                out.lock().unwrap_or_else(|e| e.into_inner()).push(one);
                next += EVERY;
            }
            scraper
        });
        Self {
            on,
            stop,
            scrapes,
            thread: Some(thread),
        }
    }

    /// Scrapes every second from now (true), or none (false).
    pub fn set(&self, on: bool) {
        self.on.store(on, Ordering::Release);
    }

    /// Stops; the scrapes made, and the scraper back.
    pub fn stop(mut self) -> (Vec<Scrape>, Scraper) {
        self.stop.store(true, Ordering::Release);
        let scraper = self
            .thread
            .take()
            .expect("started")
            .join()
            .expect("the scraping thread");
        let scrapes = std::mem::take(&mut *self.scrapes.lock().unwrap_or_else(|e| e.into_inner()));
        (scrapes, scraper)
    }
}

/// Whether change number `i` of the schedule runs with scrapes on.
pub fn scraped(i: usize) -> bool {
    (i / BLOCK) % 2 == 1
}

/// The figures: `quiet` scrapes at rest and `during` the changes, with the
/// changes' first-write p99 with and without.
pub fn figures(
    quiet: &[Scrape],
    during: &[Scrape],
    scraped_p99: Duration,
    unscraped_p99: Duration,
) -> ScrapeFigures {
    let mut took: Vec<Duration> = quiet.iter().chain(during).map(|s| s.took).collect();
    let ms = |d: Duration| (d.as_secs_f64() * 10_000.0).round() / 10.0;
    let us = |d: Duration| (d.as_secs_f64() * 10_000_000.0).round() / 10.0;
    let last = quiet.last().or(during.last());
    ScrapeFigures {
        scrapes: took.len(),
        p50_ms: ms(super::percentile(&mut took, 50.0)),
        p99_ms: ms(super::percentile(&mut took, 99.0)),
        bytes: last.map_or(0, |s| s.bytes),
        series: last.map_or(0, |s| s.series),
        change_p99_us_scraped: us(scraped_p99),
        change_p99_us_unscraped: us(unscraped_p99),
        change_p99_ratio: (scraped_p99.as_secs_f64() / unscraped_p99.as_secs_f64().max(1e-9)
            * 100.0)
            .round()
            / 100.0,
        scrapes_during_changes: during.len(),
    }
}
