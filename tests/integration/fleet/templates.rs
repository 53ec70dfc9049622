//! A hub keeps each fleet template on exactly the spokes it covers: by labels, following the
//! ClusterProfiles' labels as they change, and off a spoke once the template is deleted.

use kube::{Api, api::DeleteParams};
use oz_api::{ExecAccessTemplate, HUB_MANAGED_LABEL};

use super::setup::{NS, OzFleet, SETTLES};
use crate::support::{manifests::create_manifest, operator::eventually_or_show};

const PROD_TEMPLATE: &str = "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessTemplate\nmetadata: {name: web}\n\
                             spec:\n  clusters: {selector: {matchLabels: {env: prod}}}\n  \
                             accessConfig: {allowedGroups: [devs], defaultDuration: 1h, maxDuration: 2h}\n  \
                             controllerTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n";

#[tokio::test]
async fn a_fleet_template_follows_the_labels_of_its_clusters() {
    let oz = OzFleet::start(&[("b", &[("env", "prod")]), ("c", &[("env", "dev")])]).await;
    let hub_admin = oz.fleet.hub().admin().await.unwrap();
    create_manifest(&hub_admin, NS, PROD_TEMPLATE)
        .await
        .unwrap();
    oz.wait_until_synced("web", &["b"]).await;
    let copy = Api::<ExecAccessTemplate>::namespaced(oz.spoke_admin("b").await, NS)
        .get("web")
        .await
        .unwrap();
    let labels = copy.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels.get(HUB_MANAGED_LABEL).map(String::as_str),
        Some("hub")
    );
    assert_eq!(copy.spec.clusters, None, "a spoke's copy covers nothing");
    assert!(
        copy.status.is_some_and(|s| s.ready),
        "b's oz found web there"
    );

    // c joins prod, then leaves it.
    let on_c = Api::<ExecAccessTemplate>::namespaced(oz.spoke_admin("c").await, NS);
    oz.fleet.register("c", &[("env", "prod")]).await;
    oz.wait_until_synced("web", &["b", "c"]).await;
    assert!(on_c.get_opt("web").await.unwrap().is_some());
    oz.fleet.register("c", &[("env", "dev")]).await;
    eventually_or_show(SETTLES, "web to leave c", &oz.operators(), || async {
        on_c.get_opt("web").await.unwrap().is_none().then_some(())
    })
    .await;

    // Deleted on the hub, gone from b.
    Api::<ExecAccessTemplate>::namespaced(hub_admin, NS)
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    let on_b = Api::<ExecAccessTemplate>::namespaced(oz.spoke_admin("b").await, NS);
    eventually_or_show(SETTLES, "web to leave b", &oz.operators(), || async {
        on_b.get_opt("web").await.unwrap().is_none().then_some(())
    })
    .await;
}
