//! The world gpu-claims is tried in, apart from the operator that ships:
//! an in-memory cluster that implements the core's ports with the API
//! server's semantics, and the invariants I1-I10 judged over it
//! (`memory`); builders for test objects (`fixtures`); the CRDs installed
//! in an embedded API server (`crds`); KubeVirt, the kubelet and
//! kube-scheduler played over it (`standin`); the demo's cluster and story
//! (`demo`); replicas of `run` started and killed against it (`cluster`,
//! `terms`, `chaos`); `plan`'s simulation and the snapshots it reads
//! (`plan`, `snapshot`); and the benchmarks' worlds (`bench`).
//!
//! It depends on the core and on the embedded API server, never on the
//! operator: the operator's tests and dev commands depend on it, and hand
//! it the operator where a world needs one running (`bench::cold`).
#![forbid(unsafe_code)]

pub mod bench;
pub mod chaos;
pub mod cluster;
pub mod crds;
pub mod demo;
pub mod fixtures;
pub mod memory;
pub mod plan;
pub mod snapshot;
pub mod standin;
pub mod terms;

/// The multi-thread runtime the tests and the tools run their worlds on:
/// two workers, as many as the machines CI runs on have cores.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}
