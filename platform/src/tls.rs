//! An axum server over rustls (ring) whose serving certificate is swapped in place, so a rotated
//! certificate is served from the next TLS handshake on, with no restart and no dropped
//! connections; with a [`CallerVerifier`], it verifies its callers' client certificates, and
//! every request carries the [`Caller`] its connection proved.

use std::{fmt, io, net::SocketAddr, sync::Arc, time::Duration};

use arc_swap::ArcSwap;
use axum::{Extension, Router, middleware::AddExtension};
use axum_server::{
    Handle,
    accept::Accept,
    tls_rustls::{RustlsAcceptor, RustlsConfig},
};
use futures::future::BoxFuture;
use rustls::{
    ServerConfig,
    crypto::CryptoProvider,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
    server::{ClientHello, ResolvesServerCert},
    sign::CertifiedKey,
};
use tokio::net::TcpStream;
use tower::Layer;

use crate::{
    callers::{Caller, CallerVerifier, ClientCaError},
    crypto::crypto_provider,
};

/// Why a certificate or key could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("the certificate PEM holds no certificate")]
    NoCertificate,
    #[error("the certificate PEM is invalid: {0}")]
    CertificatePem(#[source] rustls::pki_types::pem::Error),
    #[error("the private key PEM is invalid: {0}")]
    KeyPem(#[source] rustls::pki_types::pem::Error),
    #[error("the certificate and key cannot be used together: {0}")]
    Unusable(#[source] rustls::Error),
    #[error("the webhook client CA cannot be used: {0}")]
    ClientCa(#[from] ClientCaError),
}

/// A certificate resolver that always answers with the current certificate, which
/// [`SwappableCert::replace_pem`] may change at any time.
pub struct SwappableCert {
    current: ArcSwap<CertifiedKey>,
    provider: Arc<CryptoProvider>,
}

impl SwappableCert {
    /// Starts with the given PEM certificate chain (leaf first) and PEM private key.
    pub fn from_pem(cert_chain_pem: &[u8], key_pem: &[u8]) -> Result<Self, TlsError> {
        let provider = crypto_provider();
        let key = certified_key(&provider, cert_chain_pem, key_pem)?;
        Ok(Self {
            current: ArcSwap::from_pointee(key),
            provider,
        })
    }

    /// Serves this certificate from the next handshake on. On error the old one stays.
    pub fn replace_pem(&self, cert_chain_pem: &[u8], key_pem: &[u8]) -> Result<(), TlsError> {
        let key = certified_key(&self.provider, cert_chain_pem, key_pem)?;
        self.current.store(Arc::new(key));
        Ok(())
    }

    /// The DER of the leaf certificate being served now.
    pub fn current_leaf_der(&self) -> CertificateDer<'static> {
        self.current.load().cert[0].clone()
    }
}

impl fmt::Debug for SwappableCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SwappableCert").finish_non_exhaustive()
    }
}

impl ResolvesServerCert for SwappableCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

fn certified_key(
    provider: &CryptoProvider,
    cert_chain_pem: &[u8],
    key_pem: &[u8],
) -> Result<CertifiedKey, TlsError> {
    let chain = CertificateDer::pem_slice_iter(cert_chain_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(TlsError::CertificatePem)?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate);
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(TlsError::KeyPem)?;
    CertifiedKey::from_der(chain, key, provider).map_err(TlsError::Unusable)
}

/// A rustls server configuration that serves whatever `certificate` holds at handshake time
/// and, with `callers`, asks every client for a certificate and verifies one if presented.
pub fn server_config(
    certificate: Arc<SwappableCert>,
    callers: Option<Arc<CallerVerifier>>,
) -> Arc<ServerConfig> {
    let builder = ServerConfig::builder_with_provider(crypto_provider())
        .with_safe_default_protocol_versions()
        .expect("ring supports rustls' default protocol versions");
    let mut config = match callers {
        Some(verifier) => builder.with_client_cert_verifier(verifier),
        None => builder.with_no_client_auth(),
    }
    .with_cert_resolver(certificate);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Arc::new(config)
}

/// A running TLS server; dropping it does not stop it, [`TlsServer::shutdown`] does.
#[derive(Debug)]
pub struct TlsServer {
    /// The address the server listens on (useful when bound to port 0).
    pub local_addr: SocketAddr,
    handle: Handle<SocketAddr>,
    task: tokio::task::JoinHandle<io::Result<()>>,
}

impl TlsServer {
    /// Serves `router` over TLS on an already-bound listener, in a background task; no client
    /// certificate is asked for, and every caller is [`Caller::Unverified`].
    pub async fn start(
        listener: std::net::TcpListener,
        router: Router,
        certificate: Arc<SwappableCert>,
    ) -> io::Result<Self> {
        Self::start_verifying(listener, router, certificate, None).await
    }

    /// [`TlsServer::start`], and with `callers`, each client's certificate is asked for and
    /// verified, and each request carries the [`Caller`] its connection's certificate proved.
    pub async fn start_verifying(
        listener: std::net::TcpListener,
        router: Router,
        certificate: Arc<SwappableCert>,
        callers: Option<Arc<CallerVerifier>>,
    ) -> io::Result<Self> {
        listener.set_nonblocking(true)?;
        let local_addr = listener.local_addr()?;
        let handle = Handle::new();
        let tls = RustlsConfig::from_config(server_config(certificate, callers));
        let server = axum_server::from_tcp(listener)?
            .acceptor(CallerAcceptor(RustlsAcceptor::new(tls)))
            .handle(handle.clone());
        let task = tokio::spawn(server.serve(router.into_make_service()));
        Ok(Self {
            local_addr,
            handle,
            task,
        })
    }

    /// Stops accepting connections, lets open requests finish for up to `grace`, then stops.
    pub async fn shutdown(self, grace: Duration) -> io::Result<()> {
        self.handle.graceful_shutdown(Some(grace));
        self.task.await.map_err(io::Error::other)?
    }
}

/// axum-server's TLS acceptor, and then the [`Caller`] the handshake proved, added to every
/// request of the connection as an extension.
#[derive(Clone, Debug)]
struct CallerAcceptor(RustlsAcceptor);

impl<S: Send + 'static> Accept<TcpStream, S> for CallerAcceptor {
    type Stream = <RustlsAcceptor as Accept<TcpStream, S>>::Stream;
    type Service = AddExtension<S, Caller>;
    type Future = BoxFuture<'static, io::Result<(Self::Stream, Self::Service)>>;

    fn accept(&self, stream: TcpStream, service: S) -> Self::Future {
        let handshake = self.0.accept(stream, service);
        Box::pin(async move {
            let (stream, service) = handshake.await?;
            let caller = Caller::of_peer(stream.get_ref().1.peer_certificates());
            Ok((stream, Extension(caller).layer(service)))
        })
    }
}
