//! The hub's way into a spoke, with the real binaries and none of oz's code: a consumer that
//! combines a spoke's ClusterProfile on the hub with the provider file gets a kubeconfig whose
//! user is the secretreader plugin; kubectl with it is the hub's ServiceAccount on that spoke
//! until its token is revoked, and that account may keep oz's templates and requests and do
//! nothing else there.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use kube::{
    Api,
    api::{ApiResource, DynamicObject, GroupVersionKind, ListParams},
};
use oz_testenv::exec;
use serde_json::{Value, json};

use crate::support::{fleet::Fleet, polling::eventually};

/// How long a revoked token may still work: the spoke's apiserver caches an accepted token for
/// 10 s; the rest is slack for a loaded machine.
pub(super) const REVOKED_WITHIN: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_cluster_profile_and_the_provider_file_reach_the_spoke_as_the_hub_account() {
    let fleet = Fleet::start_unregistered(&["a", "b"]).await;
    fleet.register("a", &[("env", "prod")]).await;
    fleet.register("b", &[("env", "dev")]).await;
    assert_eq!(profile_names(&fleet, "env=dev").await, ["b"]);
    let hub_user = fleet.hub_user_on_spokes();
    assert_eq!(hub_user, "system:serviceaccount:oz-system:oz-fleet-hub");
    let a = exec_kubeconfig(&fleet, "a").await;
    let b = exec_kubeconfig(&fleet, "b").await;
    // Each spoke signs its own tokens, so each answer also shows the plugin read the Secret its
    // cluster's `clusterName` names.
    assert_eq!(whoami(&fleet, &b).await, Ok(hub_user.clone()));
    assert_eq!(whoami(&fleet, &a).await, Ok(hub_user.clone()));

    fleet.revoke_token("b").await;
    let refusal = eventually(
        REVOKED_WITHIN,
        "spoke b to refuse the revoked token",
        || {
            let (fleet, b) = (&fleet, &b);
            async move { whoami(fleet, b).await.err() }
        },
    )
    .await;
    assert!(refusal.contains("Unauthorized"), "{refusal}");
    assert_eq!(
        whoami(&fleet, &a).await,
        Ok(hub_user.clone()),
        "a's token is a's own"
    );

    // The same kubeconfig works again once the hub's Secret holds a new token.
    fleet.rotate_token("b").await;
    assert_eq!(whoami(&fleet, &b).await, Ok(hub_user.clone()));

    // A spoke leaves the inventory with its ClusterProfile, but that revokes nothing: whoever
    // made a client from it keeps the spoke's token until the spoke revokes it.
    fleet.delete_cluster_profile("a").await;
    assert_eq!(profile_names(&fleet, "").await, ["b"]);
    assert_eq!(whoami(&fleet, &a).await, Ok(hub_user));
}

/// What the hub's account may do on a spoke: `kubectl auth can-i` asked through the plugin.
const ALLOWED: &[&[&str]] = &[
    &["create", "execaccessrequests.crds.wizardofoz.co"],
    &["delete", "execaccessrequests.crds.wizardofoz.co"],
    &["create", "podaccessrequests.crds.wizardofoz.co"],
    &["create", "execaccesstemplates.crds.wizardofoz.co"],
    &["update", "execaccesstemplates.crds.wizardofoz.co"],
    &["delete", "execaccesstemplates.crds.wizardofoz.co"],
    &["create", "podaccesstemplates.crds.wizardofoz.co"],
];

/// What it must not: grant itself or anyone access, read credentials, act as someone else,
/// reach pods, approve, or change a request the spoke's oz is granting.
const REFUSED: &[&[&str]] = &[
    &["create", "rolebindings.rbac.authorization.k8s.io"],
    &["create", "clusterrolebindings.rbac.authorization.k8s.io"],
    &["create", "clusterroles.rbac.authorization.k8s.io"],
    &["get", "secrets"],
    &["get", "secrets", "--namespace=oz-system"],
    &["list", "secrets", "--all-namespaces"],
    &[
        "create",
        "serviceaccounts",
        "--subresource=token",
        "--namespace=oz-system",
    ],
    &["impersonate", "users"],
    &["impersonate", "groups"],
    &["impersonate", "serviceaccounts"],
    &["create", "pods"],
    &["create", "pods", "--subresource=exec"],
    &["create", "accessapprovals.crds.wizardofoz.co"],
    &["update", "execaccessrequests.crds.wizardofoz.co"],
    &[
        "update",
        "execaccessrequests.crds.wizardofoz.co",
        "--subresource=status",
    ],
];

#[tokio::test]
async fn the_hub_account_may_keep_templates_and_requests_and_nothing_more() {
    let fleet = Fleet::start(&["b"]).await;
    let b = exec_kubeconfig(&fleet, "b").await;
    let ns = fleet.spoke("b").namespace("fleet-rbac").await.unwrap();
    let mut wrong = Vec::new();
    for (question, expected) in ALLOWED
        .iter()
        .map(|q| (q, true))
        .chain(REFUSED.iter().map(|q| (q, false)))
    {
        let mut args = vec!["auth", "can-i", "--namespace", &ns];
        args.extend_from_slice(question);
        if can_i(&fleet, &b, &args).await != expected {
            wrong.push(format!("{} (expected {expected})", question.join(" ")));
        }
    }
    assert!(wrong.is_empty(), "wrong answers: {wrong:#?}");
}

/// A kubeconfig for spoke `name` made the way a ClusterProfile consumer makes its client: the
/// cluster is the ClusterProfile's `secretreader` access provider, read from the hub; the user
/// is that provider's exec config in the provider file, never interactive (as the
/// cluster-inventory-api library sets it).
pub(super) async fn exec_kubeconfig(fleet: &Fleet, name: &str) -> PathBuf {
    let profile = cluster_profiles(fleet).await.get(name).await.unwrap();
    let cluster =
        named("secretreader", &profile.data["status"]["accessProviders"])["cluster"].clone();
    assert_eq!(
        named("client.authentication.k8s.io/exec", &cluster["extensions"])["extension"],
        json!({"clusterName": name})
    );
    let providers: Value =
        serde_json::from_str(&std::fs::read_to_string(fleet.provider_file()).unwrap()).unwrap();
    let mut exec = named("secretreader", &providers["providers"])["execConfig"].clone();
    assert_eq!(exec["provideClusterInfo"], json!(true));
    exec["interactiveMode"] = json!("Never");
    let kubeconfig = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": "fleet-hub", "user": {"exec": exec}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": "fleet-hub"}}],
        "current-context": name,
    });
    let path = fleet
        .hub()
        .work_dir()
        .join(format!("{name}-exec.kubeconfig"));
    std::fs::write(&path, kubeconfig.to_string()).unwrap();
    path
}

/// The names of the hub's ClusterProfiles that `selector` selects (all for `""`), sorted.
async fn profile_names(fleet: &Fleet, selector: &str) -> Vec<String> {
    let mut names: Vec<String> = cluster_profiles(fleet)
        .await
        .list(&ListParams::default().labels(selector))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    names.sort();
    names
}

async fn cluster_profiles(fleet: &Fleet) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "multicluster.x-k8s.io",
        "v1alpha1",
        "ClusterProfile",
    ));
    Api::namespaced_with(
        fleet.hub().admin().await.unwrap(),
        fleet.fleet_namespace(),
        &resource,
    )
}

/// The entry of the JSON list `list` whose `name` is `name`.
fn named<'a>(name: &str, list: &'a Value) -> &'a Value {
    list.as_array()
        .and_then(|items| items.iter().find(|item| item["name"] == name))
        .unwrap_or_else(|| panic!("no entry named {name} in {list}"))
}

/// Who kubectl is with `kubeconfig` (`kubectl auth whoami`), or what it said when it failed.
pub(super) async fn whoami(fleet: &Fleet, kubeconfig: &Path) -> Result<String, String> {
    let out = kubectl(fleet, kubeconfig, &["auth", "whoami", "-o", "json"]).await;
    if !out.success() {
        return Err(out.stderr);
    }
    let review: Value = serde_json::from_str(&out.stdout).unwrap();
    Ok(review["status"]["userInfo"]["username"]
        .as_str()
        .unwrap()
        .to_string())
}

/// kubectl's answer to `auth can-i ...` in `args`: yes or no; anything else fails the test.
async fn can_i(fleet: &Fleet, kubeconfig: &Path, args: &[&str]) -> bool {
    let out = kubectl(fleet, kubeconfig, args).await;
    match out.stdout.trim() {
        "yes" => true,
        "no" => false,
        _ => panic!("kubectl {}: {out:?}", args.join(" ")),
    }
}

async fn kubectl(fleet: &Fleet, kubeconfig: &Path, args: &[&str]) -> exec::Output {
    let mut command = fleet.hub().kubectl_with(kubeconfig);
    command.args(args);
    // The plugin tries the in-cluster config before $KUBECONFIG: run inside a pod, it must
    // still read the hub's Secrets.
    command.env_remove("KUBERNETES_SERVICE_HOST");
    exec::run(command, exec::RUN_TIMEOUT).await.unwrap()
}
