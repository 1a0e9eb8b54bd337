//! What a written object goes through before the store, in
//! kube-apiserver's order: the part this request may not write taken from
//! the stored object, the built-in kind's defaults (`defaults`) and what
//! its registry sets on create (`created`), metadata and the kind's own
//! rules validated (`kind_rules`), the CRD's schema applied
//! (pruning, defaults, validation and CEL rules), a built-in kind decoded
//! by its type, unknown fields handled as `fieldValidation` says, and the
//! field manager's managedFields recorded.

use super::{Refused, Req};
use crate::journal::WriteRecord;
use crate::store::Apply;
use crate::{
    patch::managed, registry::created, registry::defaults, registry::kind_rules,
    registry::priorities, registry::resource_values, registry::schema, registry::typed,
    registry::validate, status,
};
use axum::response::Response;
use serde_json::Value;

/// How a write's unknown fields are handled (`fieldValidation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

impl Req<'_> {
    /// Kubernetes 1.36 (`DRAResourceClaimGranularStatusAuthorization`,
    /// beta and on): a ResourceClaim status write that changes
    /// `status.allocation` or `status.reservedFor` is also authorized as
    /// the request's verb on the synthetic subresource
    /// `resourceclaims/binding`, cluster-wide
    /// (`pkg/registry/resource/utils.go` `AuthorizedForBinding`). The
    /// server records that second request as RBAC would judge it.
    fn authorize_binding(&self, old: Option<&Value>, new: &Value) {
        if self.store_kind() != "ResourceClaim" || !self.t.is_status() {
            return;
        }
        let part = |o: Option<&Value>, f: &str| o.map_or(Value::Null, |o| o["status"][f].clone());
        let changed = ["allocation", "reservedFor"]
            .iter()
            .any(|f| part(old, f) != part(Some(new), f));
        if changed {
            self.s.audit_request(crate::auth::audit::Access {
                user: self.user.to_string(),
                user_agent: self.user_agent.to_string(),
                verb: self.verb.to_string(),
                group: "resource.k8s.io".into(),
                resource: "resourceclaims/binding".into(),
                namespace: None,
            });
        }
    }

    /// Prepares `obj` for the store, or refuses it (400 for a body that
    /// cannot be decoded or strict unknown fields, 422 for an invalid
    /// one). The warnings to send with the answer. `applied`: a
    /// server-side apply, which records its own managedFields.
    pub(super) fn prepare(
        &self,
        name: &str,
        obj: &mut Value,
        applied: bool,
    ) -> Result<Vec<String>, Refused> {
        let mode = self.field_validation(name)?;
        let old = self.s.store.get(self.store_kind(), self.ns(), name);
        self.keep_what_it_may_not_write(old.as_ref(), obj);
        defaults::apply(self.store_kind(), obj);
        match &old {
            None => created::prepare(&self.s.store, self.store_kind(), obj),
            Some(old) => created::prepare_update(&self.s.store, self.store_kind(), old, obj),
        }
        self.priority_admission(name, old.as_ref(), obj)?;
        let mut causes = validate::metadata(&self.t.resource, obj);
        causes.extend(kind_rules::check(self.store_kind(), old.as_ref(), obj));
        self.authorize_binding(old.as_ref(), obj);
        let crd_schema = self
            .served
            .custom(self.t.resource.kind)
            .and_then(|c| c.schema.as_ref());
        let sent = crd_schema.is_some().then(|| obj.clone());
        causes.extend(schema::admit(crd_schema, obj, old.as_ref()));
        let mut unknown = Vec::new();
        if let Some(sent) = &sent {
            schema::dropped(sent, obj, "", &mut unknown);
        }
        unknown.extend(self.decode_built_in(name, obj)?);
        if mode == FieldValidation::Strict && !unknown.is_empty() {
            let fields: Vec<String> = unknown
                .iter()
                .map(|f| format!("unknown field {f:?}"))
                .collect();
            let why = format!("strict decoding error: {}", fields.join(", "));
            return Err(Box::new(self.cannot_handle(name, &why)));
        }
        if !causes.is_empty() {
            return Err(Box::new(self.refuse_invalid(name, old.is_some(), &causes)));
        }
        if !applied {
            let sub = if self.t.is_status() { "status" } else { "" };
            let api = self.t.resource.api_version();
            managed::record_update(old.as_ref(), obj, self.manager, sub, &api);
        }
        Ok(match mode {
            FieldValidation::Warn => unknown
                .iter()
                .map(|f| format!("unknown field {f:?}"))
                .collect(),
            _ => Vec::new(),
        })
    }

    /// The Priority admission plugin on an update of a pod (what it left
    /// out of its priority is kept) and on a PriorityClass's write (one
    /// global default at most: 403).
    fn priority_admission(
        &self,
        name: &str,
        old: Option<&Value>,
        obj: &mut Value,
    ) -> Result<(), Refused> {
        match (self.store_kind(), old) {
            ("Pod", Some(old)) => priorities::keep_on_update(old, obj),
            ("PriorityClass", old) => {
                priorities::admit_class(&self.s.store, old.is_some(), obj)
                    .map_err(|why| Box::new(self.forbidden(name, &why)))?;
            }
            _ => {}
        }
        Ok(())
    }

    /// `fieldValidation`: Warn unless the query says otherwise.
    fn field_validation(&self, name: &str) -> Result<FieldValidation, Refused> {
        match self.q.get("fieldValidation").map(String::as_str) {
            None | Some("" | "Warn") => Ok(FieldValidation::Warn),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some(v) => {
                let msg = format!(
                    "fieldValidation: Unsupported value: {v:?}: supported values: \"Ignore\", \"Strict\", \"Warn\""
                );
                Err(Box::new(status(
                    400,
                    "BadRequest",
                    &msg,
                    Some(name),
                    self.plural(),
                )))
            }
        }
    }

    /// A kind with a status subresource: a write to the main resource
    /// keeps the stored status, a write to `/status` keeps everything else.
    fn keep_what_it_may_not_write(&self, old: Option<&Value>, obj: &mut Value) {
        if !self.t.resource.status {
            return;
        }
        let set_status = |obj: &mut Value, status: Option<Value>| match status {
            Some(st) => obj["status"] = st,
            None => {
                obj.as_object_mut().map(|m| m.remove("status"));
            }
        };
        // nodeStrategy.PrepareForCreate: "Nodes allow *all* fields,
        // including status, to be set on create" (the kubelet registers
        // its node with its capacity).
        if old.is_none() && self.store_kind() == "Node" {
            return;
        }
        if !self.t.is_status() {
            set_status(obj, old.and_then(|o| o.get("status")).cloned());
        } else if let Some(o) = old {
            let status = obj.get("status").cloned();
            let meta = obj["metadata"].clone();
            *obj = o.clone();
            obj["metadata"] = meta;
            set_status(obj, status);
        }
    }

    /// A built-in kind, decoded by its type: what the type lacks is
    /// dropped and answered as unknown fields; a body it cannot decode is
    /// refused.
    fn decode_built_in(&self, name: &str, obj: &mut Value) -> Result<Vec<String>, Refused> {
        if let Some(why) = resource_values::malformed(self.store_kind(), obj) {
            return Err(Box::new(self.cannot_handle(name, &why)));
        }
        match typed::check(self.store_kind(), obj) {
            typed::Decoded::Untyped => Ok(Vec::new()),
            typed::Decoded::Invalid(why) => Err(Box::new(self.cannot_handle(name, &why))),
            typed::Decoded::Unknown(fields) => {
                for f in &fields {
                    schema::remove_path(obj, f);
                }
                Ok(fields)
            }
        }
    }

    /// A 422 with its causes, logged as a refused write (not a dry run's).
    fn refuse_invalid(&self, name: &str, exists: bool, causes: &[validate::Cause]) -> Response {
        if self.how == Apply::Commit {
            let what: Vec<String> = validate::distinct(causes)
                .iter()
                .map(|c| c.field.clone())
                .collect();
            let op = if exists { "update" } else { "create" };
            let w = WriteRecord::of(self.user, self.t, op, name.to_string());
            self.s
                .log_write(w.refused(format!("invalid: {}", what.join(", ")), true));
        }
        validate::invalid(&self.t.resource, name, causes)
    }

    /// An admission plugin's refusal (`admission.NewForbidden`): 403,
    /// `<resource> "<name>" is forbidden: <why>`.
    pub(super) fn forbidden(&self, name: &str, why: &str) -> Response {
        let r = &self.t.resource;
        let resource = match r.group {
            "" => r.plural.to_string(),
            g => format!("{}.{g}", r.plural),
        };
        let msg = format!("{resource} {name:?} is forbidden: {why}");
        crate::answers::object_status(403, "Forbidden", &msg, name, r)
    }

    /// A body the decoder refuses, as kube-apiserver words it (400).
    pub(super) fn cannot_handle(&self, name: &str, why: &str) -> Response {
        let r = &self.t.resource;
        let msg = format!(
            "{} in version {:?} cannot be handled as a {}: {why}",
            r.kind, r.version, r.kind
        );
        status(400, "BadRequest", &msg, Some(name), self.plural())
    }
}
