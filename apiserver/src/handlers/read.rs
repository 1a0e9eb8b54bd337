//! The reads: get, and list with selectors, `limit` and `continue`.

use super::{Req, meta_str, ok};
use crate::{events, status, table};
use axum::http::StatusCode;
use axum::response::Response;
use base64::Engine;
use serde_json::json;

/// A list page's position: the store version of the first page and the
/// last key returned.
fn continue_token(rv: u64, ns: &str, name: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{rv}/{ns}/{name}"))
}

fn read_token(token: &str) -> Option<(u64, String, String)> {
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .ok()?;
    let s = String::from_utf8(raw).ok()?;
    let mut it = s.splitn(3, '/');
    Some((
        it.next()?.parse().ok()?,
        it.next()?.to_string(),
        it.next()?.to_string(),
    ))
}

/// One page of objects in (namespace, name) order after `after`.
fn page_of(
    all: Vec<serde_json::Value>,
    after: Option<&(u64, String, String)>,
    limit: usize,
    keep: impl Fn(&serde_json::Value) -> bool,
) -> (Vec<serde_json::Value>, bool) {
    let mut rest = all.into_iter().filter(|o| {
        after.is_none_or(|(_, ns, name)| {
            (meta_str(o, "namespace"), meta_str(o, "name")) > (ns.as_str(), name.as_str())
        }) && keep(o)
    });
    let page: Vec<_> = rest.by_ref().take(limit).collect();
    let more = rest.next().is_some();
    (page, more)
}

/// A continue token whose version the history no longer reaches.
fn expired_continue(plural: &str) -> Response {
    status(
        410,
        "Expired",
        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
        None,
        plural,
    )
}

impl Req<'_> {
    pub(super) fn list(&self, as_table: bool) -> Response {
        let sel = match self.selector() {
            Ok(s) => s,
            Err(r) => return *r,
        };
        let after = match self.q.get("continue").filter(|c| !c.is_empty()) {
            None => None,
            Some(c) => match read_token(c) {
                Some(t) => Some(t),
                None => {
                    return status(
                        400,
                        "BadRequest",
                        "invalid continue token",
                        None,
                        self.plural(),
                    );
                }
            },
        };
        let limit = self
            .q
            .get("limit")
            .and_then(|l| l.parse::<usize>().ok())
            .filter(|l| *l > 0)
            .unwrap_or(usize::MAX);
        let exact = match self.exact_version(after.is_some()) {
            Ok(e) => e,
            Err(r) => return *r,
        };
        let now = self.s.store.resource_version();
        // A later page is read at its first page's version, as is a list
        // at an exact version: today's objects with later changes rolled back.
        let at = after.as_ref().map(|(rv, _, _)| *rv).or(exact);
        let (mut page, more) =
            match at.filter(|rv| *rv < now) {
                None => {
                    let (page, more, _) = self.s.store.list_page(
                        self.store_kind(),
                        self.t.namespace.as_deref(),
                        after
                            .as_ref()
                            .map(|(_, ns, name)| (ns.as_str(), name.as_str())),
                        limit,
                        |o| sel.matches(o),
                    );
                    (page, more)
                }
                Some(rv) => match self.s.store.objects_at(
                    self.store_kind(),
                    self.t.namespace.as_deref(),
                    rv,
                ) {
                    Ok(all) => page_of(all, after.as_ref(), limit, |o| sel.matches(o)),
                    Err(_) if after.is_some() => return expired_continue(self.plural()),
                    Err(_) => {
                        let msg = format!("too old resource version: {rv} ({now})");
                        return status(410, "Expired", &msg, None, self.plural());
                    }
                },
            };
        for o in &mut page {
            *o = events::served(&self.t.resource, std::mem::take(o));
        }
        let rv = at.unwrap_or(now);
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if more && let Some(last) = page.last() {
            meta["continue"] =
                continue_token(rv, meta_str(last, "namespace"), meta_str(last, "name")).into();
        }
        if as_table {
            return ok(
                StatusCode::OK,
                table::table(&self.t.resource, self.columns().as_deref(), &page, meta),
            );
        }
        ok(
            StatusCode::OK,
            json!({
                "kind": format!("{}List", self.t.resource.kind),
                "apiVersion": self.t.resource.api_version(),
                "metadata": meta,
                "items": page,
            }),
        )
    }

    /// `resourceVersionMatch`, checked as upstream's ListOptions validation
    /// does: `Exact` reads at `resourceVersion`; `NotOlderThan` (and none)
    /// reads the newest, which is never older.
    fn exact_version(&self, continuing: bool) -> Result<Option<u64>, Box<Response>> {
        let Some(m) = self.q.get("resourceVersionMatch").filter(|m| !m.is_empty()) else {
            return Ok(None);
        };
        let rv = self.q.get("resourceVersion").filter(|r| !r.is_empty());
        let invalid = |msg: String| {
            Err(Box::new(status(
                422,
                "Invalid",
                &format!("ListOptions.meta.k8s.io \"\" is invalid: {msg}"),
                None,
                self.plural(),
            )))
        };
        if continuing {
            return invalid("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided".into());
        }
        let Some(rv) = rv else {
            return invalid("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided".into());
        };
        match m.as_str() {
            "NotOlderThan" => Ok(None),
            "Exact" if rv == "0" => invalid("resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"".into()),
            "Exact" => match rv.parse() {
                Ok(v) => Ok(Some(v)),
                Err(_) => Err(Box::new(status(
                    400,
                    "BadRequest",
                    &format!("invalid resource version {rv:?}"),
                    None,
                    self.plural(),
                ))),
            },
            other => invalid(format!(
                "resourceVersionMatch: Unsupported value: {other:?}: supported values: \"Exact\", \"NotOlderThan\", \"\""
            )),
        }
    }

    pub(super) fn get(&self, n: &str, as_table: bool) -> Response {
        let got = self.s.store.get(self.store_kind(), self.ns(), n);
        match got.map(|o| events::served(&self.t.resource, o)) {
            Some(o) if as_table => ok(
                StatusCode::OK,
                table::table(&self.t.resource, self.columns().as_deref(), &[o], json!({})),
            ),
            Some(o) => ok(StatusCode::OK, o),
            None => self.not_found(n),
        }
    }
}
