//! Which devices serve a DRA class (D1): its DeviceClass's selectors,
//! then the class's own, in that order, stopping at the first false, as
//! the scheduler's allocator does. A selector that does not compile, or
//! that errors on a device, makes the class serve nothing, with upstream's
//! words for the condition `SelectorInvalid`.

use super::pools::Published;
use super::selector::{DeviceVar, Selector, SelectorError};

/// Where a bad selector is: the DeviceClass's or the GPUClass's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    DeviceClass,
    Class,
}

/// A selector that cannot be used, said as the allocator says it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{owner}: selector #{index}{on}: {error}")]
pub struct SelectorInvalid {
    pub origin: Origin,
    /// `class <DeviceClass name>` or `gpuclass <name>`.
    pub owner: String,
    pub index: usize,
    /// ` on device <driver>/<pool>/<device>` for an error on one device.
    pub on: String,
    pub error: SelectorError,
    /// The selector's expression, for a condition that shows it.
    pub expression: String,
}

/// A DRA class's compiled selectors.
#[derive(Debug)]
pub struct ClassSelectors {
    device_class: (String, Vec<Selector>),
    own: (String, Vec<Selector>),
}

fn compile(
    origin: Origin,
    owner: &str,
    expressions: &[String],
) -> Result<Vec<Selector>, SelectorInvalid> {
    expressions
        .iter()
        .enumerate()
        .map(|(index, e)| {
            Selector::compile(e).map_err(|error| SelectorInvalid {
                origin,
                owner: owner.to_string(),
                index,
                on: String::new(),
                error,
                expression: e.clone(),
            })
        })
        .collect()
}

impl ClassSelectors {
    /// Compiles the DeviceClass `device_class`'s selectors and the class
    /// `class`'s own.
    pub fn compile(
        device_class: &str,
        device_class_selectors: &[String],
        class: &str,
        own: &[String],
    ) -> Result<Self, SelectorInvalid> {
        let dc_owner = format!("class {device_class}");
        let own_owner = format!("gpuclass {class}");
        Ok(Self {
            device_class: (
                dc_owner.clone(),
                compile(Origin::DeviceClass, &dc_owner, device_class_selectors)?,
            ),
            own: (own_owner.clone(), compile(Origin::Class, &own_owner, own)?),
        })
    }

    /// Whether `d` serves the class: every selector true, in order.
    pub fn serves(&self, d: &Published) -> Result<bool, SelectorInvalid> {
        // Read once for every selector.
        let var = DeviceVar::new(d.driver, d.device);
        for (origin, (owner, list)) in [
            (Origin::DeviceClass, &self.device_class),
            (Origin::Class, &self.own),
        ] {
            for (index, s) in list.iter().enumerate() {
                match s.matches_var(&var) {
                    Ok(true) => {}
                    Ok(false) => return Ok(false),
                    Err(error) => {
                        return Err(SelectorInvalid {
                            origin,
                            owner: owner.clone(),
                            index,
                            on: format!(" on device {}/{}/{}", d.driver, d.pool, d.device.name),
                            error,
                            expression: s.expression().to_string(),
                        });
                    }
                }
            }
        }
        Ok(true)
    }
}
