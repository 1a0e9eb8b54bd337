//! What an operator meets when things go wrong around the controller: an
//! error is one line with its causes (no stack dump, even with
//! RUST_BACKTRACE set), an address in use is named, an unreachable API
//! server is said once per backoff step rather than many times a second,
//! and the demo leaves no kubeconfig behind.
mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gpu-claims"))
}

#[test]
fn an_error_is_one_line_with_its_causes_even_with_rust_backtrace_set() {
    let out = bin()
        .args(["plan", "--snapshot", "/nonexistent/snapshot.yaml"])
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("gpu-claims: error: snapshot /nonexistent/snapshot.yaml"),
        "{err}"
    );
    assert!(!err.contains("backtrace"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn an_address_in_use_is_named() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    for flag in ["--api-addr", "--http-addr"] {
        let out = bin().args(["demo", flag, &addr]).output().unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("listen on {addr}")) && err.contains("in use"),
            "{flag}: {err}"
        );
    }
}

#[test]
fn the_demo_leaves_no_kubeconfig_behind() {
    let out = bin().arg("demo").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let path = stdout
        .split("kubeconfig ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .expect("the demo names its kubeconfig");
    assert!(
        !std::path::Path::new(path).exists(),
        "{path} is left behind"
    );
    // Its webhook's certificate goes too; the webhook gated the story's
    // GPU launcher pods (the API server called it, the stand-in gates none).
    let tls = std::env::temp_dir().join(format!("gpu-claims-demo-{}-tls", out_pid(&stdout)));
    assert!(!tls.exists(), "{} is left behind", tls.display());
    let gated: u64 = stdout
        .split("its webhook put ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("the demo says what its webhook gated");
    assert!(gated >= 2, "{stdout}");
}

/// The demo's process id, from its kubeconfig's name.
fn out_pid(stdout: &str) -> String {
    stdout
        .split("gpu-claims-demo-")
        .nth(1)
        .and_then(|r| r.split('.').next())
        .unwrap_or_default()
        .to_string()
}

/// An API server that is not there: each watch and the leader election say
/// so at their 1st, 2nd, 4th, 8th... failure. Every failed request told
/// at once came to about 11 lines a second.
#[test]
fn an_unreachable_api_server_is_told_once_per_backoff_step() {
    let dir = tempfile::tempdir().unwrap();
    let closed = common::free_port();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        gpu_claims::apiserver::kubeconfig(&format!("http://{closed}")),
    )
    .unwrap();
    let log = dir.path().join("log");
    let mut child = bin()
        .args(["run", "--http-addr", "127.0.0.1:0"])
        .env("KUBECONFIG", &kubeconfig)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let window = Duration::from_secs(6);
    let start = Instant::now();
    while start.elapsed() < window {
        assert!(child.try_wait().unwrap().is_none(), "run exited");
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    let text = std::fs::read_to_string(&log).unwrap();
    let noisy: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        .collect();
    // 7 sources (6 watches, the Lease), each at most at failures 1, 2, 4
    // (and 8 on a fast machine) within the window.
    assert!(
        noisy.len() <= 7 * 4,
        "{} lines in {window:?}:\n{}",
        noisy.len(),
        noisy.join("\n")
    );
    assert!(
        noisy.iter().any(|l| l.contains("watch failed")),
        "still said: {text}"
    );
}
