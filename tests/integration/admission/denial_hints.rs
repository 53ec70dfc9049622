//! What an enforced denial tells a real `kubectl exec`, through the real apiserver: the
//! templates that can grant the pod to that user, each with the `ozctl create` line that asks
//! for it, and that line works as printed; whom to ask when no template admits the user; and,
//! plainly, that nothing grants port-forward. RBAC lets alice and bob exec and port-forward on
//! their own: what refuses them is oz alone.

use std::{process::Output, time::Duration};

use oz_testenv::exec;

use crate::support::{
    cluster::env,
    fixture::Fixture,
    ozctl::{assert_ok, ozctl_bin, stderr},
    polling::eventually,
    rbac::{rule, subject},
    users,
};

const WAIT: Duration = Duration::from_secs(60);

/// ExecAccessTemplate `name` for Deployment web, open to `group`; `extra` adds to its
/// accessConfig.
fn template(name: &str, group: &str, extra: &str) -> String {
    format!(
        "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessTemplate\nmetadata: {{name: {name}}}\n\
         spec:\n  accessConfig: {{allowedGroups: [{group}], defaultDuration: 1h, maxDuration: 2h{extra}}}\n  \
         controllerTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: web}}\n"
    )
}

/// The command line `line` prints (`ozctl create ...`), run as `user` with their kubeconfig,
/// exactly as printed but for a longer wait.
async fn run_as_printed(user: &str, line: &str) -> Output {
    let args: Vec<&str> = line.split_whitespace().skip(1).collect();
    tokio::process::Command::new(ozctl_bin())
        .args(&args)
        .args(["--timeout", "60s"])
        .env("KUBECONFIG", env().kubeconfig_of(user).unwrap())
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap()
}

#[tokio::test]
async fn an_enforced_denial_names_the_templates_and_the_ozctl_line_that_grants_the_pod() {
    let f = Fixture::builder("denial-hints")
        .web(1)
        .manifest(template("web-exec", "devs", ""))
        .manifest(template("web-rec", "devs", ", sessionMode: Brokered"))
        .manifest(template("web-ops", "ops", ""))
        .let_everyone_request()
        .grant(
            "standing-access",
            vec![
                rule(&[""], &["pods"], &["get", "list"]),
                rule(
                    &[""],
                    &["pods/exec", "pods/portforward"],
                    &["create", "get"],
                ),
            ],
            vec![subject("Group", "devs"), subject("Group", "qa")],
        )
        .webhooks()
        .enforcing()
        .start()
        .await;
    let (ns, pod) = (f.ns.clone(), f.web().pod_names()[0].clone());
    let log = f.operator.log.display().to_string();

    // Enforcement is live once alice's exec is refused; the hint names the templates once oz's
    // pod watch has listed (before, it says where to look).
    let create_line = format!("ozctl create exec web-exec --target-pod {pod} -n {ns}");
    let denied = eventually(
        WAIT,
        &format!("alice's exec to be denied naming web-exec (log: {log})"),
        || async {
            let outcome = users::exec("alice", &ns, &pod, &["true"]).await;
            (!outcome.success() && outcome.stderr.contains(&create_line)).then_some(outcome)
        },
    )
    .await;
    let told = format!(
        "alice has no active access request for pod {ns}/{pod}; ExecAccessTemplates that can \
         grant it to alice: web-exec: {create_line}; web-rec (Brokered: its grant is used with \
         ozctl exec, not kubectl exec): ozctl create exec web-rec --target-pod {pod} -n {ns}"
    );
    assert!(denied.stderr.contains(&told), "{denied}");
    assert_eq!(denied.stderr.lines().count(), 1, "one line: {denied}");

    // bob is in qa, which no template for web admits: he is told who admits whom, and whom to
    // ask for a template (the default template admins).
    let bobs = users::exec("bob", &ns, &pod, &["true"]).await;
    assert!(
        !bobs.success()
            && bobs.stderr.contains(&format!(
                "bob has no active access request for pod {ns}/{pod}; no template grants it to \
                 bob: ExecAccessTemplates web-exec (admits devs), web-ops (admits ops), web-rec \
                 (admits devs); ask to be added to one of those groups, or ask a template admin \
                 of {ns} (a member of system:masters) for a template"
            )),
        "{bobs}"
    );

    // Nothing grants port-forward, and the denial says so rather than naming templates.
    let mut forward = env().kubectl(Some("alice")).unwrap();
    forward.args(["port-forward", "-n", &ns, &format!("pod/{pod}"), "0:8080"]);
    let forward = exec::run(forward, Duration::from_secs(30)).await.unwrap();
    assert!(
        !forward.success()
            && forward
                .stderr
                .contains("no template can grant port-forward: oz grants exec and attach only"),
        "{forward}"
    );

    // The line works as printed: alice is granted that pod, and her exec runs.
    let created = run_as_printed("alice", &create_line).await;
    assert_ok(&created, &create_line);
    assert!(
        stderr(&created).contains("(template web-exec"),
        "{}",
        stderr(&created)
    );
    let ran = eventually(WAIT, "alice's granted exec to run", || async {
        let outcome = users::exec("alice", &ns, &pod, &["sh", "-c", "echo granted"]).await;
        outcome.success().then_some(outcome)
    })
    .await;
    assert_eq!(ran.stdout, "granted\n");
}
