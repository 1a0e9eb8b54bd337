//! kubectl's connection flags, as the kubectl plugin's commands take them
//! (`kubectl gpu-claims status --context prod`): kubectl passes a
//! plugin's flags through rather than reading them itself.

use crate::clients::Clients;
use kube::config::{KubeConfigOptions, Kubeconfig};
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct KubeArgs {
    /// The kubeconfig to read (default: $KUBECONFIG, ~/.kube/config, or
    /// the pod's service account).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current-context).
    #[arg(long)]
    pub context: Option<String>,
    /// The kubeconfig cluster to use (default: the context's).
    #[arg(long)]
    pub cluster: Option<String>,
    /// The kubeconfig user to use (default: the context's).
    #[arg(long)]
    pub user: Option<String>,
}

impl KubeArgs {
    fn options(&self) -> KubeConfigOptions {
        KubeConfigOptions {
            context: self.context.clone(),
            cluster: self.cluster.clone(),
            user: self.user.clone(),
        }
    }

    /// The config these flags name; None: none named and no kubeconfig
    /// given, so whatever `kube::Config::infer` finds (in a pod, its
    /// service account).
    pub async fn config(&self) -> anyhow::Result<Option<kube::Config>> {
        let options = self.options();
        let named =
            options.context.is_some() || options.cluster.is_some() || options.user.is_some();
        let config = match &self.kubeconfig {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
                let kc = Kubeconfig::from_yaml(&text)
                    .map_err(|e| crate::Error::Kubeconfig(Box::new(e)))?;
                kube::Config::from_custom_kubeconfig(kc, &options).await
            }
            None if !named => return Ok(None),
            None => kube::Config::from_kubeconfig(&options).await,
        };
        Ok(Some(
            config.map_err(|e| crate::Error::Kubeconfig(Box::new(e)))?,
        ))
    }

    /// The clients these flags name, each request under `request_timeout`.
    pub async fn connect(&self, request_timeout: Duration) -> anyhow::Result<Clients> {
        Ok(match self.config().await? {
            Some(config) => Clients::new(config, request_timeout)?,
            None => Clients::infer(request_timeout).await?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        kube: KubeArgs,
    }

    const TWO_CONTEXTS: &str = "apiVersion: v1\nkind: Config\n\
        clusters:\n- name: a\n  cluster: {server: 'https://a.example:6443'}\n\
        - name: b\n  cluster: {server: 'https://b.example:6443'}\n\
        users:\n- name: u\n  user: {token: t}\n\
        contexts:\n- name: ca\n  context: {cluster: a, user: u}\n\
        - name: cb\n  context: {cluster: b, user: u}\n\
        current-context: ca\n";

    /// kubectl's flags pick the context, or the cluster, as kubectl's do.
    #[tokio::test]
    async fn the_context_and_cluster_flags_pick_what_kubectl_would() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config");
        std::fs::write(&path, TWO_CONTEXTS).unwrap();
        let p = path.to_str().unwrap();
        for (args, server) in [
            (vec!["x", "--kubeconfig", p], "a.example"),
            (vec!["x", "--kubeconfig", p, "--context", "cb"], "b.example"),
            (vec!["x", "--kubeconfig", p, "--cluster", "b"], "b.example"),
        ] {
            let cli = Cli::parse_from(&args);
            let config = cli.kube.config().await.unwrap().unwrap();
            assert_eq!(config.cluster_url.host(), Some(server), "{args:?}");
        }
        let cli = Cli::parse_from(["x", "--kubeconfig", p, "--context", "nosuch"]);
        let e = cli.kube.config().await.err().unwrap();
        assert!(format!("{e:#}").contains("nosuch"), "{e:#}");
    }
}
