//! Escalation attempts: nobody gets more than a template allows, whether by forging the
//! requester, writing a request's status, editing the Role or RoleBinding oz made, or naming a
//! template in another namespace; and oz itself, with nothing but its install's RBAC, cannot
//! create a Role beyond the pod access it grants, nor bind cluster-admin. `docs/rbac.md` lists
//! the escalation rules these rely on.

use k8s_openapi::{
    api::rbac::v1::{ClusterRoleBinding, PolicyRule, Role, RoleBinding},
    jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::{ObjectMeta, Patch, PatchParams, PostParams},
};
use oz::install::{Component, InstallOptions, install_yaml};
use oz_api::{ExecAccessRequest, RequestPhase};
use oz_testenv::workloads::{self, WorkloadSpec};
use serde_json::json;

use crate::support::{
    cluster::{env, install_crds},
    grant_audit::grant_problems,
    install::{apply_install, client_from, delete_cluster_scoped, service_account_kubeconfig},
    manifests::create_manifest,
    operator::{Operator, WebhookOperator},
    polling::{SETTLE, eventually},
    rbac::{let_groups_request, role_binding, rule, subject},
    requests::{exec_request, exec_template, grant_name},
    timing::strict_timing,
    users::may_exec,
};

/// A namespace with Deployments `web` (2 pods) and `db` (1 pod), and template `web-exec`.
async fn namespace(prefix: &str) -> (String, Client, Vec<String>, Vec<String>) {
    install_crds().await;
    let ns = env().namespace(prefix).await.unwrap();
    let admin = env().admin().await.unwrap();
    let web = workloads::deployment(&admin, &ns, WorkloadSpec::new("web", 2))
        .await
        .unwrap();
    let db = workloads::deployment(&admin, &ns, WorkloadSpec::new("db", 1))
        .await
        .unwrap();
    create_manifest(&admin, &ns, &exec_template("web-exec", "web"))
        .await
        .unwrap();
    (ns, admin, web.pod_names(), db.pod_names())
}

fn request(name: &str, template: &str, requester: Option<(&str, &[&str])>) -> ExecAccessRequest {
    let mut spec = json!({"templateName": template});
    if let Some((user, groups)) = requester {
        spec["requester"] = json!({"username": user, "groups": groups});
    }
    serde_json::from_value(json!({
        "apiVersion": "crds.wizardofoz.co/v1alpha1",
        "kind": "ExecAccessRequest",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .unwrap()
}

async fn ready(api: &Api<ExecAccessRequest>, name: &str) -> ExecAccessRequest {
    eventually(SETTLE, &format!("{name} to be Ready"), || async {
        let request = api.get(name).await.ok()?;
        (request.status.as_ref()?.phase == Some(RequestPhase::Ready)).then_some(request)
    })
    .await
}

fn refusal(result: Result<impl std::fmt::Debug, kube::Error>) -> kube::core::Status {
    match result {
        Err(kube::Error::Api(status)) => *status,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// Asserts `result` was refused with `code`, saying `why` (the text that proves why it was
/// refused, not just that it was).
fn assert_refused(
    what: &str,
    result: Result<impl std::fmt::Debug, kube::Error>,
    code: u16,
    why: &str,
) {
    let status = refusal(result);
    assert_eq!(status.code, code, "{what}: {status:?}");
    assert!(
        status.message.contains(why),
        "{what}: refused, but not saying {why:?}: {}",
        status.message
    );
}

/// The apiserver's RBAC refusal of `user` doing `verb` on `resource` in `namespace`.
fn rbac_denies(user: &str, verb: &str, resource: &str, group: &str, namespace: &str) -> String {
    format!(
        "User \"{user}\" cannot {verb} resource \"{resource}\" in API group \"{group}\" in the namespace \"{namespace}\""
    )
}

/// What the apiserver says when a Role or RoleBinding would grant more than its author holds.
const ESCALATION: &str = "attempting to grant RBAC permissions not currently held";

#[tokio::test]
async fn a_forged_requester_is_overwritten_and_grants_only_the_real_user() {
    let (ns, admin, web, _) = namespace("sec-forge").await;
    let_groups_request(&admin, &ns, &["devs", "qa"]).await;
    let oz = WebhookOperator::start(&ns, &[]);
    oz.wait_until_admitting("alice", "web-exec").await;
    let alice_client = env().client_as("alice").await.unwrap();
    let alice = Api::<ExecAccessRequest>::namespaced(alice_client.clone(), &ns);
    let bob_client = env().client_as("bob").await.unwrap();
    let bob = Api::<ExecAccessRequest>::namespaced(bob_client.clone(), &ns);

    // alice claims to be bob, in system:masters and devs: she is recorded as herself.
    let forged = request(
        "forged",
        "web-exec",
        Some(("bob", &["system:masters", "devs"])),
    );
    let created = alice.create(&PostParams::default(), &forged).await.unwrap();
    let requester = created.spec.requester.unwrap();
    assert_eq!(requester.username, "alice");
    assert!(!requester.groups.contains(&"system:masters".to_string()));
    let granted = ready(&alice, "forged").await;
    let pod = granted.status.clone().unwrap().pod_name.unwrap();
    assert!(web.contains(&pod));
    assert!(may_exec(&alice_client, &ns, &pod).await);
    assert!(
        !may_exec(&bob_client, &ns, &pod).await,
        "bob gets nothing from alice's forgery"
    );
    assert_eq!(grant_problems(&admin, &ns).await, Vec::<String>::new());

    // bob (qa) claims to be alice (devs): stamped as bob, and refused at creation.
    let status = refusal(
        bob.create(
            &PostParams::default(),
            &request("bob-as-alice", "web-exec", Some(("alice", &["devs"]))),
        )
        .await,
    );
    assert_eq!(status.code, 403, "{status:?}");
    assert!(
        status
            .message
            .contains("does not exist or does not admit bob"),
        "{}",
        status.message
    );

    // Nor can a requester be changed after creation, by its creator or anyone (both may
    // patch requests): the CRD's immutability rule refuses it before any webhook is asked.
    for (who, api) in [("alice", &alice), ("bob", &bob)] {
        assert_refused(
            who,
            api.patch(
                "forged",
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"spec": {"requester": {"username": "bob", "groups": ["devs"]}}}),
                ),
            )
            .await,
            422,
            "spec is immutable: a request cannot be changed after it is created",
        );
    }
    oz.remove_configurations().await;
}

#[tokio::test]
async fn users_cannot_write_status_and_an_admin_status_edit_does_not_widen_a_grant() {
    let (ns, admin, web, db) = namespace("sec-status").await;
    let_groups_request(&admin, &ns, &["devs"]).await;
    let operator = Operator::builder(&ns).metrics().start();
    let metrics = operator.metrics_port();
    let alice_client = env().client_as("alice").await.unwrap();
    let requests = Api::<ExecAccessRequest>::namespaced(admin.clone(), &ns);
    // The grant's end is timed below: not under another test's burst.
    let timing = strict_timing().await;
    create_manifest(
        &admin,
        &ns,
        &exec_request("alices", "web-exec", "alice", "8s"),
    )
    .await
    .unwrap();
    let granted = ready(&requests, "alices").await;
    let status = granted.status.clone().unwrap();
    let (pod, expires_at) = (status.pod_name.unwrap(), status.expires_at.unwrap().0);
    let other_web = web.iter().find(|p| **p != pod).unwrap().clone();

    // alice may update and patch her requests, but has no status permission.
    let alice = Api::<ExecAccessRequest>::namespaced(alice_client.clone(), &ns);
    let widen = json!({"status": {"podName": other_web, "expiresAt": "2099-01-01T00:00:00Z"}});
    assert_refused(
        "alice's status patch",
        alice
            .patch_status("alices", &PatchParams::default(), &Patch::Merge(&widen))
            .await,
        403,
        &rbac_denies(
            "alice",
            "patch",
            "execaccessrequests/status",
            oz_api::GROUP,
            &ns,
        ),
    );
    // A status written through the main resource is dropped by the apiserver.
    alice
        .patch("alices", &PatchParams::default(), &Patch::Merge(&widen))
        .await
        .unwrap();
    assert_eq!(
        requests
            .get("alices")
            .await
            .unwrap()
            .status
            .unwrap()
            .pod_name
            .as_deref(),
        Some(pod.as_str())
    );

    // An admin (or anything else with status permission) points the grant at another pod, of
    // this workload and of another one, and extends it: oz keeps the pod it granted and the
    // window it decided.
    for target in [other_web.as_str(), db[0].as_str()] {
        requests
            .patch_status(
                "alices",
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"status": {"podName": target, "expiresAt": "2099-01-01T00:00:00Z"}}),
                ),
            )
            .await
            .unwrap();
        let restored = eventually(SETTLE, "oz to restore the granted pod", || async {
            let status = requests.get("alices").await.ok()?.status?;
            (status.pod_name.as_deref() == Some(pod.as_str())).then_some(status)
        })
        .await;
        assert!(
            restored.expires_at.unwrap().0 <= expires_at,
            "a status edit must not extend a grant"
        );
        assert!(may_exec(&alice_client, &ns, &pod).await);
        assert!(
            !may_exec(&alice_client, &ns, target).await,
            "alice got {target}"
        );
        assert_eq!(grant_problems(&admin, &ns).await, Vec::<String>::new());
    }

    // The grant still ends at the time decided at creation.
    let revoked = eventually(SETTLE, "the grant to end", || async {
        (!may_exec(&alice_client, &ns, &pod).await).then(Timestamp::now)
    })
    .await;
    drop(timing);
    let late = revoked.duration_since(expires_at).as_secs_f64();
    assert!(late < 1.5, "the grant outlived its window by {late:.3}s");

    // Once Expired, writing it back to Ready with a later expiry grants nothing again.
    let expired = eventually(SETTLE, "Expired", || async {
        let request = requests.get("alices").await.ok()?;
        (request.status.as_ref()?.phase == Some(RequestPhase::Expired)).then_some(request)
    })
    .await;
    let finished_before = reconciles(metrics).await.1;
    requests
        .patch_status(
            "alices",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"phase": "Ready", "expiresAt": "2099-01-01T00:00:00Z"}}),
            ),
        )
        .await
        .unwrap();
    // oz's reconcile of the edit ran to its end: the status is Expired again (oz rewrote it
    // after the edit), and read after that, every reconcile started has finished.
    eventually(
        SETTLE,
        &format!(
            "oz to mark it Expired again and finish reconciling (log: {})",
            operator.log.display()
        ),
        || async {
            let status = requests.get("alices").await.ok()?.status?;
            let (started, finished) = reconciles(metrics).await;
            (status.phase == Some(RequestPhase::Expired)
                && finished > finished_before
                && started == finished)
                .then_some(())
        },
    )
    .await;
    assert!(!may_exec(&alice_client, &ns, &pod).await);
    let roles: Api<Role> = Api::namespaced(admin.clone(), &ns);
    assert!(
        roles
            .get_opt(&grant_name(&expired))
            .await
            .unwrap()
            .is_none()
    );
    drop(operator);
}

/// oz creates a grant's Role when its cache has none; if one exists after all (made meanwhile,
/// or not yet seen), the create's AlreadyExists must not leave it as it was found.
#[tokio::test]
async fn a_role_oz_writes_as_new_that_already_exists_gets_oz_s_rules() {
    install_crds().await;
    let ns = env().namespace("sec-newrole").await.unwrap();
    let admin = env().admin().await.unwrap();
    let roles: Api<Role> = Api::namespaced(admin, &ns);
    let role = |resource: &str| Role {
        metadata: ObjectMeta {
            name: Some("grant".into()),
            ..Default::default()
        },
        rules: Some(vec![rule(&[""], &[resource], &["get"])]),
    };
    roles
        .create(&PostParams::default(), &role("secrets"))
        .await
        .unwrap();
    let written = oz::apply::create_or_apply(&roles, &role("pods"), true)
        .await
        .unwrap();
    let wanted = Some(vec![rule(&[""], &["pods"], &["get"])]);
    assert_eq!(written.rules, wanted);
    assert_eq!(roles.get("grant").await.unwrap().rules, wanted);
}

#[tokio::test]
async fn an_edited_role_or_binding_of_a_grant_is_put_back() {
    let (ns, admin, web, _) = namespace("sec-roleedit").await;
    let operator = Operator::start(&ns, &[]);
    let requests = Api::<ExecAccessRequest>::namespaced(admin.clone(), &ns);
    create_manifest(
        &admin,
        &ns,
        &exec_request("alices", "web-exec", "alice", "1h"),
    )
    .await
    .unwrap();
    let granted = ready(&requests, "alices").await;
    let pod = granted.status.clone().unwrap().pod_name.unwrap();
    let name = grant_name(&granted);
    let alice_client = env().client_as("alice").await.unwrap();
    let bob_client = env().client_as("bob").await.unwrap();

    // Users may not touch it at all.
    let alices_roles: Api<Role> = Api::namespaced(alice_client.clone(), &ns);
    assert_refused(
        "alice's Role patch",
        alices_roles
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"rules": []})),
            )
            .await,
        403,
        &rbac_denies("alice", "patch", "roles", "rbac.authorization.k8s.io", &ns),
    );

    widen_grant(&admin, &ns, &name).await;
    let other = web.iter().find(|p| **p != pod).unwrap();
    eventually(
        SETTLE,
        &format!("oz to put the grant back (log: {})", operator.log.display()),
        || async { grant_problems(&admin, &ns).await.is_empty().then_some(()) },
    )
    .await;
    assert!(may_exec(&alice_client, &ns, &pod).await);
    assert!(!may_exec(&alice_client, &ns, other).await);
    assert!(!may_exec(&bob_client, &ns, &pod).await);
}

/// As an admin, widens grant `name`: its Role to secrets and exec on every pod, its RoleBinding
/// to bob too.
async fn widen_grant(admin: &Client, ns: &str, name: &str) {
    let roles: Api<Role> = Api::namespaced(admin.clone(), ns);
    let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), ns);
    roles
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"rules": [
                {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create", "get"]},
                {"apiGroups": [""], "resources": ["pods", "secrets"], "verbs": ["get", "list"]},
            ]})),
        )
        .await
        .unwrap();
    bindings
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"subjects": [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"},
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bob"},
            ]})),
        )
        .await
        .unwrap();
}

/// What changed while oz was down reaches it only as the state its watches first list: no
/// watch event says a grant was edited or deleted. Every request is reconciled once at
/// start-up, against those lists, and that puts each grant back.
#[tokio::test]
async fn a_grant_edited_or_deleted_while_oz_is_down_is_put_back_when_it_starts() {
    let (ns, admin, web, db) = namespace("sec-downedit").await;
    let mut operator = Operator::start(&ns, &[]);
    let requests = Api::<ExecAccessRequest>::namespaced(admin.clone(), &ns);
    for name in ["widened", "deleted"] {
        create_manifest(&admin, &ns, &exec_request(name, "web-exec", "alice", "1h"))
            .await
            .unwrap();
    }
    let (widened, deleted) = (
        ready(&requests, "widened").await,
        ready(&requests, "deleted").await,
    );
    operator.kill();

    widen_grant(&admin, &ns, &grant_name(&widened)).await;
    let roles: Api<Role> = Api::namespaced(admin.clone(), &ns);
    let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), &ns);
    let gone = grant_name(&deleted);
    roles.delete(&gone, &Default::default()).await.unwrap();
    bindings.delete(&gone, &Default::default()).await.unwrap();
    assert!(!grant_problems(&admin, &ns).await.is_empty());

    operator.restart();
    eventually(
        SETTLE,
        &format!(
            "oz to put both grants back once started (log: {})",
            operator.log.display()
        ),
        || async { grant_problems(&admin, &ns).await.is_empty().then_some(()) },
    )
    .await;
    let alice_client = env().client_as("alice").await.unwrap();
    let bob_client = env().client_as("bob").await.unwrap();
    // alice holds both grants, each on a pod picked at random: she may exec into the granted
    // pods and no other, bob into none.
    let granted: Vec<String> = [&widened, &deleted]
        .iter()
        .map(|r| r.status.clone().unwrap().pod_name.unwrap())
        .collect();
    for pod in web.iter().chain(&db) {
        assert_eq!(
            may_exec(&alice_client, &ns, pod).await,
            granted.contains(pod),
            "alice into {pod} (granted: {granted:?})"
        );
        assert!(!may_exec(&bob_client, &ns, pod).await, "bob into {pod}");
    }
}

#[tokio::test]
async fn a_template_in_another_namespace_cannot_be_used() {
    let (ns, admin, _, _) = namespace("sec-xns").await;
    let other = env().namespace("sec-xns-other").await.unwrap();
    workloads::deployment(&admin, &other, WorkloadSpec::new("web", 1))
        .await
        .unwrap();
    create_manifest(&admin, &other, &exec_template("elsewhere", "web"))
        .await
        .unwrap();
    let_groups_request(&admin, &ns, &["devs"]).await;
    let oz = WebhookOperator::start(&ns, &[]);
    oz.wait_until_admitting("alice", "web-exec").await;
    let alice = Api::<ExecAccessRequest>::namespaced(env().client_as("alice").await.unwrap(), &ns);

    // A plain name is looked up in the request's namespace only (oz's webhook refuses it); a
    // qualified or path-like one is not a name at all (the schema refuses it).
    for (name, template, code, says) in [
        (
            "plain",
            "elsewhere".to_string(),
            403,
            "does not exist or does not admit",
        ),
        (
            "qualified",
            format!("{other}/elsewhere"),
            422,
            "spec.templateName must be the name of an object in this namespace",
        ),
        (
            "traversal",
            format!("../../{other}/execaccesstemplates/elsewhere"),
            422,
            "spec.templateName must be the name of an object in this namespace",
        ),
    ] {
        let status = refusal(
            alice
                .create(&PostParams::default(), &request(name, &template, None))
                .await,
        );
        assert_eq!(status.code, code, "{template}: {status:?}");
        assert!(
            status.message.contains(says),
            "{template}: {}",
            status.message
        );
    }
    oz.remove_configurations().await;

    // Without the webhooks (created as admin), the controller looks in the request's own
    // namespace only, and says so.
    let plain_ns = env().namespace("sec-xns-plain").await.unwrap();
    let _operator = Operator::start(&plain_ns, &[]);
    create_manifest(
        &admin,
        &plain_ns,
        &exec_request("plain", "elsewhere", "alice", "1h"),
    )
    .await
    .unwrap();
    let requests = Api::<ExecAccessRequest>::namespaced(admin.clone(), &plain_ns);
    let failed = eventually(SETTLE, "the request to fail", || async {
        let request = requests.get("plain").await.ok()?;
        (request.status.as_ref()?.phase == Some(RequestPhase::Failed)).then_some(request)
    })
    .await;
    let message = failed
        .status
        .unwrap()
        .conditions
        .into_iter()
        .find(|c| c.type_() == "TargetTemplateExists")
        .unwrap()
        .message;
    assert!(
        message.contains(&format!("in namespace {plain_ns:?}")),
        "{message}"
    );
    assert_eq!(
        grant_problems(&admin, &plain_ns).await,
        Vec::<String>::new()
    );
}

/// oz-manager's metrics, scraped from `127.0.0.1:port`.
async fn scrape(port: u16) -> String {
    let text =
        crate::support::operator::http_get(&format!("http://127.0.0.1:{port}/metrics")).await;
    assert!(
        !text.is_empty(),
        "oz-manager's metrics on port {port} do not answer"
    );
    text
}

/// How many ExecAccessRequest reconciles oz has started, and finished.
async fn reconciles(port: u16) -> (u64, u64) {
    let exported = scrape(port).await;
    let value = |name: &str| {
        let line = format!("{name}{{controller=\"request\",kind=\"ExecAccessRequest\"}} ");
        exported
            .lines()
            .find_map(|l| l.strip_prefix(&line))
            .map_or(0, |v| v.trim().parse::<f64>().unwrap() as u64)
    };
    (
        value("oz_reconciles_total"),
        value("oz_reconcile_duration_seconds_count"),
    )
}

/// `support::rule`, limited to `names` when given.
fn named_rule(
    groups: &[&str],
    resources: &[&str],
    verbs: &[&str],
    names: Option<&[&str]>,
) -> PolicyRule {
    PolicyRule {
        resource_names: names.map(|n| n.iter().map(|s| s.to_string()).collect()),
        ..rule(groups, resources, verbs)
    }
}

#[tokio::test]
async fn the_operators_own_rbac_cannot_create_a_role_beyond_pod_access_nor_bind_cluster_admin() {
    install_crds().await;
    let admin = env().admin().await.unwrap();
    let operator_ns = env().namespace("sec-sa-oz").await.unwrap();
    let ns = env().namespace("sec-sa").await.unwrap();
    let elsewhere = env().namespace("sec-sa-other").await.unwrap();
    let web = workloads::deployment(&admin, &ns, WorkloadSpec::new("web", 1))
        .await
        .unwrap();
    let pod = web.pod_names()[0].clone();
    // An exec-only install: the strictest; a pod install also holds pods/attach and pod
    // create and delete (docs/rbac.md).
    let options = InstallOptions {
        namespace: operator_ns.clone(),
        watch_namespaces: vec![ns.clone()],
        controllers: vec![Component::Exec],
        name: operator_ns.clone(),
        crds: false,
        ..InstallOptions::default()
    };
    let yaml = install_yaml(&options).unwrap();
    let applied = apply_install(&admin, &yaml, |_| true).await;
    let kubeconfig = service_account_kubeconfig(
        env(),
        &admin,
        &operator_ns,
        &format!("{operator_ns}-manager"),
    )
    .await;
    let oz = client_from(&kubeconfig).await;
    let roles = Api::<Role>::namespaced(oz.clone(), &ns);
    let create_role = |name: &str, rules: Vec<PolicyRule>| {
        let roles = roles.clone();
        let role = Role {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            rules: Some(rules),
        };
        async move { roles.create(&PostParams::default(), &role).await }
    };

    // What oz's builders make: fine.
    create_role(
        "grant",
        vec![
            named_rule(&[""], &["pods"], &["get"], Some(&[&pod])),
            named_rule(&[""], &["pods/exec"], &["create", "get"], Some(&[&pod])),
        ],
    )
    .await
    .unwrap();
    // Exec on every pod of the namespace is within what oz holds, so RBAC allows it: the
    // ceiling is oz's own rules, not one pod (docs/rbac.md).
    create_role(
        "any-pod",
        vec![named_rule(&[""], &["pods/exec"], &["create", "get"], None)],
    )
    .await
    .unwrap();

    let escalations: Vec<(&str, Vec<PolicyRule>)> = vec![
        (
            "secrets",
            vec![named_rule(&[""], &["secrets"], &["get"], None)],
        ),
        (
            "secret-by-name",
            vec![named_rule(
                &[""],
                &["secrets"],
                &["get"],
                Some(&["oz-webhook-ca"]),
            )],
        ),
        (
            "every-verb",
            vec![named_rule(&[""], &["pods"], &["*"], None)],
        ),
        (
            "every-resource",
            vec![named_rule(&[""], &["*"], &["get"], None)],
        ),
        ("everything", vec![named_rule(&["*"], &["*"], &["*"], None)]),
        (
            "node-proxy",
            vec![named_rule(
                &[""],
                &["nodes/proxy"],
                &["get", "create"],
                None,
            )],
        ),
        (
            "port-forward",
            vec![named_rule(
                &[""],
                &["pods/portforward"],
                &["create", "get"],
                Some(&[&pod]),
            )],
        ),
        (
            "attach",
            vec![named_rule(
                &[""],
                &["pods/attach"],
                &["create", "get"],
                Some(&[&pod]),
            )],
        ),
        (
            "ephemeral",
            vec![named_rule(
                &[""],
                &["pods/ephemeralcontainers"],
                &["patch", "update"],
                None,
            )],
        ),
        (
            "pod-create",
            vec![named_rule(&[""], &["pods"], &["create", "delete"], None)],
        ),
        (
            "escalate",
            vec![named_rule(
                &["rbac.authorization.k8s.io"],
                &["roles"],
                &["escalate", "bind"],
                None,
            )],
        ),
        (
            "impersonate",
            vec![named_rule(
                &[""],
                &["users", "groups", "serviceaccounts"],
                &["impersonate"],
                None,
            )],
        ),
        (
            "tokens",
            vec![named_rule(
                &[""],
                &["serviceaccounts/token"],
                &["create"],
                None,
            )],
        ),
    ];
    for (name, rules) in escalations {
        assert_refused(name, create_role(name, rules).await, 403, ESCALATION);
    }

    // Nor by changing a Role it may patch (its own included): the same check applies.
    assert_refused(
        "a patched grant",
        roles
            .patch(
                "grant",
                &PatchParams::default(),
                &Patch::Merge(json!({"rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]})),
            )
            .await,
        403,
        ESCALATION,
    );
    let own_role = format!("{operator_ns}-manager");
    assert_refused(
        "its own Role",
        roles
            .patch(
                &own_role,
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}),
                ),
            )
            .await,
        403,
        ESCALATION,
    );

    // Binding: only to what it holds; cluster-admin and a ClusterRole with secrets are beyond it.
    let bindings = Api::<RoleBinding>::namespaced(oz.clone(), &ns);
    let binding = |name: &str, kind: &str, role: &str, user: &str| {
        let mut binding = role_binding(name, vec![subject("User", user)]);
        binding.role_ref.kind = kind.into();
        binding.role_ref.name = role.into();
        binding
    };
    bindings
        .create(
            &PostParams::default(),
            &binding("ok", "Role", "grant", "alice"),
        )
        .await
        .unwrap();
    // The test control plane runs no ClusterRole aggregation controller, so the aggregated
    // admin, edit and view are empty here: a ClusterRole of the test's own stands in for them.
    Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(admin.clone())
        .patch(
            "oz-test-secret-reader",
            &PatchParams::apply("oz-tests").force(),
            &Patch::Apply(json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": "oz-test-secret-reader"},
                "rules": [{"apiGroups": [""], "resources": ["pods", "secrets"], "verbs": ["get"]}],
            })),
        )
        .await
        .unwrap();
    for cluster_role in ["cluster-admin", "oz-test-secret-reader"] {
        assert_refused(
            cluster_role,
            bindings
                .create(
                    &PostParams::default(),
                    &binding(cluster_role, "ClusterRole", cluster_role, "mallory"),
                )
                .await,
            403,
            ESCALATION,
        );
    }
    let oz_user = format!("system:serviceaccount:{operator_ns}:{operator_ns}-manager");
    assert_refused(
        "a ClusterRoleBinding",
        Api::<ClusterRoleBinding>::all(oz.clone())
            .create(
                &PostParams::default(),
                &ClusterRoleBinding {
                    metadata: ObjectMeta {
                        name: Some(format!("{operator_ns}-escalation")),
                        ..Default::default()
                    },
                    role_ref: binding("", "ClusterRole", "cluster-admin", "").role_ref,
                    subjects: binding("", "", "", "mallory").subjects,
                },
            )
            .await,
        403,
        &format!(
            "User \"{oz_user}\" cannot create resource \"clusterrolebindings\" in API group \"rbac.authorization.k8s.io\" at the cluster scope"
        ),
    );
    // And nothing at all in a namespace it does not watch.
    assert_refused(
        "a Role elsewhere",
        Api::<Role>::namespaced(oz.clone(), &elsewhere)
            .create(
                &PostParams::default(),
                &Role {
                    metadata: ObjectMeta {
                        name: Some("grant".into()),
                        ..Default::default()
                    },
                    rules: Some(vec![named_rule(&[""], &["pods"], &["get"], Some(&[&pod]))]),
                },
            )
            .await,
        403,
        &rbac_denies(
            &oz_user,
            "create",
            "roles",
            "rbac.authorization.k8s.io",
            &elsewhere,
        ),
    );

    delete_cluster_scoped(&admin, &applied).await;
}

#[tokio::test]
async fn a_grant_whose_template_is_orphan_deleted_does_not_outlive_its_window() {
    let (ns, admin, _, _) = namespace("sec-orphan").await;
    let operator = Operator::start(&ns, &[]);
    let requests = Api::<ExecAccessRequest>::namespaced(admin.clone(), &ns);
    // An hour: only the missing template can end this grant within the test.
    create_manifest(
        &admin,
        &ns,
        &exec_request("alices", "web-exec", "alice", "1h"),
    )
    .await
    .unwrap();
    let granted = ready(&requests, "alices").await;
    let pod = granted.status.clone().unwrap().pod_name.unwrap();
    let alice_client = env().client_as("alice").await.unwrap();
    assert!(may_exec(&alice_client, &ns, &pod).await);

    // Deleting the template without cascading leaves the request, and no template to check it
    // against: the request fails, and its grant ends.
    let deleted_at = Timestamp::now();
    Api::<oz_api::ExecAccessTemplate>::namespaced(admin.clone(), &ns)
        .delete(
            "web-exec",
            &kube::api::DeleteParams {
                propagation_policy: Some(kube::api::PropagationPolicy::Orphan),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let revoked = eventually(
        SETTLE,
        &format!("the grant to end (log: {})", operator.log.display()),
        || async { (!may_exec(&alice_client, &ns, &pod).await).then(Timestamp::now) },
    )
    .await;
    let after = revoked.duration_since(deleted_at).as_secs_f64();
    eprintln!("grant revoked {after:.3}s after its template was deleted");
    assert!(
        after < 10.0,
        "the grant outlived its template by {after:.3}s"
    );
    // Revoking deletes the RoleBinding (access ends), then the Role: wait for the settled
    // state.
    eventually(SETTLE, "no grant left behind", || async {
        grant_problems(&admin, &ns).await.is_empty().then_some(())
    })
    .await;
    // The orphaning delete is respected: oz ended the grant and kept the request to say why,
    // rather than adopting it again onto the dying template (which had it deleted too).
    let request = eventually(
        SETTLE,
        "the garbage collector to orphan the request",
        || async {
            let request = requests
                .get_opt("alices")
                .await
                .unwrap()
                .expect("the request was deleted with its template, not orphaned");
            let owners = request
                .metadata
                .owner_references
                .clone()
                .unwrap_or_default();
            owners.is_empty().then_some(request)
        },
    )
    .await;
    assert_eq!(request.status.unwrap().phase, Some(RequestPhase::Failed));
}
