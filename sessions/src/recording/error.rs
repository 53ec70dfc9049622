//! Why recordings cannot be opened or read.

/// Why recordings cannot be opened or read.
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    /// The store's URL is wrong.
    #[error("cannot open the recordings store {url}: {reason}")]
    Config {
        /// The URL, without its query (which may hold credentials).
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// The store failed.
    #[error("the recordings store {store} failed on {key}: {source}")]
    Storage {
        /// Where the store is.
        store: String,
        /// The object.
        key: String,
        /// What the store said.
        source: object_store::Error,
    },
}
