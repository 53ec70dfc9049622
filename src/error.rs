//! The controllers' error type.

/// What can go wrong while reconciling. Problems with a user's objects (a missing template, a
/// bad duration) are not errors: they become conditions on the object. These are failures of
/// the machinery, retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API error: {0}")]
    Kube(#[from] kube::Error),
    #[error("could not serialise {what}: {source}")]
    Serialization {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error("{0} has no {1}; the apiserver always sets it")]
    MissingMetadata(String, &'static str),
}

impl Error {
    /// Every [`Error::metric_label`]: the series oz exports at 0 from the start.
    pub const METRIC_LABELS: [&'static str; 4] = ["api", "client", "serialization", "metadata"];

    /// A short, stable label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(kube::Error::Api(_)) => "api",
            Error::Kube(_) => "client",
            Error::Serialization { .. } => "serialization",
            Error::MissingMetadata(..) => "metadata",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
