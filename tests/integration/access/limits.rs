//! A template's limits (`accessConfig.maxGrantsPerUser`, `maxGrants`) against a real
//! oz-manager: with its webhooks, a request over a limit is refused at admission with the
//! limit named, also when two race for the last place; without them (two replicas racing, or a
//! webhook bypassed), the controller denies the later of two for the last place, the limit
//! named, and grants nothing for it.

use std::time::Duration;

use kube::{
    Api, ResourceExt,
    api::{ListParams, PostParams},
};
use oz_api::{ExecAccessRequest, RequestPhase, condition_type};

use crate::support::{
    admission::create_once_admitted, cluster::env, fixture::Fixture, manifests::create_manifest,
    polling::eventually,
};

const WAIT: Duration = Duration::from_secs(60);

const LIMITED: &str = "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessTemplate\n\
    metadata: {name: limited}\nspec:\n  accessConfig: {allowedGroups: [devs], defaultDuration: 1h, \
    maxDuration: 2h, maxGrantsPerUser: 1}\n  \
    controllerTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n";

fn request(name: &str) -> ExecAccessRequest {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "crds.wizardofoz.co/v1alpha1", "kind": "ExecAccessRequest",
        "metadata": {"name": name}, "spec": {"templateName": "limited"},
    }))
    .unwrap()
}

#[tokio::test]
async fn two_requests_racing_for_the_last_place_get_one_grant_and_one_refusal() {
    let f = Fixture::builder("limits-race")
        .web(1)
        .manifest(LIMITED)
        .let_everyone_request()
        .webhooks()
        .start()
        .await;
    let alice: Api<ExecAccessRequest> =
        Api::namespaced(env().client_as("alice").await.unwrap(), &f.ns);
    // Once oz's webhooks are registered and answer (they stamp the requester).
    let first = create_once_admitted(&alice, &request("alice-1"), "alice", &f.operator.log).await;
    assert_eq!(first.name_any(), "alice-1");
    // Over her limit: refused, the limit named.
    let refused = alice
        .create(&PostParams::default(), &request("alice-2"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("alice already holds 1 grants through ExecAccessTemplate \"limited\", its accessConfig.maxGrantsPerUser (1)"),
        "{refused}"
    );
    // carol: two at once for her one place.
    let carol: Api<ExecAccessRequest> =
        Api::namespaced(env().client_as("carol").await.unwrap(), &f.ns);
    let (params, carol_a, carol_b) = (
        PostParams::default(),
        request("carol-a"),
        request("carol-b"),
    );
    let (a, b) = tokio::join!(
        carol.create(&params, &carol_a),
        carol.create(&params, &carol_b),
    );
    assert_eq!(
        [a.is_ok(), b.is_ok()].iter().filter(|ok| **ok).count(),
        1,
        "{a:?}\n{b:?}"
    );
    let refusal = a.err().or(b.err()).unwrap().to_string();
    assert!(refusal.contains("maxGrantsPerUser (1)"), "{refusal}");
}

#[tokio::test]
async fn without_the_webhook_the_controller_denies_the_later_of_two_for_the_last_place() {
    let f = Fixture::builder("limits-controller")
        .web(1)
        .manifest(LIMITED)
        .record_grants()
        .start()
        .await;
    let stamped = |name: &str| {
        format!(
            "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessRequest\nmetadata: {{name: {name}}}\n\
             spec:\n  templateName: limited\n  \
             requester: {{username: alice, groups: [devs, system:authenticated]}}\n"
        )
    };
    // Created in this order (their creationTimestamps may be equal: then by name).
    create_manifest(&f.admin, &f.ns, &stamped("alice-a"))
        .await
        .unwrap();
    create_manifest(&f.admin, &f.ns, &stamped("alice-b"))
        .await
        .unwrap();
    let requests: Api<ExecAccessRequest> = Api::namespaced(f.admin.clone(), &f.ns);
    let settled = eventually(WAIT, "both requests to be decided", || async {
        let list = requests.list(&ListParams::default()).await.ok()?;
        let phase = |name: &str| {
            list.items
                .iter()
                .find(|r| r.name_any() == name)
                .and_then(|r| r.status.as_ref()?.phase)
        };
        match (phase("alice-a"), phase("alice-b")) {
            (Some(RequestPhase::Ready), Some(RequestPhase::Denied)) => Some(list.items),
            _ => None,
        }
    })
    .await;
    let later = settled.iter().find(|r| r.name_any() == "alice-b").unwrap();
    let why = later
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_() == condition_type::WITHIN_LIMITS)
        .unwrap();
    assert_eq!(why.reason(), "OverLimit");
    assert!(
        why.message.contains("accessConfig.maxGrantsPerUser (1)"),
        "{}",
        why.message
    );
    let granted = f.recorded_grants().lock().unwrap().clone();
    assert!(
        !granted.iter().any(|g| g.contains("/alice-b-")),
        "nothing granted for the later: {granted:?}"
    );
}
