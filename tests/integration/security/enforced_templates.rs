//! Where access is enforced (`--audit-enforce-namespaces`), a template is a grant in waiting:
//! a user bound to the built-in `edit` (which carries oz's template-manager rules) must not
//! write one for herself and so exec without anyone's approval. Only the template admin groups
//! (`--template-admin-groups`) write templates there; everyone else is refused by oz's
//! fail-closed templates webhook, while requests through an admin's template still work.

use std::time::Duration;

use kube::{Api, api::PostParams};
use oz::install::{InstallOptions, install_yaml, is_users_role};
use oz_api::{ExecAccessRequest, RequestPhase};
use oz_testenv::{
    exec,
    workloads::{self, WorkloadSpec},
};
use serde_json::json;

use crate::support::{
    cluster::{env, install_crds},
    install::{apply_install, delete_cluster_scoped},
    operator::WebhookOperator,
    polling::eventually,
    users::exec,
};

/// An ExecAccessTemplate `name` for Deployment web, open to `group`, with no approval.
fn template_for(name: &str, group: &str) -> String {
    format!(
        "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessTemplate\nmetadata: {{name: {name}}}\n\
         spec:\n  accessConfig: {{allowedGroups: [{group}], defaultDuration: 1h, maxDuration: 2h}}\n  \
         controllerTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: web}}\n"
    )
}

/// `kubectl ARGS` as `user`.
async fn kubectl_as(user: &str, args: &[&str]) -> exec::Output {
    let mut kubectl = env().kubectl(Some(user)).unwrap();
    kubectl.args(args);
    exec::run(kubectl, exec::RUN_TIMEOUT).await.unwrap()
}

/// `kubectl apply` of `manifest` in `ns` as `user`, from a file as a user would.
async fn apply_as(user: &str, ns: &str, manifest: &str) -> exec::Output {
    let file = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("{ns}-{user}-{}.yaml", manifest.len()));
    std::fs::write(&file, manifest).unwrap();
    kubectl_as(user, &["apply", "-n", ns, "-f", file.to_str().unwrap()]).await
}

#[tokio::test]
async fn an_edit_user_cannot_write_herself_a_template_where_access_is_enforced() {
    install_crds().await;
    let admin = env().admin().await.unwrap();
    let ns = env().namespace("enforced-templates").await.unwrap();
    let web = workloads::deployment(&admin, &ns, WorkloadSpec::new("web", 1))
        .await
        .unwrap();
    // The users' ClusterRoles, aggregated into the built-in ones; bob (in qa) and alice (in
    // devs) hold `edit` in the namespace and nothing else, so RBAC lets both write templates
    // and exec there.
    let options = InstallOptions {
        namespace: ns.clone(),
        name: ns.clone(),
        crds: false,
        ..InstallOptions::default()
    };
    let applied = apply_install(&admin, &install_yaml(&options).unwrap(), |object| {
        object.types.as_ref().unwrap().kind == "ClusterRole" && is_users_role(&object.metadata)
    })
    .await;
    let binding: k8s_openapi::api::rbac::v1::RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "edit"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bob"},
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"},
        ],
    }))
    .unwrap();
    Api::<k8s_openapi::api::rbac::v1::RoleBinding>::namespaced(admin.clone(), &ns)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    eventually(
        Duration::from_secs(60),
        "edit to carry oz's template rules for bob",
        || async {
            let can = kubectl_as(
                "bob",
                &[
                    "auth",
                    "can-i",
                    "create",
                    "execaccesstemplates.crds.wizardofoz.co",
                    "-n",
                    &ns,
                ],
            )
            .await;
            (can.stdout.trim() == "yes").then_some(())
        },
    )
    .await;

    // devs are the template admins here.
    let oz = WebhookOperator::start(
        &ns,
        &[
            &format!("--audit-enforce-namespaces={ns}"),
            "--template-admin-groups=devs",
        ],
    );
    let log = oz.operator.log.display().to_string();
    let pod = &web.pod_names()[0];
    // Enforcement is live once bob's exec, which his RBAC allows, is refused for want of a grant.
    eventually(
        Duration::from_secs(30),
        &format!("oz to enforce in {ns} (log: {log})"),
        || async {
            let outcome = exec("bob", &ns, pod, &["true"]).await;
            outcome
                .stderr
                .contains("bob has no active access request")
                .then_some(())
        },
    )
    .await;

    // The attack: bob writes a template for his own group, to request through it at once.
    let own = apply_as("bob", &ns, &template_for("bobs", "qa")).await;
    assert!(!own.success(), "bob wrote his own template: {own:?}");
    assert!(
        own.stderr.contains("bob may not create ExecAccessTemplate")
            && own.stderr.contains("template admin groups (devs)"),
        "{own:?}"
    );
    let templates = Api::<oz_api::ExecAccessTemplate>::namespaced(admin.clone(), &ns);
    assert!(templates.get_opt("bobs").await.unwrap().is_none());
    let exec_now = exec("bob", &ns, pod, &["true"]).await;
    assert!(!exec_now.success(), "{exec_now:?}");

    // A template admin (alice, in devs) writes the template for qa: the legitimate way.
    let by_admin = apply_as("alice", &ns, &template_for("qa-web", "qa")).await;
    assert!(by_admin.success(), "{by_admin:?}");
    // bob may not widen or remove it either.
    let widened = kubectl_as(
        "bob",
        &[
            "patch",
            "execaccesstemplate",
            "qa-web",
            "-n",
            &ns,
            "--type=merge",
            "-p",
            r#"{"spec":{"accessConfig":{"maxDuration":"24h"}}}"#,
        ],
    )
    .await;
    assert!(
        !widened.success() && widened.stderr.contains("bob may not change"),
        "{widened:?}"
    );
    let removed = kubectl_as(
        "bob",
        &["delete", "execaccesstemplate", "qa-web", "-n", &ns],
    )
    .await;
    assert!(
        !removed.success() && removed.stderr.contains("bob may not delete"),
        "{removed:?}"
    );

    // Through it, bob asks and is granted, and his exec into the granted pod runs.
    let bob_requests =
        Api::<ExecAccessRequest>::namespaced(env().client_as("bob").await.unwrap(), &ns);
    let request: ExecAccessRequest = serde_json::from_value(json!({
        "apiVersion": "crds.wizardofoz.co/v1alpha1",
        "kind": "ExecAccessRequest",
        "metadata": {"name": "bobs-request"},
        "spec": {"templateName": "qa-web", "targetPod": pod},
    }))
    .unwrap();
    bob_requests
        .create(&PostParams::default(), &request)
        .await
        .unwrap();
    eventually(
        Duration::from_secs(30),
        &format!("bob's request to be Ready (log: {log})"),
        || async {
            let request = bob_requests.get("bobs-request").await.ok()?;
            (request.status?.phase == Some(RequestPhase::Ready)).then_some(())
        },
    )
    .await;
    let granted = eventually(
        Duration::from_secs(30),
        "bob's granted exec to run",
        || async {
            let outcome = exec("bob", &ns, pod, &["sh", "-c", "echo granted"]).await;
            outcome.success().then_some(outcome)
        },
    )
    .await;
    assert_eq!(granted.stdout, "granted\n");

    oz.remove_configurations().await;
    delete_cluster_scoped(&admin, &applied).await;
}
