//! What `status` shows of DRA classes (D1-D8): per node, a class's
//! devices and who holds them; per claim, its devices by name and PCI
//! address, and whether a VM uses them or they are kept for a stopped one
//! (D4: a named claim's backing ResourceClaim holds them meanwhile).

use crate::api::ClaimPhase;
use crate::world::World;
use crate::world::devices::DeviceId;
use serde::Serialize;

/// The standard attribute a device's PCI address is published under.
const PCI_BUS_ID: &str = "resource.kubernetes.io/pciBusID";

/// One node and one DRA class's devices there (D1, D2): those serving
/// it, those allocation records name, those other ResourceClaims hold,
/// and the free ones (the rest are tainted or their counters are spent).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceRow {
    pub node: String,
    pub class: String,
    pub device_class: String,
    pub ready: bool,
    pub devices: u64,
    pub allocated: u64,
    pub held_outside_allocations: u64,
    pub free: u64,
    /// The free devices, by name (`pool/device`).
    pub free_devices: Vec<String>,
    /// Devices records name for a claim no VM uses (a stopped VM's, or
    /// one not started yet): no pod runs on them, and no other claim may
    /// take them.
    pub kept_for_stopped_vms: Vec<String>,
}

/// One claim of a DRA class that holds devices.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimDevicesRow {
    pub namespace: String,
    pub name: String,
    pub class: String,
    pub phase: ClaimPhase,
    pub node: String,
    /// The VMI it is attached to; none: its VM is stopped.
    pub vmi: Option<String>,
    /// Its devices, `pool/device` and the PCI address where published.
    pub devices: Vec<String>,
}

/// `pool/device`, and ` (0000:18:00.0)` where the device's PCI address is
/// published.
fn named(w: &World, d: &DeviceId) -> String {
    match w.device_attribute(d, PCI_BUS_ID) {
        Some(pci) => format!(
            "{}/{} ({})",
            d.pool,
            d.device,
            pci.strip_prefix("s:").unwrap_or(&pci)
        ),
        None => format!("{}/{}", d.pool, d.device),
    }
}

/// Whether the claim of `k` holds its devices with no VM using them.
fn kept(w: &World, k: &str) -> bool {
    w.claim(k)
        .is_some_and(|c| c.phase() == ClaimPhase::Bound && c.attached_vmi_name().is_none())
}

/// D1, D2: a DRA class's devices on each node that has some.
pub(super) fn device_rows(w: &World, class: &str, dc: &str) -> Vec<DeviceRow> {
    let mut rows = Vec::new();
    for (node, ids) in w.class_devices(class).by_node {
        let facts: Vec<_> = ids.iter().filter_map(|id| w.device(id)).collect();
        let allocated = facts.iter().filter(|d| d.allocated_by.is_some()).count() as u64;
        let outside = facts
            .iter()
            .filter(|d| d.allocated_by.is_none() && d.held_by.is_some())
            .count() as u64;
        let kept_for_stopped_vms = facts
            .iter()
            .filter(|d| d.allocated_by.as_deref().is_some_and(|k| kept(w, k)))
            .map(|d| format!("{}/{}", d.id.pool, d.id.device))
            .collect();
        let free: Vec<String> = w
            .free_devices(class, &node)
            .iter()
            .map(|d| format!("{}/{}", d.pool, d.device))
            .collect();
        rows.push(DeviceRow {
            ready: w.node(&node).is_some_and(|n| n.ready),
            class: class.to_string(),
            device_class: dc.to_string(),
            devices: ids.len() as u64,
            allocated,
            held_outside_allocations: outside,
            free: free.len() as u64,
            free_devices: free,
            kept_for_stopped_vms,
            node,
        });
    }
    rows
}

/// D3, D4: the claims of DRA class `class` whose records name devices.
pub(super) fn claim_device_rows(w: &World, class: &str) -> Vec<ClaimDevicesRow> {
    let mut keys = w.claims_of_class(class);
    keys.sort();
    keys.iter()
        .filter_map(|k| {
            let c = w.claim(k)?;
            let r = w.allocation(k)?;
            if r.spec.devices.is_empty() {
                return None;
            }
            let (ns, name) = crate::world::split_key(k);
            Some(ClaimDevicesRow {
                namespace: ns.to_string(),
                name: name.to_string(),
                class: class.to_string(),
                phase: c.phase(),
                node: r.spec.node_name.clone(),
                vmi: c.attached_vmi_name().map(str::to_string),
                devices: r
                    .spec
                    .devices
                    .iter()
                    .map(|d| named(w, &DeviceId::from(d)))
                    .collect(),
            })
        })
        .collect()
}
