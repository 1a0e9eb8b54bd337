//! `gpu-claims drain NODE` and `gpu-claims uncordon NODE` (E3), also as
//! `kubectl gpu-claims drain`: the operator's side of evacuation. `drain`
//! cordons the node and taints it `gpu.cozystack.io/evacuate:NoSchedule`
//! (valued `--max-concurrent`, the node's own limit of restarts at once),
//! which the controller answers by restarting the node's GPU VMs
//! elsewhere (E2), and shows how far it has come until no GPU VM is live
//! there (exit 0) or its timeout (exit 1, saying what blocks). `uncordon`
//! removes both. Each write is a read, an edit and a replace on the
//! resourceVersion read, retried on a 409: never a write over someone
//! else's newer node.

use crate::clients::Clients;
use crate::status::read_world;
use gpu_claims_actors::api::{EVACUATE_TAINT, Kind};
use gpu_claims_actors::printable::printable;
use gpu_claims_actors::status::{EvacuatingNode, evacuating_node};
use k8s_openapi::api::core::v1::{Node, Taint};
use kube::Api;
use kube::api::PostParams;
use std::io::{IsTerminal, Write as _};
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug)]
pub struct DrainArgs {
    /// The node to empty of GPU VMs.
    node: String,
    #[command(flatten)]
    kube: crate::kube_args::KubeArgs,
    /// How long to wait for the node's GPU VMs to move before giving up
    /// (exit 1); the node stays cordoned and tainted.
    #[arg(long, default_value = "30m", value_parser = humantime::parse_duration)]
    timeout: Duration,
    /// At most this many of the node's VMs restarting at once (the
    /// taint's value); the controller's `evacuation.maxConcurrent` still
    /// bounds all nodes together. Default: that bound alone.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    max_concurrent: Option<u32>,
    /// How often to look.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    interval: Duration,
    /// The deadline of each request.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    request_timeout: Duration,
}

#[derive(clap::Args, Debug)]
pub struct UncordonArgs {
    /// The node to take back into service.
    node: String,
    #[command(flatten)]
    kube: crate::kube_args::KubeArgs,
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    request_timeout: Duration,
}

/// What a node's evacuation is read from: the claims held there, the
/// VMIs attached to them, and the nodes (the restarts each keeps). Listed
/// every `--interval`, so not the pods of the whole cluster.
const WATCHED: [Kind; 3] = [Kind::Claim, Kind::Vmi, Kind::Node];

/// How many times a node write is tried again after a 409.
const CONFLICT_RETRIES: usize = 10;

/// What `set_evacuating` makes of a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Evacuate {
    /// Cordoned and tainted, the taint valued with the node's own limit
    /// of restarts at once (None: no value, the cluster's alone).
    Yes(Option<u32>),
    /// Neither.
    No,
}

/// Cordons and taints `node` or undoes both; whether it wrote.
async fn set_evacuating(clients: &Clients, node: &str, want: Evacuate) -> anyhow::Result<bool> {
    let value = match want {
        Evacuate::Yes(n) => n.map(|n| n.to_string()),
        Evacuate::No => None,
    };
    let evacuate = want != Evacuate::No;
    let nodes: Api<Node> = Api::all(clients.requests.clone());
    let deadline = clients.request_timeout;
    for _ in 0..CONFLICT_RETRIES {
        let mut n = tokio::time::timeout(deadline, nodes.get(node))
            .await
            .map_err(|_| anyhow::anyhow!("reading node {node}: no answer within {deadline:?}"))?
            .map_err(|e| {
                anyhow::anyhow!("reading node {node}: {}", crate::error_words::kube(&e))
            })?;
        let spec = n.spec.get_or_insert_default();
        let taints = spec.taints.get_or_insert_default();
        let tainted = taints.iter().any(|t| t.key == EVACUATE_TAINT);
        let as_wanted = taints.iter().any(|t| {
            t.key == EVACUATE_TAINT
                && t.value.as_deref().filter(|v| !v.is_empty()) == value.as_deref()
        });
        let cordoned = spec.unschedulable == Some(true);
        let already = if evacuate {
            as_wanted && cordoned
        } else {
            !tainted && !cordoned
        };
        if already {
            return Ok(false);
        }
        if evacuate {
            spec.unschedulable = Some(true);
            if !as_wanted {
                taints.retain(|t| t.key != EVACUATE_TAINT);
                taints.push(Taint {
                    key: EVACUATE_TAINT.into(),
                    value: value.clone(),
                    effect: "NoSchedule".into(),
                    ..Default::default()
                });
            }
        } else {
            spec.unschedulable = None;
            taints.retain(|t| t.key != EVACUATE_TAINT);
        }
        if spec.taints.as_ref().is_some_and(Vec::is_empty) {
            spec.taints = None;
        }
        match tokio::time::timeout(deadline, nodes.replace(node, &PostParams::default(), &n))
            .await
            .map_err(|_| anyhow::anyhow!("writing node {node}: no answer within {deadline:?}"))?
        {
            Ok(_) => return Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => {
                let e = crate::error_words::kube(&e);
                return Err(anyhow::anyhow!("writing node {node}: {e}"));
            }
        }
    }
    anyhow::bail!("writing node {node}: it changed under every one of {CONFLICT_RETRIES} tries")
}

/// What the node's evacuation shows, in one line.
/// A VM counts as moved once it runs elsewhere: not while it is live on
/// the node, nor while its restart is under way (its VMI gone from the
/// node, its new one waiting at the gate or starting).
fn progress_line(first: usize, e: &EvacuatingNode) -> String {
    let mut not_yet: std::collections::BTreeSet<&str> = e.live.iter().map(String::as_str).collect();
    not_yet.extend(e.restarting.iter().map(String::as_str));
    let moved = first.saturating_sub(not_yet.len());
    let blocked = e.without_vm.len() + e.waiting.len() + e.nowhere.len();
    format!(
        "{moved}/{first} GPU VMs moved off {}; {} live there, {} restarting, {} claims moving, {blocked} blocked",
        e.node,
        e.live.len(),
        e.restarting.len(),
        e.moving.len()
    )
}

/// What keeps the node from emptying, one line each.
fn blockers(e: &EvacuatingNode) -> Vec<String> {
    let mut out: Vec<String> = e
        .without_vm
        .iter()
        .map(|v| format!("VMI {v} has no VirtualMachine owner: stop it by hand"))
        .collect();
    out.extend(
        e.waiting
            .iter()
            .map(|(c, why)| format!("claim {c} waits at the gate: {why}")),
    );
    out.extend(e.nowhere.iter().map(|(v, why)| {
        format!("VMI {v} is not stopped: no other node could take it now ({why})")
    }));
    out.extend(
        e.live
            .iter()
            .filter(|v| !e.without_vm.contains(v) && !e.nowhere.iter().any(|(n, _)| n == *v))
            .map(|v| {
                format!(
                    "VMI {v} still runs there: waiting its turn, or its VirtualMachine would not start it again (runStrategy other than Always or Once; `kubectl describe node {}` names it)",
                    e.node
                )
            }),
    );
    out
}

/// Drains `args.node`: Ok once no GPU VM is live there, an error (exit 1)
/// at the timeout, after saying what blocks.
pub fn drain(args: DrainArgs) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(drain_async(args))
}

async fn drain_async(args: DrainArgs) -> anyhow::Result<()> {
    let clients = args.kube.connect(args.request_timeout).await?;
    let node = args.node.as_str();
    // What runs there before the taint: the controller starts moving VMs
    // as soon as it sees it.
    let (world, _) = read_world(&clients, &WATCHED).await?;
    let first = evacuating_node(&world, node).live.len();
    let taint = match args.max_concurrent {
        Some(n) => {
            format!("{EVACUATE_TAINT}={n}:NoSchedule (at most {n} of its VMs restarting at once)")
        }
        None => format!("{EVACUATE_TAINT}:NoSchedule"),
    };
    if set_evacuating(&clients, node, Evacuate::Yes(args.max_concurrent)).await? {
        println!("node {node} cordoned and tainted {taint}");
    } else {
        println!("node {node} is already cordoned and tainted {taint}");
    }
    let terminal = std::io::stdout().is_terminal();
    let started = Instant::now();
    let mut said = String::new();
    loop {
        let (world, _) = read_world(&clients, &WATCHED).await?;
        let e = evacuating_node(&world, node);
        let line = progress_line(first, &e);
        if terminal {
            let width = 30usize;
            let done = (width * first.saturating_sub(e.live.len()))
                .checked_div(first)
                .unwrap_or(width);
            print!(
                "\r[{}{}] {}",
                "#".repeat(done),
                "-".repeat(width - done),
                printable(&line)
            );
            let _ = std::io::stdout().flush();
        } else if line != said {
            println!("{}", printable(&line));
        }
        said = line;
        if e.done() {
            if terminal {
                println!();
            }
            let restarting = match e.restarting.len() {
                0 => String::new(),
                n => format!(" ({n} restarting elsewhere)"),
            };
            println!(
                "no GPU VM is live on {node}{restarting}; `kubectl drain {node}` finds none to evict"
            );
            return Ok(());
        }
        if started.elapsed() >= args.timeout {
            if terminal {
                println!();
            }
            println!(
                "gave up after {}; {node} stays cordoned and tainted. What blocks:",
                humantime::format_duration(args.timeout)
            );
            for b in blockers(&e) {
                println!("  {}", printable(&b));
            }
            println!(
                "Run drain again to keep waiting, or abort: `kubectl gpu-claims uncordon {node}` \
                 takes the node back into service (the VMs still there stay; restarts under way go on)."
            );
            anyhow::bail!("{} GPU VMs still live on {node}", e.live.len());
        }
        tokio::time::sleep(args.interval).await;
    }
}

pub fn uncordon(args: UncordonArgs) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let clients = args.kube.connect(args.request_timeout).await?;
        let node = args.node.as_str();
        if set_evacuating(&clients, node, Evacuate::No).await? {
            println!("node {node} uncordoned and its {EVACUATE_TAINT} taint removed");
        } else {
            println!("node {node} is neither cordoned nor tainted {EVACUATE_TAINT}");
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 64, item 7: a VM whose restart is under way (its new VMI at
    /// the gate, say, with nowhere to go) has not moved yet.
    #[test]
    fn e3_a_vm_counts_as_moved_only_once_it_runs_elsewhere() {
        let e = EvacuatingNode {
            node: "n1".into(),
            live: vec!["t/a".into()],
            without_vm: vec![],
            restarting: vec!["t/b".into()],
            moving: vec!["t/b-gpu".into()],
            waiting: vec![("t/b-gpu".into(), "NoCapacity: no node fits".into())],
            nowhere: vec![],
        };
        assert_eq!(
            progress_line(3, &e),
            "1/3 GPU VMs moved off n1; 1 live there, 1 restarting, 1 claims moving, 1 blocked"
        );
        assert!(
            blockers(&e)
                .contains(&"claim t/b-gpu waits at the gate: NoCapacity: no node fits".to_string())
        );
    }
}
