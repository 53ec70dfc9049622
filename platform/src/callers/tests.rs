//! The caller checks without a cluster: the verifier over a real TLS socket (certificates minted
//! here by rcgen), the guard's answers and counts, and the CA file's reload.

use std::{
    path::Path,
    sync::atomic::{AtomicUsize, Ordering},
};

use axum::{Extension, Router, http, middleware, routing::get};
use kube::client::Body;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use super::*;
use crate::{
    metrics::RefusedLabels,
    tls::{SwappableCert, TlsServer},
};

/// A CA: its certificate's PEM and what signs with it.
struct Authority {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

fn authority(name: &str) -> Authority {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let cert = params.self_signed(&key).unwrap();
    Authority {
        pem: cert.pem(),
        issuer: Issuer::new(params, key),
    }
}

impl Authority {
    /// A leaf with CN `cn` and DNS SANs `dns` for `usage`: (certificate PEM, key PEM).
    fn issue(&self, cn: &str, dns: &[&str], usage: ExtendedKeyUsagePurpose) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(dns.iter().map(|d| d.to_string()).collect::<Vec<_>>()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    fn client(&self, cn: &str, dns: &[&str]) -> (String, String) {
        self.issue(cn, dns, ExtendedKeyUsagePurpose::ClientAuth)
    }
}

/// A TLS server on 127.0.0.1 whose one webhook path, `/who`, answers who called, behind the
/// guard, and `/healthz`, not behind it.
struct Server {
    tls: TlsServer,
    serving_ca: String,
    metrics: ServerMetrics,
    /// How many calls reached the handler.
    handled: Arc<AtomicUsize>,
    verifier: Option<Arc<CallerVerifier>>,
    /// Where the clients' certificates and keys are written (kube's client reads files).
    dir: tempfile::TempDir,
    identities: AtomicUsize,
}

async fn server(client_ca: Option<ClientCa>) -> Server {
    let metrics = ServerMetrics::default();
    let verifier = client_ca
        .as_ref()
        .map(|ca| CallerVerifier::new(ca, metrics.clone()).unwrap());
    let policy = CallerPolicy::for_client_ca(client_ca.as_ref(), metrics.clone());
    let handled = Arc::new(AtomicUsize::new(0));
    let counter = handled.clone();
    let router = Router::new()
        .route(
            "/who",
            get(move |caller: Option<Extension<Caller>>| {
                counter.fetch_add(1, Ordering::SeqCst);
                let caller = caller.map(|Extension(c)| c).unwrap_or_default();
                async move { format!("{:?} {}", caller.kind(), caller.name().unwrap_or("-")) }
            }),
        )
        .route_layer(middleware::from_fn_with_state(Arc::new(policy), guard))
        .route("/healthz", get(|| async { "ok" }));
    let serving = authority("serving CA");
    let (cert, key) = serving.issue(
        "127.0.0.1",
        &["127.0.0.1"],
        ExtendedKeyUsagePurpose::ServerAuth,
    );
    let cert = Arc::new(SwappableCert::from_pem(cert.as_bytes(), key.as_bytes()).unwrap());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let tls = TlsServer::start_verifying(listener, router, cert, verifier.clone())
        .await
        .unwrap();
    Server {
        tls,
        serving_ca: serving.pem,
        metrics,
        handled,
        verifier,
        dir: tempfile::tempdir().unwrap(),
        identities: AtomicUsize::new(0),
    }
}

impl Server {
    /// GETs `path` presenting `identity` (certificate and key PEM), if any: the HTTP status and
    /// body, or the connection's error.
    async fn get(
        &self,
        path: &str,
        identity: Option<&(String, String)>,
    ) -> Result<(u16, String), String> {
        let url = format!("https://{}", self.tls.local_addr).parse().unwrap();
        let mut config = kube::Config::new(url);
        config.root_cert = Some(crate::certs::certificates_der(&self.serving_ca).unwrap());
        config.default_retry = false;
        if let Some((cert, key)) = identity {
            let n = self.identities.fetch_add(1, Ordering::SeqCst);
            let cert_path = self.dir.path().join(format!("{n}.crt"));
            let key_path = self.dir.path().join(format!("{n}.key"));
            std::fs::write(&cert_path, cert).unwrap();
            std::fs::write(&key_path, key).unwrap();
            config.auth_info.client_certificate = Some(cert_path.display().to_string());
            config.auth_info.client_key = Some(key_path.display().to_string());
        }
        let client = kube::Client::try_from(config).map_err(|e| e.to_string())?;
        let response = client
            .send(http::Request::get(path).body(Body::empty()).unwrap())
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let body = response.into_body().collect_bytes().await.unwrap();
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    }

    fn refused(&self, reason: &'static str) -> u64 {
        self.metrics
            .refused_callers
            .get_or_create(&RefusedLabels { reason })
            .get()
    }

    fn handled(&self) -> usize {
        self.handled.load(Ordering::SeqCst)
    }
}

const APISERVER: &str = "kube-apiserver-webhook-client";

#[tokio::test]
async fn a_certificate_from_the_client_ca_is_the_apiserver_named_by_its_cn() {
    let ca = authority("webhook client CA");
    let s = server(Some(ClientCa::from_pem(ca.pem.as_bytes(), vec![]).unwrap())).await;
    let answer = s.get("/who", Some(&ca.client(APISERVER, &[]))).await;
    assert_eq!(answer, Ok((200, format!("Apiserver {APISERVER}"))));
    assert_eq!(
        s.refused(NO_CERTIFICATE) + s.refused(UNTRUSTED_CERTIFICATE),
        0
    );
}

#[tokio::test]
async fn a_caller_without_a_certificate_is_answered_401_counted_and_never_handled() {
    let ca = authority("webhook client CA");
    let s = server(Some(ClientCa::from_pem(ca.pem.as_bytes(), vec![]).unwrap())).await;
    let (status, body) = s.get("/who", None).await.expect("the handshake completes");
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("only the kube-apiserver"), "{body}");
    assert_eq!(s.refused(NO_CERTIFICATE), 1);
    assert_eq!(s.handled(), 0);
    // Probes carry no certificate: /healthz answers them.
    assert_eq!(s.get("/healthz", None).await, Ok((200, "ok".into())));
    assert_eq!(s.refused(NO_CERTIFICATE), 1);
}

#[tokio::test]
async fn a_certificate_from_another_ca_fails_the_handshake_and_is_counted() {
    let ca = authority("webhook client CA");
    let other = authority("someone else's CA");
    let s = server(Some(ClientCa::from_pem(ca.pem.as_bytes(), vec![]).unwrap())).await;
    let answer = s.get("/who", Some(&other.client(APISERVER, &[]))).await;
    assert!(answer.is_err(), "{answer:?}");
    assert_eq!(s.refused(UNTRUSTED_CERTIFICATE), 1);
    assert_eq!(s.handled(), 0);
    // And a certificate for serving, not for clients, from the right CA: not a client.
    let server_cert = ca.issue(APISERVER, &[], ExtendedKeyUsagePurpose::ServerAuth);
    assert!(s.get("/who", Some(&server_cert)).await.is_err());
    assert_eq!(s.refused(UNTRUSTED_CERTIFICATE), 2);
    assert_eq!(s.handled(), 0);
}

#[tokio::test]
async fn only_the_allowed_names_pass_by_cn_or_dns_name() {
    let ca = authority("webhook client CA");
    let allowed = vec!["apiserver.example".to_string(), APISERVER.to_string()];
    let s = server(Some(
        ClientCa::from_pem(ca.pem.as_bytes(), allowed).unwrap(),
    ))
    .await;
    assert_eq!(
        s.get("/who", Some(&ca.client(APISERVER, &[]))).await,
        Ok((200, format!("Apiserver {APISERVER}")))
    );
    assert_eq!(
        s.get("/who", Some(&ca.client("cp-1", &["apiserver.example"])))
            .await,
        Ok((200, "Apiserver cp-1".into()))
    );
    let (status, body) = s
        .get("/who", Some(&ca.client("mallory", &["mallory.example"])))
        .await
        .unwrap();
    assert_eq!(status, 403, "{body}");
    assert_eq!(s.refused(NAME_NOT_ALLOWED), 1);
    assert_eq!(s.handled(), 2);
}

#[tokio::test]
async fn without_a_client_ca_anyone_is_answered_as_unverified() {
    let ca = authority("webhook client CA");
    let s = server(None).await;
    assert_eq!(s.get("/who", None).await, Ok((200, "Unverified -".into())));
    // A certificate is not asked for, so none is sent or believed.
    assert_eq!(
        s.get("/who", Some(&ca.client(APISERVER, &[]))).await,
        Ok((200, "Unverified -".into()))
    );
}

#[tokio::test]
async fn a_rotated_ca_file_is_verified_against_from_the_next_reload_and_a_bad_one_is_not() {
    let old = authority("old CA");
    let new = authority("new CA");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("client-ca.crt");
    std::fs::write(&path, &old.pem).unwrap();
    let s = server(Some(ClientCa::from_file(&path, vec![]).unwrap())).await;
    let verifier = s.verifier.clone().unwrap();
    let (old_client, new_client) = (old.client(APISERVER, &[]), new.client(APISERVER, &[]));
    assert!(s.get("/who", Some(&new_client)).await.is_err());
    assert!(!verifier.reload().unwrap(), "unchanged");

    std::fs::write(&path, &new.pem).unwrap();
    assert!(verifier.reload().unwrap());
    assert_eq!(s.get("/who", Some(&new_client)).await.map(|a| a.0), Ok(200));
    assert!(s.get("/who", Some(&old_client)).await.is_err());

    // A broken file leaves the CA in force.
    std::fs::write(&path, "not a certificate").unwrap();
    assert!(matches!(
        verifier.reload(),
        Err(ClientCaError::NoCertificate)
    ));
    std::fs::remove_file(&path).unwrap();
    assert!(matches!(verifier.reload(), Err(ClientCaError::Read { .. })));
    assert_eq!(s.get("/who", Some(&new_client)).await.map(|a| a.0), Ok(200));
}

#[tokio::test]
async fn keep_current_rereads_the_file_on_its_interval() {
    let (old, new) = (authority("old CA"), authority("new CA"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("client-ca.crt");
    std::fs::write(&path, &old.pem).unwrap();
    let ca = ClientCa::from_file(&path, vec![]).unwrap();
    let verifier = CallerVerifier::new(&ca, ServerMetrics::default()).unwrap();
    verifier.keep_current(Duration::from_millis(50));
    let loaded = || verifier.current.load().pem.clone();
    assert_eq!(loaded(), old.pem.as_bytes());
    std::fs::write(&path, &new.pem).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while loaded() != new.pem.as_bytes() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the new CA was not loaded within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[test]
fn a_missing_or_empty_ca_file_is_an_error_naming_it() {
    let missing = Path::new("/nonexistent/oz/client-ca.crt");
    let err = ClientCa::from_file(missing, vec![]).unwrap_err();
    assert!(
        err.to_string().contains("/nonexistent/oz/client-ca.crt"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.crt");
    std::fs::write(&empty, "").unwrap();
    assert!(matches!(
        ClientCa::from_file(&empty, vec![]),
        Err(ClientCaError::NoCertificate)
    ));
}

#[test]
fn the_policy_admits_by_verification_and_name() {
    let apiserver = Caller::Verified {
        common_name: Some(APISERVER.into()),
        dns_names: vec!["cp.example".into()],
    };
    let anyone = CallerPolicy::anyone();
    assert_eq!(anyone.admit(&Caller::Unverified), Ok(()));
    let verified = CallerPolicy {
        verified_only: true,
        ..CallerPolicy::default()
    };
    assert_eq!(
        verified.admit(&Caller::Unverified),
        Err(Refusal::NoCertificate)
    );
    assert_eq!(verified.admit(&apiserver), Ok(()));
    let named = |names: &[&str]| CallerPolicy {
        verified_only: true,
        allowed_names: names.iter().map(|n| n.to_string()).collect(),
        ..CallerPolicy::default()
    };
    assert_eq!(named(&[APISERVER]).admit(&apiserver), Ok(()));
    assert_eq!(named(&["cp.example"]).admit(&apiserver), Ok(()));
    assert_eq!(
        named(&["other-name"]).admit(&apiserver),
        Err(Refusal::NameNotAllowed(Some(APISERVER.into())))
    );
    assert_eq!(
        named(&["other-name"]).admit(&Caller::Unverified),
        Err(Refusal::NoCertificate)
    );
}

#[test]
fn without_a_verified_certificate_the_caller_is_unverified() {
    assert_eq!(Caller::default(), Caller::Unverified);
    assert_eq!(Caller::of_peer(None), Caller::Unverified);
}
