//! An error as a platform engineer reads it, on the command line: each
//! cause once, and an API server's refusal in its own words (`nodes
//! "nosuch" not found`). kube's `Error::Api` displays its Status's Rust
//! Debug form after the message, which no one should have to read.

/// The error's causes, outermost first, joined by ": ". An API server's
/// answer ends the chain with its message; a cause that the context
/// before it already says (kube's errors repeat their source in their
/// own text) is not said again.
pub fn words(e: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in e.chain() {
        let api = match cause.downcast_ref::<kube::Error>() {
            Some(e @ kube::Error::Api(_)) => Some(kube(e)),
            _ => None,
        };
        let text = api.clone().unwrap_or_else(|| cause.to_string());
        if !parts.last().is_some_and(|p| p.contains(&text)) {
            parts.push(text);
        }
        if api.is_some() {
            break;
        }
    }
    parts.join(": ")
}

/// A kube error in words to put in a message: an API server's answer as
/// its message.
pub fn kube(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        e => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn not_found() -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status::failure(
            "nodes \"nosuch\" not found",
            "NotFound",
        )))
    }

    #[test]
    fn an_api_servers_refusal_is_said_in_its_own_words_once() {
        let e = anyhow::Error::new(not_found()).context("reading node nosuch");
        assert_eq!(words(&e), "reading node nosuch: nodes \"nosuch\" not found");
        let io = std::io::Error::other("no such file");
        let e = anyhow::Error::new(io).context("reading /x: no such file");
        assert_eq!(words(&e), "reading /x: no such file", "said once");
        // A context that says its cause in the middle, as kube's do.
        let io = std::io::Error::other("failed to read kubeconfig");
        let e =
            anyhow::Error::new(io).context("no config: (failed to read kubeconfig), in-cluster");
        assert_eq!(
            words(&e),
            "no config: (failed to read kubeconfig), in-cluster"
        );
    }
}
