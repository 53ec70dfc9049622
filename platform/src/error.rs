//! The crate's one error type.

use crate::{certs::CertError, tls::TlsError};

/// Why a server could not start, or a certificate or registration step failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kubernetes API error: {0}")]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Cert(#[from] CertError),
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    #[error("the audit file: {0}")]
    Audit(#[from] oz_audit::Error),
    #[error("invalid webhook configuration: {0}")]
    Config(String),
    #[error("Secret {0} kept changing under us; giving up for now")]
    Contended(String),
}

/// `Result` with [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
