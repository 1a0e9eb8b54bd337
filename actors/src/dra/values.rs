//! The two value kinds Kubernetes' CEL environment for devices adds to
//! CEL's own: quantities (`library.Quantity`: a device's capacity, and
//! `quantity("1Gi")`) and semantic versions (`library.SemverLib`: a
//! `version` attribute, and `semver("1.2.3")`), as opaque values with the
//! methods selectors call on them.

use crate::api::quantity::scheduler_amount;
use cel::extractors::This;
use cel::objects::{Opaque, Value};
use cel::{ExecutionError, FunctionContext};
use std::cmp::Ordering;
use std::sync::Arc;

/// A quantity, in thousandths of its unit (`MilliValue`, rounded up):
/// exact for every quantity a slice or a selector writes down to `1m`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Quantity(pub u64);

impl Opaque for Quantity {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Quantity"
    }
}

impl Quantity {
    /// Reads a quantity (`141Gi`, `1500m`); None for one Kubernetes would
    /// not parse or could not hold.
    pub fn parse(q: &str) -> Option<Self> {
        // `cpu` counts in thousandths: the scale wanted for any quantity.
        scheduler_amount(crate::api::quantity::CPU, q)
            .ok()
            .map(Self)
    }
}

/// A semantic version (semver 2.0.0): its numbers and pre-release parts;
/// build metadata plays no part in precedence and is dropped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Semver {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
    pre: Vec<String>,
}

impl Opaque for Semver {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Semver"
    }
}

impl Semver {
    /// Reads `1.2.3`, `1.2.3-rc.1`, `1.2.3+build`; None otherwise (no
    /// leading zeros, no missing parts, as semver 2.0.0 says).
    pub fn parse(s: &str) -> Option<Self> {
        let core = s.split('+').next()?;
        let (nums, pre) = match core.split_once('-') {
            Some((n, p)) => (n, Some(p)),
            None => (core, None),
        };
        let number = |p: &str| -> Option<u64> {
            let ok = !p.is_empty()
                && p.bytes().all(|b| b.is_ascii_digit())
                && (p == "0" || !p.starts_with('0'));
            ok.then(|| p.parse().ok()).flatten()
        };
        let parts: Vec<&str> = nums.split('.').collect();
        let [major, minor, patch] = parts[..] else {
            return None;
        };
        let pre: Vec<String> = match pre {
            Some(p) => {
                let ids: Vec<String> = p.split('.').map(str::to_string).collect();
                let valid = ids.iter().all(|i| {
                    !i.is_empty() && i.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                });
                if !valid {
                    return None;
                }
                ids
            }
            None => Vec::new(),
        };
        Some(Self {
            major: number(major)?,
            minor: number(minor)?,
            patch: number(patch)?,
            pre,
        })
    }
}

impl PartialOrd for Semver {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Semver {
    /// Semver's precedence: numbers, then a pre-release below its release,
    /// pre-release identifiers numeric below alphanumeric.
    fn cmp(&self, other: &Self) -> Ordering {
        let numbers =
            (self.major, self.minor, self.patch).cmp(&(other.major, other.minor, other.patch));
        if numbers != Ordering::Equal {
            return numbers;
        }
        match (self.pre.is_empty(), other.pre.is_empty()) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Greater,
            (false, true) => return Ordering::Less,
            (false, false) => {}
        }
        for (a, b) in self.pre.iter().zip(&other.pre) {
            let o = match (a.parse::<u64>(), b.parse::<u64>()) {
                (Ok(x), Ok(y)) => x.cmp(&y),
                (Ok(_), Err(_)) => Ordering::Less,
                (Err(_), Ok(_)) => Ordering::Greater,
                (Err(_), Err(_)) => a.cmp(b),
            };
            if o != Ordering::Equal {
                return o;
            }
        }
        self.pre.len().cmp(&other.pre.len())
    }
}

fn opaque(v: &Value) -> Option<&Arc<dyn Opaque>> {
    match v {
        Value::Opaque(o) => Some(o),
        _ => None,
    }
}

type Answer = Result<Value, ExecutionError>;

/// The order of two quantities or two versions; an error for anything
/// else, as a type-checked call would be.
fn order(ftx: &FunctionContext, this: &Value, other: &Value) -> Result<Ordering, ExecutionError> {
    let wrong = || ftx.error("needs two quantities or two versions");
    let (Some(a), Some(b)) = (opaque(this), opaque(other)) else {
        return Err(wrong());
    };
    if let (Some(x), Some(y)) = (a.downcast_ref::<Quantity>(), b.downcast_ref::<Quantity>()) {
        return Ok(x.cmp(y));
    }
    if let (Some(x), Some(y)) = (a.downcast_ref::<Semver>(), b.downcast_ref::<Semver>()) {
        return Ok(x.cmp(y));
    }
    Err(wrong())
}

fn compare_to(ftx: &FunctionContext, This(this): This<Value>, other: Value) -> Answer {
    Ok(Value::Int(order(ftx, &this, &other)? as i64))
}

fn greater(ftx: &FunctionContext, This(this): This<Value>, other: Value) -> Answer {
    Ok(Value::Bool(order(ftx, &this, &other)? == Ordering::Greater))
}

fn less(ftx: &FunctionContext, This(this): This<Value>, other: Value) -> Answer {
    Ok(Value::Bool(order(ftx, &this, &other)? == Ordering::Less))
}

fn quantity(ftx: &FunctionContext, s: Arc<String>) -> Answer {
    Quantity::parse(&s)
        .map(|q| Value::Opaque(Arc::new(q)))
        .ok_or_else(|| ftx.error(format!("invalid quantity: {s}")))
}

fn is_quantity(s: Arc<String>) -> bool {
    Quantity::parse(&s).is_some()
}

fn semver(ftx: &FunctionContext, s: Arc<String>) -> Answer {
    Semver::parse(&s)
        .map(|v| Value::Opaque(Arc::new(v)))
        .ok_or_else(|| ftx.error(format!("invalid semver: {s}")))
}

fn is_semver(s: Arc<String>) -> bool {
    Semver::parse(&s).is_some()
}

fn version_part(ftx: &FunctionContext, v: &Value, part: fn(&Semver) -> u64) -> Answer {
    opaque(v)
        .and_then(|o| o.downcast_ref::<Semver>())
        .map(|s| Value::Int(i64::try_from(part(s)).unwrap_or(i64::MAX)))
        .ok_or_else(|| ftx.error("needs a version"))
}

fn major(ftx: &FunctionContext, This(v): This<Value>) -> Answer {
    version_part(ftx, &v, |s| s.major)
}

fn minor(ftx: &FunctionContext, This(v): This<Value>) -> Answer {
    version_part(ftx, &v, |s| s.minor)
}

fn patch(ftx: &FunctionContext, This(v): This<Value>) -> Answer {
    version_part(ftx, &v, |s| s.patch)
}

/// `asInteger()`: a quantity's whole units (an error for a fraction, as
/// upstream's).
fn as_integer(ftx: &FunctionContext, This(v): This<Value>) -> Answer {
    let q = opaque(&v)
        .and_then(|o| o.downcast_ref::<Quantity>())
        .ok_or_else(|| ftx.error("needs a quantity"))?;
    if q.0 % 1000 != 0 {
        return Err(ftx.error("cannot convert value to integer"));
    }
    Ok(Value::Int(i64::try_from(q.0 / 1000).unwrap_or(i64::MAX)))
}

thread_local! {
    /// Patterns compiled, per thread (a decision runs on one): few in a
    /// cluster, each compiled once.
    static REGEXES: std::cell::RefCell<std::collections::HashMap<String, Result<regex::Regex, String>>> =
        std::cell::RefCell::default();
}

/// How many patterns a thread keeps compiled.
const REGEXES_KEPT: usize = 256;

/// The most a selector's regex may compile to (the `regex` crate's size
/// limit): past it, a pattern is refused, never compiled on every device.
pub const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// `matches` as selectors call it: the pattern compiled once per thread
/// (the `cel` crate compiles it at every call, and a short pattern such
/// as `[\pL]{200}` compiles to megabytes), within `REGEX_SIZE_LIMIT`.
pub(super) const CACHED_MATCHES: &str = "gpuClaimsMatches";

/// A selector's pattern compiled within `REGEX_SIZE_LIMIT`, once per
/// thread; its error as the regex crate says it.
pub(super) fn compile_regex(pattern: &str) -> Result<regex::Regex, String> {
    REGEXES.with(|cache| {
        if let Some(r) = cache.borrow().get(pattern) {
            return r.clone();
        }
        let compiled = regex::RegexBuilder::new(pattern)
            .size_limit(REGEX_SIZE_LIMIT)
            .dfa_size_limit(REGEX_SIZE_LIMIT)
            .build()
            .map_err(|e| format!("'{pattern}' is not a regex a selector may use: {e}"));
        let mut cache = cache.borrow_mut();
        if cache.len() >= REGEXES_KEPT {
            cache.clear();
        }
        cache.insert(pattern.to_string(), compiled.clone());
        compiled
    })
}

/// `matches`, the pattern compiled once (`compile_regex`).
fn regex_match(ftx: &FunctionContext, This(s): This<Arc<String>>, re: Arc<String>) -> Answer {
    let compiled = compile_regex(&re).map_err(|e| ftx.error(e))?;
    Ok(Value::Bool(compiled.is_match(&s)))
}

/// Adds the quantity and semver functions to a CEL context.
pub fn add_to(ctx: &mut cel::Context) -> Result<(), cel::DeclarationError> {
    ctx.add_function(CACHED_MATCHES, regex_match)?;
    ctx.add_function("quantity", quantity)?;
    ctx.add_function("isQuantity", is_quantity)?;
    ctx.add_function("semver", semver)?;
    ctx.add_function("isSemver", is_semver)?;
    ctx.add_function("compareTo", compare_to)?;
    ctx.add_function("isGreaterThan", greater)?;
    ctx.add_function("isLessThan", less)?;
    ctx.add_function("asInteger", as_integer)?;
    ctx.add_function("major", major)?;
    ctx.add_function("minor", minor)?;
    ctx.add_function("patch", patch)?;
    Ok(())
}
