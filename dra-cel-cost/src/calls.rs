//! What a call costs beyond its arguments, and what it gives: cel-go's
//! `functionCost` for the standard library, and Kubernetes'
//! `library.CostEstimator` for its own functions (quantities, semvers,
//! strings). A function neither knows costs 1, as cel-go charges it.

use crate::ty::{Ty, UNKNOWN, factor};

/// `StringTraversalCostFactor`, `RegexStringLengthCostFactor`.
const TRAVERSAL: f64 = 0.1;
const REGEX: f64 = 0.25;

/// Whether the call's own cost already counts its arguments (the logical
/// operators and the conditional choose among them).
pub fn counts_own_args(function: &str) -> bool {
    matches!(function, "_&&_" | "_||_" | "_?_:_")
}

/// The cost of calling `function` beyond what evaluating its target and
/// arguments costs (except where `counts_own_args`), and the type of
/// what it gives. `args` holds each argument's cost and type.
pub fn call(function: &str, target: Option<&Ty>, args: &[(u64, Ty)]) -> (u64, Ty) {
    let arg = |i: usize| args.get(i).map_or(Ty::Dyn, |(_, t)| t.clone());
    let size = |i: usize| args.get(i).map_or(UNKNOWN, |(_, t)| t.size());
    let cost = |i: usize| args.get(i).map_or(0, |(c, _)| *c);
    // The string a member or global string function works on.
    let subject = || target.map_or_else(|| size(0), Ty::size);
    let pattern = || if target.is_some() { size(0) } else { size(1) };
    match function {
        // Both sides at most; the short circuit is not counted on.
        "_&&_" | "_||_" => (cost(0).saturating_add(cost(1)), Ty::Scalar),
        "_?_:_" => {
            let branch = cost(1).max(cost(2));
            (cost(0).saturating_add(branch), arg(1).union(arg(2)))
        }
        // Equality and ordering: scalars cost 1, strings, bytes, lists and
        // maps a tenth of the smaller side.
        "_==_" | "_!=_" | "_<_" | "_<=_" | "_>_" | "_>=_" => {
            let opaque = |t: &Ty| matches!(t, Ty::Quantity | Ty::Opaque);
            let c = if opaque(&arg(0)) && opaque(&arg(1)) {
                1
            } else {
                factor(size(0).min(size(1)), TRAVERSAL)
            };
            (c, Ty::Scalar)
        }
        "@in" => match arg(1) {
            Ty::Map(..) => (1, Ty::Scalar),
            list => (list.size(), Ty::Scalar),
        },
        "_+_" => match (arg(0), arg(1)) {
            (Ty::Str(a), Ty::Str(b)) => {
                let n = a.saturating_add(b);
                (factor(n, TRAVERSAL), Ty::Str(n))
            }
            (Ty::Bytes(a), Ty::Bytes(b)) => {
                let n = a.saturating_add(b);
                (factor(n, TRAVERSAL), Ty::Bytes(n))
            }
            (Ty::List(a, n), Ty::List(b, m)) => {
                (1, Ty::List(Box::new(a.union(*b)), n.saturating_add(m)))
            }
            (Ty::Scalar, Ty::Scalar) => (1, Ty::Scalar),
            // Either may be a string or a list: the dearer, size unknown.
            (a, b) => (
                factor(a.size().saturating_add(b.size()), TRAVERSAL).max(1),
                Ty::Dyn,
            ),
        },
        "_-_" | "_*_" | "_/_" | "_%_" | "-_" | "!_" | "@not_strictly_false" | "size" => {
            (1, Ty::Scalar)
        }
        "_[_]" | "_[?_]" => (1, arg(0).value()),
        // `a.?f`: its type is the field's, which the walk knows.
        "_?._" => (1, Ty::Dyn),
        "startsWith" | "endsWith" => (factor(pattern(), TRAVERSAL), Ty::Scalar),
        "contains" => (
            factor(subject(), TRAVERSAL).saturating_mul(factor(pattern(), TRAVERSAL)),
            Ty::Scalar,
        ),
        "matches" | "find" | "findAll" => {
            let on = subject().saturating_add(1);
            let c = factor(on, TRAVERSAL).saturating_mul(factor(pattern(), REGEX));
            let ty = match function {
                "find" => Ty::Str(subject()),
                "findAll" => Ty::List(Box::new(Ty::Str(subject())), subject()),
                _ => Ty::Scalar,
            };
            (c, ty)
        }
        "lowerAscii" | "upperAscii" | "substring" | "trim" => {
            (factor(subject(), TRAVERSAL), Ty::Str(subject()))
        }
        "replace" => (factor(subject(), 0.2), Ty::Dyn),
        "split" => {
            let n = subject();
            (factor(n, 0.2), Ty::List(Box::new(Ty::Str(n)), n))
        }
        "indexOf" | "lastIndexOf" => (factor(subject(), TRAVERSAL), Ty::Scalar),
        "join" => (factor(subject(), TRAVERSAL).max(1), Ty::Str(UNKNOWN)),
        "string" | "bytes" => {
            let from = target.cloned().unwrap_or_else(|| arg(0));
            let c = match from {
                Ty::Str(n) | Ty::Bytes(n) => factor(n, TRAVERSAL),
                _ => 1,
            };
            let ty = match (function, from) {
                ("string", Ty::Str(n) | Ty::Bytes(n)) => Ty::Str(n),
                ("bytes", Ty::Str(n) | Ty::Bytes(n)) => Ty::Bytes(n),
                _ => Ty::Dyn,
            };
            (c, ty)
        }
        "dyn" => (1, target.cloned().unwrap_or_else(|| arg(0))),
        // Kubernetes' quantity and semver functions: 1 each (cel-go
        // v0.26 on, the global ones included).
        "quantity" => (1, Ty::Quantity),
        "add" | "sub" => (1, Ty::Quantity),
        "semver" => (1, Ty::Opaque),
        "isQuantity" | "isSemver" | "isGreaterThan" | "isLessThan" | "compareTo" | "major"
        | "minor" | "patch" | "sign" | "asInteger" | "isInteger" | "asApproximateFloat" | "int"
        | "uint" | "double" | "bool" | "type" | "hasValue" => (1, Ty::Scalar),
        "orValue" | "value" | "or" => (1, target.cloned().unwrap_or(Ty::Dyn)),
        _ => (1, Ty::Dyn),
    }
}
