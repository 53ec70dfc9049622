use std::path::PathBuf;

/// What went wrong while starting or using the test control plane.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("could not build or find kube-testenv: {0}")]
    Binary(String),
    #[error("could not start the control plane: {0}")]
    Start(String),
    #[error("no kubeconfig for user {0:?}; known users are set by ControlPlaneOptions::user")]
    UnknownUser(String),
    #[error(
        "this control plane presents no webhook client certificate (ControlPlaneOptions::webhook_client_cert)"
    )]
    NoWebhookClientCert,
    #[error("reading {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    #[error("kube: {0}")]
    Kube(#[from] kube::Error),
    #[error("timed out: {0}")]
    Timeout(String),
    #[error("manifest: {0}")]
    Manifest(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
