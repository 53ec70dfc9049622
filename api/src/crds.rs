//! The CustomResourceDefinitions generated from the Rust types.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde_json::Value;

use crate::{
    AccessApproval, AccessLock, ExecAccessRequest, ExecAccessTemplate, PodAccessRequest,
    PodAccessTemplate,
};

/// The six CRDs: templates first, then requests, then approvals and locks.
pub fn all_crds() -> Vec<CustomResourceDefinition> {
    vec![
        ExecAccessTemplate::crd(),
        ExecAccessRequest::crd(),
        without_nested_pod_spec_docs(PodAccessTemplate::crd()),
        PodAccessRequest::crd(),
        AccessApproval::crd(),
        AccessLock::crd(),
    ]
}

/// The six CRDs as one multi-document YAML stream, as committed under `config/crd/`.
pub fn crds_yaml() -> Result<String, serde_saphyr::ser::Error> {
    let mut out = String::new();
    for crd in all_crds() {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(&crd)?);
    }
    Ok(out)
}

/// Drops the descriptions inside `spec.podSpec`, the full upstream PodSpec schema: with them the
/// CRD is 350 kB, more than `kubectl apply` can keep in its last-applied annotation (256 kB).
/// Those fields are Kubernetes' own and `kubectl explain pod.spec` documents them.
fn without_nested_pod_spec_docs(crd: CustomResourceDefinition) -> CustomResourceDefinition {
    let mut value = serde_json::to_value(&crd).expect("a CRD serialises to JSON");
    for version in value["spec"]["versions"]
        .as_array_mut()
        .into_iter()
        .flatten()
    {
        let pod_spec = &mut version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            ["podSpec"];
        if let Some(properties) = pod_spec.get_mut("properties") {
            strip_descriptions(properties);
        }
    }
    serde_json::from_value(value).expect("stripping descriptions keeps a valid CRD")
}

fn strip_descriptions(value: &mut Value) {
    match value {
        Value::Object(map) => {
            // A property may itself be named "description"; only drop the keyword, a string.
            if map.get("description").is_some_and(Value::is_string) {
                map.remove("description");
            }
            map.values_mut().for_each(strip_descriptions);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_descriptions),
        _ => {}
    }
}
