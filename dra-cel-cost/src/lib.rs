//! The estimated cost of a Dynamic Resource Allocation device selector, as
//! Kubernetes computes it (`k8s.io/dynamic-resource-allocation/cel`): cel-go's
//! static estimate (`checker/cost.go`) in the environment a selector runs in,
//! where every size is declared (a driver's name at most 63 bytes, a device's
//! attributes at most 32 per domain, a value at most 64), so that the cost of
//! the worst device is known before any device is seen.
//!
//! kube-apiserver refuses a selector whose estimate exceeds
//! [`SELECTOR_MAX_COST`] ([`TOO_COMPLEX`]); the scheduler stops an evaluation
//! at the same cost. The estimate is an upper bound on what an evaluation
//! does: a selector under it cannot run long on any device, and one over it
//! is refused before it runs at all.
//!
//! ```
//! let parsed = cel::Program::compile(r#"device.driver == "gpu.nvidia.com""#).unwrap();
//! assert_eq!(dra_cel_cost::estimate(parsed.expression()), 4);
//! ```

#![forbid(unsafe_code)]

mod calls;
mod estimate;
mod ty;

/// `CELSelectorExpressionMaxCost`: the most a selector may cost, estimated
/// by kube-apiserver on write and counted by the scheduler as it runs.
/// Upstream's note: "roughly 0.1 second for each expression evaluation".
pub const SELECTOR_MAX_COST: u64 = 1_000_000;

/// kube-apiserver's words for a selector over [`SELECTOR_MAX_COST`]
/// (`field.Forbidden` on the expression).
pub const TOO_COMPLEX: &str = "too complex, exceeds cost limit";

/// cel-go's estimated maximum cost of `expr` in the device environment:
/// saturating, `u64::MAX` for what has no bound (iterating a value whose
/// size is unknown).
pub fn estimate(expr: &cel::parser::Expression) -> u64 {
    estimate::Estimator::default().cost(expr).0
}

/// Whether kube-apiserver refuses `expr` as too complex (strictly over the
/// limit, as upstream compares).
pub fn too_complex(expr: &cel::parser::Expression) -> bool {
    estimate(expr) > SELECTOR_MAX_COST
}

#[cfg(test)]
mod tests;
