//! Brokered grants as the apiserver enforces them: a template with
//! `sessionMode: Brokered` grants exec (and, for pod access, attach) in oz's API group
//! `sessions.wizardofoz.co` only, so alice's plain `kubectl exec` is refused by the apiserver,
//! and her session can only go through oz. The oz-manager runs as admin (the streams
//! [`Fixture`]), which holds every permission it grants.

use k8s_openapi::api::{authorization::v1::ResourceAttributes, rbac::v1::Role};
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use oz_api::{
    AccessRequest, ExecAccessRequest, ExecAccessTemplate, PodAccessRequest, SESSIONS_GROUP,
    SessionMode,
};
use serde_json::json;

use crate::{
    access::streams::{StreamsFixture, WAIT, assert_exec_forbidden, hello, web},
    support::{
        cluster::env,
        fixture::Fixture,
        manifests::create_manifest,
        polling::eventually,
        users::{can_exec, self_review},
    },
};

/// A template of `kind` (`Exec` or `Pod`) named `name` for devs on Deployment `web`, with
/// `extra` added to its accessConfig (`sessionMode: Brokered`).
async fn template(f: &Fixture, kind: &str, name: &str, extra: &str) {
    let yaml = format!(
        "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: {kind}AccessTemplate\nmetadata: {{name: {name}}}\n\
         spec:\n  accessConfig: {{allowedGroups: [devs], defaultDuration: 1h, maxDuration: 2h{extra}}}\n  \
         controllerTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: web}}\n"
    );
    create_manifest(&f.admin, &f.ns, &yaml).await.unwrap();
}

/// Whether `user` may `verb` `pods/<subresource>` in API `group` on `pod`, asked with their own
/// credentials.
async fn may(user: &str, verb: &str, group: &str, subresource: &str, ns: &str, pod: &str) -> bool {
    let client = env().client_as(user).await.unwrap();
    let attributes = ResourceAttributes {
        namespace: Some(ns.into()),
        verb: Some(verb.into()),
        group: Some(group.into()),
        resource: Some("pods".into()),
        subresource: Some(subresource.into()),
        name: Some(pod.into()),
        ..Default::default()
    };
    self_review(&client, attributes).await
}

/// Whether `user` may open `subresource` (exec or attach) on `pod` through oz: both verbs a
/// websocket stream needs.
async fn may_through_oz(user: &str, subresource: &str, ns: &str, pod: &str) -> bool {
    may(user, "create", SESSIONS_GROUP, subresource, ns, pod).await
        && may(user, "get", SESSIONS_GROUP, subresource, ns, pod).await
}

fn pod_of<R: AccessRequest>(request: &R) -> String {
    request.request_status().unwrap().pod_name.clone().unwrap()
}

#[tokio::test]
async fn a_brokered_exec_grant_allows_exec_only_through_oz_into_her_pod() {
    let f = Fixture::new("brokered-exec").await;
    let web = web(&f).await;
    template(&f, "Exec", "web-brokered", ", sessionMode: Brokered").await;
    template(&f, "Exec", "web-direct", "").await;

    let granted = f
        .granted::<ExecAccessRequest>("alice-web", "web-brokered", "alice", "10m")
        .await;
    let pod = pod_of(&granted);
    let other = web.pod_names().into_iter().find(|p| *p != pod).unwrap();
    let status = granted.request_status().unwrap();
    assert_eq!(status.session_mode, Some(SessionMode::Brokered));
    assert_eq!(
        status.access_message.as_deref(),
        Some(
            format!(
                "oz brokers this grant's sessions: it records them and closes them when the access \
                 ends, and plain kubectl exec is refused. Use kubectl oz exec, or: \
                 ozctl exec -n {} alice-web -- /bin/sh",
                f.ns
            )
            .as_str()
        )
    );

    // The apiserver refuses her plain kubectl exec: the grant has nothing on core pods/exec.
    assert_exec_forbidden(&hello(&f, "alice", &pod).await, "alice", &pod, &f.ns);
    assert!(!can_exec("alice", &f.ns, &pod).await);
    // Through oz, into her pod only; nothing for bob. No attach on an exec grant.
    assert!(may_through_oz("alice", "exec", &f.ns, &pod).await);
    assert!(!may_through_oz("alice", "exec", &f.ns, &other).await);
    assert!(!may_through_oz("bob", "exec", &f.ns, &pod).await);
    assert!(!may_through_oz("alice", "attach", &f.ns, &pod).await);
    // ozctl reads the pod before it opens the session.
    assert!(may("alice", "get", "", "", &f.ns, &pod).await);

    // A Direct template's grant is what it always was: core exec, no sessionMode, kubectl's
    // access message.
    let direct = f
        .granted::<ExecAccessRequest>("alice-direct", "web-direct", "alice", "10m")
        .await;
    let direct_pod = pod_of(&direct);
    let status = direct.request_status().unwrap();
    assert_eq!(status.session_mode, None);
    assert_eq!(
        status.access_message.as_deref(),
        Some(format!("kubectl exec -ti -n {} {direct_pod} -- /bin/sh", f.ns).as_str())
    );
    let roles: Api<Role> = Api::namespaced(f.admin.clone(), &f.ns);
    let role = roles
        .list(&kube::api::ListParams::default().labels("oz.wizardofoz.co/request=alice-direct"))
        .await
        .unwrap()
        .items
        .remove(0);
    assert_eq!(
        serde_json::to_value(&role.rules).unwrap(),
        json!([
            {"apiGroups": [""], "resources": ["pods"], "resourceNames": [direct_pod], "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["pods/exec"], "resourceNames": [direct_pod], "verbs": ["create", "get"]},
        ])
    );
    assert!(can_exec("alice", &f.ns, &direct_pod).await);

    // The template switched to Brokered: the live Direct grant narrows to Brokered.
    let templates: Api<ExecAccessTemplate> = Api::namespaced(f.admin.clone(), &f.ns);
    templates
        .patch(
            "web-direct",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"accessConfig": {"sessionMode": "Brokered"}}})),
        )
        .await
        .unwrap();
    let requests = f.requests::<ExecAccessRequest>();
    eventually(WAIT, "alice-direct to become Brokered", || {
        let requests = requests.clone();
        async move {
            let request = requests.get("alice-direct").await.ok()?;
            (request.request_status()?.session_mode == Some(SessionMode::Brokered)).then_some(())
        }
    })
    .await;
    assert!(!can_exec("alice", &f.ns, &direct_pod).await);
    assert!(may_through_oz("alice", "exec", &f.ns, &direct_pod).await);
}

#[tokio::test]
async fn a_brokered_pod_grant_allows_exec_and_attach_only_through_oz() {
    let f = Fixture::new("brokered-pod").await;
    web(&f).await;
    template(&f, "Pod", "web-pod", ", sessionMode: Brokered").await;

    let granted = f
        .granted::<PodAccessRequest>("alice-pod", "web-pod", "alice", "10m")
        .await;
    let pod = pod_of(&granted);
    assert_eq!(
        granted.request_status().unwrap().session_mode,
        Some(SessionMode::Brokered)
    );
    for stream in ["exec", "attach"] {
        assert!(
            may_through_oz("alice", stream, &f.ns, &pod).await,
            "{stream}"
        );
        assert!(
            !may("alice", "create", "", stream, &f.ns, &pod).await,
            "{stream}"
        );
        assert!(
            !may_through_oz("bob", stream, &f.ns, &pod).await,
            "{stream}"
        );
    }
    assert_exec_forbidden(&hello(&f, "alice", &pod).await, "alice", &pod, &f.ns);
}
