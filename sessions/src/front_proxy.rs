//! Front-proxy authentication: only the kube-apiserver may call oz's sessions API, and who the
//! user is comes from the headers it sets, read only once its client certificate is verified.
//!
//! The apiserver publishes its aggregation settings in the ConfigMap
//! `kube-system/extension-apiserver-authentication` ([`FrontProxyConfig::from_config_map`]):
//! the CA that signs its front-proxy client certificate, the certificate names allowed, and the
//! headers that carry the user, groups and extra fields. [`FrontProxy`] holds them, verifies the
//! TLS handshake against that CA ([`FrontProxy::verifier`]; a certificate from another CA fails
//! the handshake), keeps both current from a watch of the ConfigMap ([`FrontProxy::keep_current`]),
//! and [`guard`] admits a request only with a verified certificate that has an allowed name,
//! then puts the [`Identity`] its headers name into the request's extensions.

use std::{collections::BTreeMap, sync::Arc};

use arc_swap::ArcSwap;
use axum::{
    extract::{Request, State},
    http::{HeaderMap, StatusCode},
    middleware::Next,
    response::Response,
};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api, Client,
    runtime::{WatchStreamExt, watcher},
};
use oz_platform::{
    ServerMetrics,
    callers::{Caller, CallerVerifier, ClientCa, ClientCaError, NamesRead, admit_verified},
    metrics::RefusedLabels,
};
use prometheus_client::metrics::{counter::Counter, family::Family};
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::Identity;

/// The namespace of [`AUTHENTICATION_CONFIG_MAP`].
pub const AUTHENTICATION_NAMESPACE: &str = "kube-system";
/// Where the apiserver publishes its front-proxy CA and request headers.
pub const AUTHENTICATION_CONFIG_MAP: &str = "extension-apiserver-authentication";

/// `oz_sessions_refused_total{reason}`: a call without a verified client certificate.
pub const NO_CERTIFICATE: &str = oz_platform::callers::NO_CERTIFICATE;
/// A verified certificate with none of the allowed names.
pub const NAME_NOT_ALLOWED: &str = oz_platform::callers::NAME_NOT_ALLOWED;
/// A certificate the front-proxy CA did not sign: the handshake fails.
pub const UNTRUSTED_CERTIFICATE: &str = oz_platform::callers::UNTRUSTED_CERTIFICATE;
/// A verified call with no user header (only the apiserver's discovery calls may lack one).
pub const NO_USER: &str = "no_user";

/// Where refusals are counted: `oz_sessions_refused_total{reason}`, shared with the broker's
/// own refusals (`no_grant`, ...). Cloning shares the counters.
pub type Refusals = Family<RefusedLabels, Counter>;

/// Why the aggregation settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum FrontProxyError {
    #[error(
        "{AUTHENTICATION_NAMESPACE}/{AUTHENTICATION_CONFIG_MAP} has no {0}: the apiserver's aggregation layer is not configured (--requestheader-client-ca-file)"
    )]
    Missing(&'static str),
    #[error("{AUTHENTICATION_NAMESPACE}/{AUTHENTICATION_CONFIG_MAP} key {key}: {error}")]
    Invalid {
        /// The ConfigMap key.
        key: &'static str,
        /// Why.
        error: String,
    },
    #[error("the front-proxy CA cannot be used: {0}")]
    Ca(#[from] ClientCaError),
    #[error("cannot read {AUTHENTICATION_NAMESPACE}/{AUTHENTICATION_CONFIG_MAP}: {0}")]
    Kube(#[from] kube::Error),
}

/// The apiserver's aggregation settings, as it publishes them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrontProxyConfig {
    /// `requestheader-client-ca-file`: the PEM bundle that signs the front-proxy certificate.
    pub ca_pem: String,
    /// `requestheader-allowed-names`: the CNs one of which the certificate must
    /// have; empty: any certificate the CA signed.
    pub allowed_names: Vec<String>,
    /// `requestheader-username-headers`: the first one present names the user.
    pub username_headers: Vec<String>,
    /// `requestheader-group-headers`: every value of each is a group.
    pub group_headers: Vec<String>,
    /// `requestheader-extra-headers-prefix`: `<prefix><key>` carries an extra field.
    pub extra_headers_prefixes: Vec<String>,
}

impl FrontProxyConfig {
    /// Parses the ConfigMap's data: the CA is required, and its lists are JSON arrays in
    /// strings (a missing list is empty).
    pub fn from_config_map(data: &BTreeMap<String, String>) -> Result<Self, FrontProxyError> {
        const CA: &str = "requestheader-client-ca-file";
        let ca_pem = data
            .get(CA)
            .filter(|pem| !pem.trim().is_empty())
            .ok_or(FrontProxyError::Missing(CA))?
            .clone();
        let list = |key: &'static str| -> Result<Vec<String>, FrontProxyError> {
            match data.get(key).map(|v| v.trim()) {
                None | Some("") | Some("null") => Ok(Vec::new()),
                Some(json) => serde_json::from_str::<Vec<String>>(json).map_err(|e| {
                    FrontProxyError::Invalid {
                        key,
                        error: format!("want a JSON array of strings: {e}"),
                    }
                }),
            }
        };
        let config = Self {
            ca_pem,
            allowed_names: list("requestheader-allowed-names")?,
            username_headers: list("requestheader-username-headers")?,
            group_headers: list("requestheader-group-headers")?,
            extra_headers_prefixes: list("requestheader-extra-headers-prefix")?,
        };
        if config.username_headers.is_empty() {
            return Err(FrontProxyError::Missing("requestheader-username-headers"));
        }
        ClientCa::from_pem(config.ca_pem.as_bytes(), config.allowed_names.clone())?;
        Ok(config)
    }

    /// The identity `headers` carry, read from the configured headers only: the user from the
    /// first non-empty username header (`None` without one), every value of every group
    /// header, and every `<prefix><key>` header as extra field `key`, lowercased and
    /// percent-unescaped as the apiserver does.
    pub fn identity(&self, headers: &HeaderMap) -> Option<Identity> {
        let user = self
            .username_headers
            .iter()
            .filter_map(|h| headers.get(h.as_str()))
            .filter_map(|v| v.to_str().ok())
            .find(|v| !v.is_empty())?
            .to_string();
        let groups = self
            .group_headers
            .iter()
            .flat_map(|h| headers.get_all(h.as_str()))
            .filter_map(|v| v.to_str().ok())
            .map(String::from)
            .collect();
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (name, value) in headers {
            // `HeaderName`s are lowercase already.
            let name = name.as_str();
            let Some(key) = self.extra_headers_prefixes.iter().find_map(|prefix| {
                let prefix = prefix.to_ascii_lowercase();
                name.strip_prefix(prefix.as_str()).filter(|k| !k.is_empty())
            }) else {
                continue;
            };
            let Ok(value) = value.to_str() else {
                continue;
            };
            let key = percent_encoding::percent_decode_str(key)
                .decode_utf8_lossy()
                .to_lowercase();
            extra.entry(key).or_default().push(value.to_string());
        }
        Some(Identity {
            user,
            groups,
            extra,
        })
    }
}

/// The front-proxy settings in force, the TLS verifier made from them, and where refusals are
/// counted.
pub struct FrontProxy {
    config: ArcSwap<FrontProxyConfig>,
    verifier: Arc<CallerVerifier>,
    refusals: Refusals,
}

impl std::fmt::Debug for FrontProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrontProxy")
            .field("config", &self.config.load())
            .finish_non_exhaustive()
    }
}

impl FrontProxy {
    /// Verifies against `config`, counting refusals (handshakes included) in `refusals`.
    pub fn new(config: FrontProxyConfig, refusals: Refusals) -> Result<Arc<Self>, FrontProxyError> {
        let ca = ClientCa::from_pem(config.ca_pem.as_bytes(), config.allowed_names.clone())?;
        let metrics = ServerMetrics {
            refused_callers: refusals.clone(),
            ..ServerMetrics::default()
        };
        let verifier = CallerVerifier::new(&ca, metrics)?;
        Ok(Arc::new(Self {
            config: ArcSwap::from_pointee(config),
            verifier,
            refusals,
        }))
    }

    /// Reads the apiserver's settings from its ConfigMap, as [`FrontProxy::new`].
    pub async fn load(client: Client, refusals: Refusals) -> Result<Arc<Self>, FrontProxyError> {
        let api: Api<ConfigMap> = Api::namespaced(client, AUTHENTICATION_NAMESPACE);
        let map = api.get(AUTHENTICATION_CONFIG_MAP).await?;
        Self::new(
            FrontProxyConfig::from_config_map(&map.data.unwrap_or_default())?,
            refusals,
        )
    }

    /// The settings in force.
    pub fn config(&self) -> Arc<FrontProxyConfig> {
        self.config.load_full()
    }

    /// The TLS server's client certificate verifier (the front-proxy CA in force).
    pub fn verifier(&self) -> Arc<CallerVerifier> {
        self.verifier.clone()
    }

    /// Where refusals are counted.
    pub fn refusals(&self) -> &Refusals {
        &self.refusals
    }

    /// Puts `config` in force: its CA from the next handshake on, its names and headers from
    /// the next request on. On error the old settings stay.
    pub fn update(&self, config: FrontProxyConfig) -> Result<(), FrontProxyError> {
        if *self.config.load_full() == config {
            return Ok(());
        }
        if self.verifier.replace_pem(config.ca_pem.as_bytes())? {
            info!("now verifying callers against the new front-proxy CA");
        }
        self.config.store(Arc::new(config));
        Ok(())
    }

    /// Watches the ConfigMap and puts every change in force ([`FrontProxy::update`]) until the
    /// task is aborted. Needs get/list/watch on that one ConfigMap (the built-in Role
    /// `kube-system/extension-apiserver-authentication-reader`).
    pub fn keep_current(self: &Arc<Self>, client: Client) -> JoinHandle<()> {
        let api: Api<ConfigMap> = Api::namespaced(client, AUTHENTICATION_NAMESPACE);
        let config = watcher::Config::default()
            .fields(&format!("metadata.name={AUTHENTICATION_CONFIG_MAP}"));
        let front_proxy = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut maps = watcher(api, config)
                .default_backoff()
                .applied_objects()
                .boxed();
            while let Some(map) = maps.next().await {
                let Some(front_proxy) = front_proxy.upgrade() else {
                    return;
                };
                let result = map.map_err(|e| FrontProxyError::Invalid {
                    key: "watch",
                    error: e.to_string(),
                });
                match result.and_then(|map| {
                    FrontProxyConfig::from_config_map(&map.data.unwrap_or_default())
                        .and_then(|config| front_proxy.update(config))
                }) {
                    Ok(()) => {}
                    Err(error) => warn!(%error, "keeping the front-proxy settings in force"),
                }
            }
        })
    }

    /// Whether `caller` is the apiserver, or why not: the webhooks' rule
    /// ([`admit_verified`]), with CNs only, as the apiserver reads the same list: a
    /// certificate the front-proxy CA signed for some other purpose with the name as a DNS SAN
    /// is not the apiserver.
    fn admit(&self, caller: &Caller) -> Result<(), &'static str> {
        let config = self.config.load();
        admit_verified(caller, &config.allowed_names, NamesRead::CommonName)
            .map_err(|refusal| refusal.reason())
    }

    fn refuse(&self, reason: &'static str) -> Response {
        self.refusals.get_or_create(&RefusedLabels { reason }).inc();
        let (code, message) = match reason {
            NO_CERTIFICATE => (
                StatusCode::UNAUTHORIZED,
                "oz's sessions API answers only the kube-apiserver: present its front-proxy client certificate",
            ),
            NO_USER => (
                StatusCode::UNAUTHORIZED,
                "the request names no user (the front-proxy username header is missing)",
            ),
            _ => (
                StatusCode::FORBIDDEN,
                "oz's sessions API answers only the kube-apiserver: this client certificate's name is not allowed",
            ),
        };
        crate::kube_status::failure(code, message)
    }
}

/// The middleware on every path: refuses (and counts) a caller that is not the apiserver (no
/// verified certificate: 401; a name not allowed: 403), before any handler runs and before
/// any header is read; else puts the headers' [`Identity`] into the request's extensions (a
/// request without a user goes on without one: the apiserver's discovery calls).
pub async fn guard(
    State(front_proxy): State<Arc<FrontProxy>>,
    mut request: Request,
    next: Next,
) -> Response {
    let caller = Caller::of_request(&request);
    if let Err(reason) = front_proxy.admit(&caller) {
        warn!(path = %request.uri().path(), reason, name = ?caller.name(),
            "refused a sessions API call: not the kube-apiserver");
        return front_proxy.refuse(reason);
    }
    if let Some(identity) = front_proxy.config.load().identity(request.headers()) {
        request.extensions_mut().insert(identity);
    }
    next.run(request).await
}

/// The middleware on the session routes (behind [`guard`]): a request without an [`Identity`]
/// is refused with 401, so no handler runs without one.
pub async fn require_identity(
    State(front_proxy): State<Arc<FrontProxy>>,
    request: Request,
    next: Next,
) -> Response {
    if request.extensions().get::<Identity>().is_none() {
        return front_proxy.refuse(NO_USER);
    }
    next.run(request).await
}

#[cfg(test)]
mod tests;
