//! The chaos harness in CI, for a bounded while: three `run` replicas
//! (separate processes) against the embedded API server with write
//! faults and cut watches, VM churn, and the leader killed, frozen past
//! the lease duration and cut off the server, in turn. Nothing may be
//! written outside a term, I1-I5 must hold at every check, and the
//! cluster must converge once the chaos stops. `gpu-claims-chaos
//! --duration D` runs the same for longer (docs/operations.md).
use std::process::Command;

#[test]
fn chaos_three_replicas_never_write_outside_a_term_keep_the_invariants_and_converge() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("chaos.json");
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-claims-chaos"))
        .args(["--duration", "100s", "--seed", "7", "--dir"])
        .arg(dir.path().join("run"))
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    let log = String::from_utf8_lossy(&out.stderr);
    let r: serde_json::Value = match std::fs::read_to_string(&json) {
        Ok(text) => serde_json::from_str(&text).unwrap(),
        Err(e) => panic!("no figures ({e}):\n{table}\n{log}"),
    };
    for field in [
        "replicas",
        "lease_duration_s",
        "kills",
        "pauses",
        "partitions",
        "writes",
        "writes_outside_term",
        "invariant_checks",
        "invariant_violations",
        "converged",
        "failover_p50_s",
        "failover_max_s",
    ] {
        assert!(!r[field].is_null(), "{field} in {r:#}");
    }
    assert_eq!(r["replicas"], 3);
    assert_eq!(r["writes_outside_term"], 0, "{table}\n{log}");
    assert_eq!(r["invariant_violations"], 0, "{table}\n{log}");
    assert_eq!(r["converged"], true, "{table}\n{log}");
    for what in ["kills", "pauses", "partitions"] {
        assert!(r[what].as_u64().unwrap() >= 1, "{what}: {table}");
    }
    assert!(
        r["writes"].as_u64().unwrap() > 50,
        "the replicas worked: {table}"
    );
    assert!(r["invariant_checks"].as_u64().unwrap() > 500, "{table}");
    assert!(
        r["leader_changes"].as_u64().unwrap() >= 2,
        "the leader changed: {table}"
    );
    assert!(
        !r["failovers"].as_array().unwrap().is_empty(),
        "a failover was measured: {table}"
    );
    assert!(out.status.success(), "{table}\n{log}");
}
