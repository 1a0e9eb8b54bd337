//! Loading the config file: YAML with humantime durations, validated whole
//! (an invalid file is refused and the running config stays).

use gpu_claims_actors::Config;
use gpu_claims_actors::config::ParseError as TextError;
use std::path::Path;
use tracing_subscriber::EnvFilter;

/// Why a config is refused (the running one stays).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: crate::file_read::ReadError,
    },
    #[error("config {}{source}", path.as_deref().map(|p| format!("{p}: ")).unwrap_or_default())]
    Parse {
        path: Option<String>,
        #[source]
        source: Box<ParseError>,
    },
}

/// What is wrong inside a config text: the core's reading of it, or a log
/// filter the subscriber would not take.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    #[error(transparent)]
    Text(#[from] gpu_claims_actors::config::ParseError),
    #[error("log.filter {filter:?}: {source}")]
    LogFilter {
        filter: String,
        #[source]
        source: tracing_subscriber::filter::ParseError,
    },
}

impl ConfigError {
    /// A label for the reload metric: why the file was refused.
    pub fn metric_label(&self) -> &'static str {
        match self {
            ConfigError::Read { .. } => "read",
            ConfigError::Parse { source, .. }
                if matches!(**source, ParseError::Text(TextError::Yaml(_))) =>
            {
                "yaml"
            }
            ConfigError::Parse { .. } => "invalid",
        }
    }
}

/// Reads, parses and validates a config file (a regular file of at most
/// `file_read::MAX_FILE_BYTES`).
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    from_bytes(path, crate::file_read::read_bounded(path))
}

/// `load` off the async runtime, with a deadline: what a running process
/// reloads with, so that no file holds up its probes, webhook or Lease.
pub async fn load_off_runtime(path: &Path) -> Result<Config, ConfigError> {
    from_bytes(
        path,
        crate::file_read::read_off_runtime(path.to_path_buf()).await,
    )
}

fn from_bytes(
    path: &Path,
    read: Result<Vec<u8>, crate::file_read::ReadError>,
) -> Result<Config, ConfigError> {
    let shown = path.display().to_string();
    let bytes = read.map_err(|source| ConfigError::Read {
        path: shown.clone(),
        source,
    })?;
    let text = String::from_utf8(bytes).map_err(|e| ConfigError::Read {
        path: shown.clone(),
        source: crate::file_read::ReadError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            e.utf8_error(),
        )),
    })?;
    parse(&text).map_err(|e| match e {
        ConfigError::Parse { source, .. } => ConfigError::Parse {
            path: Some(shown),
            source,
        },
        other => other,
    })
}

/// Parses and validates config text (`Config::parse`), and its log filter.
pub fn parse(text: &str) -> Result<Config, ConfigError> {
    let parse = |source: ParseError| ConfigError::Parse {
        path: None,
        source: Box::new(source),
    };
    let config = Config::parse(text).map_err(|e| parse(e.into()))?;
    EnvFilter::try_new(&config.log.filter).map_err(|source| {
        parse(ParseError::LogFilter {
            filter: config.log.filter.clone(),
            source,
        })
    })?;
    Ok(config)
}

/// The default config file, when it exists.
pub fn default_path() -> Option<std::path::PathBuf> {
    let p = std::path::PathBuf::from("config/gpu-claims.yaml");
    p.exists().then_some(p)
}

/// The config in force: the file given, else the default file if present, else defaults.
pub fn initial(path: Option<&Path>) -> Result<Config, ConfigError> {
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
#[derive(Debug)]
pub enum Reloaded {
    Applied(Box<Config>),
    Unchanged,
    Refused(Box<ConfigError>),
}

impl Reloader {
    pub fn new(path: std::path::PathBuf, current: Config) -> Self {
        Self { path, current }
    }

    /// Reads the file again, off the runtime.
    pub async fn reload(&mut self) -> Reloaded {
        match load_off_runtime(&self.path).await {
            Err(e) => Reloaded::Refused(Box::new(e)),
            Ok(c) if c == self.current => Reloaded::Unchanged,
            Ok(c) => {
                self.current = c.clone();
                Reloaded::Applied(Box::new(c))
            }
        }
    }

    /// Runs until the process ends: reloads on file changes and SIGHUP,
    /// once per change (reading the file is not one).
    pub async fn run(self, apply: impl FnMut(Result<Config, ConfigError>) + Send) {
        self.watch().run(apply).await
    }

    /// Starts watching the file: every change from now on is seen by `run`.
    pub fn watch(self) -> WatchedConfig {
        let (changes, hup_tx) = crate::file_watch::FileChanges::watch(&[&self.path]);
        WatchedConfig {
            reloader: self,
            changes,
            hup_tx,
        }
    }
}

/// A config file being watched.
pub struct WatchedConfig {
    reloader: Reloader,
    changes: crate::file_watch::FileChanges,
    hup_tx: tokio::sync::mpsc::UnboundedSender<()>,
}

impl WatchedConfig {
    /// Reloads on each change and SIGHUP until the process ends.
    pub async fn run(self, mut apply: impl FnMut(Result<Config, ConfigError>) + Send) {
        let Self {
            reloader: mut this,
            mut changes,
            hup_tx,
        } = self;
        #[cfg(unix)]
        tokio::spawn(async move {
            let Ok(mut hup) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            else {
                return;
            };
            while hup.recv().await.is_some() {
                if hup_tx.send(()).is_err() {
                    return;
                }
            }
        });
        #[cfg(not(unix))]
        drop(hup_tx);
        // A change between the first load and the watch is not missed:
        // look once now that the watch is on.
        let mut due = true;
        while due || changes.next().await.is_some() {
            due = false;
            match this.reload().await {
                Reloaded::Applied(c) => {
                    tracing::info!(path = %this.path.display(), "config reloaded");
                    apply(Ok(*c));
                }
                Reloaded::Unchanged => {}
                // Caught mid-write (a plain write truncates first): the
                // change that follows at once is the one to judge.
                Reloaded::Refused(_) if changes.follows().await => due = true,
                Reloaded::Refused(error) => {
                    tracing::error!(path = %this.path.display(), %error, "config refused; the running config stays");
                    apply(Err(*error));
                }
            }
        }
    }
}
