//! Device selectors as Kubernetes evaluates them
//! (`k8s.io/dynamic-resource-allocation/cel`): one variable, `device`,
//! with its `driver`, its `attributes` and `capacity` by domain then name
//! (a name a slice writes bare is the driver's domain's; an unknown domain
//! reads as an empty map, a missing name inside one is an error), version
//! attributes as semvers, capacities as quantities, and the quantity and
//! semver functions. A selector must give a bool; one that does not
//! compile, or that errors on a device, is bad input said in upstream's
//! words, never a guess.

use super::device_val::DeviceVal;
use cel::common::types::CelBool;
use cel::common::value::CowVal;
use cel::context::VariableResolver;
use cel::objects::Value;
use k8s_openapi::api::resource::v1::Device;

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
    /// kube-apiserver refuses it on write; the scheduler stops it as it
    /// runs. Its estimated cost, for whoever must simplify it.
    #[error("{too} (estimated cost {0}, the limit is {max})", too = dra_cel_cost::TOO_COMPLEX, max = dra_cel_cost::SELECTOR_MAX_COST)]
    TooComplex(u64),
}

impl SelectorError {
    /// A condition's reason for it.
    pub fn reason(&self) -> &'static str {
        match self {
            SelectorError::Compile(_) => "CompileError",
            SelectorError::Runtime(_) => "RuntimeError",
            SelectorError::NotBool(_) => "NotBool",
            SelectorError::TooComplex(_) => "TooComplex",
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

thread_local! {
    /// The parser with the standard macros and optional syntax.
    static PARSER: cel::Env = cel::Env::stdlib();
}

/// The `device` variable of one device, read in place (`device_val`),
/// once for all the selectors that ask of it: each borrows it through a
/// resolver.
pub struct DeviceVar<'d>(DeviceVal<'d>);

impl VariableResolver for DeviceVar<'_> {
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        (variable == "device").then_some(CowVal::Borrowed(&self.0))
    }
}

impl<'d> DeviceVar<'d> {
    /// The device `d` of `driver`.
    pub fn new(driver: &'d str, d: &'d Device) -> Self {
        Self(DeviceVal::new(driver, d))
    }
}

/// Whether an expression writes a map literal: a brace outside a string
/// (CEL writes braces for nothing else a selector can use).
fn writes_map(e: &str) -> bool {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in e.chars() {
        match quote {
            Some(_) if escaped => escaped = false,
            Some(_) if c == '\\' => escaped = true,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None if c == '{' => return true,
            None => {}
        }
    }
    false
}

use super::values::CACHED_MATCHES;
pub use super::values::REGEX_SIZE_LIMIT;

/// CEL's `matches`, which selectors call: routed to `CACHED_MATCHES`.
const MATCHES: &str = "matches";

/// `e` with every `matches` call routed to the cached one; a literal
/// pattern that does not compile within the limit is refused here.
fn route_matches(e: &mut cel::parser::Expression) -> Result<(), String> {
    use cel::common::ast::{EntryExpr, Expr, LiteralValue};
    match &mut e.expr {
        Expr::Call(call) => {
            if call.func_name == MATCHES {
                call.func_name = CACHED_MATCHES.to_string();
                let pattern = call.args.last().map(|a| &a.expr);
                if let Some(Expr::Literal(LiteralValue::String(p))) = pattern {
                    super::values::compile_regex(p.inner())?;
                }
            }
            if let Some(t) = call.target.as_mut() {
                route_matches(t)?;
            }
            for a in &mut call.args {
                route_matches(a)?;
            }
        }
        Expr::Select(s) => route_matches(&mut s.operand)?,
        Expr::List(l) => {
            for x in &mut l.elements {
                route_matches(x)?;
            }
        }
        Expr::Map(m) => {
            for entry in &mut m.entries {
                if let EntryExpr::MapEntry(me) = &mut entry.expr {
                    route_matches(&mut me.key)?;
                    route_matches(&mut me.value)?;
                }
            }
        }
        Expr::Struct(st) => {
            for entry in &mut st.entries {
                if let EntryExpr::StructField(f) = &mut entry.expr {
                    route_matches(&mut f.value)?;
                }
            }
        }
        Expr::Comprehension(c) => {
            for x in [
                &mut c.iter_range,
                &mut c.accu_init,
                &mut c.loop_cond,
                &mut c.loop_step,
                &mut c.result,
            ] {
                route_matches(x)?;
            }
        }
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
    Ok(())
}

/// One compiled selector.
#[derive(Debug)]
pub struct Selector {
    expression: String,
    /// The parsed expression, `matches` routed to the cached one.
    program: cel::parser::Expression,
    /// Its estimated cost on the worst device (cel-go's, as upstream).
    cost: u64,
    /// It writes a map literal, which may meet one of the device's maps
    /// in `==`: it reads them as built-in maps (`device_val::Lazy`).
    writes_map: bool,
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
        // Upstream's environment has optional types (`a.?b`, `orValue`),
        // which its own advice for a missing name suggests.
        let program = PARSER
            .with(|env| env.compile(expression))
            .map_err(|e| SelectorError::Compile(e.to_string()))?;
        // Upstream's budget: a selector that could cost more on some
        // device is never evaluated, on any.
        let cost = dra_cel_cost::estimate(program.expression());
        if cost > dra_cel_cost::SELECTOR_MAX_COST {
            return Err(SelectorError::TooComplex(cost));
        }
        let mut program = program.expression().clone();
        route_matches(&mut program).map_err(SelectorError::Compile)?;
        Ok(Self {
            expression: expression.to_string(),
            program,
            cost,
            writes_map: writes_map(expression),
        })
    }

    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// Its estimated cost on the worst device.
    pub fn cost(&self) -> u64 {
        self.cost
    }

    /// Whether the device of `driver` matches: true, false, or the error
    /// that makes the selector unusable.
    pub fn matches(&self, driver: &str, d: &Device) -> Result<bool, SelectorError> {
        self.matches_var(&DeviceVar::new(driver, d))
    }

    /// Whether the device `var` holds matches: a device read once for
    /// every selector that asks of it.
    pub fn matches_var(&self, var: &DeviceVar) -> Result<bool, SelectorError> {
        ROOT.with(|root| {
            let root = root
                .as_ref()
                .map_err(|e| SelectorError::Runtime(e.clone()))?;
            // The thread's root, read for as long as this device is.
            let root: &cel::Context<'_, '_> = root;
            let mut ctx = root.new_inner_scope();
            var.0.answer_as_builtin(self.writes_map);
            ctx.set_variable_resolver(var);
            outcome(Value::resolve_val(&self.program, &ctx))
        })
    }
}

/// A selector's result as a match, or the error upstream would give.
fn outcome(result: Result<CowVal<'_, '_>, cel::ExecutionError>) -> Result<bool, SelectorError> {
    match result {
        Ok(v) => match v.downcast_ref::<CelBool>() {
            Some(b) => Ok(*b.inner()),
            None => Err(SelectorError::NotBool(v.get_type().name().to_string())),
        },
        // `EnhanceRuntimeError`: a missing name gets upstream's advice.
        Err(cel::ExecutionError::NoSuchKey(k)) => Err(SelectorError::Runtime(format!(
            "no such key: {k}. consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() for optional fields"
        ))),
        Err(e) => Err(SelectorError::Runtime(e.to_string())),
    }
}

#[cfg(test)]
mod tests;
