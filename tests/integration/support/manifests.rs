//! YAML manifests: parsed into typeless objects and created through the apiserver.

use kube::{
    Api, Client,
    api::{ApiResource, DynamicObject, GroupVersionKind, PostParams},
};

/// Parses one YAML manifest into a typeless object and the API resource it belongs to.
pub fn parse_manifest(yaml: &str) -> (DynamicObject, ApiResource) {
    let value: serde_json::Value = serde_saphyr::from_str(yaml).unwrap();
    let object: DynamicObject = serde_json::from_value(value).unwrap();
    let types = object
        .types
        .clone()
        .expect("manifests have apiVersion and kind");
    let (group, version) = match types.api_version.split_once('/') {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (String::new(), types.api_version.clone()),
    };
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(&group, &version, &types.kind));
    (object, resource)
}

/// Creates a YAML manifest in `namespace` (whatever namespace it names) as `client`, returning
/// the stored object or the apiserver's refusal.
pub async fn create_manifest(
    client: &Client,
    namespace: &str,
    yaml: &str,
) -> Result<DynamicObject, kube::Error> {
    let (mut object, resource) = parse_manifest(yaml);
    object.metadata.namespace = Some(namespace.into());
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource);
    api.create(&PostParams::default(), &object).await
}
