//! Discovery of `sessions.wizardofoz.co/v1alpha1`: what the apiserver asks to mark the
//! APIService available and to list the group's resources (`kubectl api-resources`).

use axum::{Json, Router, routing::get};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    APIGroup, APIGroupList, APIResource, APIResourceList, GroupVersionForDiscovery,
};
use oz_api::{SESSIONS_GROUP, SESSIONS_VERSION};

/// `/apis/sessions.wizardofoz.co/v1alpha1`: where the group version is served.
pub fn group_version_path() -> String {
    format!("/apis/{SESSIONS_GROUP}/{SESSIONS_VERSION}")
}

fn group_version() -> String {
    format!("{SESSIONS_GROUP}/{SESSIONS_VERSION}")
}

fn preferred() -> GroupVersionForDiscovery {
    GroupVersionForDiscovery {
        group_version: group_version(),
        version: SESSIONS_VERSION.into(),
    }
}

/// The group, as `GET /apis/sessions.wizardofoz.co` answers.
pub fn api_group() -> APIGroup {
    APIGroup {
        name: SESSIONS_GROUP.into(),
        versions: vec![preferred()],
        preferred_version: Some(preferred()),
        server_address_by_client_cidrs: None,
    }
}

/// `GET /apis`: this server's one group.
pub fn api_group_list() -> APIGroupList {
    APIGroupList {
        groups: vec![api_group()],
    }
}

/// `GET /apis/sessions.wizardofoz.co/v1alpha1`: `pods/exec` and `pods/attach` (create and get,
/// as the core subresources: kubectl uses either verb for the upgrade) and `recordings` (get).
pub fn api_resource_list() -> APIResourceList {
    let resource = |name: &str, kind: &str, verbs: &[&str]| APIResource {
        name: name.into(),
        singular_name: String::new(),
        namespaced: true,
        kind: kind.into(),
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        ..APIResource::default()
    };
    APIResourceList {
        group_version: group_version(),
        resources: vec![
            resource("pods/exec", "PodExecOptions", &["create", "get"]),
            resource("pods/attach", "PodAttachOptions", &["create", "get"]),
            APIResource {
                singular_name: "recording".into(),
                ..resource("recordings", "Recording", &["get"])
            },
        ],
    }
}

/// The discovery routes (the OpenAPI paths are left to the router's 404).
pub fn router() -> Router {
    Router::new()
        .route("/apis", get(|| async { Json(api_group_list()) }))
        .route(
            &format!("/apis/{SESSIONS_GROUP}"),
            get(|| async { Json(api_group()) }),
        )
        .route(
            &group_version_path(),
            get(|| async { Json(api_resource_list()) }),
        )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn discovery_documents_are_what_the_aggregator_and_kubectl_read() {
        let list = serde_json::to_value(api_resource_list()).unwrap();
        assert_eq!(list["kind"], "APIResourceList");
        assert_eq!(list["groupVersion"], "sessions.wizardofoz.co/v1alpha1");
        let resources = list["resources"].as_array().unwrap();
        let names: Vec<_> = resources.iter().map(|r| r["name"].clone()).collect();
        assert_eq!(
            names,
            [
                json!("pods/exec"),
                json!("pods/attach"),
                json!("recordings")
            ]
        );
        assert_eq!(resources[0]["kind"], "PodExecOptions");
        assert_eq!(resources[0]["verbs"], json!(["create", "get"]));
        assert_eq!(resources[0]["namespaced"], true);
        assert_eq!(resources[1]["kind"], "PodAttachOptions");
        assert_eq!(resources[2]["kind"], "Recording");
        assert_eq!(resources[2]["verbs"], json!(["get"]));

        let groups = serde_json::to_value(api_group_list()).unwrap();
        assert_eq!(groups["kind"], "APIGroupList");
        assert_eq!(groups["groups"][0]["name"], "sessions.wizardofoz.co");
        assert_eq!(
            groups["groups"][0]["preferredVersion"],
            json!({"groupVersion": "sessions.wizardofoz.co/v1alpha1", "version": "v1alpha1"})
        );
        let group = serde_json::to_value(api_group()).unwrap();
        assert_eq!(group["kind"], "APIGroup");
        assert_eq!(group["versions"][0]["version"], "v1alpha1");
    }
}
