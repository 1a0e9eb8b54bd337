//! `gpu-claims cluster`: the embedded API server and the stand-in alone,
//! with a kubeconfig (its own token) per replica; a `run` replica started
//! against it leads and writes, and on Ctrl-C the server tells the Lease's
//! history and who wrote what.
mod common;
use common::http_get;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn cluster_serves_replicas_by_identity_and_tells_who_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Command::new(env!("CARGO_BIN_EXE_gpu-claims"))
        .args(["cluster", "--replicas", "2", "--dir"])
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(cluster.stdout.take().unwrap());
    let mut intro = String::new();
    while !intro.contains("Ctrl-C stops it") {
        assert_ne!(out.read_line(&mut intro).unwrap(), 0, "{intro}");
    }
    for f in [
        "admin.kubeconfig",
        "replica-1.kubeconfig",
        "replica-2.kubeconfig",
    ] {
        assert!(dir.path().join(f).exists(), "{f}: {intro}");
    }
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, "log: {filter: info}\n").unwrap();
    let http = common::free_port();
    let mut replica = Command::new(env!("CARGO_BIN_EXE_gpu-claims"))
        .arg("run")
        .arg("--config")
        .arg(&config)
        .args(["--http-addr", &http.to_string(), "--http-auth=none"])
        .args([
            "--lease-duration=4s",
            "--renew-deadline=3s",
            "--retry-period=500ms",
        ])
        .env("KUBECONFIG", dir.path().join("replica-1.kubeconfig"))
        .env("POD_NAME", "replica-1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // It leads, and its actors settle (the demo cluster's classes and claim get finalizers).
    let start = Instant::now();
    loop {
        let d = http_get(http, "/debug")
            .and_then(|(_, b)| serde_json::from_str::<serde_json::Value>(&b).ok());
        if d.as_ref()
            .is_some_and(|d| d["settled"] == true && d["leader"]["leading"] == true)
        {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "{d:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = replica.kill();
    let _ = replica.wait();
    kill(Pid::from_raw(cluster.id() as i32), Signal::SIGINT).unwrap();
    let mut summary = String::new();
    out.read_to_string(&mut summary).unwrap();
    assert!(cluster.wait().unwrap().success(), "{summary}");
    assert!(summary.contains("Lease holders, in order:"), "{summary}");
    let holder = summary
        .lines()
        .find(|l| l.contains("replica-1_"))
        .unwrap_or_else(|| panic!("replica-1 held the Lease: {summary}"));
    assert!(
        holder
            .trim_start()
            .starts_with(|c: char| c.is_ascii_digit()),
        "{holder}"
    );
    let writes: usize = summary
        .lines()
        .find_map(|l| l.trim().strip_prefix("replica-1: "))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("replica-1's writes: {summary}"));
    assert!(
        writes >= 3,
        "finalizers on two classes and a claim: {summary}"
    );
    assert!(
        summary.contains("writes outside their writer's term: 0"),
        "{summary}"
    );
}
