//! The types the estimate follows, with their declared sizes: what a value
//! may be and how many bytes, runes, elements or entries it may have at
//! most (cel-go's `SizeEstimate.Max`; `UNKNOWN` where nothing bounds it).

/// A size with no bound.
pub const UNKNOWN: u64 = u64::MAX;

/// `DriverNameMaxLength`, `DeviceMaxDomainLength`, `DeviceMaxIDLength`,
/// `DeviceAttributeMaxValueLength`,
/// `ResourceSliceMaxAttributesAndCapacitiesPerDevice`.
const DRIVER_MAX: u64 = 63;
const DOMAIN_MAX: u64 = 63;
const ID_MAX: u64 = 32;
pub const ATTRIBUTE_MAX: u64 = 64;
const FIELDS_MAX: u64 = 32;

#[derive(Clone, Debug, PartialEq)]
pub enum Ty {
    /// What the environment does not declare: size unknown.
    Dyn,
    /// bool, int, uint, double, null: size 1.
    Scalar,
    Str(u64),
    Bytes(u64),
    /// Elements' type, how many.
    List(Box<Ty>, u64),
    /// Keys' type, values' type, how many entries.
    Map(Box<Ty>, Box<Ty>, u64),
    /// The `device` variable (`kubernetes.DRADevice`).
    Device,
    /// A device attribute's value (string, int, bool, version, or from 1.36
    /// a list of them): declared dyn, of at most 64.
    Attribute,
    /// A capacity's quantity: declared without a size (0).
    Quantity,
    /// What Kubernetes' functions make (a semver): size unknown.
    Opaque,
}

impl Ty {
    /// `computeSize`: the most elements, bytes or runes it has.
    pub fn size(&self) -> u64 {
        match self {
            Ty::Scalar => 1,
            Ty::Str(n) | Ty::Bytes(n) | Ty::List(_, n) | Ty::Map(_, _, n) => *n,
            Ty::Attribute => ATTRIBUTE_MAX,
            Ty::Quantity => 0,
            Ty::Dyn | Ty::Device | Ty::Opaque => UNKNOWN,
        }
    }

    /// What iterating it gives: a list's elements, a map's keys.
    pub fn entry(&self) -> Ty {
        match self {
            Ty::List(e, _) => (**e).clone(),
            Ty::Map(k, _, _) => (**k).clone(),
            // An attribute's list: its values are attribute values.
            Ty::Attribute => Ty::Attribute,
            _ => Ty::Dyn,
        }
    }

    /// The value of `x[k]` or `x.k`.
    pub fn value(&self) -> Ty {
        match self {
            Ty::List(e, _) => (**e).clone(),
            Ty::Map(_, v, _) => (**v).clone(),
            Ty::Attribute => Ty::Attribute,
            _ => Ty::Dyn,
        }
    }

    /// `a.f`: the field's type, and whether cel-go charges the select
    /// (only on a map or an object: `costSelect`).
    pub fn field(&self, name: &str) -> (Ty, bool) {
        match self {
            Ty::Device => (device_field(name), true),
            Ty::Map(_, v, _) => ((**v).clone(), true),
            // The DRA size estimator follows an attribute's name on an
            // attribute (its dyn kind is not charged).
            Ty::Attribute => (Ty::Attribute, false),
            _ => (Ty::Dyn, false),
        }
    }

    /// Both at once (a list literal's elements, a conditional's branches):
    /// the larger size where the kinds agree, else dyn.
    pub fn union(self, other: Ty) -> Ty {
        match (self, other) {
            (a, b) if a == b => a,
            (Ty::Str(a), Ty::Str(b)) => Ty::Str(a.max(b)),
            (Ty::Bytes(a), Ty::Bytes(b)) => Ty::Bytes(a.max(b)),
            (Ty::List(a, n), Ty::List(b, m)) => Ty::List(Box::new(a.union(*b)), n.max(m)),
            (Ty::Map(k, v, n), Ty::Map(k2, v2, m)) => {
                Ty::Map(Box::new(k.union(*k2)), Box::new(v.union(*v2)), n.max(m))
            }
            _ => Ty::Dyn,
        }
    }
}

/// The declared fields of `device`.
fn device_field(name: &str) -> Ty {
    let by_domain = |value: Ty| {
        Ty::Map(
            Box::new(Ty::Str(DOMAIN_MAX)),
            Box::new(Ty::Map(
                Box::new(Ty::Str(ID_MAX)),
                Box::new(value),
                FIELDS_MAX,
            )),
            FIELDS_MAX,
        )
    };
    match name {
        "driver" => Ty::Str(DRIVER_MAX),
        "attributes" => by_domain(Ty::Attribute),
        "capacity" => by_domain(Ty::Quantity),
        "allowMultipleAllocations" => Ty::Scalar,
        _ => Ty::Dyn,
    }
}

/// `MultiplyByCostFactor`: `ceil(x * f)`, saturating.
pub fn factor(x: u64, f: f64) -> u64 {
    if x == UNKNOWN {
        return UNKNOWN;
    }
    let v = (x as f64 * f).ceil();
    if v >= u64::MAX as f64 {
        UNKNOWN
    } else {
        v as u64
    }
}
