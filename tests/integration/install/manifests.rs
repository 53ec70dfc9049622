//! The generated install (`oz::install`) against the real control plane: it applies cleanly by
//! server-side apply, and an oz-manager running as the install's ServiceAccount, with nothing
//! but the install's RBAC, grants exec. That is the proof the least-privilege RBAC is enough.
//!
//! Nothing runs pods here, so the install's Deployment is applied but oz-manager runs as a local
//! process, with the Deployment's own flags and a token of the install's ServiceAccount.

use std::time::Duration;

use k8s_openapi::api::{
    authorization::v1::ResourceAttributes,
    coordination::v1::Lease,
    core::v1::{ConfigMap, Secret, ServiceAccount},
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::{
    Api, Client,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use oz::install::{Component, InstallOptions, install_yaml, is_users_role};
use oz_api::ExecAccessRequest;
use oz_testenv::workloads::{self, WorkloadSpec};
use serde_json::{Value, json};

use crate::support::{
    admission::{create_once_admitted, written_request},
    cluster::{env, install_crds},
    install::{
        ALICES_REQUEST, FIELD_MANAGER, SHARED_KINDS, ScopedInstall, TEMPLATE, api_for,
        apply_install, client_from, created_at_run_time, delete_cluster_scoped, operator_args,
        service_account_kubeconfig, wait_for_ready,
    },
    manifests::{create_manifest, parse_manifest},
    operator::Operator,
    polling::eventually,
    rbac::{grant, rule, subject},
    users::{can_exec, self_review},
};

const WAIT: Duration = Duration::from_secs(60);

#[tokio::test]
async fn the_scoped_install_applies_and_its_service_account_can_grant_exec() {
    let ScopedInstall {
        admin,
        operator_ns,
        ns,
        yaml,
        applied,
    } = ScopedInstall::apply("install").await;
    // The users' ClusterRoles (aggregated into view, edit and admin) aside: they are not oz's.
    let cluster_scoped: Vec<String> = applied
        .iter()
        .filter(|o| o.metadata.namespace.is_none())
        .filter(|o| !is_users_role(&o.metadata))
        .map(|o| o.types.clone().unwrap().kind)
        .collect();
    assert_eq!(
        cluster_scoped,
        ["Namespace", "ClusterRole", "ClusterRoleBinding"],
        "a scoped install without webhooks gives oz nothing cluster-scoped but reading locks"
    );
    let cluster_role = applied
        .iter()
        .find(|o| o.types.as_ref().unwrap().kind == "ClusterRole" && !is_users_role(&o.metadata))
        .unwrap();
    assert_eq!(
        cluster_role.data["rules"],
        serde_json::json!([{"apiGroups": [oz_api::GROUP], "resources": ["accesslocks"],
                            "verbs": ["get", "list", "watch"]}]),
        "only reading AccessLocks"
    );

    let kubeconfig = service_account_kubeconfig(env(), &admin, &operator_ns, "oz-manager").await;
    let oz = client_from(&kubeconfig).await;
    // What the ServiceAccount may do is exactly what the install says, no more.
    let other = env().namespace("install-other").await.unwrap();
    for (verb, resource, subresource, namespace, allowed) in [
        ("create", "roles", None, ns.as_str(), true),
        ("create", "pods", Some("exec"), ns.as_str(), true),
        ("list", "execaccessrequests", None, ns.as_str(), true),
        ("escalate", "roles", None, ns.as_str(), false),
        ("bind", "roles", None, ns.as_str(), false),
        ("get", "secrets", None, ns.as_str(), false),
        ("list", "pods", None, other.as_str(), false),
        ("list", "execaccessrequests", None, other.as_str(), false),
        ("create", "roles", None, other.as_str(), false),
    ] {
        assert_eq!(
            may(&oz, verb, resource, subresource, namespace).await,
            allowed,
            "the ServiceAccount may {verb} {resource} {subresource:?} in {namespace}"
        );
    }

    let web = workloads::deployment(&admin, &ns, WorkloadSpec::new("web", 2))
        .await
        .unwrap();
    create_manifest(&admin, &ns, TEMPLATE).await.unwrap();
    let args = operator_args(&yaml, &[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let operator = Operator::start_with_kubeconfig(&ns, &kubeconfig, &args);
    create_manifest(&admin, &ns, ALICES_REQUEST).await.unwrap();
    let pod = wait_for_ready(&admin, &ns, "alice-web", &operator).await;
    assert!(web.pod_names().contains(&pod), "{pod} is one of web's pods");
    assert!(can_exec("alice", &ns, &pod).await);
    assert!(!can_exec("bob", &ns, &pod).await);

    // It took the leader-election Lease the install's Role names.
    let leases: Api<Lease> = Api::namespaced(admin.clone(), &operator_ns);
    let lease = leases.get("oz-manager").await.unwrap();
    assert!(lease.spec.and_then(|s| s.holder_identity).is_some());
}

#[tokio::test]
async fn the_full_install_with_webhooks_runs_under_its_own_rbac() {
    install_crds().await;
    let admin = env().admin().await.unwrap();
    let operator_ns = env().namespace("install-full-oz").await.unwrap();
    let ns = env().namespace("install-full").await.unwrap();
    // Webhook configurations and ClusterRoles are cluster-scoped: a name of this test's own.
    let options = InstallOptions {
        namespace: operator_ns.clone(),
        watch_namespaces: vec![ns.clone()],
        name: operator_ns.clone(),
        crds: false,
        ..InstallOptions::default()
    };
    // No Service routing here: the apiserver calls the webhooks at a local URL instead of
    // through the install's Service, and oz-manager registers that same URL.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let base = format!("https://127.0.0.1:{port}");
    let yaml = install_yaml(&options).unwrap();
    let applied = apply_install(&admin, &yaml, |object| {
        let webhooks = object
            .data
            .get_mut("webhooks")
            .and_then(Value::as_array_mut);
        for webhook in webhooks.into_iter().flatten() {
            let config = &mut webhook["clientConfig"];
            let path = config["service"]["path"].as_str().unwrap().to_string();
            *config = json!({ "url": format!("{base}{path}") });
        }
        true
    })
    .await;

    let kubeconfig = service_account_kubeconfig(
        env(),
        &admin,
        &operator_ns,
        &format!("{}-manager", options.name),
    )
    .await;
    let web = workloads::deployment(&admin, &ns, WorkloadSpec::new("web", 1))
        .await
        .unwrap();
    create_manifest(&admin, &ns, TEMPLATE).await.unwrap();
    grant_alice_requests(&admin, &ns).await;
    // An audit file, so oz makes its signing key and publishes it, under the install's RBAC.
    let audit_log = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("{operator_ns}-audit.jsonl"));
    let args = operator_args(
        &yaml,
        &[
            ("--webhook-service", None),
            ("--webhook-url-base", Some(base.clone())),
            ("--webhook-port", Some(port.to_string())),
            ("--audit-log-path", Some(audit_log.display().to_string())),
        ],
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let operator = Operator::start_with_kubeconfig(&ns, &kubeconfig, &args);

    // alice creates the request herself; the mutating webhook records her as the requester once
    // oz-manager serves it (until then the fail-closed webhooks refuse the request).
    let alice: Api<ExecAccessRequest> =
        Api::namespaced(env().client_as("alice").await.unwrap(), &ns);
    let request = written_request("alice-web", "web-exec");
    create_once_admitted(&alice, &request, "alice", &operator.log).await;
    let pod = wait_for_ready(&admin, &ns, "alice-web", &operator).await;
    assert_eq!(pod, web.pod_names()[0]);
    assert!(can_exec("alice", &ns, &pod).await);

    // Its certificates are in the Secrets its Role names, and its Lease is held.
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), &operator_ns);
    for secret in [
        format!("{}-webhook-ca", options.name),
        format!("{}-webhook-tls", options.name),
    ] {
        assert!(
            secrets.get_opt(&secret).await.unwrap().is_some(),
            "{secret}"
        );
    }
    let leases: Api<Lease> = Api::namespaced(admin.clone(), &operator_ns);
    let lease = leases
        .get(&format!("{}-manager", options.name))
        .await
        .unwrap();
    assert!(lease.spec.and_then(|s| s.holder_identity).is_some());
    // Its audit signing key is in the Secret its Role names, its public key in the ConfigMap.
    assert!(
        secrets
            .get_opt("oz-audit-signing-key")
            .await
            .unwrap()
            .is_some(),
        "oz-audit-signing-key (log: {})",
        operator.log.display()
    );
    let keys = Api::<ConfigMap>::namespaced(admin.clone(), &operator_ns)
        .get("oz-audit")
        .await
        .unwrap()
        .data
        .unwrap_or_default();
    let current = keys.get("current").expect("the current key id");
    assert!(keys.contains_key(&format!("{current}.pub")), "{keys:?}");

    // All four name its ServiceAccount as owner, by the uid the apiserver told oz-manager
    // when it asked who it is.
    let manager = format!("{}-manager", options.name);
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), &operator_ns);
    let ours = OwnerReference {
        api_version: "v1".into(),
        kind: "ServiceAccount".into(),
        name: manager.clone(),
        uid: accounts.get(&manager).await.unwrap().metadata.uid.unwrap(),
        controller: None,
        block_owner_deletion: None,
    };
    for (object, owners) in created_at_run_time(&admin, &operator_ns, &options.name).await {
        assert_eq!(owners, Some(vec![ours.clone()]), "{object}");
    }
    // A Secret that lacks it (made by an older oz-manager) gets it back, beside its other owner.
    let configmaps: Api<ConfigMap> = Api::namespaced(admin.clone(), &operator_ns);
    let other = configmaps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "another-owner"}})).unwrap(),
        )
        .await
        .unwrap();
    let theirs = OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: "another-owner".into(),
        uid: other.metadata.uid.unwrap(),
        ..OwnerReference::default()
    };
    let ca = format!("{}-webhook-ca", options.name);
    secrets
        .patch(
            &ca,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"ownerReferences": [theirs]}})),
        )
        .await
        .unwrap();
    eventually(WAIT, "oz-manager to add itself back as an owner", || {
        let (secrets, ca, both) = (
            secrets.clone(),
            ca.clone(),
            vec![theirs.clone(), ours.clone()],
        );
        async move {
            let owners = secrets.get(&ca).await.ok()?.metadata.owner_references;
            (owners == Some(both)).then_some(())
        }
    })
    .await;

    // Uninstalling (oz-manager stopped, its ServiceAccount deleted) leaves none of them: the
    // garbage collector deletes what only the ServiceAccount owned, and the CA Secret once its
    // other owner goes too.
    drop(operator);
    accounts
        .delete(&manager, &DeleteParams::default())
        .await
        .unwrap();
    configmaps
        .delete("another-owner", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        WAIT,
        "the garbage collector to delete what oz-manager created",
        || {
            let (admin, ns, name) = (admin.clone(), operator_ns.clone(), options.name.clone());
            async move {
                let left: Vec<String> = created_at_run_time(&admin, &ns, &name)
                    .await
                    .into_iter()
                    .filter(|(_, owners)| owners.is_some())
                    .map(|(object, _)| object)
                    .collect();
                left.is_empty().then_some(())
            }
        },
    )
    .await;
    let _ = std::fs::remove_file(&audit_log);
    delete_cluster_scoped(&admin, &applied).await;
}

/// The install with both caller options passes the real apiserver's validation: every object,
/// the NetworkPolicy and the Deployment mounting the webhook client CA Secret among them, is
/// accepted by a server-side dry run and comes back with what the generator wrote.
#[tokio::test]
async fn the_install_with_caller_verification_passes_the_apiservers_validation() {
    let admin = env().admin().await.unwrap();
    let operator_ns = env().namespace("install-callers").await.unwrap();
    let options = InstallOptions {
        namespace: operator_ns.clone(),
        name: operator_ns.clone(),
        crds: false,
        webhook_client_ca_secret: Some("apiserver-webhook-client-ca".into()),
        webhook_ingress_cidrs: vec!["10.96.0.0/12".into(), "fd00:10::/64".into()],
        ..InstallOptions::default()
    };
    let yaml = install_yaml(&options).unwrap();
    let mut checked = Vec::new();
    for document in yaml.split("\n---\n").skip(1) {
        let (object, resource) = parse_manifest(document);
        let name = object.metadata.name.clone().unwrap();
        let stored = api_for(&admin, &object, &resource)
            .patch(
                &name,
                &PatchParams::apply(FIELD_MANAGER).dry_run(),
                &Patch::Apply(&object),
            )
            .await
            .unwrap_or_else(|e| panic!("the apiserver refuses {} {name}: {e}", resource.kind));
        match resource.kind.as_str() {
            "NetworkPolicy" => {
                assert_eq!(stored.data["spec"], object.data["spec"], "{name}");
                checked.push("NetworkPolicy");
            }
            "Deployment" => {
                let pod = &stored.data["spec"]["template"]["spec"];
                assert_eq!(
                    pod["volumes"][0]["secret"]["secretName"],
                    "apiserver-webhook-client-ca"
                );
                assert_eq!(
                    pod["containers"][0]["volumeMounts"],
                    object.data["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
                );
                checked.push("Deployment");
            }
            _ => {}
        }
    }
    assert_eq!(checked, ["Deployment", "NetworkPolicy"]);
}

/// Whether `client`'s identity may `verb` `resource` in `namespace`, by its own review.
async fn may(
    client: &Client,
    verb: &str,
    resource: &str,
    subresource: Option<&str>,
    namespace: &str,
) -> bool {
    let group = match resource {
        "roles" | "rolebindings" => "rbac.authorization.k8s.io",
        "execaccessrequests" => oz_api::GROUP,
        _ => "",
    };
    let attributes = ResourceAttributes {
        namespace: Some(namespace.into()),
        group: Some(group.into()),
        verb: Some(verb.into()),
        resource: Some(resource.into()),
        subresource: subresource.map(Into::into),
        ..Default::default()
    };
    self_review(client, attributes).await
}

/// alice (group devs) may create requests in `ns`, as a cluster admin would let her.
async fn grant_alice_requests(admin: &Client, ns: &str) {
    let rules = vec![rule(
        &[oz_api::GROUP],
        &["execaccessrequests"],
        &["create", "get", "list", "watch"],
    )];
    grant(
        admin,
        ns,
        "request-access",
        rules,
        vec![subject("Group", "devs")],
    )
    .await;
}

/// The install with sessions passes the apiserver's validation (a server-side dry run of every
/// object, the APIService included), and its ServiceAccount, with only that install's RBAC,
/// can create a Brokered grant's Role (it holds what it grants: no escalation) and read the
/// apiserver's front-proxy settings. Nothing cluster-wide that would reach other tests is
/// applied for real: not the APIService, not the webhook configurations.
#[tokio::test]
async fn the_install_with_sessions_applies_and_its_service_account_can_grant_brokered_sessions() {
    install_crds().await;
    let admin = env().admin().await.unwrap();
    let operator_ns = env().namespace("install-sessions").await.unwrap();
    let ns = env().namespace("install-sessions-w").await.unwrap();
    let options = InstallOptions {
        namespace: operator_ns.clone(),
        name: operator_ns.clone(),
        watch_namespaces: vec![ns.clone()],
        controllers: Component::ALL.to_vec(),
        crds: false,
        ..InstallOptions::default()
    };
    let yaml = install_yaml(&options).unwrap();
    let mut kinds = Vec::new();
    for document in yaml.split("\n---\n").skip(1) {
        let (object, resource) = parse_manifest(document);
        let name = object.metadata.name.clone().unwrap();
        api_for(&admin, &object, &resource)
            .patch(
                &name,
                &PatchParams::apply(FIELD_MANAGER).dry_run(),
                &Patch::Apply(&object),
            )
            .await
            .unwrap_or_else(|e| panic!("the apiserver refuses {} {name}: {e}", resource.kind));
        kinds.push(resource.kind);
    }
    assert!(kinds.iter().any(|k| k == "APIService"), "{kinds:?}");

    let applied = apply_install(&admin, &yaml, |object| {
        !SHARED_KINDS.contains(&object.types.as_ref().unwrap().kind.as_str())
    })
    .await;
    let kubeconfig = service_account_kubeconfig(
        env(),
        &admin,
        &operator_ns,
        &format!("{operator_ns}-manager"),
    )
    .await;
    let oz = client_from(&kubeconfig).await;

    // The front-proxy settings, through the built-in reader Role in kube-system.
    let front_proxy = oz_sessions::front_proxy::FrontProxy::load(oz.clone(), Default::default())
        .await
        .unwrap_or_else(|e| panic!("oz cannot read the front-proxy settings: {e}"));
    assert!(!front_proxy.config().username_headers.is_empty());
    let maps: Api<ConfigMap> = Api::namespaced(oz.clone(), "kube-system");
    assert!(
        maps.get("kube-root-ca.crt").await.is_err(),
        "only that one ConfigMap"
    );

    // A Brokered grant's Role: exec and attach on one pod through the sessions API only.
    let role: k8s_openapi::api::rbac::v1::Role = serde_json::from_value(json!({
        "metadata": {"name": "brokered-grant"},
        "rules": [
            {"apiGroups": [""], "resources": ["pods"], "resourceNames": ["web-0"], "verbs": ["get"]},
            {"apiGroups": [oz_api::SESSIONS_GROUP], "resources": ["pods/exec", "pods/attach"],
             "resourceNames": ["web-0"], "verbs": ["create", "get"]},
        ],
    }))
    .unwrap();
    Api::<k8s_openapi::api::rbac::v1::Role>::namespaced(oz.clone(), &ns)
        .create(&PostParams::default(), &role)
        .await
        .unwrap_or_else(|e| panic!("oz cannot create a Brokered grant's Role: {e}"));

    delete_cluster_scoped(&admin, &applied).await;
    let bindings: Api<k8s_openapi::api::rbac::v1::RoleBinding> =
        Api::namespaced(admin.clone(), "kube-system");
    bindings
        .delete(
            &format!("{operator_ns}-manager-authentication-reader"),
            &DeleteParams::default(),
        )
        .await
        .unwrap();
}
