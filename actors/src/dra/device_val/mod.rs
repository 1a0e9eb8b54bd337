//! The `device` variable of a selector, read where the selector reads it.
//!
//! A selector names one or two of a device's attributes, yet building the
//! whole variable (a map by domain of maps by name, every key a `String`,
//! every value boxed) cost more than evaluating the selector: at a cold
//! start over 120,000 devices it was a quarter of what the world adds to
//! bare reflectors. Here `device`, `device.attributes`, `device.capacity`
//! and each domain's map are views over the slice's own `Device`: `a.f`
//! and `a[k]` look the name up in place and convert only the value asked
//! for. What else a map answers (`in`, `size`, comprehensions, `==`,
//! the selector's result itself) is rare, and is answered by the map made
//! whole once, on first use, exactly as before.

mod cel_traits;

use super::values::{Quantity, Semver};
use cel::ExecutionError;
use cel::common::types::{CelBool, CelInt, CelMap, CelMapKey, CelString};
use cel::common::value::{CowVal, Val};
use cel::objects::Value;
use k8s_openapi::api::resource::v1::{Device, DeviceAttribute};
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

/// `device`: its driver, attributes, capacity and whether it takes
/// several allocations.
pub type DeviceVal<'d> = Lazy<Fields<'d>>;

/// A map read in place: what `a.f` and `a[k]` ask it answers itself,
/// the rest its whole form, made once on first use, answers.
trait LazyMap: Clone + Debug + Send + Sync {
    /// The value at `key`, or `NoSuchKey` (what makes `has()` false).
    fn get<'b, 'v>(&'b self, key: &str) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v;

    /// The map made whole: built once, kept beside the view.
    fn whole<'b, 'v>(&'b self) -> &'b CelMap<'v>
    where
        Self: 'v;
}

/// A `LazyMap` as the interpreter sees it: a `map(string, dyn)`.
///
/// Whether it calls itself a built-in map is the selector's choice
/// (`builtin`): the interpreter asks that of every operand it selects
/// from (is it an optional?), and a view that said yes would be made
/// whole on every read; but a map literal on the left of `==` only
/// equals a built-in map. So a selector that writes a map literal reads
/// the device's maps as built-in ones, made whole; the others read them
/// in place.
#[derive(Debug)]
pub struct Lazy<M> {
    map: M,
    builtin: AtomicBool,
}

impl<M: Clone> Clone for Lazy<M> {
    fn clone(&self) -> Self {
        Self {
            map: self.map.clone(),
            builtin: AtomicBool::new(self.builtin.load(Ordering::Relaxed)),
        }
    }
}

impl<M> Lazy<M> {
    fn view(map: M) -> Self {
        Self {
            map,
            builtin: AtomicBool::new(false),
        }
    }

    fn builtin(&self) -> bool {
        self.builtin.load(Ordering::Relaxed)
    }
}

/// `device`'s fields.
#[derive(Clone, Debug)]
pub struct Fields<'d> {
    driver: CelString<'d>,
    attributes: Lazy<ByDomain<'d>>,
    capacity: Lazy<ByDomain<'d>>,
    multiple: CelBool,
    whole: OnceLock<CelMap<'d>>,
}

/// Which of a device's maps a view reads.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Attributes,
    Capacity,
}

/// `device.attributes` or `device.capacity`: a map by domain, where a
/// domain the device publishes nothing in reads as an empty map
/// (upstream's `WithDefault` maps).
#[derive(Clone, Debug)]
struct ByDomain<'d> {
    domains: Vec<Lazy<Domain<'d>>>,
    empty: Lazy<Domain<'d>>,
    whole: OnceLock<CelMap<'d>>,
}

/// One domain's map of a device: names in the slice are `domain/name`,
/// or bare for the driver's own domain (`parseQualifiedName`).
#[derive(Clone, Debug)]
struct Domain<'d> {
    kind: Kind,
    device: &'d Device,
    driver: &'d str,
    /// None for the empty map of a domain the device has not.
    domain: Option<&'d str>,
    whole: OnceLock<CelMap<'d>>,
}

/// A name's domain and id; a bare name is the driver's.
fn qualified<'a>(name: &'a str, driver: &'a str) -> (&'a str, &'a str) {
    name.split_once('/').unwrap_or((driver, name))
}

/// The string an index or a field name is; another type is no overload.
fn key_str(idx: &dyn Val) -> Result<&str, ExecutionError> {
    idx.downcast_ref::<CelString>()
        .map(CelString::inner)
        .ok_or_else(|| ExecutionError::UnexpectedType {
            got: idx.get_type().name().to_owned(),
            want: "string".to_owned(),
        })
}

impl<'d> DeviceVal<'d> {
    pub fn new(driver: &'d str, device: &'d Device) -> Self {
        Lazy::view(Fields {
            driver: CelString::from(driver),
            attributes: ByDomain::new(Kind::Attributes, driver, device),
            capacity: ByDomain::new(Kind::Capacity, driver, device),
            multiple: CelBool::from(device.allow_multiple_allocations.unwrap_or(false)),
            whole: OnceLock::new(),
        })
    }
}

impl DeviceVal<'_> {
    /// Whether its maps call themselves built-in maps (`Lazy`), for the
    /// selector about to read it.
    pub fn answer_as_builtin(&self, on: bool) {
        if self.builtin() == on {
            return;
        }
        let Fields {
            attributes,
            capacity,
            ..
        } = &self.map;
        for by_domain in [attributes, capacity] {
            for d in by_domain.map.domains.iter().chain([&by_domain.map.empty]) {
                d.builtin.store(on, Ordering::Relaxed);
            }
            by_domain.builtin.store(on, Ordering::Relaxed);
        }
        self.builtin.store(on, Ordering::Relaxed);
    }
}

impl LazyMap for Fields<'_> {
    fn get<'b, 'v>(&'b self, key: &str) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        Ok(CowVal::Borrowed(match key {
            "driver" => &self.driver,
            "attributes" => &self.attributes,
            "capacity" => &self.capacity,
            "allowMultipleAllocations" => &self.multiple,
            _ => return Err(ExecutionError::no_such_key(key)),
        }))
    }

    fn whole<'b, 'v>(&'b self) -> &'b CelMap<'v>
    where
        Self: 'v,
    {
        self.whole.get_or_init(|| {
            [
                "driver",
                "attributes",
                "capacity",
                "allowMultipleAllocations",
            ]
            .into_iter()
            .filter_map(|k| Some((CelMapKey::from(k), self.get(k).ok()?.into_owned())))
            .collect::<HashMap<_, _>>()
            .into()
        })
    }
}

impl<'d> ByDomain<'d> {
    fn new(kind: Kind, driver: &'d str, device: &'d Device) -> Lazy<Self> {
        let view = |domain| {
            Lazy::view(Domain {
                kind,
                device,
                driver,
                domain,
                whole: OnceLock::new(),
            })
        };
        let mut domains: Vec<Lazy<Domain<'d>>> = Vec::new();
        for name in names(kind, device) {
            let (domain, _) = qualified(name, driver);
            if !domains.iter().any(|d| d.map.domain == Some(domain)) {
                domains.push(view(Some(domain)));
            }
        }
        Lazy::view(Self {
            domains,
            empty: view(None),
            whole: OnceLock::new(),
        })
    }
}

/// The names a device publishes in one of its maps.
fn names(kind: Kind, device: &Device) -> Box<dyn Iterator<Item = &String> + '_> {
    match kind {
        Kind::Attributes => Box::new(device.attributes.iter().flat_map(|m| m.keys())),
        Kind::Capacity => Box::new(device.capacity.iter().flat_map(|m| m.keys())),
    }
}

impl LazyMap for ByDomain<'_> {
    fn get<'b, 'v>(&'b self, key: &str) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        let found = self.domains.iter().find(|d| d.map.domain == Some(key));
        Ok(CowVal::Borrowed(found.unwrap_or(&self.empty)))
    }

    fn whole<'b, 'v>(&'b self) -> &'b CelMap<'v>
    where
        Self: 'v,
    {
        self.whole.get_or_init(|| {
            self.domains
                .iter()
                .filter_map(|d| Some((CelMapKey::from(d.map.domain?), d.clone_as_boxed())))
                .collect::<HashMap<_, _>>()
                .into()
        })
    }
}

impl<'d> Domain<'d> {
    /// The value of `id` in this domain, as the interpreter holds it; None
    /// when the device has none, or one the API would have refused (no
    /// value, a version that is no semver, a quantity past what we count):
    /// only a selector that reads it errors, the rest of the device stays
    /// usable. A name written both bare and qualified reads as the later.
    fn lookup(&self, id: &str) -> Option<Box<dyn Val + 'd>> {
        let domain = self.domain?;
        let found = |name: &str| qualified(name, self.driver) == (domain, id);
        match self.kind {
            Kind::Attributes => {
                let attributes = self.device.attributes.as_ref()?;
                let (_, a) = attributes.iter().rfind(|(n, _)| found(n))?;
                attribute(a)
            }
            Kind::Capacity => {
                let capacity = self.device.capacity.as_ref()?;
                let (_, c) = capacity.iter().rfind(|(n, _)| found(n))?;
                let q = Quantity::parse(&c.value.0)?;
                Box::<dyn Val>::try_from(Value::Opaque(Arc::new(q))).ok()
            }
        }
    }
}

impl LazyMap for Domain<'_> {
    fn get<'b, 'v>(&'b self, key: &str) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        self.lookup(key)
            .map(CowVal::Owned)
            .ok_or_else(|| ExecutionError::no_such_key(key))
    }

    fn whole<'b, 'v>(&'b self) -> &'b CelMap<'v>
    where
        Self: 'v,
    {
        self.whole.get_or_init(|| {
            let ids = names(self.kind, self.device)
                .map(|n| qualified(n, self.driver))
                .filter(|(d, _)| self.domain == Some(*d))
                .map(|(_, id)| id);
            ids.filter_map(|id| Some((CelMapKey::from(id), self.lookup(id)?)))
                .collect::<HashMap<_, _>>()
                .into()
        })
    }
}

/// An attribute's value as the interpreter holds it: strings borrowed
/// from the slice, versions as semvers, lists element by element.
fn attribute<'d>(a: &'d DeviceAttribute) -> Option<Box<dyn Val + 'd>> {
    if let Some(b) = a.bool {
        return Some(Box::new(CelBool::from(b)));
    }
    if let Some(i) = a.int {
        return Some(Box::new(CelInt::from(i)));
    }
    if let Some(s) = &a.string {
        return Some(Box::new(CelString::from(s.as_str())));
    }
    let version = |v: &str| Semver::parse(v).map(|s| Value::Opaque(Arc::new(s)));
    let value = if let Some(v) = &a.version {
        version(v)?
    } else if let Some(b) = &a.bools {
        Value::List(Arc::new(b.iter().map(|b| Value::Bool(*b)).collect()))
    } else if let Some(i) = &a.ints {
        Value::List(Arc::new(i.iter().map(|i| Value::Int(*i)).collect()))
    } else if let Some(s) = &a.strings {
        Value::List(Arc::new(
            s.iter()
                .map(|s| Value::String(Arc::new(s.clone())))
                .collect(),
        ))
    } else if let Some(v) = &a.versions {
        Value::List(Arc::new(
            v.iter().map(|v| version(v)).collect::<Option<_>>()?,
        ))
    } else {
        return None;
    };
    Box::<dyn Val>::try_from(value).ok()
}
