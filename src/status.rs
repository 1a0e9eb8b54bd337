//! `gpu-claims status` (README, "Commands"), also `kubectl gpu-claims status`: where
//! the GPUs are, read from the cluster through the kubeconfig with the
//! deadlines `run` has. Every kind is listed in pages into one world, the
//! report is one pass over it (`gpu_claims_actors::status`).

use crate::clients::Clients;
use crate::kube_ports::{api, typed};
use anyhow::Context as _;
use gpu_claims_actors::api::Kind;
use gpu_claims_actors::printable::printable;
use gpu_claims_actors::status::{Report, report};
use gpu_claims_actors::world::WorldWriter;
use kube::api::ListParams;
use std::fmt::Write as _;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct StatusArgs {
    #[command(flatten)]
    kube: crate::kube_args::KubeArgs,
    /// Only this namespace's waiting sets, quotas and claims' devices
    /// (the cluster's classes and nodes are shown whole).
    #[arg(short = 'n', long)]
    namespace: Option<String>,
    /// table, json or yaml.
    #[arg(short = 'o', long = "output", default_value = "table")]
    output: Output,
    /// The deadline of each request (a page of a list).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    request_timeout: Duration,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Output {
    Table,
    Json,
    Yaml,
}

/// Objects per page: a list of 100k claims is 200 requests, none large.
const PAGE: u32 = 500;

pub fn status(args: StatusArgs) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let report = rt.block_on(read(&args))?;
    let out = match args.output {
        Output::Table => table(&report, k8s_openapi::jiff::Timestamp::now()),
        Output::Json => serde_json::to_string_pretty(&report)? + "\n",
        Output::Yaml => serde_saphyr::to_string(&report)?,
    };
    print!("{out}");
    Ok(())
}

async fn read(args: &StatusArgs) -> anyhow::Result<Report> {
    let clients = args.kube.connect(args.request_timeout).await?;
    let (world, not_read) = read_world(&clients, &Kind::ALL)
        .await
        .with_context(|| format!("the API server at {}", clients.url))?;
    let mut r = report(&world);
    r.not_read = not_read;
    if let Some(ns) = &args.namespace {
        r.waiting.retain(|w| &w.namespace == ns);
        r.quotas.retain(|q| &q.namespace == ns);
        r.claim_devices.retain(|c| &c.namespace == ns);
        r.heads.retain(|h| &h.namespace == ns);
    }
    Ok(r)
}

/// Clients for the kubeconfig at `path`, or the default one.
/// These kinds listed into one world, and the kinds that could not be read.
pub async fn read_world(
    clients: &Clients,
    kinds: &[Kind],
) -> anyhow::Result<(WorldWriter, Vec<String>)> {
    let world = WorldWriter::new(Default::default());
    let mut not_read = Vec::new();
    for &kind in kinds {
        match list(clients, kind).await? {
            Listed::Objects(objects) => objects.into_iter().for_each(|o| world.load(o)),
            Listed::Not(why) => {
                // A cluster without DRA: its DRA classes say so (D1).
                world.set_served(kind, false);
                not_read.push(format!("{}: {why}", kind.name()));
            }
        }
    }
    Ok((world, not_read))
}

enum Listed {
    Objects(Vec<gpu_claims_actors::ports::Obj>),
    /// Not served (no KubeVirt, an older CRD set) or not permitted (a
    /// tenant's view): the report goes on without it, and says so.
    Not(&'static str),
}

/// Lists `kind` page by page. A continue token that expired (410) starts
/// the list again from its first page, as client-go's pager does.
async fn list(clients: &Clients, kind: Kind) -> anyhow::Result<Listed> {
    let objects = api(&clients.requests, kind, None);
    let mut items = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut params = ListParams::default().limit(PAGE);
        if let Some(t) = &token {
            params = params.continue_token(t);
        }
        let page = tokio::time::timeout(clients.request_timeout, objects.list(&params))
            .await
            .map_err(|_| {
                let deadline = clients.request_timeout;
                anyhow::anyhow!("listing {}: no answer within {deadline:?}", kind.name())
            })?;
        let page = match page {
            Ok(p) => p,
            Err(kube::Error::Api(s)) if s.code == 404 && token.is_none() => {
                return Ok(Listed::Not("not served"));
            }
            Err(kube::Error::Api(s)) if s.code == 403 => {
                return Ok(Listed::Not("not permitted to list"));
            }
            Err(kube::Error::Api(s)) if s.code == 410 && token.is_some() => {
                items.clear();
                token = None;
                continue;
            }
            Err(e) => {
                let e = crate::error_words::kube(&e);
                return Err(anyhow::anyhow!("listing {}: {e}", kind.name()));
            }
        };
        for o in page.items {
            match typed(kind, o) {
                Ok(obj) => items.push(obj),
                Err(e) => eprintln!(
                    "skipping a {} that cannot be read: {}",
                    kind.name(),
                    printable(&e.to_string())
                ),
            }
        }
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            return Ok(Listed::Objects(items));
        }
    }
}

/// Columns padded to their widest cell. Every cell is shown through
/// `printable`: names and messages come from what tenants wrote (a claim's
/// class in a ClassMissing message), and a raw ESC, CR or newline could
/// act on the operator's terminal or forge a row or a section.
fn columns(rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| printable(c).into_owned()).collect())
        .collect();
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in &rows {
        let cells: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:w$}"))
            .collect();
        let _ = writeln!(out, "{}", cells.join("   ").trim_end());
    }
    out
}

/// A titled table; "(none)" when it has no rows.
pub(crate) fn section(out: &mut String, title: &str, header: &[&str], rows: Vec<Vec<String>>) {
    let _ = writeln!(out, "{title}");
    if rows.is_empty() {
        let _ = writeln!(out, "  (none)\n");
        return;
    }
    let mut all = vec![header.iter().map(|h| h.to_string()).collect()];
    all.extend(rows);
    for line in columns(&all).lines() {
        let _ = writeln!(out, "  {line}");
    }
    out.push('\n');
}

/// Names joined by commas, or `-` for none.
fn names_or_dash(names: &[String]) -> String {
    if names.is_empty() {
        "-".into()
    } else {
        names.join(",")
    }
}

/// How long from `since` to `now`, to the second ("-" when unknown).
fn waited(
    since: Option<k8s_openapi::jiff::Timestamp>,
    now: k8s_openapi::jiff::Timestamp,
) -> String {
    let Some(since) = since else {
        return "-".into();
    };
    let secs = since.duration_until(now).as_secs().max(0);
    let secs = u64::try_from(secs).unwrap_or(0);
    humantime::format_duration(Duration::from_secs(secs)).to_string()
}

/// The report as tables, its durations counted to `now`.
pub fn table(r: &Report, now: k8s_openapi::jiff::Timestamp) -> String {
    let mut out = String::new();
    let classes = r.classes.iter().map(|c| {
        let budget = c.budget.map_or("-".into(), |b| b.to_string());
        let source = match &c.device_class {
            Some(dc) => format!("deviceclass/{dc}"),
            None => c.resource.clone(),
        };
        vec![
            c.name.clone(),
            source,
            c.capacity.to_string(),
            c.allocated.to_string(),
            budget,
            c.waiting_sets.to_string(),
        ]
    });
    section(
        &mut out,
        "CLASSES",
        &[
            "NAME",
            "RESOURCE",
            "CAPACITY",
            "ALLOCATED",
            "BUDGET",
            "WAITING",
        ],
        classes.collect(),
    );
    // FREE is what no one holds; PLACEABLE what a new set could get
    // (none where placement skips the node, and SKIPPED says why).
    let nodes = r.nodes.iter().map(|n| {
        vec![
            n.node.clone(),
            n.resource.clone(),
            n.allocatable.to_string(),
            n.allocated.to_string(),
            n.used_outside_allocations.to_string(),
            n.free.to_string(),
            n.placeable.to_string(),
            n.skipped.clone().unwrap_or_else(|| "-".into()),
        ]
    });
    section(
        &mut out,
        "NODES",
        &[
            "NODE",
            "RESOURCE",
            "ALLOCATABLE",
            "ALLOCATED",
            "OTHER PODS",
            "FREE",
            "PLACEABLE",
            "SKIPPED",
        ],
        nodes.collect(),
    );
    let devices = r.devices.iter().map(|d| {
        let ready = if d.ready { "" } else { " (not Ready)" };
        vec![
            format!("{}{ready}", d.node),
            d.class.clone(),
            d.devices.to_string(),
            d.allocated.to_string(),
            d.held_outside_allocations.to_string(),
            d.free.to_string(),
            names_or_dash(&d.free_devices),
            names_or_dash(&d.kept_for_stopped_vms),
        ]
    });
    // A cluster without DRA classes is shown as before.
    if !r.devices.is_empty() {
        section(
            &mut out,
            "DRA DEVICES",
            &[
                "NODE",
                "CLASS",
                "DEVICES",
                "ALLOCATED",
                "OTHER CLAIMS",
                "FREE",
                "FREE DEVICES",
                "KEPT FOR STOPPED VMS",
            ],
            devices.collect(),
        );
        // Each claim's devices: which GPUs (by PCI address) a VM has, or
        // keeps while it is stopped.
        let claims = r.claim_devices.iter().map(|c| {
            vec![
                format!("{}/{}", c.namespace, c.name),
                c.class.clone(),
                c.phase.as_str().to_string(),
                c.node.clone(),
                c.vmi.clone().unwrap_or_else(|| "- (stopped)".into()),
                c.devices.join(", "),
            ]
        });
        section(
            &mut out,
            "DRA CLAIMS",
            &["CLAIM", "CLASS", "PHASE", "NODE", "VMI", "DEVICES"],
            claims.collect(),
        );
    }
    let quotas = r.quotas.iter().map(|q| {
        let class = q.class.clone().unwrap_or_else(|| "(all)".into());
        vec![
            q.namespace.clone(),
            q.name.clone(),
            class,
            format!("{}/{}", q.used, q.hard),
        ]
    });
    section(
        &mut out,
        "QUOTAS",
        &["NAMESPACE", "QUOTA", "CLASS", "USED/HARD"],
        quotas.collect(),
    );
    // O1's order: the order in which the sets take the GPUs that free.
    let waiting = r.waiting.iter().enumerate().map(|(i, s)| {
        vec![
            (i + 1).to_string(),
            format!("{}/{}", s.namespace, s.vmi),
            s.priority.to_string(),
            waited(s.since, now),
            s.claims.join(","),
            s.reason.clone(),
            s.message.clone(),
        ]
    });
    section(
        &mut out,
        "WAITING AT THE GATE",
        &[
            "#", "VMI", "PRIORITY", "WAITED", "CLAIMS", "REASON", "MESSAGE",
        ],
        waiting.collect(),
    );
    // O2: the set at the head of each class, and how long it has led.
    if !r.heads.is_empty() {
        let heads = r.heads.iter().map(|h| {
            vec![
                h.class.clone(),
                format!("{}/{}", h.namespace, h.vmi),
                h.since.to_string(),
                waited(Some(h.since), now),
            ]
        });
        section(
            &mut out,
            "QUEUE HEADS",
            &["CLASS", "HEAD", "SINCE", "LED FOR"],
            heads.collect(),
        );
    }
    let evacuating = r.evacuating.iter().map(|e| {
        let mut why: Vec<String> = e
            .without_vm
            .iter()
            .map(|v| format!("{v}: no VirtualMachine owner"))
            .collect();
        why.extend(e.waiting.iter().map(|(c, w)| format!("{c}: {w}")));
        why.extend(
            e.nowhere
                .iter()
                .map(|(v, w)| format!("{v}: not stopped, no other node could take it ({w})")),
        );
        vec![
            e.node.clone(),
            e.live.len().to_string(),
            e.restarting.len().to_string(),
            e.moving.len().to_string(),
            (e.without_vm.len() + e.waiting.len() + e.nowhere.len()).to_string(),
            if why.is_empty() {
                "-".into()
            } else {
                why.join("; ")
            },
        ]
    });
    section(
        &mut out,
        "EVACUATING",
        &["NODE", "LIVE VMS", "RESTARTING", "MOVING", "BLOCKED", "WHY"],
        evacuating.collect(),
    );
    for why in &r.not_read {
        let _ = writeln!(out, "not read: {why} (what needs it counts none)");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_claims_actors::status::WaitingSet;

    #[test]
    fn a_tenants_control_characters_are_shown_in_the_table_not_acted_on() {
        // A className of ESC sequences, CR and newline, as a tenant could
        // store it under a CRD without a pattern, in the ClassMissing message.
        let forged = "h200\u{1b}[2J\u{1b}]0;pwned\u{7}\r\nWAITING AT THE GATE\n  (none)";
        let report = Report {
            waiting: vec![WaitingSet {
                namespace: "t".into(),
                vmi: "vm\u{1b}[31m".into(),
                claims: vec!["a".into()],
                reason: "ClassMissing".into(),
                message: format!("GPUClass {forged} does not exist"),
                since: None,
                priority: 0,
            }],
            ..Report::default()
        };
        let out = table(&report, k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        assert!(!out.contains(['\u{1b}', '\r', '\u{7}']), "{out:?}");
        let sections = out
            .lines()
            .filter(|l| l.starts_with("WAITING AT THE GATE"))
            .count();
        assert_eq!(sections, 1, "no forged section: {out}");
        let row = out.lines().find(|l| l.contains("ClassMissing")).unwrap();
        assert!(
            row.contains("h200^[[2J^[]0;pwned\\u{7}\\r\\nWAITING AT THE GATE\\n  (none)"),
            "{row}"
        );
        assert!(row.contains("t/vm^[[31m"), "{row}");
    }
}
