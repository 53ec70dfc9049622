//! The crate's one error type.

use std::{io, path::PathBuf};

/// Why a key could not be read or made, a file could not be written or read, or a record
/// could not be encoded.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{}: {message}", path.display())]
    NotAnAuditFile { path: PathBuf, message: String },
    #[error("invalid key: {0}")]
    Key(String),
    #[error("cannot write this record: {0}")]
    Record(String),
}

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { path, source }
    }
}

/// `Result` with [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
