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
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: closed\n  cluster:\n    server: http://{closed}\ncontexts:\n- name: closed\n  context: {{cluster: closed, user: anonymous}}\ncurrent-context: closed\nusers:\n- name: anonymous\n  user: {{}}\n"
        ),
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
    // One source per watched kind and the Lease, each at most at failures
    // 1, 2, 4 (and 8 on a fast machine) within the window.
    let sources = gpu_claims_actors::api::Kind::ALL.len() + 1;
    assert!(
        noisy.len() <= sources * 4,
        "{} lines in {window:?}:\n{}",
        noisy.len(),
        noisy.join("\n")
    );
    assert!(
        noisy.iter().any(|l| l.contains("watch failed")),
        "still said: {text}"
    );
}

/// `demo --serve` is for playing with: a user's writes the server refuses
/// (a claim without className, a ConfigMap with a bad name) or that
/// disturb the story (a node deleted) neither end it nor fail it; it says
/// the story was disturbed and keeps serving. Its kubeconfig, which
/// carries a token, is readable by its owner only.
#[test]
fn demo_serve_takes_a_user_playing_with_it_and_keeps_its_kubeconfig_private() {
    if !common::kubectl_available() {
        return;
    }
    use std::io::BufRead;
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("k");
    let mut child = bin()
        .args([
            "demo",
            "--serve",
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                return;
            }
        }
    });
    let mut seen = Vec::new();
    let wait_for = |needle: &str, seen: &mut Vec<String>| {
        let until = Instant::now() + Duration::from_secs(120);
        while Instant::now() < until {
            match rx.recv_timeout(Duration::from_millis(200)) {
                Ok(l) => {
                    let hit = l.contains(needle);
                    seen.push(l);
                    if hit {
                        return;
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(_) => break,
            }
        }
        panic!("{needle:?} never came:\n{}", seen.join("\n"));
    };
    wait_for("step 1/", &mut seen);
    let mode = std::fs::metadata(&kubeconfig).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the kubeconfig is private");
    let kubectl = |args: &[&str], stdin: Option<&str>| {
        let mut c = Command::new("kubectl");
        c.arg("--kubeconfig").arg(&kubeconfig).args(args);
        c.stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut p = c.spawn().unwrap();
        if let Some(text) = stdin {
            use std::io::Write;
            p.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        }
        p.wait().unwrap().success()
    };
    let bad_claim = "apiVersion: gpu.cozystack.io/v1alpha1\nkind: GPUClaim\nmetadata: {name: nope, namespace: tenant-a}\nspec: {count: 1}\n";
    assert!(
        !kubectl(&["create", "-f", "-"], Some(bad_claim)),
        "refused as invalid"
    );
    let bad_name =
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: Bad-Name, namespace: default}\n";
    assert!(
        !kubectl(&["create", "-f", "-"], Some(bad_name)),
        "refused as invalid"
    );
    assert!(kubectl(
        &["delete", "node", "gpu-node-3", "--wait=false"],
        None
    ));
    wait_for("serving until Ctrl-C", &mut seen);
    assert!(
        child.try_wait().unwrap().is_none(),
        "still serving:\n{}",
        seen.join("\n")
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}\n{}", seen.join("\n"));
}
