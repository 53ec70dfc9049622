//! The one grant rule, through the real apiserver and the enforced webhook: a grant lets its
//! user into its pod only by the action its kind grants, by the route its session mode takes,
//! and only before its `expiresAt`, even while no controller runs to end it. alice's own RBAC
//! allows exec, attach and port-forward there: what refuses them is oz alone.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::{
    Api,
    api::{ObjectMeta, PostParams},
};
use oz_api::ExecAccessRequest;
use oz_testenv::{
    exec,
    pods::{create_ready_pod, test_pod_spec},
};
use serde_json::json;

use crate::{
    admission::webhook_server::set_alices_status,
    support::{
        cluster::{env, install_crds},
        manifests::create_manifest,
        operator::WebhookOperator,
        polling::eventually,
        rbac::{grant, let_groups_request, rule, subject},
        requests::exec_template,
        users::exec,
    },
};

/// `kubectl ARGS` as alice.
async fn alice_runs(args: &[&str]) -> exec::Output {
    let mut kubectl = env().kubectl(Some("alice")).unwrap();
    kubectl.args(args);
    exec::run(kubectl, Duration::from_secs(30)).await.unwrap()
}

#[tokio::test]
async fn a_grant_admits_only_its_action_its_route_and_its_window() {
    install_crds().await;
    let admin = env().admin().await.unwrap();
    let ns = env().namespace("grant-rule").await.unwrap();
    create_manifest(&admin, &ns, &exec_template("web-exec", "web"))
        .await
        .unwrap();
    let target: Pod = create_ready_pod(
        &admin,
        &ns,
        "target",
        &ObjectMeta::default(),
        None,
        test_pod_spec(),
    )
    .await
    .unwrap();
    let container = target.spec.as_ref().unwrap().containers[0].name.clone();
    grant(
        &admin,
        &ns,
        "standing-access",
        vec![
            rule(&[""], &["pods"], &["get", "list"]),
            rule(
                &[""],
                &["pods/exec", "pods/attach", "pods/portforward"],
                &["create", "get"],
            ),
        ],
        vec![subject("Group", "devs")],
    )
    .await;
    let_groups_request(&admin, &ns, &["devs"]).await;
    // Webhooks only: no controller grants, expires or corrects anything.
    let oz = WebhookOperator::start(
        &ns,
        &[
            "--controllers=webhooks",
            &format!("--audit-enforce-namespaces={ns}"),
        ],
    );
    oz.wait_until_admitting("alice", "web-exec").await;
    let alice = Api::<ExecAccessRequest>::namespaced(env().client_as("alice").await.unwrap(), &ns);
    let request: ExecAccessRequest = serde_json::from_value(json!({
        "apiVersion": "crds.wizardofoz.co/v1alpha1", "kind": "ExecAccessRequest",
        "metadata": {"name": "alices"}, "spec": {"templateName": "web-exec"},
    }))
    .unwrap();
    alice
        .create(&PostParams::default(), &request)
        .await
        .unwrap();
    let in_an_hour = (chrono::Utc::now() + chrono::TimeDelta::hours(1)).to_rfc3339();
    set_alices_status(
        &admin,
        &ns,
        json!({"phase": "Ready", "podName": "target", "ready": true, "expiresAt": in_an_hour}),
    )
    .await;
    let denied = |outcome: &exec::Output| {
        !outcome.success()
            && outcome
                .stderr
                .contains("alice has no active access request")
    };

    // Her Direct ExecAccessRequest: exec, and nothing else.
    let ran = eventually(
        Duration::from_secs(30),
        "alice's granted exec to run",
        || async {
            let outcome = exec("alice", &ns, "target", &["sh", "-c", "echo granted"]).await;
            outcome.success().then_some(outcome)
        },
    )
    .await;
    assert_eq!(ran.stdout, "granted\n");
    let attach = alice_runs(&["attach", "-n", &ns, "target", "-c", &container]).await;
    assert!(denied(&attach), "an exec grant admitted attach: {attach}");
    let forward = alice_runs(&["port-forward", "-n", &ns, "pod/target", "0:8080"]).await;
    assert!(
        denied(&forward),
        "an exec grant admitted port-forward: {forward}"
    );

    // A Brokered grant is for oz's sessions API: a plain `kubectl exec` (unrecorded, never
    // closed by oz) is not what it granted.
    set_alices_status(&admin, &ns, json!({"sessionMode": "Brokered"})).await;
    let outcome = exec("alice", &ns, "target", &["true"]).await;
    assert!(
        denied(&outcome),
        "a Brokered grant admitted a core exec: {outcome}"
    );

    // Direct again, but past its expiresAt and still Ready (no controller to expire it).
    let a_minute_ago = (chrono::Utc::now() - chrono::TimeDelta::minutes(1)).to_rfc3339();
    set_alices_status(
        &admin,
        &ns,
        json!({"sessionMode": null, "expiresAt": a_minute_ago}),
    )
    .await;
    let outcome = exec("alice", &ns, "target", &["true"]).await;
    assert!(
        denied(&outcome),
        "a grant past its expiresAt admitted exec: {outcome}"
    );

    oz.remove_configurations().await;
}
