//! Dynamic Resource Allocation as gpu-claims reads it (docs/design.md, "GPUs from a DRA driver"):
//! the devices a DRA driver publishes in ResourceSlices (`pools`), and
//! which of them a class's selectors take (`class`), in Kubernetes' CEL
//! environment for devices (`selector`, `values`).

pub mod budget;
pub mod class;
mod device_val;
pub mod pools;
pub mod selector;
pub mod template;
pub mod values;

pub use class::{ClassSelectors, SelectorInvalid};
pub use pools::{PoolState, Published, complete_devices};
pub use selector::{DeviceVar, Selector, SelectorError};

#[cfg(test)]
mod tests;
