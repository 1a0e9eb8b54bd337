//! Device selectors as Kubernetes evaluates them
//! (`k8s.io/dynamic-resource-allocation/cel`): one variable, `device`,
//! with its `driver`, its `attributes` and `capacity` by domain then name
//! (a name a slice writes bare is the driver's domain's; an unknown domain
//! reads as an empty map, a missing name inside one is an error), version
//! attributes as semvers, capacities as quantities, and the quantity and
//! semver functions. A selector must give a bool; one that does not
//! compile, or that errors on a device, is bad input said in upstream's
//! words, never a guess.

use super::values::{Quantity, Semver};
use cel::common::types::{CelBool, CelMap, CelMapKey, CelString};
use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use cel::objects::Value;
use k8s_openapi::api::resource::v1::Device;
use std::collections::HashMap;
use std::sync::Arc;

/// Upstream's `CELSelectorExpressionMaxLength`.
const MAX_LENGTH: usize = 10 * 1024;

/// The deepest nesting compiled: far past any selector a person writes
/// (upstream's parser stops at a recursion depth of 250 too).
const MAX_NESTING: usize = 250;

/// How deep an expression nests: brackets, and unary operators in a row
/// (outside string literals).
fn nesting(e: &str) -> usize {
    let (mut depth, mut deepest, mut run) = (0usize, 0usize, 0usize);
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in e.chars() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' => quote = Some(c),
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        run = if matches!(c, '!' | '-') {
            run + 1
        } else if c.is_whitespace() {
            run
        } else {
            0
        };
        deepest = deepest.max(depth + run);
    }
    deepest
}

/// Why a selector cannot be used: upstream's wording after `selector #i`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("CEL compile error: compilation failed: {0}")]
    Compile(String),
    #[error("CEL runtime error: {0}")]
    Runtime(String),
    #[error("CEL result of type {0} could not be converted to bool")]
    NotBool(String),
}

impl SelectorError {
    /// A condition's reason for it.
    pub fn reason(&self) -> &'static str {
        match self {
            SelectorError::Compile(_) => "CompileError",
            SelectorError::Runtime(_) => "RuntimeError",
            SelectorError::NotBool(_) => "NotBool",
        }
    }
}

thread_local! {
    /// CEL's standard library and Kubernetes' functions, declared once per
    /// thread: declaring them is most of what a fresh context costs, many
    /// times what evaluating a selector on one device does.
    static ROOT: Result<cel::Context<'static, 'static>, String> = {
        let mut ctx = cel::Context::default();
        super::values::add_to(&mut ctx).map(|()| ctx).map_err(|e| e.to_string())
    };
}

/// The `device` variable of one device, built once for all the selectors
/// that ask of it, already in the interpreter's own form: each selector
/// borrows it (through a resolver) rather than converting a copy, which
/// was most of what a device's evaluation cost.
pub struct DeviceVar(Result<Box<dyn Val>, String>);

impl VariableResolver for DeviceVar {
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        match (&self.0, variable) {
            (Ok(v), "device") => Some(CowVal::Borrowed(v.as_ref())),
            _ => None,
        }
    }
}

impl DeviceVar {
    /// The device of `driver`, with an empty map for each of `domains`
    /// it publishes nothing in (upstream's `WithDefault` maps).
    pub fn new<'a>(driver: &str, d: &Device, domains: impl IntoIterator<Item = &'a str>) -> Self {
        Self(Self::build(driver, d, domains).map_err(|e| e.to_string()))
    }

    /// The device as every one of `selectors` reads it: the union of
    /// their domains reads as each one's would (a domain the device has
    /// not is empty).
    pub fn for_selectors<'a>(
        driver: &str,
        d: &Device,
        selectors: impl IntoIterator<Item = &'a Selector>,
    ) -> Self {
        Self::new(driver, d, selectors.into_iter().flat_map(Selector::domains))
    }

    /// Built in the interpreter's form directly: a `Value` map converts
    /// by cloning itself and each entry again.
    fn build<'a>(
        driver: &str,
        d: &Device,
        domains: impl IntoIterator<Item = &'a str>,
    ) -> Result<Box<dyn Val>, cel::ExecutionError> {
        let mut attributes: HashMap<String, ValMap> = HashMap::new();
        for (name, a) in d.attributes.iter().flatten() {
            let (domain, id) = qualified(name, driver);
            // One the API would have refused (no value, a version that is
            // no semver) is left out as a bad capacity is: only a selector
            // that reads it errors.
            if let Ok(v) = attribute(a) {
                attributes
                    .entry(domain.into())
                    .or_default()
                    .insert(val_key(id), Box::<dyn Val>::try_from(v)?);
            }
        }
        let mut capacity: HashMap<String, ValMap> = HashMap::new();
        for (name, c) in d.capacity.iter().flatten() {
            let (domain, id) = qualified(name, driver);
            // One the quantity type cannot hold (negative, past what it
            // counts) is left out: a selector that reads it errors, the
            // rest of the device stays usable.
            if let Some(q) = Quantity::parse(&c.value.0) {
                capacity.entry(domain.into()).or_default().insert(
                    val_key(id),
                    Box::<dyn Val>::try_from(Value::Opaque(Arc::new(q)))?,
                );
            }
        }
        for domain in domains {
            attributes.entry(domain.to_string()).or_default();
            capacity.entry(domain.to_string()).or_default();
        }
        let by_domain = |m: HashMap<String, ValMap>| -> Box<dyn Val> {
            let m: ValMap = m
                .into_iter()
                .map(|(d, v)| {
                    (
                        CelMapKey::from(d),
                        Box::new(CelMap::from(v)) as Box<dyn Val>,
                    )
                })
                .collect();
            Box::new(CelMap::from(m))
        };
        let mut device = ValMap::new();
        device.insert(
            val_key("driver"),
            Box::new(CelString::from(driver.to_string())),
        );
        device.insert(val_key("attributes"), by_domain(attributes));
        device.insert(val_key("capacity"), by_domain(capacity));
        device.insert(
            val_key("allowMultipleAllocations"),
            Box::new(CelBool::from(d.allow_multiple_allocations.unwrap_or(false))),
        );
        Ok(Box::new(CelMap::from(device)))
    }
}

/// A map as the interpreter holds one.
type ValMap = HashMap<CelMapKey<'static>, Box<dyn Val>>;

fn val_key(s: &str) -> CelMapKey<'static> {
    CelMapKey::from(s.to_string())
}

/// One compiled selector, with the attribute domains it names (an unknown
/// one reads as an empty map, as upstream's `WithDefault` maps do).
#[derive(Debug)]
pub struct Selector {
    expression: String,
    program: cel::Program,
    domains: Vec<String>,
}

/// The quoted strings of an expression: the domains it may index with.
fn literals(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = expr.chars();
    while let Some(c) = chars.next() {
        if c == '"' || c == '\'' {
            let s: String = chars.by_ref().take_while(|d| *d != c).collect();
            out.push(s);
        }
    }
    out
}

/// `parseQualifiedName`: a name's domain and id; a bare name is the
/// driver's.
fn qualified<'a>(name: &'a str, driver: &'a str) -> (&'a str, &'a str) {
    name.split_once('/').unwrap_or((driver, name))
}

fn attribute(a: &k8s_openapi::api::resource::v1::DeviceAttribute) -> Result<Value, String> {
    let version = |v: &str| {
        Semver::parse(v)
            .map(|s| Value::Opaque(Arc::new(s)))
            .ok_or_else(|| format!("parse semantic version: {v}"))
    };
    if let Some(b) = a.bool {
        return Ok(Value::Bool(b));
    }
    if let Some(i) = a.int {
        return Ok(Value::Int(i));
    }
    if let Some(s) = &a.string {
        return Ok(Value::String(Arc::new(s.clone())));
    }
    if let Some(v) = &a.version {
        return version(v);
    }
    let list = |l: Vec<Value>| Value::List(Arc::new(l));
    if let Some(b) = &a.bools {
        return Ok(list(b.iter().map(|b| Value::Bool(*b)).collect()));
    }
    if let Some(i) = &a.ints {
        return Ok(list(i.iter().map(|i| Value::Int(*i)).collect()));
    }
    if let Some(s) = &a.strings {
        return Ok(list(
            s.iter()
                .map(|s| Value::String(Arc::new(s.clone())))
                .collect(),
        ));
    }
    if let Some(v) = &a.versions {
        return Ok(list(
            v.iter().map(|v| version(v)).collect::<Result<_, _>>()?,
        ));
    }
    Err("unsupported attribute value".into())
}

impl Selector {
    /// Compiles `expression`; its error as upstream says it.
    pub fn compile(expression: &str) -> Result<Self, SelectorError> {
        if expression.len() > MAX_LENGTH {
            return Err(SelectorError::Compile(format!(
                "expression is {} bytes long, longer than the {MAX_LENGTH} Kubernetes allows",
                expression.len()
            )));
        }
        // The parser recurses per nesting level: a tenant's template
        // nested thousands deep must be refused, not overflow our stack.
        if nesting(expression) > MAX_NESTING {
            return Err(SelectorError::Compile(format!(
                "expression is nested more than {MAX_NESTING} levels deep"
            )));
        }
        let program =
            cel::Program::compile(expression).map_err(|e| SelectorError::Compile(e.to_string()))?;
        Ok(Self {
            expression: expression.to_string(),
            program,
            domains: literals(expression),
        })
    }

    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// The attribute domains it names.
    pub fn domains(&self) -> impl Iterator<Item = &str> {
        self.domains.iter().map(String::as_str)
    }

    /// Whether the device of `driver` matches: true, false, or the error
    /// that makes the selector unusable.
    pub fn matches(&self, driver: &str, d: &Device) -> Result<bool, SelectorError> {
        self.matches_var(&DeviceVar::new(driver, d, self.domains()))
    }

    /// Whether the device `var` holds matches: a device read once for
    /// every selector that asks of it.
    pub fn matches_var(&self, var: &DeviceVar) -> Result<bool, SelectorError> {
        ROOT.with(|root| {
            let root = root
                .as_ref()
                .map_err(|e| SelectorError::Runtime(e.clone()))?;
            if let Err(e) = &var.0 {
                return Err(SelectorError::Runtime(e.clone()));
            }
            // The thread's root, read for as long as this device is.
            let root: &cel::Context<'_, '_> = root;
            let mut ctx = root.new_inner_scope();
            ctx.set_variable_resolver(var);
            outcome(self.program.execute(&ctx))
        })
    }
}

/// A selector's result as a match, or the error upstream would give.
fn outcome(result: cel::ResolveResult) -> Result<bool, SelectorError> {
    match result {
        Ok(Value::Bool(b)) => Ok(b),
        Ok(other) => Err(SelectorError::NotBool(
            format!("{:?}", other.type_of()).to_lowercase(),
        )),
        // `EnhanceRuntimeError`: a missing name gets upstream's advice.
        Err(cel::ExecutionError::NoSuchKey(k)) => Err(SelectorError::Runtime(format!(
            "no such key: {k}. consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() for optional fields"
        ))),
        Err(e) => Err(SelectorError::Runtime(e.to_string())),
    }
}

#[cfg(test)]
mod tests;
