//! What the demo prints after each step: the claims, one row each, the
//! classes' budgets and the tenants' quotas.

use crate::memory::store::Store;
use gpu_claims_actors::api::{GPUAllocation, GPUClaim, GPUClass, GPUQuota, is_deleting};
use gpu_claims_actors::ports::{Kind, Obj};
use k8s_openapi::api::resource::v1::ResourceClaim;
use std::fmt::Write as _;

/// The claims, classes and quotas as the store holds them now.
pub struct Snapshot {
    pub claims: Vec<GPUClaim>,
    pub classes: Vec<GPUClass>,
    pub quotas: Vec<GPUQuota>,
    pub nodes: Vec<k8s_openapi::api::core::v1::Node>,
    pub allocations: Vec<GPUAllocation>,
    pub resource_claims: Vec<ResourceClaim>,
}

impl Snapshot {
    pub fn take(store: &Store) -> Self {
        let typed = |kind: Kind| {
            store
                .list(kind.name())
                .0
                .into_iter()
                .filter_map(move |v| gpu_claims_actors::api::from_json(kind, v).ok())
        };
        Self {
            claims: typed(Kind::Claim)
                .filter_map(|o| if let Obj::Claim(c) = o { Some(c) } else { None })
                .collect(),
            classes: typed(Kind::Class)
                .filter_map(|o| if let Obj::Class(c) = o { Some(c) } else { None })
                .collect(),
            quotas: typed(Kind::Quota)
                .filter_map(|o| if let Obj::Quota(q) = o { Some(q) } else { None })
                .collect(),
            nodes: typed(Kind::Node)
                .filter_map(|o| if let Obj::Node(n) = o { Some(n) } else { None })
                .collect(),
            allocations: typed(Kind::Allocation)
                .filter_map(|o| match o {
                    Obj::Allocation(r) => Some(r),
                    _ => None,
                })
                .collect(),
            resource_claims: typed(Kind::ResourceClaim)
                .filter_map(|o| match o {
                    Obj::ResourceClaim(c) => Some(c),
                    _ => None,
                })
                .collect(),
        }
    }

    /// The nodes tainted for evacuation (E2), by name.
    pub fn evacuating(&self) -> Vec<String> {
        self.nodes
            .iter()
            .filter_map(gpu_claims_actors::api::NodeFacts::from_node)
            .filter(|n| n.evacuating)
            .map(|n| n.name)
            .collect()
    }

    /// Whether any node keeps a restart under way (E2's marks).
    pub fn restarting(&self) -> bool {
        self.nodes
            .iter()
            .filter_map(gpu_claims_actors::api::NodeFacts::from_node)
            .any(|n| !n.restarts.is_empty())
    }

    pub fn quota(&self, ns: &str, name: &str) -> Option<&GPUQuota> {
        self.quotas.iter().find(|q| {
            q.metadata.namespace.as_deref() == Some(ns) && q.metadata.name.as_deref() == Some(name)
        })
    }

    pub fn claim(&self, ns: &str, name: &str) -> Option<&GPUClaim> {
        self.claims.iter().find(|c| {
            c.metadata.namespace.as_deref() == Some(ns) && c.metadata.name.as_deref() == Some(name)
        })
    }

    pub fn class(&self, name: &str) -> Option<&GPUClass> {
        self.classes
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))
    }

    /// The claim's phase, "gone" when it does not exist.
    pub fn phase(&self, ns: &str, name: &str) -> &'static str {
        self.claim(ns, name).map_or("gone", |c| c.phase().as_str())
    }
}

fn note(c: &GPUClaim) -> String {
    let mut notes: Vec<String> = c
        .conditions()
        .iter()
        .filter(|x| x.status == "True")
        .map(|x| format!("{}: {}", x.type_, x.reason))
        .collect();
    if is_deleting(&c.metadata) {
        notes.insert(0, "deleting".into());
    }
    notes.join(", ")
}

/// One claim's row: CLAIM, CLASS, GPUS, PHASE, NODE, VMI, NOTE.
type Row = [String; 7];

const HEADER: [&str; 7] = ["CLAIM", "CLASS", "GPUS", "PHASE", "NODE", "VMI", "NOTE"];

fn claim_rows(s: &Snapshot) -> Vec<Row> {
    s.claims
        .iter()
        .map(|c| {
            let dash = |v: Option<&str>| v.unwrap_or("-").to_string();
            [
                format!(
                    "{}/{}",
                    c.metadata.namespace.as_deref().unwrap_or_default(),
                    c.metadata.name.as_deref().unwrap_or_default()
                ),
                c.spec.class_name.clone(),
                c.spec.count.to_string(),
                c.phase().as_str().to_string(),
                dash(c.node_name()),
                dash(c.attached_vmi_name()),
                note(c),
            ]
        })
        .collect()
}

/// The rows under the header, each column as wide as its widest cell.
fn table(rows: &[Row]) -> String {
    let header: Row = HEADER.map(str::to_string);
    let all: Vec<&Row> = std::iter::once(&header).chain(rows).collect();
    let widths: Vec<usize> = (0..7)
        .map(|i| all.iter().map(|r| r[i].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in all {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:w$}"))
            .collect();
        let _ = writeln!(out, "    {}", line.join("  ").trim_end());
    }
    out
}

/// The lines under the claims: DRA devices, classes, quotas.
fn other_lines(s: &Snapshot) -> Vec<String> {
    let mut out: Vec<String> = s
        .allocations
        .iter()
        .filter(|r| !r.spec.devices.is_empty())
        .map(|r| devices_line(s, r))
        .collect();
    for k in &s.classes {
        let st = k.status.as_ref();
        let source = match &k.spec.device_class_name {
            Some(dc) => format!("DeviceClass {dc},"),
            None => k.spec.resource_name.clone(),
        };
        out.push(format!(
            "class {}: {} budget {}, capacity {}, allocated {}{}",
            k.metadata.name.as_deref().unwrap_or_default(),
            source,
            k.spec.budget.map_or("none".into(), |b| b.to_string()),
            st.and_then(|s| s.capacity).unwrap_or(0),
            st.and_then(|s| s.allocated).unwrap_or(0),
            if is_deleting(&k.metadata) {
                " (deleting)"
            } else {
                ""
            },
        ));
    }
    out.extend(s.quotas.iter().map(quota_line));
    out
}

/// Every claim, then the devices, classes and quotas.
pub fn render(s: &Snapshot) -> String {
    let rows = claim_rows(s);
    let mut out = match rows.is_empty() {
        true => "    (no claims)\n".to_string(),
        false => table(&rows),
    };
    for l in other_lines(s) {
        let _ = writeln!(out, "    {l}");
    }
    out
}

/// What changed from `before` to `now`: the claims made or changed (and
/// those gone), and the device, class and quota lines that are new.
pub fn render_changes(before: &Snapshot, now: &Snapshot) -> String {
    let old = claim_rows(before);
    let new = claim_rows(now);
    let mut rows: Vec<Row> = new.iter().filter(|r| !old.contains(r)).cloned().collect();
    for gone in old.iter().filter(|o| !new.iter().any(|n| n[0] == o[0])) {
        let mut r: Row = Default::default();
        r[0] = gone[0].clone();
        r[1] = gone[1].clone();
        r[2] = gone[2].clone();
        r[3] = "gone".into();
        rows.push(r);
    }
    rows.sort_by(|a, b| a[0].cmp(&b[0]));
    let mut out = match rows.is_empty() {
        true => "    (no claim changed)\n".to_string(),
        false => table(&rows),
    };
    let before_lines = other_lines(before);
    for l in other_lines(now)
        .into_iter()
        .filter(|l| !before_lines.contains(l))
    {
        let _ = writeln!(out, "    {l}");
    }
    out
}

/// D3, D4: "devices of tenant-a/vm-llm-gpu on dra-node-2: gpu-vfio-0,
/// gpu-vfio-1; ResourceClaim tenant-a/x allocated to them, reserved for
/// pod virt-launcher-vm-llm-abcde".
fn devices_line(s: &Snapshot, r: &GPUAllocation) -> String {
    let ns = r.metadata.namespace.as_deref().unwrap_or_default();
    let names: Vec<&str> = r.spec.devices.iter().map(|d| d.device.as_str()).collect();
    let mut line = format!(
        "devices of {ns}/{} on {}: {}",
        r.metadata.name.as_deref().unwrap_or_default(),
        r.spec.node_name,
        names.join(", ")
    );
    // A device is its driver, pool and name: two nodes' pools may name
    // their devices alike.
    let recorded: Vec<(&str, &str, &str)> = r
        .spec
        .devices
        .iter()
        .map(|d| (d.driver.as_str(), d.pool.as_str(), d.device.as_str()))
        .collect();
    let holder = s.resource_claims.iter().find(|c| {
        let results = c
            .status
            .as_ref()
            .and_then(|st| st.allocation.as_ref())
            .and_then(|a| a.devices.as_ref())
            .and_then(|d| d.results.as_deref())
            .unwrap_or_default();
        c.metadata.namespace.as_deref() == Some(ns)
            && !results.is_empty()
            && results.iter().all(|x| {
                recorded.contains(&(x.driver.as_str(), x.pool.as_str(), x.device.as_str()))
            })
    });
    match holder {
        Some(c) => {
            let _ = write!(
                line,
                "; ResourceClaim {ns}/{} allocated to them",
                c.metadata.name.as_deref().unwrap_or_default()
            );
            let pods: Vec<&str> = c
                .status
                .iter()
                .flat_map(|st| st.reserved_for.iter().flatten())
                .map(|p| p.name.as_str())
                .collect();
            if !pods.is_empty() {
                let _ = write!(line, ", reserved for pod {}", pods.join(", "));
            }
        }
        None => line.push_str("; no ResourceClaim allocated to them yet"),
    }
    line
}

/// "quota tenant-a/gpus: h200 3 of 6, l40s 0 of 1, 3 of 8 in all".
fn quota_line(q: &GPUQuota) -> String {
    let st = q.status.clone().unwrap_or_default();
    let mut parts: Vec<String> = q
        .spec
        .hard
        .iter()
        .map(|(class, hard)| format!("{class} {} of {hard}", st.used.get(class).unwrap_or(&0)))
        .collect();
    if let Some(total) = q.spec.total {
        parts.push(format!("{} of {total} in all", st.used_total.unwrap_or(0)));
    }
    format!(
        "quota {}/{}: {}",
        q.metadata.namespace.as_deref().unwrap_or_default(),
        q.metadata.name.as_deref().unwrap_or_default(),
        parts.join(", ")
    )
}
