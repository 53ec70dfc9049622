//! A debug pod's name is predictable (`<request>-<uid8>`, and the request is readable), so a
//! user who may create pods could make one first, from an image of her own, for the grantee to
//! exec into. oz uses only a pod its request controls: bob's request fails naming the pod in
//! the way, he is granted nothing, and oz never deletes the pod it did not make.

use std::time::Duration;

use k8s_openapi::api::{core::v1::Pod, rbac::v1::RoleBinding};
use kube::{Api, Client, ResourceExt};
use oz_api::{PodAccessRequest, RequestPhase};
use oz_testenv::{
    exec,
    workloads::{self, WorkloadSpec},
};

use crate::support::{
    cluster::{env, install_crds},
    manifests::create_manifest,
    operator::Operator,
    operator::eventually_or_show,
    rbac::{grant, rule, subject},
    users::can,
};

const SETTLE: Duration = Duration::from_secs(60);

async fn phase_of(requests: &Api<PodAccessRequest>, name: &str) -> Option<RequestPhase> {
    requests.get(name).await.ok()?.status?.phase
}

#[tokio::test]
async fn a_pod_made_in_advance_under_a_grants_name_is_never_granted_nor_deleted() {
    install_crds().await;
    let admin = env().admin().await.unwrap();
    let ns = env().namespace("squat").await.unwrap();
    workloads::deployment(&admin, &ns, WorkloadSpec::new("web", 1))
        .await
        .unwrap();
    // Debug copies for qa, after one approval from leads.
    create_manifest(
        &admin,
        &ns,
        "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: PodAccessTemplate\nmetadata: {name: debug}\n\
         spec:\n  accessConfig:\n    allowedGroups: [qa]\n    defaultDuration: 1h\n    maxDuration: 2h\n    \
         approval: {approverGroups: [leads]}\n  \
         controllerTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n",
    )
    .await
    .unwrap();
    // carol may create pods and read requests here, as `edit` may.
    grant(
        &admin,
        &ns,
        "carol-pods",
        vec![
            rule(&[""], &["pods"], &["create", "get", "list"]),
            rule(&[oz_api::GROUP], &["podaccessrequests"], &["get", "list"]),
        ],
        vec![subject("User", "carol")],
    )
    .await;
    let operator = Operator::start(&ns, &[]);

    // bob asks (his request as oz's webhook stamps it) and waits for approval, with a short
    // window so that its expiry, which revokes by name, comes within the test.
    create_manifest(
        &admin,
        &ns,
        "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: PodAccessRequest\nmetadata: {name: bobs-debug}\n\
         spec:\n  templateName: debug\n  duration: 20s\n  \
         requester: {username: bob, groups: [qa, system:authenticated]}\n",
    )
    .await
    .unwrap();
    let requests: Api<PodAccessRequest> = Api::namespaced(admin.clone(), &ns);
    eventually_or_show(
        SETTLE,
        "bob's request to wait for approval",
        &[&operator],
        || async {
            (phase_of(&requests, "bobs-debug").await == Some(RequestPhase::PendingApproval))
                .then_some(())
        },
    )
    .await;

    // carol reads its uid with her own credentials and makes the pod first, with kubectl.
    let carol = env().client_as("carol").await.unwrap();
    let uid = Api::<PodAccessRequest>::namespaced(carol.clone(), &ns)
        .get("bobs-debug")
        .await
        .unwrap()
        .uid()
        .unwrap();
    let squatted = format!("bobs-debug-{}", &uid[..8]);
    let manifest =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{ns}-squat.yaml"));
    std::fs::write(
        &manifest,
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {squatted}}}\n\
             spec: {{containers: [{{name: shell, image: carols/listener}}]}}\n"
        ),
    )
    .unwrap();
    let mut kubectl = env().kubectl(Some("carol")).unwrap();
    kubectl.args(["apply", "-n", &ns, "-f", manifest.to_str().unwrap()]);
    let made = exec::run(kubectl, exec::RUN_TIMEOUT).await.unwrap();
    assert!(made.success(), "{made}");

    // A lead approves (as the approvals webhook stamps it).
    approve(&admin, &ns, &uid).await;

    // The request fails, naming the pod in the way; bob is granted nothing.
    let failed = eventually_or_show(SETTLE, "bob's request to fail", &[&operator], || async {
        let request = requests.get("bobs-debug").await.ok()?;
        let status = request.status?;
        match status.phase {
            Some(RequestPhase::Failed) => Some(status),
            Some(RequestPhase::Ready) => panic!("bob was granted carol's pod: {status:?}"),
            _ => None,
        }
    })
    .await;
    let message = failed
        .conditions
        .iter()
        .map(|c| c.message.clone())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        message.contains(&squatted) && message.contains("oz did not make"),
        "{message}"
    );
    assert!(!can("bob", "create", "pods", Some("exec"), &ns, &squatted).await);
    let bindings = Api::<RoleBinding>::namespaced(admin.clone(), &ns)
        .list(&Default::default())
        .await
        .unwrap();
    assert!(
        bindings.items.iter().all(|b| b.name_any() != squatted),
        "a RoleBinding for the squatted pod exists"
    );

    // Its window ends (the expiry revokes the grant by name): carol's pod is not oz's to delete.
    eventually_or_show(SETTLE, "bob's request to expire", &[&operator], || async {
        (phase_of(&requests, "bobs-debug").await == Some(RequestPhase::Expired)).then_some(())
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(admin.clone(), &ns);
    let pod = pods.get_opt(&squatted).await.unwrap();
    assert!(
        pod.is_some_and(|p| p.metadata.deletion_timestamp.is_none()),
        "oz deleted a pod it did not make"
    );
}

/// dave, in leads, approves bob's request `bobs-debug` (uid `uid`).
async fn approve(admin: &Client, ns: &str, uid: &str) {
    create_manifest(
        admin,
        ns,
        &format!(
            "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: AccessApproval\nmetadata: {{name: dave-ok}}\n\
             spec:\n  requestRef: {{kind: PodAccessRequest, name: bobs-debug}}\n  decision: Approve\n  \
             comment: fine\n  approver: {{username: dave, groups: [leads, system:authenticated]}}\n  \
             requestUid: {uid}\n"
        ),
    )
    .await
    .unwrap();
}
