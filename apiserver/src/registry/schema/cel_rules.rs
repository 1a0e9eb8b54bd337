//! The `x-kubernetes-validations` CEL rules of a schema: each with `self`,
//! and the transition rules (naming `oldSelf`) only on an update.

use super::*;

/// The `x-kubernetes-validations` CEL rules on one value.
pub(super) fn rules(v: &Value, s: &Value, path: &str, old: Option<&Value>, out: &mut Vec<Cause>) {
    let Some(rules) = s["x-kubernetes-validations"].as_array() else {
        return;
    };
    for r in rules {
        let Some(rule) = r["rule"].as_str() else {
            continue;
        };
        let transition = rule.contains("oldSelf");
        if transition && old.is_none() {
            continue;
        }
        let passed = eval(rule, v, old);
        if passed != Some(true) {
            let detail = match (passed, r["message"].as_str()) {
                (None, _) => format!("compilation or evaluation of rule failed: {rule}"),
                (_, Some(m)) => m.to_string(),
                (_, None) => format!("failed rule: {rule}"),
            };
            out.push(Cause::invalid(path, format!("{:?}", type_name(v)), detail));
        }
    }
}

/// One CEL rule with `self` (and `oldSelf`); None when it does not
/// compile or does not evaluate to a boolean.
pub(super) fn eval(rule: &str, this: &Value, old: Option<&Value>) -> Option<bool> {
    let program = cel::Program::compile(rule).ok()?;
    let mut ctx = cel::Context::default();
    ctx.add_variable("self", this.clone()).ok()?;
    if let Some(o) = old {
        ctx.add_variable("oldSelf", o.clone()).ok()?;
    }
    match program.execute(&ctx).ok()? {
        cel::Value::Bool(b) => Some(b),
        _ => None,
    }
}
