//! Who calls: bearer tokens as a real API
//! server's token authenticator knows them (one per replica of the
//! controller, so that the server can tell who made each write, and when
//! in the Lease's history), and the network between a caller and the
//! server, which a test can cut (a partition).

use crate::{ApiServer, status};
use axum::http::{HeaderMap, header};
use axum::response::Response;
use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

/// A request without credentials (the tests' and the demo's kubeconfig).
pub const ANONYMOUS: &str = "system:anonymous";

/// The audience of the API server's own tokens (kube-apiserver's
/// `--api-audiences` as kind and kubeadm set it).
pub const API_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

#[derive(Default)]
pub(crate) struct Identities {
    /// Token to user.
    tokens: Mutex<HashMap<String, String>>,
    /// The audiences of the tokens a TokenRequest was given (others are
    /// for the API server, `API_AUDIENCE`).
    audiences: Mutex<HashMap<String, Vec<String>>>,
    /// The users cut off the server.
    cut: tokio::sync::watch::Sender<BTreeSet<String>>,
}

impl ApiServer {
    /// A user the server knows by a bearer token: the token.
    pub fn add_user(&self, name: &str) -> String {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let token = format!("{name}.{nanos:x}");
        self.identities
            .tokens
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(token.clone(), name.to_string());
        token
    }

    /// A token for `user` (a service account's, from a TokenRequest) that
    /// is valid for `audiences`.
    pub(crate) fn issue_token(&self, user: &str, audiences: Vec<String>) -> String {
        let token = self.add_user(user);
        self.identities
            .audiences
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(token.clone(), audiences);
        token
    }

    /// The audiences a token is valid for.
    pub(crate) fn audiences_of_token(&self, token: &str) -> Vec<String> {
        self.identities
            .audiences
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(token)
            .cloned()
            .unwrap_or_else(|| vec![API_AUDIENCE.to_string()])
    }

    /// The user a bearer token was given to (a TokenReview's answer).
    pub(crate) fn user_of_token(&self, token: &str) -> Option<String> {
        self.identities
            .tokens
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(token)
            .cloned()
    }

    /// A kubeconfig for a new user `name`, who authenticates with its own token.
    pub fn kubeconfig_for(&self, name: &str) -> String {
        let token = self.add_user(name);
        crate::kubeconfig(&self.url())
            .replace("  user: {}\n", &format!("  user:\n    token: {token}\n"))
    }

    /// Cuts `user` off the server (its requests hang and are never
    /// applied; its watches end) or lets it through again.
    pub fn partition(&self, user: &str, cut: bool) {
        self.identities.cut.send_modify(|s| {
            if cut {
                s.insert(user.to_string());
            } else {
                s.remove(user);
            }
        });
    }

    fn is_cut(&self, user: &str) -> bool {
        self.identities.cut.borrow().contains(user)
    }

    /// The caller, from its bearer token: 401 for a token nobody was given.
    #[allow(clippy::result_large_err)]
    pub(crate) fn authenticate(&self, headers: &HeaderMap) -> Result<String, Response> {
        let Some(auth) = headers.get(header::AUTHORIZATION) else {
            return Ok(ANONYMOUS.to_string());
        };
        let token = auth
            .to_str()
            .ok()
            .and_then(|a| a.strip_prefix("Bearer "))
            .unwrap_or_default();
        let tokens = self
            .identities
            .tokens
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        // A token a TokenRequest gave for other audiences is not one for
        // the API server.
        let for_api = self
            .audiences_of_token(token)
            .iter()
            .any(|a| a == API_AUDIENCE);
        match tokens.get(token) {
            Some(user) if for_api => Ok(user.clone()),
            _ => Err(status(401, "Unauthorized", "Unauthorized", None, "")),
        }
    }

    /// Holds a request of a user who is cut off for as long as the cut
    /// lasts, and then refuses it: a request lost in a partition is never
    /// applied (its client gave up on it long before).
    #[allow(clippy::result_large_err)]
    pub(crate) async fn through_partition(&self, user: &str) -> Result<(), Response> {
        if !self.is_cut(user) {
            return Ok(());
        }
        self.healed(user).await;
        Err(status(
            503,
            "ServiceUnavailable",
            "the request was lost in a network partition",
            None,
            "",
        ))
    }

    async fn healed(&self, user: &str) {
        let mut rx = self.identities.cut.subscribe();
        let _ = rx.wait_for(|s| !s.contains(user)).await;
    }

    /// Resolves when `user` is cut off: its watch streams end then.
    pub(crate) fn cut_off(&self, user: &str) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.identities.cut.subscribe();
        let user = user.to_string();
        async move {
            if rx.wait_for(|s| s.contains(&user)).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}
