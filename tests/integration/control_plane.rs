//! Proves the test control plane is real: users are authenticated by their own certificates,
//! RBAC is enforced per user, the apiserver calls admission webhooks over TLS on loopback, the
//! garbage collector and namespace controllers run, and the control plane dies with its parent.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{Json, Router, extract::State, routing::post};
use k8s_openapi::{
    ByteString,
    api::{
        admissionregistration::v1::{
            RuleWithOperations, ValidatingWebhook, ValidatingWebhookConfiguration,
            WebhookClientConfig,
        },
        authentication::v1::SelfSubjectReview,
        core::v1::{ConfigMap, Namespace, Pod},
    },
    apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference},
};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{DeleteParams, ObjectMeta, PostParams},
};
use oz_platform::tls::{SwappableCert, TlsServer};
use oz_testenv::{
    ControlPlane, ControlPlaneOptions,
    pods::{create_ready_pod, test_pod_spec},
    workloads::{self, WorkloadSpec},
};
use serde_json::{Value, json};

use crate::support::{
    cluster::env,
    polling::eventually,
    rbac::{grant, rule, subject},
    users::{can, exec},
};

#[tokio::test]
async fn each_user_is_authenticated_by_their_own_certificate() {
    for (user, group) in [("alice", "devs"), ("carol", "devs"), ("bob", "qa")] {
        let client = env().client_as(user).await.unwrap();
        let review: Api<SelfSubjectReview> = Api::all(client);
        let me = review
            .create(&PostParams::default(), &SelfSubjectReview::default())
            .await
            .unwrap();
        let info = me.status.unwrap().user_info.unwrap();
        assert_eq!(info.username.as_deref(), Some(user));
        let groups = info.groups.unwrap_or_default();
        assert!(
            groups.contains(&group.to_string()),
            "{user}'s groups: {groups:?}"
        );
        assert!(
            !groups.iter().any(|g| g == "system:masters"),
            "{user} must not be an admin"
        );
    }
}

#[tokio::test]
async fn rbac_allows_alice_in_devs_and_denies_bob() {
    let ns = env().namespace("rbac").await.unwrap();
    let admin = env().admin().await.unwrap();
    grant_exec_to_group(&admin, &ns, "devs").await;

    let can_exec = |user| can(user, "create", "pods", Some("exec"), &ns, "any-pod");
    assert!(can_exec("alice").await, "alice is in devs");
    assert!(!can_exec("bob").await, "bob is not in devs");

    // And the apiserver enforces it: bob cannot even read the pods alice may exec into.
    let bobs_pods: Api<Pod> = Api::namespaced(env().client_as("bob").await.unwrap(), &ns);
    let err = bobs_pods.list(&Default::default()).await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 403),
        "{err}"
    );
}

/// What the test webhook saw and how it answers.
#[derive(Clone, Default)]
struct Recorded(Arc<Mutex<Vec<Value>>>);

async fn deny_and_record(State(seen): State<Recorded>, Json(review): Json<Value>) -> Json<Value> {
    let uid = review["request"]["uid"].clone();
    seen.0.lock().unwrap().push(review);
    Json(json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {
            "uid": uid,
            "allowed": false,
            "status": {"code": 403, "message": "exec refused by the oz test webhook"},
        }
    }))
}

#[tokio::test]
async fn exec_connect_reaches_a_validating_webhook_over_tls() {
    let ns = env().namespace("webhook").await.unwrap();
    let admin = env().admin().await.unwrap();
    grant_exec_to_group(&admin, &ns, "devs").await;
    let pod = create_ready_pod(
        &admin,
        &ns,
        "target",
        &ObjectMeta::default(),
        None,
        test_pod_spec(),
    )
    .await
    .unwrap();

    let (ca_pem, cert_pem, key_pem) = loopback_certificate();
    let seen = Recorded::default();
    let router = Router::new()
        .route("/validate", post(deny_and_record))
        .with_state(seen.clone());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let cert = Arc::new(SwappableCert::from_pem(cert_pem.as_bytes(), key_pem.as_bytes()).unwrap());
    let server = TlsServer::start(listener, router, cert).await.unwrap();

    let configs: Api<ValidatingWebhookConfiguration> = Api::all(admin.clone());
    let config_name = format!("{ns}-exec");
    configs
        .create(
            &PostParams::default(),
            &ValidatingWebhookConfiguration {
                metadata: ObjectMeta {
                    name: Some(config_name.clone()),
                    ..Default::default()
                },
                webhooks: Some(vec![ValidatingWebhook {
                    name: "exec.test.oz.wizardofoz.co".into(),
                    admission_review_versions: vec!["v1".into()],
                    side_effects: "None".into(),
                    failure_policy: Some("Fail".into()),
                    timeout_seconds: Some(5),
                    client_config: WebhookClientConfig {
                        url: Some(format!("https://{}/validate", server.local_addr)),
                        ca_bundle: Some(ByteString(ca_pem.into_bytes())),
                        ..Default::default()
                    },
                    // Only this test's namespace, so other tests' execs never reach this server.
                    namespace_selector: Some(LabelSelector {
                        match_labels: Some(BTreeMap::from([(
                            "kubernetes.io/metadata.name".to_string(),
                            ns.clone(),
                        )])),
                        ..Default::default()
                    }),
                    rules: Some(vec![RuleWithOperations {
                        operations: Some(vec!["CONNECT".into()]),
                        api_groups: Some(vec!["".into()]),
                        api_versions: Some(vec!["v1".into()]),
                        resources: Some(vec!["pods/exec".into(), "pods/attach".into()]),
                        scope: Some("Namespaced".into()),
                    }]),
                    ..Default::default()
                }]),
            },
        )
        .await
        .unwrap();

    // The apiserver picks up new webhook configurations within moments, not at once: retry the
    // exec until the webhook has answered it.
    let denial = eventually(
        Duration::from_secs(20),
        "the webhook to see alice's exec",
        || {
            let (ns, seen) = (ns.clone(), seen.clone());
            let pod = pod.name_any();
            async move {
                let outcome = exec("alice", &ns, &pod, &["cat", "/etc/hostname"]).await;
                (!seen.0.lock().unwrap().is_empty()).then_some(outcome)
            }
        },
    )
    .await;
    assert!(
        !denial.success()
            && denial
                .stderr
                .contains("exec refused by the oz test webhook"),
        "{denial:?}"
    );

    let reviews = seen.0.lock().unwrap().clone();
    let request = &reviews.last().unwrap()["request"];
    assert_eq!(request["operation"], "CONNECT");
    assert_eq!(request["subResource"], "exec");
    assert_eq!(request["kind"]["kind"], "PodExecOptions");
    assert_eq!(request["namespace"], ns.as_str());
    assert_eq!(request["name"], "target");
    assert_eq!(request["userInfo"]["username"], "alice");
    assert!(
        request["userInfo"]["groups"]
            .as_array()
            .unwrap()
            .contains(&json!("devs"))
    );
    assert_eq!(
        request["object"]["command"],
        json!(["cat", "/etc/hostname"])
    );

    configs
        .delete(&config_name, &DeleteParams::default())
        .await
        .unwrap();
    server.shutdown(Duration::from_secs(1)).await.unwrap();
}

#[tokio::test]
async fn deleting_an_owner_garbage_collects_its_dependents() {
    let ns = env().namespace("gc").await.unwrap();
    let admin = env().admin().await.unwrap();
    let maps: Api<ConfigMap> = Api::namespaced(admin, &ns);
    let owner = maps
        .create(&PostParams::default(), &config_map("owner", None))
        .await
        .unwrap();
    let owner_ref: OwnerReference = owner.controller_owner_ref(&()).unwrap();
    maps.create(
        &PostParams::default(),
        &config_map("dependent", Some(owner_ref)),
    )
    .await
    .unwrap();

    maps.delete("owner", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        Duration::from_secs(30),
        "the dependent to be collected",
        || {
            let maps = maps.clone();
            async move {
                maps.get_opt("dependent")
                    .await
                    .unwrap()
                    .is_none()
                    .then_some(())
            }
        },
    )
    .await;
}

#[tokio::test]
async fn a_deleted_namespace_is_emptied_and_removed() {
    let ns = env().namespace("nsdel").await.unwrap();
    let admin = env().admin().await.unwrap();
    let maps: Api<ConfigMap> = Api::namespaced(admin.clone(), &ns);
    maps.create(&PostParams::default(), &config_map("content", None))
        .await
        .unwrap();

    let namespaces: Api<Namespace> = Api::all(admin);
    namespaces
        .delete(&ns, &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        Duration::from_secs(60),
        "the namespace to be removed",
        || {
            let namespaces = namespaces.clone();
            let ns = ns.clone();
            async move {
                namespaces
                    .get_opt(&ns)
                    .await
                    .unwrap()
                    .is_none()
                    .then_some(())
            }
        },
    )
    .await;
}

#[tokio::test]
async fn the_controllers_make_workload_pods_and_kwok_nodes_run_them() {
    let ns = env().namespace("workloads").await.unwrap();
    let admin = env().admin().await.unwrap();

    let deployment = workloads::deployment(&admin, &ns, WorkloadSpec::new("web", 2))
        .await
        .unwrap();
    let sts = workloads::stateful_set(&admin, &ns, WorkloadSpec::new("db", 2))
        .await
        .unwrap();
    let ds = workloads::daemon_set(&admin, &ns, WorkloadSpec::new("agent", 1))
        .await
        .unwrap();
    let rollout = workloads::rollout(&admin, &ns, WorkloadSpec::new("canary", 1))
        .await
        .unwrap();
    assert_eq!(sts.pod_names(), ["db-0", "db-1"]);
    assert_eq!(deployment.pods.len(), 2);
    assert_eq!(rollout.pods.len(), 1);
    let nodes = &env().ready.nodes;
    assert_eq!(nodes.len(), oz_testenv::DEFAULT_NODES);
    let mut daemon_nodes: Vec<_> = ds
        .pods
        .iter()
        .map(|p| p.spec.as_ref().unwrap().node_name.clone().unwrap())
        .collect();
    daemon_nodes.sort();
    assert_eq!(&daemon_nodes, nodes, "one DaemonSet pod on every node");

    let pods: Api<Pod> = Api::namespaced(admin, &ns);
    for (workload, owner_kind) in [
        (&deployment, "ReplicaSet"),
        (&sts, "StatefulSet"),
        (&ds, "DaemonSet"),
        (&rollout, "ReplicaSet"),
    ] {
        for name in workload.pod_names() {
            let pod = pods.get(&name).await.unwrap();
            let owner = &pod.owner_references()[0];
            assert_eq!(owner.kind, owner_kind);
            assert_eq!(owner.controller, Some(true));
            for (k, v) in &workload.selector {
                assert_eq!(
                    pod.labels().get(k),
                    Some(v),
                    "{name} must match its selector"
                );
            }
            let node = pod.spec.as_ref().unwrap().node_name.clone();
            assert!(
                node.as_ref().is_some_and(|n| nodes.contains(n)),
                "{name} runs on a kwok node: {node:?}"
            );
            let status = pod.status.unwrap();
            assert_eq!(status.phase.as_deref(), Some("Running"));
            assert!(status.pod_ip.is_some(), "{name} has an IP from its node");
            let ready = status
                .conditions
                .unwrap()
                .into_iter()
                .find(|c| c.type_ == "Ready")
                .unwrap();
            assert_eq!(ready.status, "True");
        }
    }
}

#[test]
fn the_control_plane_exits_and_cleans_up_when_its_parent_goes_away() {
    let plane = ControlPlane::start(ControlPlaneOptions::empty()).unwrap();
    let work_dir = plane.work_dir().to_path_buf();
    assert!(plane.is_running());
    // A killed parent's file descriptors are closed by the kernel; closing stdin is the same event.
    plane.close_stdin();
    assert!(
        plane.wait_for_exit(Duration::from_secs(15)),
        "kube-testenv outlived its parent"
    );
    assert!(!work_dir.exists(), "{} was left behind", work_dir.display());
}

/// Gives `group` what `kubectl exec` needs in `ns`: get on pods, create and get on pods/exec.
async fn grant_exec_to_group(admin: &Client, ns: &str, group: &str) {
    let rules = vec![
        rule(&[""], &["pods"], &["get", "list"]),
        rule(&[""], &["pods/exec"], &["create", "get"]),
    ];
    grant(admin, ns, "exec", rules, vec![subject("Group", group)]).await;
}

fn config_map(name: &str, owner: Option<OwnerReference>) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            owner_references: owner.map(|o| vec![o]),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// A CA and a serving certificate for 127.0.0.1 and localhost, as PEM: (ca, cert, key).
fn loopback_certificate() -> (String, String, String) {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose,
    };
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "oz test webhook CA");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);

    let key = KeyPair::generate().unwrap();
    let mut leaf = CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()]).unwrap();
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let cert = leaf.signed_by(&key, &issuer).unwrap();
    (ca_cert.pem(), cert.pem(), key.serialize_pem())
}
