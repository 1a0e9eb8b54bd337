//! The kinds of request the server has served, as RBAC would judge them
//! (a test's check that the controller's ClusterRole grants what it uses):
//! bounded, as anyone may ask for anything: at most `AUDIT_MAX` kinds and
//! `AUDIT_BYTES` of their strings, user agents cut to 256 bytes, a
//! namespace no namespace could be named recorded as such, and a path that
//! is no resource recorded only when it is one the server serves
//! (discovery, OpenAPI, health).

use std::collections::BTreeSet;
use std::sync::Mutex;

const AUDIT_MAX: usize = 4096;
const AUDIT_BYTES: usize = 1 << 20;

/// One kind of request, in RBAC's terms.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Access {
    /// Who asked (`system:anonymous` without a token).
    pub user: String,
    pub user_agent: String,
    /// get, list, watch, create, update, patch, delete; for a path that is
    /// no resource (discovery), the HTTP method.
    pub verb: String,
    pub group: String,
    /// The plural, with `/status` for the subresource; for a path that is
    /// no resource, the path.
    pub resource: String,
    pub namespace: Option<String>,
}

/// The record: the kinds, and the bytes their strings take.
#[derive(Default)]
pub(crate) struct Audit(Mutex<(BTreeSet<Access>, usize)>);

impl Audit {
    pub(crate) fn kinds(&self) -> Vec<Access> {
        let g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        g.0.iter().cloned().collect()
    }

    pub(crate) fn record(&self, mut a: Access) {
        let mut cut = a.user_agent.len().min(256);
        while !a.user_agent.is_char_boundary(cut) {
            cut -= 1;
        }
        a.user_agent.truncate(cut);
        if a.group.is_empty() && a.resource.starts_with('/') && !served_path(&a.resource) {
            a.resource = "(a path the server does not serve)".into();
        }
        if let Some(ns) = &mut a.namespace
            && ns.len() > 63
        {
            *ns = "(no namespace's name)".into();
        }
        let size = [&a.user, &a.user_agent, &a.verb, &a.group, &a.resource]
            .iter()
            .map(|s| s.len())
            .sum::<usize>()
            + a.namespace.as_ref().map_or(0, String::len);
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let (set, bytes) = &mut *g;
        if set.len() < AUDIT_MAX && *bytes + size <= AUDIT_BYTES && !set.contains(&a) {
            set.insert(a);
            *bytes += size;
        }
    }
}

/// The paths that are no resource the server answers: health, version,
/// discovery and OpenAPI.
fn served_path(path: &str) -> bool {
    matches!(
        path,
        "/healthz" | "/livez" | "/readyz" | "/version" | "/api" | "/apis" | "/openapi/v2"
    ) || path.starts_with("/openapi/v3")
        || (path.starts_with("/api/") || path.starts_with("/apis/")) && path.len() <= 256
}
