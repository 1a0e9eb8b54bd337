//! What kube-controller-manager and the API server's own controllers
//! keep in a cluster, run here beside the server: garbage collection by
//! ownerReferences (`gc`), namespace lifecycle (`namespaces`), CRDs
//! accepted and served (`crds`), aggregated ClusterRoles
//! (`aggregation`), PodDisruptionBudget status (`disruption`, with the
//! `conformance` feature) and the objects a cluster has before anyone
//! writes (`bootstrap`); and, for a test to call as its node's kubelet
//! would, a pod's graceful deletion confirmed (`kubelet`).

pub(crate) mod aggregation;
pub(crate) mod bootstrap;
pub(crate) mod crds;
#[cfg(feature = "conformance")]
pub(crate) mod disruption;
pub(crate) mod gc;
pub mod kubelet;
pub mod namespaces;
