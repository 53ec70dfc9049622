//! The install's ClusterRoles for users aggregate into the built-in `view`, `edit` and `admin`
//! (the shared control plane runs the ClusterRole aggregation controller): a user bound to
//! `edit` in a namespace may ask for access and read templates there; one bound to `view` may
//! read and nothing more.

use std::time::Duration;

use kube::{
    Api,
    api::{DeleteParams, ListParams, PostParams},
};
use oz::install::{InstallOptions, install_yaml, is_users_role};
use oz_api::{ExecAccessRequest, ExecAccessTemplate};
use serde_json::json;

use crate::support::{
    admission::written_request,
    cluster::{env, install_crds},
    install::{apply_install, delete_cluster_scoped},
    manifests::create_manifest,
    polling::eventually,
};

#[tokio::test]
async fn edit_users_may_ask_for_access_and_view_users_only_read_through_the_aggregated_roles() {
    install_crds().await;
    let admin = env().admin().await.unwrap();
    let ns = env().namespace("user-roles").await.unwrap();
    // Only the users' ClusterRoles, under names of this test's own.
    let options = InstallOptions {
        namespace: ns.clone(),
        name: ns.clone(),
        crds: false,
        ..InstallOptions::default()
    };
    let yaml = install_yaml(&options).unwrap();
    let applied = apply_install(&admin, &yaml, |object| {
        object.types.as_ref().unwrap().kind == "ClusterRole" && is_users_role(&object.metadata)
    })
    .await;
    let names: Vec<String> = applied
        .iter()
        .map(|o| o.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "view",
            "request-access",
            "template-manager",
            "lock-admin",
            "approver"
        ]
        .map(|s| format!("{ns}-{s}"))
    );
    create_manifest(
        &admin,
        &ns,
        "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessTemplate\nmetadata: {name: web-exec}\n\
         spec:\n  accessConfig: {allowedGroups: [devs], defaultDuration: 1h, maxDuration: 2h}\n  \
         controllerTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n",
    )
    .await
    .unwrap();
    for (user, built_in) in [("alice", "edit"), ("bob", "view")] {
        let binding: k8s_openapi::api::rbac::v1::RoleBinding = serde_json::from_value(json!({
            "metadata": {"name": format!("{user}-{built_in}")},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": built_in},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        }))
        .unwrap();
        Api::<k8s_openapi::api::rbac::v1::RoleBinding>::namespaced(admin.clone(), &ns)
            .create(&PostParams::default(), &binding)
            .await
            .unwrap();
    }

    // alice (edit): reads templates and asks for access, once the aggregation has her rules.
    let alice = env().client_as("alice").await.unwrap();
    let alice_requests: Api<ExecAccessRequest> = Api::namespaced(alice.clone(), &ns);
    eventually(
        Duration::from_secs(60),
        "edit to carry oz's rules for alice",
        || async {
            alice_requests
                .create(
                    &PostParams::default(),
                    &written_request("alice-web", "web-exec"),
                )
                .await
                .ok()
        },
    )
    .await;
    let templates = Api::<ExecAccessTemplate>::namespaced(alice.clone(), &ns)
        .list(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(templates.items.len(), 1);

    // bob (view): reads requests and templates, once aggregated; asks for nothing, ends nothing.
    let bob = env().client_as("bob").await.unwrap();
    let bob_requests: Api<ExecAccessRequest> = Api::namespaced(bob.clone(), &ns);
    let listed = eventually(
        Duration::from_secs(60),
        "view to carry oz's rules for bob",
        || async { bob_requests.list(&ListParams::default()).await.ok() },
    )
    .await;
    assert_eq!(listed.items.len(), 1);
    Api::<ExecAccessTemplate>::namespaced(bob.clone(), &ns)
        .get("web-exec")
        .await
        .unwrap();
    for refused in [
        bob_requests
            .create(
                &PostParams::default(),
                &written_request("bob-web", "web-exec"),
            )
            .await
            .map(drop),
        bob_requests
            .delete("alice-web", &DeleteParams::default())
            .await
            .map(drop),
    ] {
        assert!(
            matches!(refused, Err(kube::Error::Api(ref s)) if s.code == 403),
            "{refused:?}"
        );
    }

    delete_cluster_scoped(&admin, &applied).await;
}
