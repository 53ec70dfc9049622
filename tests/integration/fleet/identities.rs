//! A spoke whose authenticator names people differently from the hub's: the hub knows alice as
//! `hub-alice` in `hub-devs`, spoke `b` as `corp-alice` in `corp-devs`, and b's oz is told so
//! (`--fleet-user-prefix=hub-=corp-`, `--fleet-group-prefix=hub-=corp-`). The grant on b binds
//! `corp-alice`; a hub user without the hub's prefix is refused there, naming the flag.
//! (kube-testenv's user names cannot hold `:`, so the prefixes here end in `-`.)

use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::{Api, api::ListParams};
use oz_api::{ExecAccessRequest, RequestPhase, condition_type};

use super::setup::{NS, OzFleet, SETTLES};
use crate::support::{
    fleet::FleetUsers, manifests::create_manifest, operator::eventually_or_show, users::may_exec,
};

/// A fleet template for `web` on spoke b, without approval. Its allowedGroups name the group
/// under both names: the hub checks the hub's (`hub-devs`, and `devs`, so that the hub lets
/// the unprefixed alice through and b's refusal is what is tested), b checks its own
/// (`corp-devs`).
const TEMPLATE: &str = "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessTemplate\n\
                        metadata: {name: web}\nspec:\n  clusters: {names: [b]}\n  \
                        accessConfig:\n    allowedGroups: [hub-devs, devs, corp-devs]\n    \
                        defaultDuration: 1h\n    maxDuration: 2h\n  \
                        controllerTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n";

fn request(name: &str) -> String {
    format!(
        "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessRequest\nmetadata: {{name: {name}}}\n\
         spec: {{templateName: web, cluster: b}}\n"
    )
}

#[tokio::test]
async fn a_spoke_grants_the_hubs_user_under_its_own_name_and_refuses_one_it_cannot_name() {
    let users = FleetUsers::default()
        .on_hub("hub-alice", &["hub-devs"])
        .on_spoke("b", "corp-alice", &["corp-devs"]);
    let mapping: &[&str] = &[
        "--fleet-user-prefix=hub-=corp-",
        "--fleet-group-prefix=hub-=corp-",
    ];
    let oz = OzFleet::start_with(&[("b", &[])], users, &[("b", mapping)]).await;
    let hub_admin = oz.fleet.hub().admin().await.unwrap();
    create_manifest(&hub_admin, NS, TEMPLATE).await.unwrap();
    oz.wait_until_synced("web", &["b"]).await;

    // hub-alice asks on the hub; b grants corp-alice.
    oz.wait_until_hub_admits("hub-alice", "web").await;
    create_manifest(&oz.on_hub("hub-alice").await, NS, &request("hub-alice-web"))
        .await
        .unwrap();
    oz.wait_for_hub_phase("hub-alice-web", RequestPhase::Ready)
        .await;
    let on_b = Api::<ExecAccessRequest>::namespaced(oz.spoke_admin("b").await, NS);
    let granted = on_b.get("hub-alice-web").await.unwrap();
    let requester = granted.spec.requester.as_ref().unwrap();
    assert_eq!(requester.username, "corp-alice");
    assert!(
        requester.groups.iter().any(|g| g == "corp-devs")
            && !requester.groups.iter().any(|g| g.starts_with("hub-")),
        "{requester:?}"
    );
    let forwarded = granted.spec.forwarded.as_ref().unwrap();
    let hubs = forwarded
        .requester
        .as_ref()
        .expect("the hub's name is kept");
    assert_eq!(hubs.username, "hub-alice");

    let bindings = Api::<RoleBinding>::namespaced(oz.spoke_admin("b").await, NS)
        .list(&ListParams::default())
        .await
        .unwrap();
    let users: Vec<String> = bindings
        .items
        .iter()
        .flat_map(|b| b.subjects.iter().flatten())
        .filter(|s| s.kind == "User")
        .map(|s| s.name.clone())
        .collect();
    assert_eq!(users, ["corp-alice"], "b's RoleBindings bind {users:?}");
    let pod = oz.web_pod("b");
    assert!(may_exec(&oz.on_spoke("b", "corp-alice").await, NS, &pod).await);
    assert!(!may_exec(&oz.on_spoke("b", "alice").await, NS, &pod).await);

    // alice, on the hub without the hub's prefix, has no name on b: b refuses the hub's
    // request, and the hub's request says why.
    oz.wait_until_hub_admits("alice", "web").await;
    create_manifest(&oz.on_hub("alice").await, NS, &request("alice-web"))
        .await
        .unwrap();
    let hub_requests = Api::<ExecAccessRequest>::namespaced(hub_admin, NS);
    let why = eventually_or_show(
        SETTLES,
        "the hub's request to show b's refusal",
        &oz.operators(),
        || async {
            let request = hub_requests.get("alice-web").await.ok()?;
            let status = request.status?;
            let created = status
                .conditions
                .iter()
                .find(|c| c.type_() == condition_type::ACCESS_RESOURCES_CREATED)?;
            (created.status() == "False" && created.message.contains("--fleet-user-prefix"))
                .then(|| created.message.to_string())
        },
    )
    .await;
    assert!(
        why.contains("\"alice\" does not start with \"hub-\""),
        "{why}"
    );
    assert!(on_b.get_opt("alice-web").await.unwrap().is_none());
    assert!(!may_exec(&oz.on_spoke("b", "alice").await, NS, &pod).await);
}
