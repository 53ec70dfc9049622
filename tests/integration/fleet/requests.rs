//! A fleet end to end: alice asks the hub for an exec on spoke `b` through a fleet template
//! that needs a lead's approval; dave approves on the hub; the hub forwards the request to
//! `b`, whose oz grants it; alice's own `kubectl exec` on `b` works, and `c` sees nothing.

use kube::{
    Api, ResourceExt,
    api::{DeleteParams, DynamicObject, ListParams},
    core::{ApiResource, GroupVersionKind},
};
use oz_api::{ExecAccessRequest, ExecAccessTemplate, RequestPhase};
use oz_testenv::exec;

use super::setup::{NS, OzFleet, SETTLES};
use crate::support::{
    manifests::create_manifest, operator::eventually_or_show, polling::wait_until_gone,
    users::may_exec,
};

/// A fleet template for `web` on the spokes `clusters` names, for devs, approved by one lead.
fn fleet_template(name: &str, clusters: &str) -> String {
    format!(
        "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessTemplate\nmetadata: {{name: {name}}}\nspec:\n  \
         clusters: {clusters}\n  \
         accessConfig:\n    allowedGroups: [devs]\n    defaultDuration: 1h\n    maxDuration: 2h\n    \
         approval: {{required: 1, approverGroups: [leads]}}\n  \
         controllerTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: web}}\n"
    )
}

#[tokio::test]
async fn alice_asks_the_hub_and_gets_exec_on_spoke_b_and_nothing_on_c() {
    let oz = OzFleet::start(&[("b", &[]), ("c", &[])]).await;
    let hub_admin = oz.fleet.hub().admin().await.unwrap();
    create_manifest(&hub_admin, NS, &fleet_template("web", "{names: [b]}"))
        .await
        .unwrap();
    oz.wait_until_synced("web", &["b"]).await;
    let on_c = Api::<ExecAccessTemplate>::namespaced(oz.spoke_admin("c").await, NS);
    assert!(
        on_c.get_opt("web").await.unwrap().is_none(),
        "c holds the template"
    );

    // alice asks the hub; nothing reaches b before a lead approves.
    oz.wait_until_hub_admits("alice", "web").await;
    let request = "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessRequest\n\
                   metadata: {name: alice-web}\nspec: {templateName: web, cluster: b, reason: incident 7}\n";
    create_manifest(&oz.on_hub("alice").await, NS, request)
        .await
        .unwrap();
    let pending = oz
        .wait_for_hub_phase("alice-web", RequestPhase::PendingApproval)
        .await;
    let on_b = Api::<ExecAccessRequest>::namespaced(oz.spoke_admin("b").await, NS);
    assert!(
        on_b.get_opt("alice-web").await.unwrap().is_none(),
        "forwarded before approval"
    );

    let approval = format!(
        "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: AccessApproval\nmetadata: {{name: dave-ok}}\n\
         spec: {{requestRef: {{kind: ExecAccessRequest, name: alice-web}}, decision: Approve, \
         comment: go, requestUid: {}}}\n",
        pending.uid().unwrap()
    );
    create_manifest(&oz.on_hub("dave").await, NS, &approval)
        .await
        .unwrap();
    let ready = oz
        .wait_for_hub_phase("alice-web", RequestPhase::Ready)
        .await;
    let pod = oz.web_pod("b");
    let status = ready.status.unwrap();
    assert_eq!(status.pod_name.as_deref(), Some(pod.as_str()));
    assert!(status.access_message.unwrap().contains(&pod));

    // The spoke's request names alice as the hub attested her, and the hub's approver; its
    // window is the time the hub had left, counted by the spoke's own clock.
    let granted = on_b.get("alice-web").await.unwrap();
    let seconds: i64 = granted
        .spec
        .duration
        .as_deref()
        .unwrap()
        .trim_end_matches('s')
        .parse()
        .unwrap();
    assert!(
        (3500..3600).contains(&seconds),
        "{seconds}s forwarded of the hub's 1h"
    );
    let created = granted.metadata.creation_timestamp.clone().unwrap().0;
    let spoke_expiry = granted.status.clone().unwrap().expires_at.unwrap().0;
    assert_eq!(spoke_expiry.duration_since(created).as_secs(), seconds);
    assert_eq!(granted.spec.requester.as_ref().unwrap().username, "alice");
    let forwarded = granted.spec.forwarded.as_ref().unwrap();
    assert_eq!(forwarded.request_uid, ready.metadata.uid.clone().unwrap());
    let approvers: Vec<&str> = forwarded
        .approvers
        .iter()
        .map(|a| a.approver.as_str())
        .collect();
    assert_eq!(approvers, ["dave"]);

    // alice's own credentials on b open a real exec; on c she has nothing.
    let alice_on_b = oz.on_spoke("b", "alice").await;
    assert!(may_exec(&alice_on_b, NS, &pod).await);
    let mut kubectl = oz.fleet.spoke("b").kubectl(Some("alice")).unwrap();
    kubectl.args(["exec", "-n", NS, &pod, "--", "echo", "hello-from-b"]);
    let out = exec::run(kubectl, exec::RUN_TIMEOUT).await.unwrap();
    assert!(
        out.success() && out.stdout.contains("hello-from-b"),
        "{out:?}"
    );
    // b's audit trail names alice, and dave as the hub's user.
    let record = eventually_or_show(
        SETTLES,
        "b's audit record of alice's exec",
        &oz.operators(),
        || async {
            std::fs::read_to_string(&oz.audit["b"])
                .unwrap_or_default()
                .lines()
                .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
                .find(|r| r["event"] == "PodExec" && r["user"] == "alice" && r["allowed"] == true)
        },
    )
    .await;
    assert_eq!(
        record["grant"]["approvers"],
        serde_json::json!(["dave@hub"]),
        "{record}"
    );
    assert!(!may_exec(&oz.on_spoke("c", "alice").await, NS, &oz.web_pod("c")).await);
    nothing_of_oz_on(&oz, "c").await;

    // Deleting the hub's request revokes the grant on b.
    Api::<ExecAccessRequest>::namespaced(oz.on_hub("alice").await, NS)
        .delete("alice-web", &DeleteParams::default())
        .await
        .unwrap();
    wait_until_gone(&on_b, "alice-web", SETTLES, "b's request to be withdrawn").await;
    oz.wait_until_exec_refused(&alice_on_b, &pod).await;
}

#[tokio::test]
async fn on_a_spoke_only_the_hub_requests_through_its_templates() {
    let oz = OzFleet::start(&[("b", &[])]).await;
    let hub_admin = oz.fleet.hub().admin().await.unwrap();
    create_manifest(&hub_admin, NS, &fleet_template("web", "{names: [b]}"))
        .await
        .unwrap();
    oz.wait_until_synced("web", &["b"]).await;
    // bob may write requests on b (RBAC), and alice is in the copy's allowedGroups: neither
    // gets anything through the hub's template there, nor may change it.
    let admin_on_b = oz.spoke_admin("b").await;
    grant_request_writers(&admin_on_b).await;
    for user in ["bob", "alice"] {
        let client = oz.on_spoke("b", user).await;
        let request = format!(
            "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessRequest\nmetadata: {{name: {user}-direct}}\n\
             spec: {{templateName: web}}\n"
        );
        let refused =
            eventually_or_show(SETTLES, "b's webhooks to refuse", &oz.operators(), || {
                let (client, request) = (client.clone(), request.clone());
                async move { create_manifest(&client, NS, &request).await.err() }
            })
            .await;
        assert!(
            refused.to_string().contains("is managed by fleet hub"),
            "{refused}"
        );
    }
    let templates = Api::<ExecAccessTemplate>::namespaced(admin_on_b.clone(), NS);
    let mut copy = templates.get("web").await.unwrap();
    copy.spec.access_config.allowed_groups.push("qa".into());
    let edit = templates
        .replace("web", &Default::default(), &copy)
        .await
        .unwrap_err();
    assert!(edit.to_string().contains("change it on the hub"), "{edit}");
    let requests = Api::<ExecAccessRequest>::namespaced(admin_on_b, NS);
    assert!(
        requests
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}

/// Lets every authenticated user of a spoke write requests in [`NS`], as a permissive cluster
/// might: what stops them is oz's rule, not RBAC.
async fn grant_request_writers(admin: &kube::Client) {
    let role = "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: oz-writers}\n\
                rules: [{apiGroups: [crds.wizardofoz.co], resources: [execaccessrequests, execaccesstemplates], \
                verbs: [get, list, create, update, patch, delete]}]\n";
    create_manifest(admin, NS, role).await.unwrap();
    let binding = "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: oz-writers}\n\
                   roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: oz-writers}\n\
                   subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: 'system:authenticated'}]\n";
    create_manifest(admin, NS, binding).await.unwrap();
}

/// Nothing of oz's in [`NS`] on spoke `name`: no template, request, Role, RoleBinding or Event.
async fn nothing_of_oz_on(oz: &OzFleet, name: &str) {
    let admin = oz.spoke_admin(name).await;
    for (group, version, kind, plural) in [
        (
            "crds.wizardofoz.co",
            "v1alpha1",
            "ExecAccessRequest",
            "execaccessrequests",
        ),
        (
            "crds.wizardofoz.co",
            "v1alpha1",
            "ExecAccessTemplate",
            "execaccesstemplates",
        ),
        ("rbac.authorization.k8s.io", "v1", "Role", "roles"),
        (
            "rbac.authorization.k8s.io",
            "v1",
            "RoleBinding",
            "rolebindings",
        ),
        ("events.k8s.io", "v1", "Event", "events"),
    ] {
        let resource =
            ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
        let api: Api<DynamicObject> = Api::namespaced_with(admin.clone(), NS, &resource);
        let found: Vec<String> = api
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            // The workload controllers' Events about web's pods are not oz's.
            .filter(|o| {
                kind != "Event"
                    || o.data["regarding"]["apiVersion"]
                        .as_str()
                        .is_some_and(|v| v.starts_with("crds.wizardofoz.co"))
            })
            .map(|o| o.name_any())
            .collect();
        assert!(found.is_empty(), "{kind} on {name}: {found:?}");
    }
}
