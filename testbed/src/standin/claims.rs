//! A pod's ResourceClaims as kube-controller-manager's resourceclaim
//! controller keeps them (`pkg/controller/resourceclaim`): for each
//! `spec.resourceClaims` entry naming a template, a claim made from the
//! template, named as upstream names it (`<pod>-<entry>-` and a random
//! suffix, shortened to 57 characters), owned by the pod, annotated with
//! the entry's name, and recorded in `pod.status.resourceClaimStatuses`;
//! a done or gone pod taken out of `reservedFor`, and its generated claim
//! deleted once nothing reserves it. The scheduler's and the kubelet's
//! reading of a pod's claims is here too.

use crate::memory::store::{Store, Subresource};
use serde_json::{Value, json};

pub const CLAIM: &str = "ResourceClaim";
const TEMPLATE: &str = "ResourceClaimTemplate";
/// The annotation that ties a generated claim to its pod's entry.
pub const POD_CLAIM_NAME: &str = "resource.kubernetes.io/pod-claim-name";
/// The finalizer kube-scheduler puts on a claim it allocates, which the
/// controller takes off with the allocation once nothing reserves it.
const DELETE_PROTECTION: &str = "resource.kubernetes.io/delete-protection";

fn s<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    path.iter()
        .fold(v, |v, p| &v[*p])
        .as_str()
        .unwrap_or_default()
}

/// `handleClaim`'s generateName: `<pod>-<entry>-`, or both cut in
/// proportion to fit 57 characters (with no trailing hyphen).
pub fn generate_name(pod: &str, entry: &str) -> String {
    const MAX_BASE: usize = 57;
    let name = format!("{pod}-{entry}-");
    if name.len() <= MAX_BASE {
        return name;
    }
    // Upstream cuts bytes of DNS labels; a name that is none is cut at a
    // character boundary rather than inside a character.
    let cut = |s: &str| {
        let mut at = s.len() * MAX_BASE / name.len();
        while !s.is_char_boundary(at) {
            at -= 1;
        }
        s[..at].to_string()
    };
    format!("{}-{}", cut(pod), cut(entry))
}

/// The claim a pod's entry uses: its `resourceClaimName`, or the one the
/// controller recorded for its template. Err: the name to wait for.
pub fn claim_name(pod: &Value, entry: &Value) -> Result<String, String> {
    if let Some(n) = entry["resourceClaimName"].as_str() {
        return Ok(n.to_string());
    }
    let wanted = entry["name"].as_str().unwrap_or_default();
    pod["status"]["resourceClaimStatuses"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|st| st["name"] == wanted)
        .and_then(|st| st["resourceClaimName"].as_str())
        .map(str::to_string)
        .ok_or_else(|| format!("{}-{wanted}", s(pod, &["metadata", "name"])))
}

/// The pod's claims as the scheduler's PreFilter reads them, or why the
/// pod must wait (upstream's words).
pub fn of_pod(store: &Store, pod: &Value) -> Result<Vec<Value>, String> {
    let ns = s(pod, &["metadata", "namespace"]);
    let mut out = Vec::new();
    for e in pod["spec"]["resourceClaims"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let missing = |n: &str| {
            format!("waiting for dynamic resource controller to create the resourceclaim {n:?}")
        };
        let name = claim_name(pod, e).map_err(|n| missing(&n))?;
        let Some(c) = store.get(CLAIM, ns, &name) else {
            return Err(missing(&name));
        };
        if c["metadata"]["deletionTimestamp"].is_string() {
            return Err(format!("resourceclaim {name:?} is being deleted"));
        }
        out.push(c);
    }
    Ok(out)
}

/// Whether `claim` is reserved for the pod of `uid`.
pub fn reserved_for(claim: &Value, uid: &str) -> bool {
    claim["status"]["reservedFor"]
        .as_array()
        .is_some_and(|r| r.iter().any(|c| c["uid"] == uid))
}

/// Adds the pod to the claim's `reservedFor` (the scheduler's PreBind,
/// `bindClaim`), stamping an allocation that has no timestamp as it does
/// from Kubernetes 1.36 (DRADeviceBindingConditions and
/// DRAResourceClaimDeviceStatus, both on by default): the API server
/// refuses that write as a change to the allocation when another
/// allocator wrote it unstamped, and the pod is not bound.
pub fn reserve(store: &Store, claim: &Value, pod: &Value) -> bool {
    let uid = s(pod, &["metadata", "uid"]);
    if reserved_for(claim, uid) {
        return true;
    }
    let mut c = claim.clone();
    let entry = json!({"resource": "pods", "name": pod["metadata"]["name"], "uid": uid});
    match c["status"]["reservedFor"].as_array_mut() {
        Some(r) => r.push(entry),
        None => c["status"]["reservedFor"] = json!([entry]),
    }
    stamp(&mut c);
    write_status(store, claim, c)
}

/// A status write as the API server takes it: refused, as
/// `validateResourceClaimStatusUpdate` refuses it, when it changes an
/// allocation once set (the caller's write fails; nothing is stored).
fn write_status(store: &Store, old: &Value, new: Value) -> bool {
    if gpu_claims_apiserver::dra_refusal(CLAIM, Some(old), &new).is_some() {
        return false;
    }
    store.update(CLAIM, new, Subresource::Status).is_ok()
}

/// `bindClaim`'s `AllocationTimestamp`: now, where the allocation has none.
fn stamp(claim: &mut Value) {
    let allocation = &mut claim["status"]["allocation"];
    if allocation.is_object() && allocation["allocationTimestamp"].is_null() {
        let now = k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ");
        allocation["allocationTimestamp"] = now.to_string().into();
    }
}

/// Writes the allocation the scheduler made for `claim` and reserves it
/// for `pod`, as its PreBind does: the delete-protection finalizer first,
/// then one status write with both.
pub fn allocate(store: &Store, claim: &Value, allocation: Value, pod: &Value) -> bool {
    let mut c = claim.clone();
    let protected = c["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| f.iter().any(|f| f == DELETE_PROTECTION));
    if !protected {
        match c["metadata"]["finalizers"].as_array_mut() {
            Some(f) => f.push(DELETE_PROTECTION.into()),
            None => c["metadata"]["finalizers"] = json!([DELETE_PROTECTION]),
        }
        match store.update(CLAIM, c, Subresource::Main) {
            Ok(w) => c = w.object,
            Err(_) => return false,
        }
    }
    let old = c.clone();
    c["status"]["allocation"] = allocation;
    c["status"]["reservedFor"] = json!([{"resource": "pods", "name": pod["metadata"]["name"],
        "uid": pod["metadata"]["uid"]}]);
    stamp(&mut c);
    write_status(store, &old, c)
}

fn done(pod: &Value) -> bool {
    matches!(s(pod, &["status", "phase"]), "Succeeded" | "Failed")
        || (pod["metadata"]["deletionTimestamp"].is_string()
            && s(pod, &["spec", "nodeName"]).is_empty())
}

/// One pass of the controller; whether it wrote.
pub fn reconcile(store: &Store) -> bool {
    // Claims before pods: a pod that reserves a claim after this list is
    // in the pod list below, never taken for gone.
    let (claims, _) = store.list(CLAIM);
    let (pods, _) = store.list("Pod");
    let mut wrote = false;
    for pod in pods.iter().filter(|p| !done(p)) {
        if pod["metadata"]["deletionTimestamp"].is_string() {
            continue;
        }
        for e in pod["spec"]["resourceClaims"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if e["resourceClaimTemplateName"].is_string() && claim_name(pod, e).is_err() {
                wrote |= make_claim(store, pod, e);
            }
        }
    }
    for c in &claims {
        wrote |= release(store, c, &pods);
    }
    wrote
}

/// Makes (or finds again) the claim of a pod's template entry and records
/// it in the pod's status.
fn make_claim(store: &Store, pod: &Value, entry: &Value) -> bool {
    let (ns, pod_name, uid) = (
        s(pod, &["metadata", "namespace"]),
        s(pod, &["metadata", "name"]),
        s(pod, &["metadata", "uid"]),
    );
    let entry_name = s(entry, &["name"]);
    // `findPodResourceClaim`: one made before its status was recorded.
    let (claims, _) = store.list(CLAIM);
    let found = claims.into_iter().find(|c| {
        c["metadata"]["namespace"] == ns
            && c["metadata"]["annotations"][POD_CLAIM_NAME] == entry_name
            && c["metadata"]["ownerReferences"]
                .as_array()
                .is_some_and(|o| o.iter().any(|o| o["uid"] == uid && o["controller"] == true))
    });
    let claim = match found {
        Some(c) => c,
        None => {
            let Some(t) = store.get(TEMPLATE, ns, s(entry, &["resourceClaimTemplateName"])) else {
                return false;
            };
            let meta = &t["spec"]["metadata"];
            let mut annotations = meta["annotations"].as_object().cloned().unwrap_or_default();
            annotations.insert(POD_CLAIM_NAME.into(), entry_name.into());
            let c = json!({"apiVersion": "resource.k8s.io/v1", "kind": CLAIM,
                "metadata": {"namespace": ns, "generateName": generate_name(pod_name, entry_name),
                    "annotations": annotations, "labels": meta["labels"].clone(),
                    "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod_name,
                        "uid": uid, "controller": true, "blockOwnerDeletion": true}]},
                "spec": t["spec"]["spec"].clone()});
            let mut c = c;
            if c["metadata"]["labels"].is_null()
                && let Some(m) = c["metadata"].as_object_mut()
            {
                m.remove("labels");
            }
            match store.create(CLAIM, c) {
                Ok(w) => w.object,
                Err(_) => return false,
            }
        }
    };
    let Some(mut p) = store.get("Pod", ns, pod_name) else {
        return true;
    };
    let status = json!({"name": entry_name, "resourceClaimName": claim["metadata"]["name"]});
    match p["status"]["resourceClaimStatuses"].as_array_mut() {
        Some(list) => list.push(status),
        None => p["status"]["resourceClaimStatuses"] = json!([status]),
    }
    let _ = store.update("Pod", p, Subresource::Status);
    true
}

/// `syncClaim`: reservations of done or gone pods dropped; a claim that
/// the scheduler allocated and nothing reserves any more deallocated; a
/// generated claim whose pod is done or gone, once unreserved, deleted.
fn release(store: &Store, claim: &Value, pods: &[Value]) -> bool {
    let ns = s(claim, &["metadata", "namespace"]);
    let live = |uid: &Value| {
        pods.iter()
            .any(|p| &p["metadata"]["uid"] == uid && p["metadata"]["namespace"] == ns && !done(p))
    };
    let reserved = claim["status"]["reservedFor"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let kept: Vec<Value> = reserved
        .iter()
        // A consumer that is not a pod is not this controller's to judge.
        .filter(|r| r["resource"] != "pods" || live(&r["uid"]))
        .cloned()
        .collect();
    let mut c = claim.clone();
    let mut changed = false;
    if kept.len() != reserved.len() {
        c["status"]["reservedFor"] = Value::Array(kept.clone());
        changed = true;
    }
    let protected = claim["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| f.iter().any(|f| f == DELETE_PROTECTION));
    if kept.is_empty() && protected && c["status"]["allocation"].is_object() {
        if let Some(st) = c["status"].as_object_mut() {
            st.remove("allocation");
            st.remove("reservedFor");
        }
        changed = true;
    }
    let mut wrote = false;
    if changed {
        match store.update(CLAIM, c, Subresource::Status) {
            Ok(w) => {
                wrote = true;
                c = w.object;
            }
            Err(_) => return false,
        }
    }
    if kept.is_empty() && protected && !c["status"]["allocation"].is_object() {
        if let Some(f) = c["metadata"]["finalizers"].as_array_mut() {
            f.retain(|f| f != DELETE_PROTECTION);
        }
        match store.update(CLAIM, c, Subresource::Main) {
            Ok(w) => {
                wrote = true;
                c = w.object;
            }
            Err(_) => return wrote,
        }
    }
    let owner = claim["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|o| o["controller"] == true && o["kind"] == "Pod");
    // Deleted only when its pod is known done, or gone by a fresh read
    // (a pod made since the list is not taken for gone).
    let pod_gone = |o: &Value| {
        let name = o["name"].as_str().unwrap_or_default();
        store
            .get("Pod", ns, name)
            .is_none_or(|p| p["metadata"]["uid"] != o["uid"] || done(&p))
    };
    if let Some(o) = owner
        && kept.is_empty()
        && pod_gone(o)
        && !c["metadata"]["deletionTimestamp"].is_string()
    {
        wrote |= store
            .delete(CLAIM, ns, s(&c, &["metadata", "name"]))
            .is_ok();
    }
    wrote
}
