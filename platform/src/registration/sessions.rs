//! The aggregated sessions API's registration: the Service the apiserver proxies it to
//! ([`SessionsService`]) and its APIService.

use k8s_openapi::{
    ByteString,
    kube_aggregator::pkg::apis::apiregistration::v1::{
        APIService, APIServiceSpec, ServiceReference as ApiServiceReference,
    },
};

use super::{
    endpoint::WebhookEndpoint,
    object_meta::{CLUSTER_DOMAIN, metadata},
};
use crate::{Error, Result};

/// The Service the apiserver proxies oz's aggregated sessions API to
/// ([`oz_api::SESSIONS_API_SERVICE`]): `https://<name>.<namespace>.svc:<port>` (in a cluster, a
/// ClusterIP Service; locally, an `ExternalName` Service whose name is `localhost`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionsService {
    /// The Service's namespace.
    pub namespace: String,
    /// The Service's name.
    pub name: String,
    /// The Service port.
    pub port: u16,
}

impl SessionsService {
    /// `NAMESPACE/NAME`, or `NAMESPACE/NAME:PORT` when the Service's port is not
    /// `default_port` (the port oz listens on: a Service may map another port to it, and so may
    /// a second local replica whose APIService should name the first one's port).
    pub fn parse(service: &str, default_port: u16) -> Result<Self> {
        let (namespace_and_name, port) = match service.rsplit_once(':') {
            Some((rest, port)) => match port.parse::<u16>() {
                Ok(port) if port > 0 => (rest, port),
                _ => {
                    return Err(Error::Config(format!(
                        "sessions service {service:?}: the port after ':' must be 1-65535"
                    )));
                }
            },
            None => (service, default_port),
        };
        match WebhookEndpoint::service(namespace_and_name, port) {
            Ok(WebhookEndpoint::Service {
                namespace, name, ..
            }) => Ok(Self {
                namespace,
                name,
                port,
            }),
            _ => Err(Error::Config(format!(
                "sessions service {namespace_and_name:?} must be NAMESPACE/NAME or NAMESPACE/NAME:PORT"
            ))),
        }
    }

    /// The names the serving certificate needs for it: the apiserver verifies the server as
    /// `<name>.<namespace>.svc`.
    pub fn serving_names(&self) -> Vec<String> {
        let (name, namespace) = (&self.name, &self.namespace);
        vec![
            format!("{name}.{namespace}.svc"),
            format!("{name}.{namespace}.svc.{CLUSTER_DOMAIN}"),
        ]
    }

    /// The APIService `v1alpha1.sessions.wizardofoz.co`, trusting `ca_bundle` (PEM).
    pub fn api_service(&self, ca_bundle: &str) -> APIService {
        APIService {
            metadata: metadata(oz_api::SESSIONS_API_SERVICE.into()),
            spec: Some(APIServiceSpec {
                group: Some(oz_api::SESSIONS_GROUP.into()),
                version: Some(oz_api::SESSIONS_VERSION.into()),
                service: Some(ApiServiceReference {
                    namespace: Some(self.namespace.clone()),
                    name: Some(self.name.clone()),
                    port: Some(i32::from(self.port)),
                }),
                ca_bundle: Some(ByteString(ca_bundle.as_bytes().to_vec())),
                insecure_skip_tls_verify: Some(false),
                group_priority_minimum: SESSIONS_GROUP_PRIORITY_MINIMUM,
                version_priority: SESSIONS_VERSION_PRIORITY,
            }),
            status: None,
        }
    }
}

/// The sessions API group's priority among groups in discovery (as the built-in groups').
pub const SESSIONS_GROUP_PRIORITY_MINIMUM: i32 = 1000;
/// The sessions API version's priority within its group.
pub const SESSIONS_VERSION_PRIORITY: i32 = 15;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registration::Registration;

    #[test]
    fn the_sessions_api_service_trusts_the_ca_and_names_its_service_port() {
        let service = SessionsService::parse("oz-system/oz-webhook", 9444).unwrap();
        assert!(SessionsService::parse("oz-webhook", 9444).is_err());
        let elsewhere = SessionsService::parse("oz-system/oz-webhook:443", 9444).unwrap();
        assert_eq!(
            (elsewhere.name.as_str(), elsewhere.port),
            ("oz-webhook", 443)
        );
        for bad in [
            "oz-system/oz-webhook:",
            "oz-system/oz-webhook:0",
            "oz/oz:https",
        ] {
            let error = SessionsService::parse(bad, 9444).unwrap_err().to_string();
            assert!(error.contains("1-65535"), "{bad}: {error}");
        }
        let object = serde_json::to_value(service.api_service("PEM")).unwrap();
        assert_eq!(
            object["metadata"]["name"],
            "v1alpha1.sessions.wizardofoz.co"
        );
        assert_eq!(
            object["spec"],
            serde_json::json!({
                "group": "sessions.wizardofoz.co",
                "version": "v1alpha1",
                "service": {"namespace": "oz-system", "name": "oz-webhook", "port": 9444},
                "caBundle": "UEVN",
                "insecureSkipTLSVerify": false,
                "groupPriorityMinimum": 1000,
                "versionPriority": 15,
            })
        );
        // The apiserver verifies the server as <service>.<namespace>.svc: the certificate
        // names it beside the webhook endpoint's names.
        let mut registration =
            Registration::new(WebhookEndpoint::url("https://127.0.0.1:9443").unwrap());
        registration.sessions = Some(service);
        assert_eq!(
            registration.serving_names(),
            [
                "127.0.0.1",
                "localhost",
                "oz-webhook.oz-system.svc",
                "oz-webhook.oz-system.svc.cluster.local"
            ]
        );
    }
}
