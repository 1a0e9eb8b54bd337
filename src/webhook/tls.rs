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
    /// Reads and checks the pair (regular files of bounded size only: a
    /// FIFO at the path is refused, not waited on).
    fn load(&self) -> Result<CertifiedKey, TlsError> {
        let file = |path: &PathBuf, reason: String| TlsError::File {
            path: path.display().to_string(),
            reason,
        };
        let read = |path: &PathBuf| {
            crate::file_read::read_bounded(path).map_err(|e| file(path, e.to_string()))
        };
        let (cert_pem, key_pem) = (read(&self.cert)?, read(&self.key)?);
        let certs = CertificateDer::pem_slice_iter(&cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| file(&self.cert, e.to_string()))?;
        if certs.is_empty() {
            return Err(TlsError::NoCertificate {
                path: self.cert.display().to_string(),
            });
        }
        let key =
            PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| file(&self.key, e.to_string()))?;
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

/// How long a client has to send its first byte (the ClientHello) after
/// connecting. kube-apiserver and Prometheus send theirs at once; a peer
/// that connects and says nothing is dropped after this, so idle
/// connections, however many and however often reopened, hold nothing up.
pub const FIRST_BYTE_DEADLINE: Duration = Duration::from_secs(1);
/// How long a client has to complete its TLS handshake. The API server
/// calls with a timeout of a few seconds (the webhook's timeoutSeconds).
pub const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(3);
/// Handshakes under way at once, in all: past it, a new connection is
/// closed at once (each costs a task and a socket, never a turn others
/// wait for).
const HANDSHAKES_AT_ONCE: usize = 16_384;
/// Handshakes under way at once from one address: past it, that address's
/// new connections are closed at once, and other addresses' are not. High
/// enough that an address kube-apiserver shares with a flood (a node an
/// attacker's pod runs on) still gets through the first-byte deadline's
/// churn: a flood must hold this many silent connections at once, each
/// dropped within FIRST_BYTE_DEADLINE.
const HANDSHAKES_PER_PEER: usize = 1024;

/// Handshakes in flight, in all and per address.
#[derive(Default)]
struct InFlight {
    all: std::sync::atomic::AtomicUsize,
    by_peer: dashmap::DashMap<std::net::IpAddr, usize>,
}

/// A handshake's place in `InFlight`, given back when it ends.
struct Slot(Arc<InFlight>, std::net::IpAddr);

impl InFlight {
    /// A place for a handshake from `peer`, unless it is over a limit.
    fn take(self: &Arc<Self>, peer: std::net::IpAddr) -> Option<Slot> {
        use std::sync::atomic::Ordering::SeqCst;
        if self.all.fetch_add(1, SeqCst) >= HANDSHAKES_AT_ONCE {
            self.all.fetch_sub(1, SeqCst);
            return None;
        }
        let mut n = self.by_peer.entry(peer).or_default();
        if *n >= HANDSHAKES_PER_PEER {
            drop(n);
            self.all.fetch_sub(1, SeqCst);
            return None;
        }
        *n += 1;
        Some(Slot(self.clone(), peer))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.all.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        if let Some(mut n) = self.0.by_peer.get_mut(&self.1) {
            *n = n.saturating_sub(1);
            let gone = *n == 0;
            drop(n);
            if gone {
                self.0.by_peer.remove_if(&self.1, |_, n| *n == 0);
            }
        }
    }
}

/// Accepts TCP connections and completes their TLS handshakes, each in its
/// own task with a first-byte and a handshake deadline: the accept loop
/// never waits on a handshake, so a client that connects and says nothing
/// (or is slow) delays no one else's review or probe.
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

/// One connection's handshake: its first byte within FIRST_BYTE_DEADLINE,
/// the whole handshake within HANDSHAKE_DEADLINE.
async fn handshake(
    acceptor: TlsAcceptor,
    tcp: TcpStream,
    peer: SocketAddr,
) -> Option<tokio_rustls::server::TlsStream<TcpStream>> {
    let started = tokio::time::Instant::now();
    if tokio::time::timeout(FIRST_BYTE_DEADLINE, tcp.readable())
        .await
        .is_err()
    {
        tracing::debug!(%peer, "TLS client sent nothing; dropped");
        return None;
    }
    match tokio::time::timeout_at(started + HANDSHAKE_DEADLINE, acceptor.accept(tcp)).await {
        Ok(Ok(tls)) => Some(tls),
        Ok(Err(e)) => {
            tracing::debug!(error = %e, %peer, "TLS handshake failed");
            None
        }
        Err(_) => {
            tracing::debug!(%peer, "TLS handshake timed out");
            None
        }
    }
}

impl TlsListener {
    pub async fn bind(addr: SocketAddr, resolver: &Arc<Resolver>) -> Result<Self, TlsError> {
        let listen = |source| TlsError::Listen { addr, source };
        let tcp = TcpListener::bind(addr).await.map_err(listen)?;
        let local = tcp.local_addr().map_err(listen)?;
        let acceptor = TlsAcceptor::from(Arc::new(resolver.server_config()?));
        let (tx, ready) = tokio::sync::mpsc::channel(1024);
        let in_flight = Arc::new(InFlight::default());
        let accepting = tokio::spawn(async move {
            loop {
                let (tcp, peer) = match tcp.accept().await {
                    Ok(c) => c,
                    Err(e) => {
                        // Out of file descriptors, say: back off a little.
                        tracing::warn!(error = %e, "TLS accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let Some(slot) = in_flight.take(peer.ip()) else {
                    tracing::debug!(%peer, "too many TLS handshakes under way; connection closed");
                    continue;
                };
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    let tls = handshake(acceptor, tcp, peer).await;
                    drop(slot);
                    if let Some(tls) = tls {
                        let _ = tx.send((tls, peer)).await;
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
        // Off the runtime, with a deadline: the webhook and the probes are
        // served meanwhile whatever the files are.
        let r = resolver.clone();
        let reload = tokio::task::spawn_blocking(move || r.reload());
        let done = match tokio::time::timeout(crate::file_read::READ_DEADLINE, reload).await {
            Ok(Ok(done)) => done,
            Ok(Err(e)) => Err(TlsError::Generate { why: e.to_string() }),
            Err(_) => Err(TlsError::File {
                path: resolver.files.cert.display().to_string(),
                reason: crate::file_read::ReadError::Timeout.to_string(),
            }),
        };
        match done {
            Ok(()) => {
                tracing::info!(cert = %resolver.files.cert.display(), "TLS certificate reloaded")
            }
            Err(e) => {
                tracing::error!(error = %e, "TLS certificate refused; the current one stays")
            }
        }
    }
}
