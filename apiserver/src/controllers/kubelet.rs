//! What a node's kubelet does for the API server's graceful pod deletion,
//! for a test that plays the kubelet: a pod marked Terminating on its node
//! (registry/pods.rs) is stopped, and its deletion confirmed with no grace
//! left, which removes it and frees what it held.

use crate::registry::pods;
use crate::store::{Apply, Store};

/// Confirms the deletion of every pod Terminating on a node, as its
/// kubelet does once it has stopped the pod's containers; how many went.
pub fn confirm_terminated_pods(store: &Store) -> usize {
    let mut gone = 0;
    for (ns, name) in pods::terminating(store) {
        // A pod gone meanwhile (or changed) is simply not counted.
        if pods::delete(store, &ns, &name, None, None, Some(0), Apply::Commit).is_ok() {
            gone += 1;
        }
    }
    gone
}
