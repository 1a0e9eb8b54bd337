//! Loading the config file: YAML with humantime durations, validated whole
//! (an invalid file is refused and the running config stays).

use crate::{Error, Result};
use gpu_claims_actors::Config;
use std::path::Path;
use tracing_subscriber::EnvFilter;

/// Reads, parses and validates a config file.
pub fn load(path: &Path) -> Result<Config> {
    let err = |reason: String| Error::Config {
        path: path.display().to_string(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    parse(&text).map_err(err)
}

/// Parses and validates config text; an empty file is the defaults.
pub fn parse(text: &str) -> Result<Config, String> {
    let config: Config = if text.trim().is_empty() {
        Config::default()
    } else {
        crate::yaml::from_str(text).map_err(|e| e.to_string())?
    };
    config.validate()?;
    EnvFilter::try_new(&config.log.filter)
        .map_err(|e| format!("log.filter {:?}: {e}", config.log.filter))?;
    Ok(config)
}

/// The config in force: the file given, else the default file if present, else defaults.
pub fn initial(path: Option<&Path>) -> Result<Config> {
    match path {
        Some(p) => load(p),
        None => Ok(Config::default()),
    }
}

/// Reloads the config file when it changes and on SIGHUP, and hands each
/// valid new config to `apply`. The directory is watched, not the file: a
/// ConfigMap mount swaps a symlink, which replaces the file without
/// writing it. An invalid file is refused whole with one log line.
pub struct Reloader {
    path: std::path::PathBuf,
    current: Config,
}

/// What a reload did.
#[derive(Debug, PartialEq)]
pub enum Reloaded {
    Applied(Box<Config>),
    Unchanged,
    Refused(String),
}

impl Reloader {
    pub fn new(path: std::path::PathBuf, current: Config) -> Self {
        Self { path, current }
    }

    /// Reads the file again.
    pub fn reload(&mut self) -> Reloaded {
        match load(&self.path) {
            Err(e) => Reloaded::Refused(e.to_string()),
            Ok(c) if c == self.current => Reloaded::Unchanged,
            Ok(c) => {
                self.current = c.clone();
                Reloaded::Applied(Box::new(c))
            }
        }
    }

    /// Runs until the process ends: reloads on file changes and SIGHUP.
    pub async fn run(mut self, mut apply: impl FnMut(Result<Config, String>) + Send) {
        use notify::Watcher;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        let dir = self
            .path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf();
        let file_tx = tx.clone();
        let watcher = notify::recommended_watcher(move |ev: notify::Result<notify::Event>| {
            if ev.is_ok() {
                let _ = file_tx.send(());
            }
        });
        let _watcher = match watcher.and_then(|mut w| {
            w.watch(&dir, notify::RecursiveMode::NonRecursive)
                .map(|_| w)
        }) {
            Ok(w) => Some(w),
            Err(e) => {
                tracing::warn!(error = %e, dir = %dir.display(), "cannot watch the config directory; SIGHUP still reloads");
                None
            }
        };
        #[cfg(unix)]
        tokio::spawn(async move {
            let Ok(mut hup) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            else {
                return;
            };
            while hup.recv().await.is_some() {
                if tx.send(()).is_err() {
                    return;
                }
            }
        });
        while rx.recv().await.is_some() {
            // A swap is several events; read once they have stopped.
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            while rx.try_recv().is_ok() {}
            match self.reload() {
                Reloaded::Applied(c) => {
                    tracing::info!(path = %self.path.display(), "config reloaded");
                    apply(Ok(*c));
                }
                Reloaded::Unchanged => {}
                Reloaded::Refused(reason) => {
                    tracing::error!(path = %self.path.display(), %reason, "config refused; the running config stays");
                    apply(Err(reason));
                }
            }
        }
    }
}
