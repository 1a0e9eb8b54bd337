//! The README's quickstart, as a new user runs it: its manifests (the
//! YAML blocks of its "Quickstart" section, which must be the files in
//! docs/quickstart/) applied with kubectl to `gpu-claims demo --serve`,
//! then `kubectl gpu-claims status`. The VM runs on a node with its GPU,
//! so the README cannot go stale.
mod common;

use serde_json::Value;
use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The YAML blocks of the README's quickstart section, in order.
fn readme_manifests() -> Vec<String> {
    let readme = std::fs::read_to_string("README.md").unwrap();
    let section = readme
        .split("\n## Quickstart")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("the README has a Quickstart section");
    section
        .split("```yaml\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap().to_string())
        .collect()
}

fn kubectl(kubeconfig: &Path, args: &[&str]) -> std::process::Output {
    Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn the_readmes_quickstart_runs_a_gpu_vm_on_the_demos_cluster() {
    // The README shows the files it tells the user to apply.
    let files = ["1-class.yaml", "2-tenant.yaml", "3-vm.yaml"];
    let blocks = readme_manifests();
    assert_eq!(blocks.len(), files.len(), "one YAML block per file");
    for (block, file) in blocks.iter().zip(files) {
        let text = std::fs::read_to_string(Path::new("docs/quickstart").join(file)).unwrap();
        assert_eq!(block, &text, "README's block of docs/quickstart/{file}");
    }
    if !common::kubectl_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let mut demo = Command::new(env!("CARGO_BIN_EXE_gpu-claims"));
    demo.args(["demo", "--serve", "--kubeconfig"])
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut demo = common::StopOnDrop(demo.spawn().unwrap());
    // Its stdout read to the end on a thread of its own: a pipe closed
    // under it would end the demo at its next line.
    let out = std::io::BufReader::new(demo.0.stdout.take().unwrap());
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in out.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut said = Vec::new();
    let until = Instant::now() + Duration::from_secs(180);
    while let Ok(line) = lines.recv_timeout(until.saturating_duration_since(Instant::now())) {
        let serving = line.contains("serving until Ctrl-C");
        said.push(line);
        if serving {
            break;
        }
    }
    assert!(
        said.last().is_some_and(|l| l.contains("serving")),
        "{}",
        said.join("\n")
    );

    let apply = kubectl(&kubeconfig, &["apply", "-f", "docs/quickstart/"]);
    assert!(
        apply.status.success(),
        "{}",
        String::from_utf8_lossy(&apply.stderr)
    );
    // The VM runs, its claim Attached on the node with the GPU.
    let until = Instant::now() + Duration::from_secs(120);
    let claim = loop {
        let out = kubectl(
            &kubeconfig,
            &["get", "gpuclaims", "-n", "tenant-demo", "-o", "json"],
        );
        let list: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let attached = list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["status"]["phase"] == "Attached")
            .cloned();
        match attached {
            Some(c) => break c,
            None if Instant::now() > until => panic!("never Attached: {list}"),
            None => std::thread::sleep(Duration::from_millis(200)),
        }
    };
    assert_eq!(claim["metadata"]["name"], "vm-first-gpu");
    assert_eq!(claim["status"]["attachedTo"]["vmi"], "vm-first");
    assert_eq!(claim["status"]["nodeName"], "gpu-node-3", "the L40S node");
    let vmi = kubectl(
        &kubeconfig,
        &[
            "get",
            "vmi",
            "-n",
            "tenant-demo",
            "vm-first",
            "-o",
            "jsonpath={.status.phase}",
        ],
    );
    assert_eq!(String::from_utf8_lossy(&vmi.stdout), "Running");
    // `kubectl gpu-claims status -n tenant-demo`, as the plugin.
    let (_bin, path) = common::plugin_path(env!("CARGO_BIN_EXE_gpu-claims"));
    let status = Command::new("kubectl")
        .args(["gpu-claims", "status", "-n", "tenant-demo"])
        .env("PATH", path)
        .env("KUBECONFIG", &kubeconfig)
        .output()
        .unwrap();
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let table = String::from_utf8(status.stdout).unwrap();
    let quota = table
        .lines()
        .find(|l| l.contains("tenant-demo"))
        .unwrap_or_else(|| panic!("the tenant's quota in\n{table}"));
    assert!(quota.contains("gpus") && quota.contains("l40s"), "{table}");
    let class = table
        .lines()
        .find(|l| l.trim_start().starts_with("l40s "))
        .unwrap_or_else(|| panic!("class l40s in\n{table}"));
    assert!(
        class.split_whitespace().any(|w| w == "1"),
        "1 allocated: {table}"
    );
}
