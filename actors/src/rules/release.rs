//! L8-L10: whether a VMI that can still hold a claim's GPUs uses it, so a
//! deleting claim is released only once none does.

use super::Grace;
use crate::api::{ClaimPhase, GPUClaim, Vmi, pod::is_gated, vmi_owner};
use crate::config::Config;

use crate::world::World;
use k8s_openapi::api::core::v1::Pod;
use tokio::time::Instant;

/// L9/L10's answer from the cache: yes, no, or read live first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Used {
    Yes,
    No,
    /// L9: every launcher pod is gated in the cache: read these pods live.
    ReadPods {
        namespace: String,
        names: Vec<String>,
    },
    /// L10: no VMI cache (integration off): read the VMI live.
    ReadVmi {
        namespace: String,
        name: String,
    },
}

/// L10's live read of a VMI, as the rule sees it.
#[derive(Clone, Debug, PartialEq)]
pub enum LiveVmi {
    Found(Box<Vmi>),
    /// Not found, or the kind is not served (a cluster without KubeVirt).
    Absent,
    /// The read failed: the rule cannot tell, and asks again later.
    Unknown,
}

/// L9 (integration on) / L10 (off): is the claim used by a VMI? A fresh
/// attachment whose VMI is not seen yet is used while L6's grace counts:
/// the grace to remember is returned beside.
pub fn used_by_vmi(
    c: &GPUClaim,
    w: &World,
    cfg: &Config,
    now: Instant,
    grace: &Grace,
) -> (Used, Grace) {
    let Some(vmi_name) = c.attached_vmi_name() else {
        return (Used::No, grace.clone());
    };
    let namespace = c.metadata.namespace.clone().unwrap_or_default();
    if !cfg.kubevirt.enabled {
        let read = Used::ReadVmi {
            namespace,
            name: vmi_name.to_string(),
        };
        return (read, grace.clone());
    }
    let vmi = w.attached_vmi(c);
    if vmi.is_none() && c.phase() != ClaimPhase::Attached && vmi_owner(&c.metadata).is_none() {
        // A fresh attachment whose VMI the cache has not shown: it may be
        // starting with the GPU, as L6 treats it.
        let grace = grace.counting(vmi_name, now);
        let since = grace.since().unwrap_or(now);
        let used = if now.duration_since(since) < cfg.attachment_grace {
            Used::Yes
        } else {
            Used::No
        };
        return (used, grace);
    }
    let Some(v) = vmi.filter(|v| !v.is_final()) else {
        return (Used::No, grace.clone());
    };
    let used = match w.gated_launchers(&v) {
        None => Used::Yes,
        Some(pods) => Used::ReadPods {
            namespace,
            names: pods.iter().map(|p| p.name.clone()).collect(),
        },
    };
    (used, grace.clone())
}

/// L9, after reading the cached-gated pods live: used when any live one has
/// left the gate; a pod not found (None) is skipped.
pub fn pods_left_gate(live: &[Option<Pod>]) -> bool {
    live.iter().flatten().any(|p| !is_gated(p))
}

/// L10, after reading the VMI live: not found or kind not served: no;
/// another error: cannot tell (None, retry later); a VMI-owned claim whose
/// owner UID differs: no; else yes unless final.
pub fn vmi_holds(c: &GPUClaim, live: &LiveVmi) -> Option<bool> {
    let v = match live {
        LiveVmi::Absent => return Some(false),
        LiveVmi::Unknown => return None,
        LiveVmi::Found(v) => v,
    };
    if let Some((_, uid)) = vmi_owner(&c.metadata)
        && uid != v.uid()
    {
        return Some(false);
    }
    Some(!v.is_final())
}
