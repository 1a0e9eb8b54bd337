//! Which published devices count (D1): node-local slices only, of a
//! pool whose slices of its highest `generation` are all present
//! (`resourceSliceCount`). A pool that is not complete neither serves nor
//! is lost: its devices are left out until it is whole again.

use k8s_openapi::api::resource::v1::{Device, ResourceSlice};
use std::collections::BTreeMap;

/// One device of a complete pool, where it is.
#[derive(Clone, Debug, PartialEq)]
pub struct Published<'a> {
    pub node: &'a str,
    pub driver: &'a str,
    pub pool: &'a str,
    pub device: &'a Device,
}

/// A pool's state as its slices say it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolState {
    Complete,
    /// Fewer slices of its newest generation than it says it has.
    Incomplete {
        present: usize,
        expected: i64,
    },
}

/// The pools of `slices` by (driver, pool), with their newest generation's
/// slices and state. Slices not local to one node are left out.
pub fn pools(slices: &[ResourceSlice]) -> BTreeMap<(&str, &str), (PoolState, Vec<&ResourceSlice>)> {
    let mut newest: BTreeMap<(&str, &str), (i64, Vec<&ResourceSlice>)> = BTreeMap::new();
    for s in slices {
        let spec = &s.spec;
        if spec.node_name.as_deref().is_none_or(str::is_empty) {
            continue;
        }
        let key = (spec.driver.as_str(), spec.pool.name.as_str());
        let g = spec.pool.generation;
        let e = newest.entry(key).or_insert((g, Vec::new()));
        if g > e.0 {
            *e = (g, Vec::new());
        }
        if g == e.0 {
            e.1.push(s);
        }
    }
    newest
        .into_iter()
        .map(|(k, (_, list))| {
            let expected = list
                .iter()
                .map(|s| s.spec.pool.resource_slice_count)
                .max()
                .unwrap_or(0);
            let present = list.len();
            // Exactly as many as it says: more is as broken as fewer.
            let state = if i64::try_from(present).ok() == Some(expected) {
                PoolState::Complete
            } else {
                PoolState::Incomplete { present, expected }
            };
            (k, (state, list))
        })
        .collect()
}

/// Every device of a complete pool on a node.
pub fn complete_devices(slices: &[ResourceSlice]) -> Vec<Published<'_>> {
    let mut out = Vec::new();
    for ((driver, pool), (state, list)) in pools(slices) {
        if state != PoolState::Complete {
            continue;
        }
        for s in list {
            let node = s.spec.node_name.as_deref().unwrap_or_default();
            for device in s.spec.devices.iter().flatten() {
                out.push(Published {
                    node,
                    driver,
                    pool,
                    device,
                });
            }
        }
    }
    out
}
