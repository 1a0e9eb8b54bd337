//! TLS for the webhook: a certificate resolver whose cert and key are read
//! again when their files change (cert-manager rotates them in place), and
//! an axum listener that completes the handshake.

use axum::serve::Listener;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

/// Why a certificate and key cannot be served (a reload keeps the current pair).
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{path}: {reason}")]
    File { path: String, reason: String },
    #[error("{path}: no certificate")]
    NoCertificate { path: String },
    #[error("{cert} and {key} do not match: {reason}")]
    Mismatch {
        cert: String,
        key: String,
        reason: String,
    },
    #[error("TLS: {0}")]
    Config(#[from] rustls::Error),
    #[error("a local serving certificate: {why}")]
    Generate { why: String },
    #[error("listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

#[derive(Clone, Debug)]
pub struct CertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl CertFiles {
    fn load(&self) -> Result<CertifiedKey, TlsError> {
        let file = |path: &PathBuf, reason: String| TlsError::File {
            path: path.display().to_string(),
            reason,
        };
        let certs = CertificateDer::pem_file_iter(&self.cert)
            .and_then(|i| i.collect::<Result<Vec<_>, _>>())
            .map_err(|e| file(&self.cert, e.to_string()))?;
        if certs.is_empty() {
            return Err(TlsError::NoCertificate {
                path: self.cert.display().to_string(),
            });
        }
        let key =
            PrivateKeyDer::from_pem_file(&self.key).map_err(|e| file(&self.key, e.to_string()))?;
        let signing = rustls::crypto::ring::sign::any_supported_type(&key)
            .map_err(|e| file(&self.key, e.to_string()))?;
        let pair = CertifiedKey::new(certs, signing);
        // A rotation caught half-way (new cert, old key) is refused, not served.
        pair.keys_match().map_err(|e| TlsError::Mismatch {
            cert: self.cert.display().to_string(),
            key: self.key.display().to_string(),
            reason: e.to_string(),
        })?;
        Ok(pair)
    }
}

/// Serves the current certificate; `reload` swaps it.
#[derive(Debug)]
pub struct Resolver {
    files: CertFiles,
    current: RwLock<Arc<CertifiedKey>>,
    /// Reloads tried (served or refused): one per change of the files.
    reloads: std::sync::atomic::AtomicU64,
}

impl Resolver {
    pub fn new(files: CertFiles) -> Result<Arc<Self>, TlsError> {
        let key = files.load()?;
        Ok(Arc::new(Self {
            files,
            current: RwLock::new(Arc::new(key)),
            reloads: Default::default(),
        }))
    }

    /// Reads the files again; a bad pair is refused and the current one stays.
    pub fn reload(&self) -> Result<(), TlsError> {
        self.reloads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let key = self.files.load()?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(key);
        Ok(())
    }

    /// How many reloads were tried.
    pub fn reloads(&self) -> u64 {
        self.reloads.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn server_config(self: &Arc<Self>) -> Result<ServerConfig, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }
}

impl ResolvesServerCert for Resolver {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.current
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        )
    }
}

/// How long a client has to complete its TLS handshake. The API server
/// calls with a timeout of a few seconds (the webhook's timeoutSeconds);
/// a connection that has not finished by then only holds a slot.
pub const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(3);
/// Handshakes under way at once: past this, new connections wait their
/// turn (in the kernel's backlog) rather than exhaust the process.
const HANDSHAKES_AT_ONCE: usize = 256;

/// Accepts TCP connections and completes their TLS handshakes, each in its
/// own task with a deadline: a client that connects and says nothing (or
/// is slow) delays no one else's review.
pub struct TlsListener {
    local: SocketAddr,
    ready: tokio::sync::mpsc::Receiver<(tokio_rustls::server::TlsStream<TcpStream>, SocketAddr)>,
    _accepting: AbortOnDrop,
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl TlsListener {
    pub async fn bind(addr: SocketAddr, resolver: &Arc<Resolver>) -> Result<Self, TlsError> {
        let listen = |source| TlsError::Listen { addr, source };
        let tcp = TcpListener::bind(addr).await.map_err(listen)?;
        let local = tcp.local_addr().map_err(listen)?;
        let acceptor = TlsAcceptor::from(Arc::new(resolver.server_config()?));
        let (tx, ready) = tokio::sync::mpsc::channel(HANDSHAKES_AT_ONCE);
        let slots = Arc::new(tokio::sync::Semaphore::new(HANDSHAKES_AT_ONCE));
        let accepting = tokio::spawn(async move {
            loop {
                let Ok(slot) = slots.clone().acquire_owned().await else {
                    return;
                };
                let (tcp, peer) = match tcp.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::warn!(error = %e, "webhook accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    let _slot = slot;
                    match tokio::time::timeout(HANDSHAKE_DEADLINE, acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => {
                            tracing::debug!(error = %e, %peer, "webhook TLS handshake failed")
                        }
                        Err(_) => tracing::debug!(%peer, "webhook TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(Self {
            local,
            ready,
            _accepting: AbortOnDrop(accepting),
        })
    }
}

impl Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(c) => c,
            // The accepting task ended (the runtime is going): accept nothing more.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}

/// Reloads the certificate when its files (or their directories, for
/// mounted Secrets that swap a symlink) change, once per change, until the
/// process ends.
pub async fn watch_certs(resolver: Arc<Resolver>) {
    let files = [resolver.files.cert.as_path(), resolver.files.key.as_path()];
    let (mut changes, _) = crate::file_watch::FileChanges::watch(&files);
    // A rotation between the first load and the watch is not missed.
    let mut first = true;
    while first || changes.next().await.is_some() {
        first = false;
        match resolver.reload() {
            Ok(()) => {
                tracing::info!(cert = %resolver.files.cert.display(), "TLS certificate reloaded")
            }
            Err(e) => {
                tracing::error!(error = %e, "TLS certificate refused; the current one stays")
            }
        }
    }
}
