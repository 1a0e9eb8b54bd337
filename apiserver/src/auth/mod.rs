//! Who calls and what they may do: callers and what each wrote
//! (`identity`), RBAC's authorizer (`rbac`), TokenReview and
//! SubjectAccessReview (`reviews`), and the kinds of request served, as
//! RBAC would judge them (`audit`).

pub(crate) mod audit;
pub(crate) mod identity;
pub(crate) mod rbac;
pub(crate) mod reviews;
