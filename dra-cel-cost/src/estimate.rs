//! The walk over a parsed expression (cel-go's `coster.cost`): each node's
//! estimated cost and type, the comprehension variables in scope.

use crate::calls;
use crate::ty::{Ty, UNKNOWN};
use cel::common::ast::{EntryExpr, Expr, LiteralValue};
use cel::parser::Expression;

/// `SelectAndIdentCost`, `ListCreateBaseCost`, `MapCreateBaseCost`,
/// `StructCreateBaseCost` (cel-go `common/cost.go`); a literal costs 0.
const IDENT: u64 = 1;
const LIST: u64 = 10;
const MAP: u64 = 30;
const STRUCT: u64 = 40;

/// The variables in scope: the comprehensions' (innermost last), then
/// `device`.
#[derive(Default)]
pub struct Estimator {
    scope: Vec<(String, Ty)>,
}

impl Estimator {
    fn lookup(&self, name: &str) -> Ty {
        match self.scope.iter().rev().find(|(n, _)| n == name) {
            Some((_, t)) => t.clone(),
            None if name == "device" => Ty::Device,
            None => Ty::Dyn,
        }
    }

    /// The estimated maximum cost of `e`, and its type.
    pub fn cost(&mut self, e: &Expression) -> (u64, Ty) {
        match &e.expr {
            Expr::Unspecified => (0, Ty::Dyn),
            Expr::Literal(l) => (0, literal(l)),
            Expr::Ident(name) => (IDENT, self.lookup(name)),
            Expr::Select(s) => {
                let (c, operand) = self.cost(&s.operand);
                let (field, charged) = operand.field(&s.field);
                if s.test {
                    // `has()`: Kubernetes charges no presence test.
                    (c, Ty::Scalar)
                } else {
                    (c.saturating_add(u64::from(charged)), field)
                }
            }
            Expr::Call(call) => {
                let (target_cost, target) = match &call.target {
                    Some(t) => {
                        let (c, ty) = self.cost(t);
                        (c, Some(ty))
                    }
                    None => (0, None),
                };
                let mut args_cost = 0u64;
                let mut args = Vec::with_capacity(call.args.len());
                for a in &call.args {
                    let (c, ty) = self.cost(a);
                    args_cost = args_cost.saturating_add(c);
                    args.push((c, ty));
                }
                let (own, mut ty) = calls::call(&call.func_name, target.as_ref(), &args);
                if let (Some((_, operand)), Some(Expr::Literal(LiteralValue::String(f)))) =
                    (args.first(), call.args.get(1).map(|a| &a.expr))
                    && call.func_name == "_?._"
                {
                    ty = operand.field(f.inner()).0;
                }
                let cost = target_cost.saturating_add(own);
                // `&&`, `||` and `?:` count their arguments themselves.
                if calls::counts_own_args(&call.func_name) {
                    (cost, ty)
                } else {
                    (cost.saturating_add(args_cost), ty)
                }
            }
            Expr::List(l) => {
                let mut cost = LIST;
                let mut elem: Option<Ty> = None;
                for x in &l.elements {
                    let (c, ty) = self.cost(x);
                    cost = cost.saturating_add(c);
                    elem = Some(match elem {
                        Some(e) => e.union(ty),
                        None => ty,
                    });
                }
                let n = l.elements.len() as u64;
                (cost, Ty::List(Box::new(elem.unwrap_or(Ty::Dyn)), n))
            }
            Expr::Map(m) => {
                let mut cost = MAP;
                let (mut keys, mut values): (Option<Ty>, Option<Ty>) = (None, None);
                for entry in &m.entries {
                    let EntryExpr::MapEntry(me) = &entry.expr else {
                        continue;
                    };
                    let (kc, kt) = self.cost(&me.key);
                    let (vc, vt) = self.cost(&me.value);
                    cost = cost.saturating_add(kc).saturating_add(vc);
                    keys = Some(keys.map_or(kt.clone(), |k| k.union(kt)));
                    values = Some(values.map_or(vt.clone(), |v| v.union(vt)));
                }
                let n = m.entries.len() as u64;
                let k = Box::new(keys.unwrap_or(Ty::Dyn));
                (cost, Ty::Map(k, Box::new(values.unwrap_or(Ty::Dyn)), n))
            }
            Expr::Struct(s) => {
                let mut cost = STRUCT;
                for entry in &s.entries {
                    if let EntryExpr::StructField(f) = &entry.expr {
                        cost = cost.saturating_add(self.cost(&f.value).0);
                    }
                }
                (cost, Ty::Dyn)
            }
            Expr::Comprehension(c) => {
                // `costComprehension`: the range, the accumulator's start
                // and the result once; the condition and the step once per
                // element of the range, with no early exit.
                let (range_cost, range) = self.cost(&c.iter_range);
                let (init_cost, init) = self.cost(&c.accu_init);
                let (var1, var2) = match (&range, &c.iter_var2) {
                    (Ty::List(e, _), Some(_)) => (Ty::Scalar, (**e).clone()),
                    (Ty::Map(k, v, _), Some(_)) => ((**k).clone(), (**v).clone()),
                    (_, Some(_)) => (Ty::Dyn, Ty::Dyn),
                    (r, None) => (r.entry(), Ty::Dyn),
                };
                let n = range.size();
                let scope = self.scope.len();
                self.scope.push((c.iter_var.clone(), var1));
                if let Some(v2) = &c.iter_var2 {
                    self.scope.push((v2.clone(), var2));
                }
                // A list or map built step by step has one entry a step at
                // most (cel-go: the result size is the range's).
                let accu = match init {
                    Ty::List(e, _) => Ty::List(e, n),
                    Ty::Map(k, v, _) => Ty::Map(k, v, n),
                    other => other,
                };
                self.scope.push((c.accu_var.clone(), accu.clone()));
                let cond = self.cost(&c.loop_cond).0;
                let (step, stepped) = self.cost(&c.loop_step);
                let (result_cost, result) = self.cost(&c.result);
                self.scope.truncate(scope);
                let per_step = cond.saturating_add(step);
                let result = match (&accu, result) {
                    // The built list, whatever its elements turned out to be.
                    (Ty::List(_, n), Ty::List(e, _)) => Ty::List(e, *n),
                    (Ty::List(_, n), _) => Ty::List(Box::new(stepped.entry()), *n),
                    (_, r) => r,
                };
                let loops = if n == UNKNOWN && per_step > 0 {
                    UNKNOWN
                } else {
                    n.saturating_mul(per_step)
                };
                let cost = range_cost
                    .saturating_add(init_cost)
                    .saturating_add(result_cost)
                    .saturating_add(loops);
                (cost, result)
            }
        }
    }
}

/// A literal's type and size (a string's in runes, as cel-go counts).
fn literal(l: &LiteralValue) -> Ty {
    match l {
        LiteralValue::String(s) => Ty::Str(s.inner().chars().count() as u64),
        LiteralValue::Bytes(b) => Ty::Bytes(b.inner().len() as u64),
        _ => Ty::Scalar,
    }
}
