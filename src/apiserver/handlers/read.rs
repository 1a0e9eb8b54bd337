//! The reads: get, and list with selectors, `limit` and `continue`.

use super::{Req, meta_str, ok};
use crate::apiserver::select::Selector;
use crate::apiserver::{events, status, table};
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

impl Req<'_> {
    pub(super) fn list(&self, as_table: bool) -> Response {
        let sel = match Selector::for_resource(
            self.q.get("labelSelector").map(String::as_str),
            self.q.get("fieldSelector").map(String::as_str),
            &self.t.resource,
        ) {
            Ok(s) => s,
            Err(e) => return status(400, "BadRequest", &e, None, self.plural()),
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
        let (mut page, more, now) = self.s.store.list_page(
            self.store_kind(),
            self.t.namespace.as_deref(),
            after
                .as_ref()
                .map(|(_, ns, name)| (ns.as_str(), name.as_str())),
            limit,
            |o| sel.matches(o),
        );
        for o in &mut page {
            *o = events::served(&self.t.resource, std::mem::take(o));
        }
        // Later pages report the first page's version, so that a watch
        // from it replays whatever changed while the pages were read.
        let rv = after.as_ref().map_or(now, |(rv, _, _)| *rv);
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if more && let Some(last) = page.last() {
            meta["continue"] =
                continue_token(rv, meta_str(last, "namespace"), meta_str(last, "name")).into();
        }
        if as_table {
            return ok(StatusCode::OK, table::table(&self.t.resource, &page, meta));
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

    pub(super) fn get(&self, n: &str, as_table: bool) -> Response {
        let got = self.s.store.get(self.store_kind(), self.ns(), n);
        match got.map(|o| events::served(&self.t.resource, o)) {
            Some(o) if as_table => ok(
                StatusCode::OK,
                table::table(&self.t.resource, &[o], json!({})),
            ),
            Some(o) => ok(StatusCode::OK, o),
            None => self.not_found(n),
        }
    }
}
