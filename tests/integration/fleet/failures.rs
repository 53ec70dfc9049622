//! What happens when part of a fleet fails, one test per row of docs/fleet.md's failure table:
//! the hub down during a grant, a spoke out of reach (its credential revoked, then rotated)
//! at request time, and a ClusterProfile deleted.

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::{Api, api::ListParams};
use oz_api::{ExecAccessRequest, RequestPhase};

use super::{
    inventory::{REVOKED_WITHIN, exec_kubeconfig, whoami},
    setup::{NS, OzFleet, SETTLES},
};
use crate::support::{
    manifests::create_manifest,
    operator::eventually_or_show,
    polling::{eventually, wait_until_gone},
    users::may_exec,
};

/// A fleet template for `web` on spoke b, for devs, with no approval.
const TEMPLATE: &str = "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessTemplate\nmetadata: {name: web}\n\
                        spec:\n  clusters: {names: [b]}\n  \
                        accessConfig: {allowedGroups: [devs], defaultDuration: 1h, maxDuration: 2h}\n  \
                        controllerTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n";

/// alice's request for an exec on b, for `duration`.
fn request(duration: &str) -> String {
    format!(
        "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessRequest\nmetadata: {{name: alice-web}}\n\
         spec: {{templateName: web, cluster: b, duration: {duration}}}\n"
    )
}

/// A fleet with spoke b, the template on it, and the hub admitting alice.
async fn fleet() -> OzFleet {
    let oz = OzFleet::start(&[("b", &[])]).await;
    let hub_admin = oz.fleet.hub().admin().await.unwrap();
    create_manifest(&hub_admin, NS, TEMPLATE).await.unwrap();
    oz.wait_until_synced("web", &["b"]).await;
    oz.wait_until_hub_admits("alice", "web").await;
    oz
}

/// A fleet in which alice holds a 30-minute exec on b, asked for on the hub.
async fn granted_on_b() -> OzFleet {
    let oz = fleet().await;
    create_manifest(&oz.on_hub("alice").await, NS, &request("30m"))
        .await
        .unwrap();
    oz.wait_for_hub_phase("alice-web", RequestPhase::Ready)
        .await;
    oz
}

#[tokio::test]
async fn with_the_hub_down_the_spoke_revokes_within_a_second_of_expiry() {
    let mut oz = fleet().await;
    create_manifest(&oz.on_hub("alice").await, NS, &request("20s"))
        .await
        .unwrap();
    oz.wait_for_hub_phase("alice-web", RequestPhase::Ready)
        .await;
    oz.hub.kill();
    let on_b = Api::<ExecAccessRequest>::namespaced(oz.spoke_admin("b").await, NS);
    let granted = on_b.get("alice-web").await.unwrap();
    let expires_at = granted.status.unwrap().expires_at.unwrap().0;
    let (alice, pod) = (oz.on_spoke("b", "alice").await, oz.web_pod("b"));
    assert!(
        may_exec(&alice, NS, &pod).await,
        "granted on b before the end"
    );
    eventually_or_show(SETTLES, "b to revoke alice's exec", &oz.operators(), || {
        let (alice, pod) = (alice.clone(), pod.clone());
        async move { (!may_exec(&alice, NS, &pod).await).then_some(()) }
    })
    .await;
    let late = Timestamp::now().duration_since(expires_at);
    assert!(
        late < SignedDuration::from_secs(1),
        "access outlived its window on b by {late} with the hub down"
    );
    // b's oz ends the grant before it writes the request's phase: wait for the phase too.
    eventually_or_show(
        SETTLES,
        "b's request to be Expired",
        &oz.operators(),
        || async {
            let ended = on_b.get("alice-web").await.ok()?;
            (ended.status?.phase == Some(RequestPhase::Expired)).then_some(())
        },
    )
    .await;
}

#[tokio::test]
async fn a_spoke_out_of_reach_is_retried_and_never_half_granted() {
    let oz = fleet().await;
    oz.fleet.revoke_token("b").await;
    // The spoke's apiserver accepts a token it has just seen for a few seconds more.
    let as_the_hub = exec_kubeconfig(&oz.fleet, "b").await;
    eventually(REVOKED_WITHIN, "b to refuse the revoked token", || {
        let (fleet, kubeconfig) = (&oz.fleet, &as_the_hub);
        async move { whoami(fleet, kubeconfig).await.err() }
    })
    .await;
    create_manifest(&oz.on_hub("alice").await, NS, &request("30m"))
        .await
        .unwrap();
    let hub = Api::<ExecAccessRequest>::namespaced(oz.fleet.hub().admin().await.unwrap(), NS);
    let message = eventually_or_show(
        SETTLES,
        "the hub to say b refused it",
        &oz.operators(),
        || async {
            let request = hub.get("alice-web").await.ok()?;
            let status = request.status?;
            let created = status.conditions.iter().find(|c| {
                c.type_() == "AccessResourcesCreated" && c.reason() == "SpokeUnreachable"
            })?;
            (status.phase == Some(RequestPhase::Pending)).then(|| created.message.to_string())
        },
    )
    .await;
    assert!(message.contains("\"b\""), "{message}");
    let on_b = Api::<ExecAccessRequest>::namespaced(oz.spoke_admin("b").await, NS);
    assert!(
        on_b.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(!may_exec(&oz.on_spoke("b", "alice").await, NS, &oz.web_pod("b")).await);

    // A new token on the hub: the hub connects again and forwards the request, once.
    oz.fleet.rotate_token("b").await;
    oz.wait_for_hub_phase("alice-web", RequestPhase::Ready)
        .await;
    assert_eq!(
        on_b.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
    assert!(may_exec(&oz.on_spoke("b", "alice").await, NS, &oz.web_pod("b")).await);
}

#[tokio::test]
async fn a_cluster_profile_deleted_withdraws_the_grants_on_its_spoke() {
    let oz = granted_on_b().await;
    let (alice, pod) = (oz.on_spoke("b", "alice").await, oz.web_pod("b"));
    assert!(may_exec(&alice, NS, &pod).await);

    oz.fleet.delete_cluster_profile("b").await;
    let on_b = Api::<ExecAccessRequest>::namespaced(oz.spoke_admin("b").await, NS);
    wait_until_gone(&on_b, "alice-web", SETTLES, "b's request to be withdrawn").await;
    // Its Role and RoleBinding go with it (the garbage collector's work).
    oz.wait_until_exec_refused(&alice, &pod).await;
    oz.wait_for_hub_phase("alice-web", RequestPhase::Revoked)
        .await;
}

#[tokio::test]
async fn a_spoke_request_deleted_there_revokes_the_hubs() {
    let oz = granted_on_b().await;
    // A spoke admin ends it there.
    let on_b = Api::<ExecAccessRequest>::namespaced(oz.spoke_admin("b").await, NS);
    on_b.delete("alice-web", &Default::default()).await.unwrap();
    wait_until_gone(&on_b, "alice-web", SETTLES, "b's request to go").await;
    oz.wait_for_hub_phase("alice-web", RequestPhase::Revoked)
        .await;
    // And the hub never makes it again.
    assert!(on_b.get_opt("alice-web").await.unwrap().is_none());
}
