//! The checks every write to a resource meets whatever it writes, as a
//! layer after the caller's (kube-apiserver's filter chain authorizes
//! after it authenticates): anonymous writes refused on a server not bound
//! to loopback, and the faults a test injects (logged as refused writes).

use super::caller::Caller;
use super::{Refused, is_write};
use crate::faults::Injected;
use crate::{ApiServer, Target, status};
use axum::extract::{Request, State};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::Response;
use std::sync::Arc;

/// The write's guards, in the order kube-apiserver's filters would meet
/// them: the anonymous caller off loopback (authorization), then an
/// injected fault. Faults go to writes that would reach the store: a
/// read-only kind's write is refused (405) without one.
pub(super) async fn guard_writes(
    State(s): State<Arc<ApiServer>>,
    req: Request,
    next: Next,
) -> Response {
    if is_write(req.method())
        && let Some(caller) = resource_caller(&req)
    {
        let method = req.method();
        if let Err(r) = refuse_anonymous(&s, &caller.user, method) {
            return *r;
        }
        if let Some(t) = caller.target.as_deref().filter(|t| !t.resource.read_only)
            && let Err(r) = inject(&s, &caller.user, t, method)
        {
            return *r;
        }
    }
    next.run(req).await
}

/// The caller of a request to a resource (None for health, OpenAPI v2, or
/// a path that names none), as the caller's layer left it.
fn resource_caller(req: &Request) -> Option<&Caller> {
    req.extensions()
        .get::<Caller>()
        .filter(|c| c.target.is_some())
}

/// Anonymous writes are a convenience on loopback only: bound to any
/// other address, anyone who can reach the port could write anything.
fn refuse_anonymous(s: &ApiServer, user: &str, method: &Method) -> Result<(), Refused> {
    if user != crate::ANONYMOUS || s.addr().ip().is_loopback() {
        return Ok(());
    }
    let msg = format!(
        "forbidden: User \"{}\" cannot {} on a server not bound to loopback; use a kubeconfig with a token",
        crate::ANONYMOUS,
        method.as_str().to_lowercase()
    );
    Err(Box::new(status(403, "Forbidden", &msg, None, "")))
}

/// A fault injected into a write, logged as a refused write. A 409 to a
/// create means AlreadyExists on a real server, never a stale version, so
/// injected conflicts go to updates and patches only.
fn inject(s: &ApiServer, user: &str, t: &Target, method: &Method) -> Result<(), Refused> {
    let Some(f) = s
        .faults()
        .roll(s.dice.next())
        .filter(|f| *f != Injected::Conflict || matches!(*method, Method::PUT | Method::PATCH))
    else {
        return Ok(());
    };
    let plural = t.resource.plural;
    let op = match *method {
        Method::POST => "create",
        Method::DELETE => "delete",
        _ => "update",
    };
    let w = crate::journal::WriteRecord::of(user, t, op, t.name.clone().unwrap_or_default());
    s.log_write(w.refused(format!("injected {f:?}"), false));
    Err(Box::new(match f {
        Injected::Conflict => status(
            409,
            "Conflict",
            "injected: the object has been modified; please apply your changes to the latest version and try again",
            t.name.as_deref(),
            plural,
        ),
        Injected::Throttle => {
            let mut r = status(
                429,
                "TooManyRequests",
                "injected: too many requests",
                None,
                plural,
            );
            r.headers_mut().insert(header::RETRY_AFTER, 1.into());
            r
        }
        Injected::ServerError => status(
            500,
            "InternalError",
            "injected: etcd timed out",
            None,
            plural,
        ),
    }))
}
