//! Who called a webhook: the kube-apiserver, proven by its client certificate, or anyone who can
//! reach the port.
//!
//! The apiserver presents a client certificate to admission webhooks when its
//! AdmissionConfiguration names one (`WebhookAdmissionConfiguration.kubeConfigFile`). With the CA
//! that signs it ([`ClientCa`], oz-manager's `--webhook-client-ca-file`):
//!
//! 1. the TLS server asks every caller for a client certificate and verifies one, if presented,
//!    against that CA ([`CallerVerifier`]); a certificate from any other CA fails the handshake
//!    and is counted as `untrusted_certificate`. A caller without a certificate still completes
//!    the handshake, so that it is answered and counted here rather than as a broken connection;
//! 2. the connection's verified certificate reaches each request as a [`Caller`] extension
//!    ([`crate::tls`]'s acceptor);
//! 3. [`guard`], on every webhook path (not `/healthz`), refuses a request without a verified
//!    caller (HTTP 401, `no_certificate`) or whose certificate names no allowed name (HTTP 403,
//!    `name_not_allowed`), before any handler runs: nothing is recorded, no Event is published;
//! 4. the audit handler reads who called from that extension (`Option<Extension<Caller>>`,
//!    none in-process): an audit record says
//!    `"caller": "apiserver"` only for a verified certificate, else `"unverified"`.
//!
//! Without a client CA nothing is asked or refused, and every caller is unverified.

use std::{
    path::{Path, PathBuf},
    sync::{Arc, Weak},
    time::Duration,
};

use arc_swap::ArcSwap;
use axum::{
    extract::{Request, State},
    http::StatusCode,
    middleware::Next,
    response::{IntoResponse, Response},
};
use rustls::{
    DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme,
    client::danger::HandshakeSignatureValid,
    crypto::CryptoProvider,
    pki_types::{CertificateDer, UnixTime, pem::PemObject},
    server::{
        WebPkiClientVerifier,
        danger::{ClientCertVerified, ClientCertVerifier},
    },
};
use tracing::{info, warn};
use x509_parser::{certificate::X509Certificate, extensions::GeneralName, prelude::FromDer};

use oz_audit::CallerKind;

use crate::{ServerMetrics, crypto::crypto_provider};

/// `oz_webhook_refused_callers_total{reason}`: a webhook call without a client certificate.
pub const NO_CERTIFICATE: &str = "no_certificate";
/// A client certificate that the client CA did not sign (or an expired one, or one whose key
/// the caller does not hold): the TLS handshake fails.
pub const UNTRUSTED_CERTIFICATE: &str = "untrusted_certificate";
/// A verified client certificate whose CN and DNS names are none of the allowed names.
pub const NAME_NOT_ALLOWED: &str = "name_not_allowed";

/// How often [`CallerVerifier::keep_current`] re-reads the CA file.
pub const RELOAD_INTERVAL: Duration = Duration::from_secs(30);

/// Why a client CA cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ClientCaError {
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    #[error("the client CA PEM is invalid: {0}")]
    Pem(#[source] rustls::pki_types::pem::Error),
    #[error("the client CA PEM holds no certificate")]
    NoCertificate,
    #[error("the client CA holds a certificate that is not a usable CA: {0}")]
    Unusable(String),
}

/// The CA that signs the apiserver's webhook client certificate, and the names allowed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientCa {
    /// The PEM bundle (one or more CA certificates; during a rotation, old and new).
    pub pem: Vec<u8>,
    /// The file the bundle came from, re-read every [`RELOAD_INTERVAL`]; `None`: fixed.
    pub path: Option<PathBuf>,
    /// The subject CNs or DNS SANs a caller's certificate must have one of; empty: any
    /// certificate the CA signed.
    pub allowed_names: Vec<String>,
}

impl ClientCa {
    /// Reads and checks the bundle in `path`.
    pub fn from_file(path: &Path, allowed_names: Vec<String>) -> Result<Self, ClientCaError> {
        let pem = read(path)?;
        verifier(&pem)?;
        Ok(Self {
            pem,
            path: Some(path.to_path_buf()),
            allowed_names,
        })
    }

    /// A fixed bundle, checked.
    pub fn from_pem(pem: &[u8], allowed_names: Vec<String>) -> Result<Self, ClientCaError> {
        verifier(pem)?;
        Ok(Self {
            pem: pem.to_vec(),
            path: None,
            allowed_names,
        })
    }
}

fn read(path: &Path) -> Result<Vec<u8>, ClientCaError> {
    std::fs::read(path).map_err(|source| ClientCaError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// rustls' verifier for `pem`: a certificate is asked for but not required at the TLS level.
fn verifier(pem: &[u8]) -> Result<Arc<dyn ClientCertVerifier>, ClientCaError> {
    verifier_with(pem, crypto_provider())
}

fn verifier_with(
    pem: &[u8],
    provider: Arc<CryptoProvider>,
) -> Result<Arc<dyn ClientCertVerifier>, ClientCaError> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        let cert = cert.map_err(ClientCaError::Pem)?;
        roots
            .add(cert)
            .map_err(|e| ClientCaError::Unusable(e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(ClientCaError::NoCertificate);
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .allow_unauthenticated()
        .build()
        .map_err(|e| ClientCaError::Unusable(e.to_string()))
}

/// The server's client certificate verifier: rustls' WebPKI verifier for the current client
/// CA, which [`CallerVerifier::reload`] may replace at any time, counting every certificate it
/// rejects as `untrusted_certificate`.
///
/// It sends no CA names in its certificate request: a Go client (the apiserver) with a
/// certificate whose issuer is not among the names it is sent sends none at all, which would
/// turn a CA mismatch into an unexplained "no certificate".
pub struct CallerVerifier {
    current: ArcSwap<Current>,
    path: Option<PathBuf>,
    provider: Arc<CryptoProvider>,
    metrics: ServerMetrics,
}

struct Current {
    pem: Vec<u8>,
    verifier: Arc<dyn ClientCertVerifier>,
}

impl CallerVerifier {
    /// Verifies against `ca`, counting refusals in `metrics`.
    pub fn new(ca: &ClientCa, metrics: ServerMetrics) -> Result<Arc<Self>, ClientCaError> {
        let provider = crypto_provider();
        let verifier = verifier_with(&ca.pem, provider.clone())?;
        Ok(Arc::new(Self {
            current: ArcSwap::from_pointee(Current {
                pem: ca.pem.clone(),
                verifier,
            }),
            path: ca.path.clone(),
            provider,
            metrics,
        }))
    }

    /// [`CallerVerifier::new`], re-reading the CA file every [`RELOAD_INTERVAL`]
    /// ([`CallerVerifier::keep_current`]).
    pub fn reloading(ca: &ClientCa, metrics: ServerMetrics) -> Result<Arc<Self>, ClientCaError> {
        let verifier = Self::new(ca, metrics)?;
        verifier.keep_current(RELOAD_INTERVAL);
        Ok(verifier)
    }

    /// Re-reads the CA file; if its bytes changed, verifies against them from the next
    /// handshake on. Returns whether they changed. On error the old CA stays in force.
    pub fn reload(&self) -> Result<bool, ClientCaError> {
        let Some(path) = &self.path else {
            return Ok(false);
        };
        let pem = read(path)?;
        if pem == self.current.load().pem {
            return Ok(false);
        }
        let verifier = verifier_with(&pem, self.provider.clone())?;
        self.current.store(Arc::new(Current { pem, verifier }));
        Ok(true)
    }

    /// Verifies against `pem` from the next handshake on, if it differs from the bundle in
    /// force (a CA published other than in a file, e.g. the front-proxy CA in the ConfigMap
    /// `kube-system/extension-apiserver-authentication`). Returns whether it changed. On error
    /// the old CA stays in force.
    pub fn replace_pem(&self, pem: &[u8]) -> Result<bool, ClientCaError> {
        if pem == self.current.load().pem.as_slice() {
            return Ok(false);
        }
        let verifier = verifier_with(pem, self.provider.clone())?;
        self.current.store(Arc::new(Current {
            pem: pem.to_vec(),
            verifier,
        }));
        Ok(true)
    }

    /// Rotation without a restart: re-reads the CA file every `every` in a background task
    /// ([`CallerVerifier::reload`]), which ends once the verifier is dropped with the server.
    /// Re-reading beats watching for changes: a mounted Secret is swapped through a symlink,
    /// which inotify on the file misses, and a 30 s poll of a small file costs nothing.
    pub fn keep_current(self: &Arc<Self>, every: Duration) {
        let Some(path) = self.path.clone() else {
            return;
        };
        let verifier: Weak<Self> = Arc::downgrade(self);
        tokio::spawn(async move {
            let path = path.display();
            let mut ticks = tokio::time::interval(every);
            ticks.tick().await;
            loop {
                ticks.tick().await;
                let Some(verifier) = verifier.upgrade() else {
                    return;
                };
                match verifier.reload() {
                    Ok(true) => info!(%path, "reloaded the webhook client CA"),
                    Ok(false) => {}
                    Err(e) => warn!(%path, error = %e, "keeping the webhook client CA in force"),
                }
            }
        });
    }

    fn refused<T>(&self, result: Result<T, rustls::Error>) -> Result<T, rustls::Error> {
        if let Err(e) = &result {
            self.metrics.refuse(UNTRUSTED_CERTIFICATE);
            warn!(error = %e, "refused a webhook caller's client certificate");
        }
        result
    }
}

impl std::fmt::Debug for CallerVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallerVerifier")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl ClientCertVerifier for CallerVerifier {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let current = self.current.load();
        self.refused(
            current
                .verifier
                .verify_client_cert(end_entity, intermediates, now),
        )
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let current = self.current.load();
        self.refused(current.verifier.verify_tls12_signature(message, cert, dss))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let current = self.current.load();
        self.refused(current.verifier.verify_tls13_signature(message, cert, dss))
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.current.load().verifier.supported_verify_schemes()
    }
}

/// Who made a request, as its connection's TLS handshake proved. Every request that reaches a
/// handler over [`crate::tls::TlsServer`] carries one as an extension.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Caller {
    /// A client certificate the client CA signed, and the caller holds its key.
    Verified {
        /// The certificate's subject CN, if it has one.
        common_name: Option<String>,
        /// Its DNS subject alternative names.
        dns_names: Vec<String>,
    },
    /// No certificate: no client CA is configured, or the caller presented none.
    #[default]
    Unverified,
}

impl Caller {
    /// Who sent `request`: the verdict the TLS server put on its connection, or
    /// [`Caller::Unverified`] when there is none (a server without TLS, a test's router).
    pub fn of_request(request: &Request) -> Self {
        request
            .extensions()
            .get::<Caller>()
            .cloned()
            .unwrap_or_default()
    }

    /// The caller a connection's peer certificates (leaf first) make, as rustls reports them
    /// after the handshake: only a verified certificate is ever reported.
    pub fn of_peer(certificates: Option<&[CertificateDer<'_>]>) -> Self {
        let Some(leaf) = certificates.and_then(|c| c.first()) else {
            return Self::Unverified;
        };
        let Ok((_, cert)) = X509Certificate::from_der(leaf) else {
            // rustls verified it, so it parses; an unparsable one proves nothing here.
            return Self::Unverified;
        };
        let common_name = cert
            .subject()
            .iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok())
            .map(String::from);
        let dns_names = match cert.subject_alternative_name() {
            Ok(Some(san)) => san
                .value
                .general_names
                .iter()
                .filter_map(|name| match name {
                    GeneralName::DNSName(dns) => Some(dns.to_string()),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        Self::Verified {
            common_name,
            dns_names,
        }
    }

    /// Whether a client certificate was verified.
    pub fn is_verified(&self) -> bool {
        matches!(self, Self::Verified { .. })
    }

    /// What an audit record says of this caller: only a verified certificate is the apiserver.
    pub fn kind(&self) -> CallerKind {
        match self {
            Self::Verified { .. } => CallerKind::Apiserver,
            Self::Unverified => CallerKind::Unverified,
        }
    }

    /// The verified certificate's CN.
    pub fn name(&self) -> Option<&str> {
        match self {
            Self::Verified { common_name, .. } => common_name.as_deref(),
            Self::Unverified => None,
        }
    }

    /// Whether the verified certificate's CN is in `allowed` (never, unverified): how
    /// kube-apiserver itself reads `--requestheader-allowed-names`, which names CNs only.
    pub fn has_allowed_common_name(&self, allowed: &[String]) -> bool {
        self.name()
            .is_some_and(|cn| allowed.iter().any(|a| a == cn))
    }

    /// Whether the verified certificate's CN or one of its DNS names is in `allowed` (never,
    /// unverified).
    pub fn has_any_name(&self, allowed: &[String]) -> bool {
        match self {
            Self::Verified {
                common_name,
                dns_names,
            } => allowed
                .iter()
                .any(|a| common_name.as_ref() == Some(a) || dns_names.contains(a)),
            Self::Unverified => false,
        }
    }
}

/// Which callers the webhook paths answer.
#[derive(Clone, Debug, Default)]
pub struct CallerPolicy {
    /// Only callers with a verified certificate (a client CA is configured).
    pub verified_only: bool,
    /// With `verified_only`: the names ([`ClientCa::allowed_names`]) one of which the
    /// certificate must have; empty: any.
    pub allowed_names: Vec<String>,
    /// Where refusals are counted.
    pub metrics: ServerMetrics,
}

/// Why a caller is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// HTTP 401: no verified client certificate.
    NoCertificate,
    /// HTTP 403: a verified certificate with none of the allowed names; its CN.
    NameNotAllowed(Option<String>),
}

impl Refusal {
    /// The metric label.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::NoCertificate => NO_CERTIFICATE,
            Self::NameNotAllowed(_) => NAME_NOT_ALLOWED,
        }
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Self::NoCertificate => (
                StatusCode::UNAUTHORIZED,
                "oz's webhooks answer only the kube-apiserver: present its webhook client certificate\n",
            ),
            Self::NameNotAllowed(_) => (
                StatusCode::FORBIDDEN,
                "oz's webhooks answer only the kube-apiserver: this client certificate's name is not allowed\n",
            ),
        }
        .into_response()
    }
}

impl CallerPolicy {
    /// Anyone: no client CA.
    pub fn anyone() -> Self {
        Self::default()
    }

    /// With `client_ca`, verified callers with an allowed name; without, anyone.
    pub fn for_client_ca(client_ca: Option<&ClientCa>, metrics: ServerMetrics) -> Self {
        Self {
            verified_only: client_ca.is_some(),
            allowed_names: client_ca
                .map(|ca| ca.allowed_names.clone())
                .unwrap_or_default(),
            metrics,
        }
    }

    /// Whether `caller` may call the webhooks, or why not ([`admit_verified`], names read
    /// from the CN or a DNS SAN, as the webhook client CA's names have always been).
    pub fn admit(&self, caller: &Caller) -> Result<(), Refusal> {
        if !self.verified_only {
            return Ok(());
        }
        admit_verified(caller, &self.allowed_names, NamesRead::CommonNameOrDnsName)
    }
}

/// Which names of a verified certificate an allowed name is compared with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NamesRead {
    /// The subject CN only, as the apiserver reads its own front-proxy names.
    CommonName,
    /// The subject CN or any DNS SAN.
    CommonNameOrDnsName,
}

/// The one rule both servers apply to a caller who must be the apiserver: a verified
/// certificate, with one of `allowed` (empty: any name) among the names `read`.
pub fn admit_verified(caller: &Caller, allowed: &[String], read: NamesRead) -> Result<(), Refusal> {
    if !caller.is_verified() {
        return Err(Refusal::NoCertificate);
    }
    let named = match read {
        NamesRead::CommonName => caller.has_allowed_common_name(allowed),
        NamesRead::CommonNameOrDnsName => caller.has_any_name(allowed),
    };
    if !allowed.is_empty() && !named {
        return Err(Refusal::NameNotAllowed(caller.name().map(String::from)));
    }
    Ok(())
}

/// The middleware on the webhook paths: refuses (and counts) a caller `policy` does not admit,
/// else runs the handler, which finds who called in the request's [`Caller`] extension.
pub async fn guard(
    State(policy): State<Arc<CallerPolicy>>,
    request: Request,
    next: Next,
) -> Response {
    let caller = Caller::of_request(&request);
    if let Err(refusal) = policy.admit(&caller) {
        policy.metrics.refuse(refusal.reason());
        warn!(
            path = %request.uri().path(),
            reason = refusal.reason(),
            name = ?caller.name(),
            "refused a webhook call: not the kube-apiserver"
        );
        return refusal.into_response();
    }
    next.run(request).await
}

#[cfg(test)]
mod tests;
