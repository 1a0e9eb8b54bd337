//! The invariants about records: I4 (claims and records match) and I8
//! (a namespace's records within its GPUQuotas).

use super::ns_key;
use gpu_claims_actors::api::{AllocatedDevice, GPUAllocation, GPUClaim, GPUQuota};
use k8s_openapi::api::resource::v1::ResourceClaim;
use std::collections::{BTreeSet, HashMap};

/// I8, for a record placed since the last check: every GPUQuota of its
/// namespace holds, for its class and in all.
pub(super) fn quotas_hold(
    r: &GPUAllocation,
    quotas: &[GPUQuota],
    recorded: &HashMap<(&str, &str), u64>,
    v: &mut Vec<String>,
) {
    let ns = r.metadata.namespace.as_deref().unwrap_or_default();
    let class = r.spec.class_name.as_str();
    let used = |c: &str| recorded.get(&(ns, c)).copied().unwrap_or(0);
    for q in quotas
        .iter()
        .filter(|q| q.metadata.namespace.as_deref() == Some(ns))
    {
        let name = q.metadata.name.as_deref().unwrap_or_default();
        if let Some(hard) = q
            .spec
            .hard
            .get(class)
            .filter(|h| used(class) > u64::from(**h))
        {
            v.push(format!(
                "I8: namespace {ns} has {} GPUs of class {class} recorded, GPUQuota {name} allows {hard}",
                used(class)
            ));
        }
        if let Some(total) = q.spec.total.filter(|t| used("") > u64::from(*t)) {
            v.push(format!(
                "I8: namespace {ns} has {} GPUs recorded, GPUQuota {name} allows {total} in all",
                used("")
            ));
        }
    }
}

/// I4: every Bound, Attached or Lost claim has its record; every record its
/// claim. A claim being deleted is exempt: L8 deletes its record before its
/// finalizer, so a release cut short leaves it without one (and unused).
pub(super) fn allocations_match(
    claims: &HashMap<String, GPUClaim>,
    records: &[GPUAllocation],
    v: &mut Vec<String>,
) {
    let by_key: HashMap<String, &GPUAllocation> =
        records.iter().map(|r| (ns_key(&r.metadata), r)).collect();
    for (k, c) in claims {
        if c.phase().counts_against_budget()
            && !gpu_claims_actors::api::is_deleting(&c.metadata)
            && by_key
                .get(k)
                .is_none_or(|r| Some(&r.spec.claim_uid) != c.metadata.uid.as_ref())
        {
            v.push(format!(
                "I4: claim {k} is {} without its record",
                c.phase().as_str()
            ));
        }
    }
    for (k, r) in &by_key {
        if claims
            .get(k)
            .is_none_or(|c| c.metadata.uid.as_ref() != Some(&r.spec.claim_uid))
        {
            v.push(format!("I4: record {k} has no claim"));
        }
    }
}

/// The devices a ResourceClaim's allocation names.
fn allocated(c: &ResourceClaim) -> BTreeSet<AllocatedDevice> {
    let results = c
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.as_deref())
        .unwrap_or_default();
    results
        .iter()
        .map(|r| AllocatedDevice {
            driver: r.driver.clone(),
            pool: r.pool.clone(),
            device: r.device.clone(),
        })
        .collect()
}

/// I9: no device is named by two records, or by a record and a
/// ResourceClaim gpu-claims allocates (`ours`: a backing claim, a launcher
/// pod's) that does not hold exactly that record's devices (the one D4
/// allocates to them). A ResourceClaim another allocator wrote (one that
/// tolerates D7's taint, one allocated before D7's rule, one written by
/// hand) naming a record's device is D8's case: noticed and given up, or
/// said, by the controller; `named_twice` counts them.
pub(crate) fn devices_held_once(
    records: &[GPUAllocation],
    claims: &[ResourceClaim],
    ours: &dyn Fn(&ResourceClaim) -> bool,
    named_twice: &mut BTreeSet<String>,
    v: &mut Vec<String>,
) {
    let mut by_device: HashMap<&AllocatedDevice, &GPUAllocation> = HashMap::new();
    for r in records {
        for d in &r.spec.devices {
            if let Some(other) = by_device.insert(d, r) {
                v.push(format!(
                    "I9: device {}/{}/{} is named by records {} and {}",
                    d.driver,
                    d.pool,
                    d.device,
                    ns_key(&other.metadata),
                    ns_key(&r.metadata)
                ));
            }
        }
    }
    for c in claims {
        let named = allocated(c);
        for d in &named {
            let Some(r) = by_device.get(d) else { continue };
            let recorded: BTreeSet<AllocatedDevice> = r.spec.devices.iter().cloned().collect();
            if !ours(c) {
                named_twice.insert(format!(
                    "{}/{}/{} {} {}",
                    d.driver,
                    d.pool,
                    d.device,
                    ns_key(&r.metadata),
                    ns_key(&c.metadata)
                ));
                continue;
            }
            // The record's own backing claim, between the record's write
            // and its own (a move on the node, D8, cut short): D4's to
            // bring back; exact once settled (`backing_claims_hold`).
            if ns_key(&c.metadata) == ns_key(&r.metadata) {
                continue;
            }
            if recorded != named {
                v.push(format!(
                    "I9: device {}/{}/{} of record {} is named by ResourceClaim {}, which does not hold that record's devices",
                    d.driver,
                    d.pool,
                    d.device,
                    ns_key(&r.metadata),
                    ns_key(&c.metadata)
                ));
            }
        }
    }
}

/// I9 once settled: every Bound or Attached named claim of a DRA class
/// has its backing claim (D4), controller-owned by it, allocated to
/// exactly its record's devices.
pub(super) fn backing_claims_hold(
    claims: &[GPUClaim],
    records: &[GPUAllocation],
    resource_claims: &[ResourceClaim],
    v: &mut Vec<String>,
) {
    use gpu_claims_actors::api::ClaimPhase;
    for c in claims.iter().filter(|c| {
        !c.is_template() && matches!(c.phase(), ClaimPhase::Bound | ClaimPhase::Attached)
    }) {
        let k = ns_key(&c.metadata);
        let Some(r) = records
            .iter()
            .find(|r| ns_key(&r.metadata) == k && r.spec.is_dra())
        else {
            continue;
        };
        let recorded: BTreeSet<AllocatedDevice> = r.spec.devices.iter().cloned().collect();
        let backing = resource_claims
            .iter()
            .find(|rc| ns_key(&rc.metadata) == k && gpu_claims_actors::rules::owned_by(rc, c));
        match backing {
            None => v.push(format!("I9: claim {k} is placed without its backing ResourceClaim")),
            Some(rc) if allocated(rc) != recorded => v.push(format!(
                "I9: the backing ResourceClaim of claim {k} is allocated to {:?}, its record names {:?}",
                allocated(rc).iter().map(|d| &d.device).collect::<Vec<_>>(),
                recorded.iter().map(|d| &d.device).collect::<Vec<_>>()
            )),
            Some(_) => {}
        }
    }
}

/// Whether a ResourceClaim's requests tolerate D7's taint (NoSchedule).
pub(crate) fn tolerates_managed(c: &ResourceClaim) -> bool {
    let requests = c
        .spec
        .as_ref()
        .and_then(|s| s.devices.as_ref())
        .and_then(|d| d.requests.as_deref())
        .unwrap_or_default();
    requests.iter().any(|r| {
        let exact = r
            .exactly
            .iter()
            .flat_map(|e| e.tolerations.iter().flatten());
        let subs = r
            .first_available
            .iter()
            .flatten()
            .flat_map(|s| s.tolerations.iter().flatten());
        exact.chain(subs).any(|t| {
            let key = t.key.as_deref().unwrap_or_default();
            let effect = t.effect.as_deref().unwrap_or_default();
            (key.is_empty() || key == gpu_claims_actors::api::MANAGED_TAINT)
                && (effect.is_empty() || effect == "NoSchedule")
                && (t.operator.as_deref() == Some("Exists")
                    || t.value.as_deref().unwrap_or_default().is_empty())
        })
    })
}

/// The devices an allocation names, for the D7 check.
pub(crate) fn allocated_devices_of(c: &ResourceClaim) -> BTreeSet<AllocatedDevice> {
    allocated(c)
}

/// When each record (`namespace/name`) was last written since the journal
/// entry `from`.
pub(super) fn last_writes(
    c: &super::MemCluster,
    from: usize,
) -> std::collections::BTreeMap<String, std::time::Duration> {
    let journal = c.journal();
    journal.entries[from.min(journal.entries.len())..]
        .iter()
        .filter(|e| e.kind == "GPUAllocation" && e.changed && matches!(e.op, "create" | "update"))
        .map(|e| {
            let ns = e.namespace.as_deref().unwrap_or_default();
            (gpu_claims_actors::world::key(ns, &e.name), e.elapsed)
        })
        .collect()
}
