//! How the apiserver reaches oz's webhook server ([`WebhookEndpoint`]): through a Service in a
//! cluster, or a URL locally; and the names the serving certificate must carry for each.

use axum::http::Uri;
use k8s_openapi::{
    ByteString,
    api::admissionregistration::v1::{ServiceReference, WebhookClientConfig},
};

use super::object_meta::CLUSTER_DOMAIN;
use crate::{Error, Result};

/// How the apiserver reaches the webhook server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WebhookEndpoint {
    /// In a cluster: through a Service (`--webhook-service NAMESPACE/NAME`).
    Service {
        /// The Service's namespace.
        namespace: String,
        /// The Service's name.
        name: String,
        /// The Service port (not the container port).
        port: u16,
    },
    /// Locally: a URL base such as `https://127.0.0.1:9443` (`--webhook-url-base`).
    Url {
        /// `https://host[:port]`, without a path.
        base: String,
    },
}

impl WebhookEndpoint {
    /// A Service endpoint from `NAMESPACE/NAME` and the Service port.
    pub fn service(namespace_and_name: &str, port: u16) -> Result<Self> {
        match namespace_and_name.split_once('/') {
            Some((namespace, name))
                if !namespace.is_empty() && !name.is_empty() && !name.contains('/') =>
            {
                Ok(Self::Service {
                    namespace: namespace.into(),
                    name: name.into(),
                    port,
                })
            }
            _ => Err(Error::Config(format!(
                "webhook service {namespace_and_name:?} must be NAMESPACE/NAME"
            ))),
        }
    }

    /// A URL endpoint; `base` must be `https://host[:port]` with no path, query or user info.
    pub fn url(base: &str) -> Result<Self> {
        let base = base.trim_end_matches('/');
        let uri: Uri = base
            .parse()
            .map_err(|e| Error::Config(format!("webhook URL base {base:?}: {e}")))?;
        let authority = uri.authority().map(|a| a.as_str()).unwrap_or_default();
        if uri.scheme_str() != Some("https")
            || uri.host().is_none()
            || authority.contains('@')
            || uri.path_and_query().is_some_and(|p| p.as_str() != "/")
        {
            return Err(Error::Config(format!(
                "webhook URL base {base:?} must be https://HOST[:PORT], without path, query or user"
            )));
        }
        Ok(Self::Url { base: base.into() })
    }

    /// The DNS names and IP addresses the serving certificate must carry for this endpoint:
    /// the Service's DNS names, or the URL's host plus the loopback address and localhost.
    pub fn serving_names(&self) -> Vec<String> {
        match self {
            Self::Service {
                namespace, name, ..
            } => vec![
                name.clone(),
                format!("{name}.{namespace}"),
                format!("{name}.{namespace}.svc"),
                format!("{name}.{namespace}.svc.{CLUSTER_DOMAIN}"),
            ],
            Self::Url { base } => {
                let host = base
                    .parse::<Uri>()
                    .ok()
                    .and_then(|u| u.host().map(|h| h.trim_matches(['[', ']']).to_string()));
                let mut names = vec!["127.0.0.1".to_string(), "localhost".to_string()];
                if let Some(host) = host
                    && !names.iter().any(|n| n.eq_ignore_ascii_case(&host))
                {
                    names.insert(0, host);
                }
                names
            }
        }
    }

    pub(super) fn client_config(&self, path: &str, ca_bundle: &str) -> WebhookClientConfig {
        let ca_bundle = Some(ByteString(ca_bundle.as_bytes().to_vec()));
        match self {
            Self::Service {
                namespace,
                name,
                port,
            } => WebhookClientConfig {
                service: Some(ServiceReference {
                    namespace: namespace.clone(),
                    name: name.clone(),
                    port: Some(i32::from(*port)),
                    path: Some(path.into()),
                }),
                ca_bundle,
                url: None,
            },
            Self::Url { base } => WebhookClientConfig {
                url: Some(format!("{base}{path}")),
                ca_bundle,
                service: None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_endpoints_name_every_service_dns_name() {
        let endpoint = WebhookEndpoint::service("oz-system/oz-webhook", 443).unwrap();
        assert_eq!(
            endpoint.serving_names(),
            [
                "oz-webhook",
                "oz-webhook.oz-system",
                "oz-webhook.oz-system.svc",
                "oz-webhook.oz-system.svc.cluster.local"
            ]
        );
        for bad in ["oz-webhook", "/oz", "oz/", "a/b/c"] {
            assert!(WebhookEndpoint::service(bad, 443).is_err(), "{bad}");
        }
    }

    #[test]
    fn url_endpoints_name_loopback_and_their_host() {
        let local = WebhookEndpoint::url("https://127.0.0.1:9443/").unwrap();
        assert_eq!(local.serving_names(), ["127.0.0.1", "localhost"]);
        let other = WebhookEndpoint::url("https://host.docker.internal:9443").unwrap();
        assert_eq!(
            other.serving_names(),
            ["host.docker.internal", "127.0.0.1", "localhost"]
        );
        let v6 = WebhookEndpoint::url("https://[::1]:9443").unwrap();
        assert_eq!(v6.serving_names(), ["::1", "127.0.0.1", "localhost"]);
        for bad in [
            "http://127.0.0.1:9443",
            "https://127.0.0.1:9443/path",
            "https://u@127.0.0.1",
            "https://127.0.0.1:9443?q=1",
            "not a url",
        ] {
            assert!(WebhookEndpoint::url(bad).is_err(), "{bad}");
        }
    }
}
