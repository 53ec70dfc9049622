//! A fleet hub's install (`oz-manager manifests --fleet-hub`) against the real control plane:
//! applied by server-side apply, its RBAC lets oz's ServiceAccount read the inventory and get the
//! spokes' token Secrets in the fleet namespace, and nothing of the kind anywhere else. Asked of
//! the apiserver as that ServiceAccount (SelfSubjectAccessReview with its own token), so what is
//! checked is what the apiserver's RBAC decides, not what the generator meant.

use k8s_openapi::api::authorization::v1::ResourceAttributes;
use kube::Client;
use oz::install::{Component, FleetHubOptions, InstallOptions, install_yaml, is_users_role};

use crate::support::{
    cluster::{env, install_crds},
    install::{apply_install, client_from, delete_cluster_scoped, service_account_kubeconfig},
    users::self_review,
};

/// The Cluster Inventory API's group, where ClusterProfiles are.
const INVENTORY: &str = "multicluster.x-k8s.io";

/// Whether `client` may `verb` `resource` (of `group`) in `namespace` (`""`: cluster-wide).
async fn may(client: &Client, verb: &str, group: &str, resource: &str, namespace: &str) -> bool {
    let attributes = ResourceAttributes {
        namespace: (!namespace.is_empty()).then(|| namespace.into()),
        group: Some(group.into()),
        verb: Some(verb.into()),
        resource: Some(resource.into()),
        ..Default::default()
    };
    self_review(client, attributes).await
}

#[tokio::test]
async fn a_hub_reads_profiles_and_gets_token_secrets_in_its_fleet_namespace_alone() {
    install_crds().await;
    let admin = env().admin().await.unwrap();
    let operator_ns = env().namespace("fleet-hub-oz").await.unwrap();
    // Where requests are: a hub watches every namespace, but reads no Secret by this rule there.
    let ns = env().namespace("fleet-hub").await.unwrap();
    let fleet_ns = env().namespace("fleet-hub-fleet").await.unwrap();
    let other = env().namespace("fleet-hub-other").await.unwrap();
    // Cluster-scoped objects (its ClusterRole) under a name of this test's own.
    let options = InstallOptions {
        name: operator_ns.clone(),
        namespace: operator_ns.clone(),
        controllers: vec![Component::Exec, Component::Pod],
        crds: false,
        fleet_hub: Some(FleetHubOptions {
            namespace: fleet_ns.clone(),
            ..FleetHubOptions::default()
        }),
        ..InstallOptions::default()
    };
    let yaml = install_yaml(&options).unwrap();
    // The users' ClusterRoles aside: they are cluster-wide, shared with other tests, and not oz's.
    let applied = apply_install(&admin, &yaml, |o| !is_users_role(&o.metadata)).await;
    assert!(
        applied.iter().any(|o| {
            o.types.as_ref().unwrap().kind == "Role"
                && o.metadata.namespace.as_deref() == Some(fleet_ns.as_str())
        }),
        "the hub's Role is in the fleet namespace"
    );

    let kubeconfig = service_account_kubeconfig(
        env(),
        &admin,
        &operator_ns,
        &format!("{operator_ns}-manager"),
    )
    .await;
    let oz = client_from(&kubeconfig).await;
    let mut wrong = Vec::new();
    for (verb, group, resource, namespace, allowed) in [
        // The inventory, read and watched, in the fleet namespace.
        ("get", INVENTORY, "clusterprofiles", fleet_ns.as_str(), true),
        (
            "list",
            INVENTORY,
            "clusterprofiles",
            fleet_ns.as_str(),
            true,
        ),
        (
            "watch",
            INVENTORY,
            "clusterprofiles",
            fleet_ns.as_str(),
            true,
        ),
        // The spokes' tokens, by GET alone.
        ("get", "", "secrets", fleet_ns.as_str(), true),
        // Never written, never listed.
        (
            "create",
            INVENTORY,
            "clusterprofiles",
            fleet_ns.as_str(),
            false,
        ),
        (
            "update",
            INVENTORY,
            "clusterprofiles",
            fleet_ns.as_str(),
            false,
        ),
        (
            "patch",
            INVENTORY,
            "clusterprofiles",
            fleet_ns.as_str(),
            false,
        ),
        (
            "delete",
            INVENTORY,
            "clusterprofiles",
            fleet_ns.as_str(),
            false,
        ),
        ("list", "", "secrets", fleet_ns.as_str(), false),
        ("watch", "", "secrets", fleet_ns.as_str(), false),
        ("create", "", "secrets", fleet_ns.as_str(), false),
        ("update", "", "secrets", fleet_ns.as_str(), false),
        ("delete", "", "secrets", fleet_ns.as_str(), false),
        // Nothing of the kind anywhere else: oz's own namespace, the one it works in, another,
        // or cluster-wide.
        (
            "get",
            INVENTORY,
            "clusterprofiles",
            operator_ns.as_str(),
            false,
        ),
        ("list", INVENTORY, "clusterprofiles", ns.as_str(), false),
        ("list", INVENTORY, "clusterprofiles", other.as_str(), false),
        ("list", INVENTORY, "clusterprofiles", "", false),
        ("get", "", "secrets", operator_ns.as_str(), false),
        ("get", "", "secrets", ns.as_str(), false),
        ("get", "", "secrets", other.as_str(), false),
        ("get", "", "secrets", "", false),
    ] {
        if may(&oz, verb, group, resource, namespace).await != allowed {
            let scope = if namespace.is_empty() {
                "the cluster"
            } else {
                namespace
            };
            wrong.push(format!(
                "{} {verb} {resource} in {scope}",
                if allowed { "may not" } else { "may" }
            ));
        }
    }
    delete_cluster_scoped(&admin, &applied).await;
    assert!(
        wrong.is_empty(),
        "oz's ServiceAccount on a hub: {}",
        wrong.join("; ")
    );
}
