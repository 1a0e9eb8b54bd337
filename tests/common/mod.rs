//! A cluster for end-to-end tests: the embedded API server (its writes
//! journaled for the I1-I5 checker), the KubeVirt stand-in, and the real
//! `gpu-claims run` binary started against it through a kubeconfig.
#![allow(dead_code)]

use gpu_claims_apiserver::{ApiServer, Handle};
use gpu_claims_testbed::demo::{Observer, Snapshot};
use gpu_claims_testbed::memory::MemCluster;
use gpu_claims_testbed::memory::store::Store;
use gpu_claims_testbed::standin::StandIn;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A `gpu-claims run` process, restarted when it exits as the kubelet
/// restarts a pod (a leader that cannot renew its Lease exits to come back
/// as a standby), until the test kills it.
pub struct Controller {
    child: Arc<Mutex<Child>>,
    stopped: Arc<AtomicBool>,
    restarts: Arc<AtomicUsize>,
    pub http: SocketAddr,
    pub log: PathBuf,
    /// The bearer token `get` presents to /metrics and /debug.
    pub token: Option<String>,
}

impl Controller {
    fn spawn(cmd: impl Fn() -> Command + Send + 'static, http: SocketAddr, log: PathBuf) -> Self {
        let child = Arc::new(Mutex::new(cmd().spawn().unwrap()));
        let stopped = Arc::new(AtomicBool::new(false));
        let restarts = Arc::new(AtomicUsize::new(0));
        let (c, s, r) = (child.clone(), stopped.clone(), restarts.clone());
        // The process supervisor: polls the child as the kubelet's pod
        // workers do; tests themselves wait on conditions.
        std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(100));
                let mut child = c.lock().unwrap();
                if s.load(Ordering::SeqCst) {
                    return;
                }
                if let Ok(Some(_)) = child.try_wait() {
                    *child = cmd().spawn().unwrap();
                    r.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
        Controller {
            child,
            stopped,
            restarts,
            http,
            log,
            token: None,
        }
    }

    /// How many times the process exited and was started again.
    pub fn restarts(&self) -> usize {
        self.restarts.load(Ordering::SeqCst)
    }

    /// A GET on the controller's /metrics, /readyz, /debug port, with
    /// this handle's token.
    pub fn get(&self, path: &str) -> Option<(u16, String)> {
        http_get_as(self.http, path, self.token.as_deref())
    }

    /// Waits until /readyz answers 200; panics after 30 s with its last answer.
    pub fn wait_ready(&self) {
        let start = std::time::Instant::now();
        loop {
            let answer = self.get("/readyz");
            if answer.as_ref().is_some_and(|(c, _)| *c == 200) {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the controller at {} is not ready after 30 s: {answer:?}",
                self.http
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `/debug` as JSON.
    pub fn debug(&self) -> Option<serde_json::Value> {
        let (code, body) = self.get("/debug")?;
        (code == 200).then(|| serde_json::from_str(&body).ok())?
    }

    /// Waits until this process leads and its actors have settled (each
    /// has handled every change, no write is in flight); panics after 60 s.
    pub fn wait_settled(&self) {
        let start = std::time::Instant::now();
        loop {
            if let Some(d) = self.debug()
                && d["settled"] == true
                && d["leader"]["leading"] != false
            {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "the controller at {} did not lead and settle within 60 s: {:?}",
                self.http,
                self.debug()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills the process at once, as a node failure or OOM would.
    pub fn kill(self) {
        drop(self)
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        self.stopped.store(true, Ordering::SeqCst);
        let mut child = self.child.lock().unwrap_or_else(|e| e.into_inner());
        let _ = child.kill();
        let _ = child.wait();
    }
}

pub fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// A GET over plain HTTP/1.1 without credentials: the status code and the body.
pub fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    http_get_as(addr, path, None)
}

/// A GET over plain HTTP/1.1 with a bearer token when given.
pub fn http_get_as(addr: SocketAddr, path: &str, token: Option<&str>) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\n{auth}Connection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let code = out.split_whitespace().nth(1)?.parse().ok()?;
    Some((
        code,
        out.split("\r\n\r\n").nth(1).unwrap_or_default().to_string(),
    ))
}

pub struct Cluster {
    pub rt: tokio::runtime::Runtime,
    pub store: Arc<Store>,
    pub journal: Arc<MemCluster>,
    pub server: Handle,
    pub standin: Arc<StandIn>,
    pub observer: Observer,
    pub dir: tempfile::TempDir,
    /// A token of `operator`, whom the chart's reader ClusterRoles are
    /// bound to: what the tests read /metrics and /debug with.
    pub reader_token: String,
}

/// The user the tests read the controller's endpoints as.
pub const OPERATOR: &str = "operator";
/// The user the KubeVirt stand-in creates launcher pods as.
pub const KUBEVIRT: &str = "system:serviceaccount:kubevirt:kubevirt-controller";

/// The chart's ClusterRoles for reading /metrics and /debug, as
/// deploy/manifests has them, bound to `user`.
pub fn grant_readers(store: &Store, user: &str) {
    let text = std::fs::read_to_string("deploy/manifests/gpu-claims.yaml").unwrap();
    let docs: Vec<serde_json::Value> = gpu_claims_actors::yaml::documents(&text).unwrap();
    for d in docs.iter().filter(|d| {
        d["kind"] == "ClusterRole" && d["metadata"]["name"].as_str().unwrap().ends_with("-reader")
    }) {
        let role = d["metadata"]["name"].as_str().unwrap();
        store.seed("ClusterRole", d.clone());
        store.seed(
            "ClusterRoleBinding",
            serde_json::json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": format!("{role}-{user}")},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [{"kind": "User", "name": user}],
            }),
        );
    }
}

impl Cluster {
    /// A cluster seeded by `seed`, with `config` as the controller's config file.
    pub fn new(seed: impl FnOnce(&MemCluster), config: &str) -> Self {
        Self::serving(seed, config, &[])
    }

    /// A cluster whose API server serves the built-in kinds `versions`
    /// names at those versions (an older Kubernetes).
    pub fn serving(
        seed: impl FnOnce(&MemCluster),
        config: &str,
        versions: &[(&'static str, &'static str)],
    ) -> Self {
        let rt = gpu_claims_testbed::runtime();
        let store = gpu_claims_testbed::crds::cluster_store();
        let journal = MemCluster::new(store.clone());
        seed(&journal);
        let mut builder = ApiServer::builder()
            .store(store.clone())
            // The controller's own namespace, as its chart makes it: its Lease.
            .namespace("gpu-claims")
            .journal(journal.clone());
        for (kind, version) in versions {
            builder = builder.serve_kind_at(kind, version);
        }
        let server = rt.block_on(builder.start()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        // The gate webhook as the chart wires it: the API server calls
        // each controller's webhook over TLS for GPU launcher pods, which
        // the stand-in creates over HTTP as virt-controller does.
        let cert = gpu_claims::dev::webhook::certificate(dir.path()).unwrap();
        gpu_claims::dev::webhook::register(&server, &cert.ca_pem);
        let kubevirt = rt
            .block_on(gpu_claims_testbed::demo::client_for(
                &server.kubeconfig_for(KUBEVIRT),
            ))
            .unwrap();
        let standin = StandIn::through_api(store.clone(), kubevirt);
        {
            let _guard = rt.enter();
            standin.spawn();
        }
        std::fs::write(dir.path().join("kubeconfig"), server.kubeconfig()).unwrap();
        // The demo's story ends with its queue scene, which plays in
        // seconds under the demo's `queueing.headOfLineAfter`.
        let config = &with_demo_queueing(config);
        write_config(dir.path(), config);
        grant_readers(&store, OPERATOR);
        let reader_token = server.add_user(OPERATOR);
        let parsed = gpu_claims::config::parse(config).unwrap_or_default();
        Self {
            reader_token,
            rt,
            observer: Observer::for_config(journal.clone(), &parsed),
            store,
            journal,
            server,
            standin,
            dir,
        }
    }

    /// Starts `gpu-claims run` against the server.
    pub fn start_controller(&self) -> Controller {
        self.start_controller_with(&[])
    }

    /// Starts `gpu-claims run` against the server with `extra` arguments.
    pub fn start_controller_with(&self, extra: &[&str]) -> Controller {
        let extra: Vec<String> = extra.iter().map(|a| a.to_string()).collect();
        let http = free_port();
        let log = self
            .dir
            .path()
            .join(format!("controller-{}.log", http.port()));
        let (config, kubeconfig) = (
            self.dir.path().join("config.yaml"),
            self.dir.path().join("kubeconfig"),
        );
        let log_file = log.clone();
        // Its gate webhook, behind the chart's Service.
        let hook = free_port();
        gpu_claims::dev::webhook::add_endpoint(&self.server, hook);
        let (cert, key) = (
            self.dir.path().join("tls.crt"),
            self.dir.path().join("tls.key"),
        );
        let cmd = move || {
            let mut c = Command::new(env!("CARGO_BIN_EXE_gpu-claims"));
            c.args([
                "run",
                "--config",
                config.to_str().unwrap(),
                "--http-addr",
                &http.to_string(),
                "--webhook-addr",
                &hook.to_string(),
                "--tls-cert-file",
                cert.to_str().unwrap(),
                "--tls-key-file",
                key.to_str().unwrap(),
                // A dead leader's Lease is taken over within 4s; a leader
                // keeps trying to renew for 3s (kube-rs retries a 429 with
                // backoff, so a shorter deadline loses the Lease under the
                // injected faults).
                "--lease-duration=4s",
                "--renew-deadline=3s",
                "--retry-period=400ms",
            ])
            .args(&extra)
            .env("KUBECONFIG", &kubeconfig)
            .stdout(Stdio::null())
            .stderr(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&log_file)
                    .unwrap(),
            );
            c
        };
        let mut c = Controller::spawn(cmd, http, log);
        c.token = Some(self.reader_token.clone());
        c
    }

    /// Waits until `until` holds for `hold` on a quiet cluster; I1-I5
    /// are checked every 50 ms meanwhile. Panics with the claims table.
    pub fn settle(
        &mut self,
        what: &str,
        until: impl Fn(&Snapshot) -> bool,
        hold: Duration,
    ) -> Snapshot {
        let Self {
            rt, observer, dir, ..
        } = self;
        match rt.block_on(observer.settle(until, hold)) {
            Ok(s) => s,
            Err(e) => panic!("{what}: {e:#}\n{}", logs(dir.path())),
        }
    }

    /// L1: waits until claim `ns/name` has its finalizer (`what` says which).
    pub fn finalized(&mut self, what: &str, ns: &str, name: &str) -> Snapshot {
        let has = |s: &Snapshot| {
            s.claim(ns, name)
                .is_some_and(|c| c.metadata.finalizers.is_some())
        };
        self.settle(what, has, Duration::ZERO)
    }

    pub fn snapshot(&self) -> Snapshot {
        Snapshot::take(&self.store)
    }

    /// Acts on one step of the demo's story (not awaited: `settle` on
    /// its `until` does that).
    pub fn act(&self, step: &gpu_claims_testbed::demo::story::Step) {
        let now = self.snapshot();
        (step.act)(&gpu_claims_testbed::demo::story::Ctx {
            standin: &self.standin,
            store: &self.store,
            now: &now,
        });
    }

    /// Writes the controller's config file as a ConfigMap update does:
    /// a new file renamed over the old one.
    pub fn rewrite_config(&self, text: &str) {
        write_config(self.dir.path(), &with_demo_queueing(text));
    }

    /// The controller's writes that took effect or changed nothing,
    /// refused ones and leader-election renewals aside.
    pub fn writes(&self) -> usize {
        self.journal
            .journal()
            .entries
            .iter()
            .filter(|e| e.error.is_none() && e.kind != "Lease")
            .count()
    }
}

/// `text`, with the demo's `queueing` unless it says its own.
pub fn with_demo_queueing(text: &str) -> String {
    if text.contains("queueing:") {
        return text.to_string();
    }
    format!("{text}\n{}", gpu_claims_testbed::demo::CONFIG_QUEUEING)
}

fn write_config(dir: &Path, text: &str) {
    let tmp = dir.join(".config.yaml.new");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(tmp, dir.join("config.yaml")).unwrap();
}

/// The controllers' logs, for a failure message: warnings and writes.
fn logs(dir: &Path) -> String {
    let mut out = String::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "log") {
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            if let Some(keep) = std::env::var_os("GPU_CLAIMS_KEEP_LOGS") {
                let _ = std::fs::create_dir_all(&keep);
                let _ = std::fs::copy(&p, Path::new(&keep).join(p.file_name().unwrap()));
            }
            out.push_str(&format!("--- {}\n", p.display()));
            for l in text
                .lines()
                .filter(|l| !l.contains("DEBUG"))
                .rev()
                .take(60)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
            {
                out.push_str(l);
                out.push('\n');
            }
        }
    }
    out
}

/// A PATH with `bin` on it as the kubectl plugin `kubectl-gpu_claims`
/// first, and the directory that holds it (kept while the PATH is used).
pub fn plugin_path(bin: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(bin, dir.path().join("kubectl-gpu_claims")).unwrap();
    let path = format!(
        "{}:{}",
        dir.path().display(),
        std::env::var("PATH").unwrap()
    );
    (dir, path)
}

/// A child process stopped however the test ends: Ctrl-C, as a user
/// stops it (it removes its own files), then a kill if it does not end.
pub struct StopOnDrop(pub Child);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.0.id() as i32),
            nix::sys::signal::Signal::SIGINT,
        );
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::time::Instant::now() < until && matches!(self.0.try_wait(), Ok(None)) {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Whether a tool nobody here wrote runs (`probe` succeeds). Missing, it
/// skips its test loudly, except where GPU_CLAIMS_REQUIRE_REAL_CLIENTS is
/// set (`.ci/run` installs the tools and sets it): there it fails.
pub fn available(what: &str, probe: &mut std::process::Command) -> bool {
    let ok = probe
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var_os("GPU_CLAIMS_REQUIRE_REAL_CLIENTS").is_none(),
            "{what} is required here (GPU_CLAIMS_REQUIRE_REAL_CLIENTS is set) but missing"
        );
        eprintln!("SKIPPED: {what} is not installed (.ci/run installs it)");
    }
    ok
}

/// Runs a command that must succeed; its output, or a panic with what it said.
pub fn succeed(cmd: &mut std::process::Command) -> std::process::Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Whether a real kubectl is here (see `available`).
pub fn kubectl_available() -> bool {
    available(
        "kubectl",
        std::process::Command::new("kubectl").args(["version", "--client"]),
    )
}

/// Whether the Python kubernetes client is here (see `available`).
pub fn python_client_available() -> bool {
    available(
        "the Python kubernetes client",
        std::process::Command::new("python3").args(["-c", "import kubernetes"]),
    )
}
