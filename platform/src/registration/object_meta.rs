//! What every object oz registers carries, and the DNS domain its Services are named in.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::FIELD_MANAGER;

/// The cluster's DNS domain, the last part of a Service's full name.
pub const CLUSTER_DOMAIN: &str = "cluster.local";

/// The metadata of a registration named `name`: labelled as managed by oz.
pub fn metadata(name: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        labels: Some(
            [(
                "app.kubernetes.io/managed-by".to_string(),
                FIELD_MANAGER.to_string(),
            )]
            .into(),
        ),
        ..Default::default()
    }
}
