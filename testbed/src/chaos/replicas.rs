//! The controller's replicas: separate `gpu-claims run` processes, each
//! with its own identity (its kubeconfig's token, its Lease identity),
//! that the harness kills, freezes (SIGSTOP) and thaws, and restarts as
//! the kubelet would.

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// How a replica is started: a program and the arguments before `run`'s.
#[derive(Clone, Debug)]
pub struct Launcher {
    pub program: PathBuf,
    pub prefix: Vec<String>,
}

/// The Lease's timing, as every replica gets it.
#[derive(Clone, Copy, Debug)]
pub struct LeaseTimes {
    pub duration: Duration,
    pub renew: Duration,
    pub retry: Duration,
}

pub struct Replica {
    pub name: String,
    kubeconfig: PathBuf,
    config: PathBuf,
    log: PathBuf,
    child: Option<Child>,
    /// Where its /debug and /readyz answer (a new port at each start).
    pub http: SocketAddr,
    pub paused: bool,
    pub starts: usize,
}

fn free_port() -> std::io::Result<SocketAddr> {
    std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()
}

fn human(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

impl Replica {
    pub fn new(name: String, kubeconfig: PathBuf, config: PathBuf, dir: &Path) -> Self {
        let log = dir.join(format!("{name}.log"));
        Self {
            name,
            kubeconfig,
            config,
            log,
            child: None,
            http: "127.0.0.1:0".parse().expect("an address"),
            paused: false,
            starts: 0,
        }
    }

    pub fn start(&mut self, launcher: &Launcher, lease: LeaseTimes) -> std::io::Result<()> {
        self.http = free_port()?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let child = Command::new(&launcher.program)
            .args(&launcher.prefix)
            .arg("run")
            .arg("--config")
            .arg(&self.config)
            .args(["--http-addr", &self.http.to_string()])
            // A harness on one machine: its replicas' /debug is open.
            .arg("--http-auth=none")
            .args(["--lease-duration", &human(lease.duration)])
            .args(["--renew-deadline", &human(lease.renew)])
            .args(["--retry-period", &human(lease.retry)])
            .env("KUBECONFIG", &self.kubeconfig)
            .env("POD_NAME", &self.name)
            .env("POD_NAMESPACE", "gpu-claims")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?;
        self.child = Some(child);
        self.paused = false;
        self.starts += 1;
        Ok(())
    }

    fn pid(&self) -> Option<Pid> {
        self.child.as_ref().map(|c| Pid::from_raw(c.id() as i32))
    }

    /// Whether the process is running (or frozen): not dead, not exited.
    pub fn alive(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// SIGKILL, as a node failure or the OOM killer does.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.paused = false;
    }

    /// SIGSTOP: the process stops where it is, its clock going on.
    pub fn pause(&mut self) {
        if let Some(p) = self.pid() {
            let _ = kill(p, Signal::SIGSTOP);
            self.paused = true;
        }
    }

    /// SIGCONT.
    pub fn resume(&mut self) {
        if let Some(p) = self.pid() {
            let _ = kill(p, Signal::SIGCONT);
        }
        self.paused = false;
    }

    /// The last lines of its log, for a report on failure.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        if self.paused {
            self.resume();
        }
        self.kill();
    }
}

/// A GET with a deadline over plain HTTP/1.1: the status and the body.
pub async fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let get = async {
        let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
        let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).await.ok()?;
        let code = out.split_whitespace().nth(1)?.parse().ok()?;
        let body = out.split("\r\n\r\n").nth(1).unwrap_or_default().to_string();
        Some((code, body))
    };
    tokio::time::timeout(Duration::from_secs(2), get)
        .await
        .ok()
        .flatten()
}
