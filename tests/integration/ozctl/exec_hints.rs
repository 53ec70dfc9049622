//! `ozctl exec` when it cannot run says what to run instead, end to end: the real ozctl as
//! alice and carol (devs) and bob (qa), against an oz-manager with its webhooks. Given a pod's
//! name, it names the user's request for that pod, or the templates that could grant it with
//! the `ozctl create` line for each; given a request that is no longer Ready, the line that
//! asks again for the same pod, which works as printed.
//!
//! The namespace has Deployment `web` (2 ready pods), ExecAccessTemplate `web-exec` for devs,
//! the requester RBAC of `hack/demo/requesters.yaml`, and `get` on pods for everyone (as `view`
//! holds): without it, whether a name is a pod is not known, and the hints stay plain.

use std::{process::Output, time::Duration};

use kube::{Api, ResourceExt, api::ListParams};
use oz_api::{ExecAccessRequest, RequestPhase};

use crate::support::{
    admission::wait_until_admitting,
    cluster::env,
    fixture::Fixture,
    ozctl::{assert_ok, ozctl_bin, ozctl_with, stderr},
    polling::eventually,
    rbac::{rule, subject},
};

const WAIT: Duration = Duration::from_secs(60);

const EXEC_TEMPLATE: &str = "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessTemplate\n\
    metadata: {name: web-exec}\nspec:\n  accessConfig: {allowedGroups: [devs], defaultDuration: 1h, maxDuration: 2h}\n  \
    controllerTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n";

async fn ozctl(f: &Fixture, user: &str, args: &[&str]) -> Output {
    ozctl_with(env().kubeconfig_of(user).unwrap(), &f.ns, args).await
}

/// The last line of stderr: ozctl's `error: ...` line.
fn error_line(output: &Output) -> String {
    stderr(output)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string()
}

/// alice's requests, as admin sees them, oldest first.
async fn alices_requests(f: &Fixture) -> Vec<ExecAccessRequest> {
    let mut requests = Api::<ExecAccessRequest>::namespaced(f.admin.clone(), &f.ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    requests.retain(|r| {
        r.spec
            .requester
            .as_ref()
            .is_some_and(|by| by.username == "alice")
    });
    requests.sort_by_key(|r| r.metadata.creation_timestamp.clone().map(|t| t.0));
    requests
}

#[tokio::test]
async fn exec_on_a_pod_or_an_ended_request_says_what_to_run_instead() {
    let f = Fixture::builder("ozctl-exec-hints")
        .web(2)
        .manifest(EXEC_TEMPLATE)
        .let_everyone_request()
        .grant(
            "pod-readers",
            vec![rule(&[""], &["pods"], &["get", "list", "watch"])],
            vec![subject("Group", "system:authenticated")],
        )
        .webhooks()
        .start()
        .await;
    let ns = f.ns.clone();
    let alice = Api::<ExecAccessRequest>::namespaced(env().client_as("alice").await.unwrap(), &ns);
    wait_until_admitting(&alice, "alice", "web-exec", WAIT, &f.operator.log).await;

    let created = ozctl(
        &f,
        "alice",
        &["create", "exec", "web-exec", "--timeout", "60s"],
    )
    .await;
    assert_ok(&created, "alice's ozctl create exec");
    let granted = alices_requests(&f).await.remove(0);
    let name = granted.name_any();
    let pod = granted.status.unwrap().pod_name.unwrap();

    // The pod's name in place of the request's: alice is sent to her request for it.
    let hers = ozctl(&f, "alice", &["exec", &pod]).await;
    assert_eq!(hers.status.code(), Some(1), "{}", stderr(&hers));
    assert_eq!(
        error_line(&hers),
        format!(
            "error: {pod} is a pod, not an access request; your ExecAccessRequest {name} \
             (Ready) is for it: ozctl exec {name} -n {ns}"
        )
    );
    // carol holds nothing for it, and web-exec can grant it to her.
    let carols = ozctl(&f, "carol", &["exec", &pod]).await;
    assert_eq!(
        error_line(&carols),
        format!(
            "error: {pod} is a pod in namespace \"{ns}\", not an access request, and you hold no \
             grant for it; ExecAccessTemplate web-exec can grant it to you: \
             ozctl create exec web-exec --target-pod {pod} -n {ns}"
        )
    );
    // bob is in no group a template for it admits.
    let bobs = ozctl(&f, "bob", &["exec", &pod]).await;
    assert_eq!(
        error_line(&bobs),
        format!(
            "error: {pod} is a pod in namespace \"{ns}\", not an access request, and you hold no \
             grant for it; no template grants it to you: ExecAccessTemplate web-exec admits only \
             devs; ask to be added to one of those groups, or ask a template admin of {ns} for a \
             template"
        )
    );
    // A request whose access starts later says when, and what to run then.
    let planned = ozctl(
        &f,
        "carol",
        &["create", "exec", "web-exec", "--start", "1h", "--no-wait"],
    )
    .await;
    assert_ok(&planned, "carol's ozctl create exec --start 1h");
    let planned = String::from_utf8_lossy(&planned.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    let early = ozctl(&f, "carol", &["exec", &planned, "--timeout", "30s"]).await;
    let line = error_line(&early);
    assert!(
        line.starts_with(&format!(
            "error: ExecAccessRequest {planned} is Scheduled: its access starts at "
        )) && line.ends_with(&format!("; run `ozctl exec {planned} -n {ns}` then")),
        "{line}"
    );

    // A name that is neither stays the error it was.
    let neither = ozctl(&f, "alice", &["exec", "no-such-thing"]).await;
    assert_eq!(
        error_line(&neither),
        format!(
            "error: no access request \"no-such-thing\" in namespace \"{ns}\"; list yours with: \
             ozctl get -n {ns}"
        )
    );

    // Revoked: the error asks again for the same pod, and the line works as printed.
    let revoked = ozctl(&f, "alice", &["revoke", &name]).await;
    assert_ok(&revoked, "ozctl revoke");
    let again = format!("ozctl create exec web-exec --target-pod {pod} -n {ns}");
    let ended = ozctl(&f, "alice", &["exec", &name]).await;
    assert_eq!(ended.status.code(), Some(1), "{}", stderr(&ended));
    let line = error_line(&ended);
    assert!(
        line.starts_with(&format!(
            "error: ExecAccessRequest {name} was revoked by alice "
        )) && line.ends_with(&format!("; request access again with: {again}")),
        "{line}"
    );
    let args: Vec<&str> = again.split_whitespace().skip(1).collect();
    let asked = tokio::process::Command::new(ozctl_bin())
        .args(&args)
        .args(["--timeout", "60s"])
        .env("KUBECONFIG", env().kubeconfig_of("alice").unwrap())
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert_ok(&asked, &again);
    let newer = eventually(WAIT, "alice's second request to be Ready", || async {
        let requests = alices_requests(&f).await;
        let newest = requests.into_iter().find(|r| r.name_any() != name)?;
        let status = newest.status?;
        (status.phase == Some(RequestPhase::Ready)).then_some(status)
    })
    .await;
    assert_eq!(
        newer.pod_name.as_deref(),
        Some(pod.as_str()),
        "the same pod"
    );
}
