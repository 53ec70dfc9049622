//! A plain HTTP/1.1 client with keep-alive connection pooling, for oz-manager's `/metrics` and
//! for calling its webhook server directly over TLS, trusting only oz's own webhook CA.

use std::time::Duration;

use http::{Request, StatusCode, Uri, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_rustls::HttpsConnector;
use hyper_util::{
    client::legacy::{Client, connect::HttpConnector},
    rt::TokioExecutor,
};
use rustls::{ClientConfig, RootCertStore, pki_types::CertificateDer, pki_types::pem::PemObject};

use crate::Result;

/// The client type: HTTP and HTTPS, bodies held in memory.
pub type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// A client that trusts the certificates in `ca_pem` (none: plain HTTP only works).
pub fn client(ca_pem: Option<&[u8]>) -> Result<HttpClient> {
    let mut roots = RootCertStore::empty();
    if let Some(pem) = ca_pem {
        for cert in CertificateDer::pem_slice_iter(pem) {
            roots.add(cert?)?;
        }
    }
    let tls = ClientConfig::builder_with_provider(rustls::crypto::ring::default_provider().into())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(http);
    Ok(Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .pool_max_idle_per_host(1024)
        .build(connector))
}

/// GETs `url` and returns the body as text; an error unless 200.
pub async fn get_text(client: &HttpClient, url: &str) -> Result<String> {
    let request = Request::get(url).body(Full::new(Bytes::new()))?;
    let response = tokio::time::timeout(Duration::from_secs(10), client.request(request))
        .await
        .map_err(|_| format!("GET {url} timed out"))??;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    if status != StatusCode::OK {
        return Err(format!("GET {url}: {status}").into());
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// POSTs a JSON body and returns the status and body.
pub async fn post_json(client: &HttpClient, uri: &Uri, body: Bytes) -> Result<(StatusCode, Bytes)> {
    let request = Request::post(uri.clone())
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(body))?;
    let response = client.request(request).await?;
    let status = response.status();
    let body = response.into_body().collect().await?.to_bytes();
    Ok((status, body))
}
