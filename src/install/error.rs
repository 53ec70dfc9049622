//! What can go wrong building an install.

/// What can go wrong building an install.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The options describe no valid install.
    #[error("invalid install options: {0}")]
    Invalid(String),
    /// An object could not be turned into YAML.
    #[error("could not render the install as YAML: {0}")]
    Yaml(#[from] serde_saphyr::ser::Error),
    /// An object could not be turned into JSON (it never can fail for these types).
    #[error("could not serialise a {kind}: {source}")]
    Json {
        kind: String,
        #[source]
        source: serde_json::Error,
    },
}
