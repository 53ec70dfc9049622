//! The one rustls crypto provider oz's servers use, so that the TLS server and the client
//! certificate verifier can never disagree on it.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;

/// The one crypto provider oz uses for TLS: ring, as kube's client does.
pub fn crypto_provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}
