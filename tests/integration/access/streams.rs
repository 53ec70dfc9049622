//! Real streams into real pods: oz grants access, and alice's own `kubectl exec`,
//! `attach`, `port-forward`, `debug` and `ozctl exec` reach pods that the control plane's
//! controllers made and its kwok nodes run (an exec runs its command as a local process), or
//! the apiserver refuses them. Grants on StatefulSets, DaemonSets and Rollouts: `targets.rs`.
//!
//! Each test has a namespace of its own, with an oz-manager watching it. It is deleted when the
//! test's [`Fixture`] is dropped, which also ends every process still exec'd into its pods.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use k8s_openapi::{
    api::{
        core::v1::Pod,
        rbac::v1::{Role, RoleBinding},
    },
    jiff::Timestamp,
};
use kube::{Api, api::ListParams};
use oz_api::{AccessRequest, ExecAccessRequest, PodAccessRequest, RequestPhase};
use oz_testenv::{
    exec::{self, Output, PortForward, RUN_TIMEOUT, Session},
    pods,
    workloads::{self, Workload, WorkloadSpec},
};
use serde_json::{Value, json};

use crate::support::{
    admission::create_once_admitted,
    cluster::env,
    fixture::{Fixture, FixtureBuilder},
    manifests::create_manifest,
    ozctl::ozctl_bin,
    polling::eventually,
    rbac::{grant, rule, subject},
};

/// How long oz, the controllers and kwok may take to get somewhere on a busy 2-core machine.
pub const WAIT: Duration = Duration::from_secs(60);

/// A namespace in which every signed-in user may read pods and oz's objects (so a refused
/// exec is refused for the exec itself), with an oz-manager watching it. The namespace is
/// deleted with the fixture, so the pods go and every command still exec'd into them is killed.
fn readers_namespace(prefix: &str) -> FixtureBuilder {
    Fixture::builder(prefix)
        .grant(
            "readers",
            vec![
                rule(&[""], &["pods"], &["get", "list", "watch"]),
                rule(
                    &[oz_api::GROUP],
                    &[
                        "execaccessrequests",
                        "podaccessrequests",
                        "execaccesstemplates",
                        "podaccesstemplates",
                    ],
                    &["get", "list", "watch"],
                ),
            ],
            vec![subject("Group", "system:authenticated")],
        )
        .delete_namespace_when_dropped()
}

/// The stream tests' templates, requests and what they wait for.
pub trait StreamsFixture {
    /// oz's exec and pod controllers, no webhooks.
    async fn new(prefix: &str) -> Fixture;

    /// oz's controllers and webhooks, scoped to the namespace, auditing to `audit_log`.
    async fn with_webhooks(prefix: &str, audit_log: &Path) -> Fixture;

    /// Creates an ExecAccessTemplate (or PodAccessTemplate, for `kind` `Pod`) for devs that
    /// targets the workload `api_version`/`target_kind`/`target`.
    async fn template(
        &self,
        kind: &str,
        name: &str,
        api_version: &str,
        target_kind: &str,
        target: &str,
    );

    /// Creates a request of `kind` (`Exec` or `Pod`) through `template` for `user`, as the
    /// admission webhook would record it, lasting `duration`.
    async fn request<R: AccessRequest>(
        &self,
        name: &str,
        template: &str,
        user: &str,
        duration: &str,
    ) -> R;

    fn requests<R: AccessRequest>(&self) -> Api<R>;

    /// Creates a request (as [`Fixture::request`]) and waits until it is Ready.
    async fn granted<R: AccessRequest>(
        &self,
        name: &str,
        template: &str,
        user: &str,
        duration: &str,
    ) -> R;

    /// Waits until request `name` reaches `phase`.
    async fn wait_for<R: AccessRequest>(&self, name: &str, phase: RequestPhase) -> R;

    /// kubectl in this namespace, as `user` (admin for `None`).
    fn kubectl(&self, user: Option<&str>, args: &[&str]) -> std::process::Command;

    /// Runs kubectl as `user` to completion.
    async fn run(&self, user: &str, args: &[&str]) -> Output;

    /// Whether the Role and RoleBinding of request `name` (labelled with it) exist.
    async fn grant_objects(&self, name: &str) -> (usize, usize);
}

impl StreamsFixture for Fixture {
    async fn new(prefix: &str) -> Fixture {
        readers_namespace(prefix).start().await
    }

    async fn with_webhooks(prefix: &str, audit_log: &Path) -> Fixture {
        let audit = format!("--audit-log-path={}", audit_log.display());
        readers_namespace(prefix)
            .webhooks()
            .operator_args(&[&audit])
            .start()
            .await
    }

    async fn template(
        &self,
        kind: &str,
        name: &str,
        api_version: &str,
        target_kind: &str,
        target: &str,
    ) {
        let yaml = format!(
            "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: {kind}AccessTemplate\nmetadata: {{name: {name}}}\n\
             spec:\n  accessConfig: {{allowedGroups: [devs], defaultDuration: 1h, maxDuration: 2h}}\n  \
             controllerTargetRef: {{apiVersion: {api_version}, kind: {target_kind}, name: {target}}}\n"
        );
        create_manifest(&self.admin, &self.ns, &yaml).await.unwrap();
    }

    async fn request<R: AccessRequest>(
        &self,
        name: &str,
        template: &str,
        user: &str,
        duration: &str,
    ) -> R {
        let groups = oz_testenv::USERS
            .iter()
            .find(|(u, _)| *u == user)
            .map(|(_, groups)| groups.join(", "))
            .unwrap();
        let kind = R::kind(&());
        let yaml = format!(
            "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: {kind}\nmetadata: {{name: {name}}}\n\
             spec:\n  templateName: {template}\n  duration: {duration}\n  \
             requester: {{username: {user}, groups: [{groups}, system:authenticated]}}\n"
        );
        create_manifest(&self.admin, &self.ns, &yaml).await.unwrap();
        self.requests::<R>().get(name).await.unwrap()
    }

    fn requests<R: AccessRequest>(&self) -> Api<R> {
        Api::namespaced(self.admin.clone(), &self.ns)
    }

    async fn granted<R: AccessRequest>(
        &self,
        name: &str,
        template: &str,
        user: &str,
        duration: &str,
    ) -> R {
        self.request::<R>(name, template, user, duration).await;
        self.wait_for(name, RequestPhase::Ready).await
    }

    async fn wait_for<R: AccessRequest>(&self, name: &str, phase: RequestPhase) -> R {
        let requests = self.requests::<R>();
        eventually(
            WAIT,
            &format!(
                "{name} to become {phase:?} (log: {})",
                self.operator.log.display()
            ),
            || {
                let requests = requests.clone();
                async move {
                    let request = requests.get(name).await.ok()?;
                    (request.request_status()?.phase == Some(phase)).then_some(request)
                }
            },
        )
        .await
    }

    fn kubectl(&self, user: Option<&str>, args: &[&str]) -> std::process::Command {
        let mut command = env().kubectl(user).unwrap();
        command.args(["--namespace", &self.ns]).args(args);
        command
    }

    async fn run(&self, user: &str, args: &[&str]) -> Output {
        exec::run(self.kubectl(Some(user), args), RUN_TIMEOUT)
            .await
            .unwrap()
    }

    async fn grant_objects(&self, name: &str) -> (usize, usize) {
        let labels = ListParams::default().labels(&format!("oz.wizardofoz.co/request={name}"));
        let roles = Api::<Role>::namespaced(self.admin.clone(), &self.ns)
            .list(&labels)
            .await
            .unwrap();
        let bindings = Api::<RoleBinding>::namespaced(self.admin.clone(), &self.ns)
            .list(&labels)
            .await
            .unwrap();
        (roles.items.len(), bindings.items.len())
    }
}

/// A Deployment `web` of two Ready pods.
pub async fn web(f: &Fixture) -> Workload {
    workloads::deployment(&f.admin, &f.ns, WorkloadSpec::new("web", 2))
        .await
        .unwrap()
}

/// The command every exec test runs: it prints a line only the pod's own process can print.
pub const HELLO: &[&str] = &["sh", "-c", "echo hello from $POD_NAME"];

/// `kubectl exec POD -- sh -c 'echo hello from $POD_NAME'` as `user`.
pub async fn hello(f: &Fixture, user: &str, pod: &str) -> Output {
    let mut args = vec!["exec", pod, "--"];
    args.extend(HELLO);
    f.run(user, &args).await
}

/// Asserts kubectl ran the command in `pod` and printed its greeting.
#[track_caller]
pub fn assert_hello(output: &Output, pod: &str) {
    assert!(output.success(), "{output}");
    assert_eq!(output.stdout, format!("hello from {pod}\n"), "{output}");
}

/// Asserts the apiserver refused `user`'s exec into `pod` for want of RBAC.
#[track_caller]
pub fn assert_exec_forbidden(output: &Output, user: &str, pod: &str, ns: &str) {
    assert!(!output.success(), "{output}");
    assert!(output.forbidden(), "{output}");
    assert!(
        output.stderr.contains(&format!(
            "pods \"{pod}\" is forbidden: User \"{user}\" cannot create resource \"pods/exec\" in API group \"\" in the namespace \"{ns}\""
        )),
        "{output}"
    );
    assert_eq!(output.stdout, "", "nothing ran: {output}");
}

fn pod_of<R: AccessRequest>(request: &R) -> String {
    request.request_status().unwrap().pod_name.clone().unwrap()
}

fn expires_at<R: AccessRequest>(request: &R) -> Timestamp {
    request
        .request_status()
        .unwrap()
        .expires_at
        .clone()
        .unwrap()
        .0
}

#[tokio::test]
async fn alice_execs_into_her_granted_pod_and_everyone_else_is_refused_until_it_expires() {
    let f = Fixture::new("streams-exec").await;
    let web = web(&f).await;
    f.template("Exec", "web-exec", "apps/v1", "Deployment", "web")
        .await;

    // bob asks too, but is not in allowedGroups: oz denies it and grants nothing.
    f.request::<ExecAccessRequest>("bob-web", "web-exec", "bob", "5m")
        .await;
    f.wait_for::<ExecAccessRequest>("bob-web", RequestPhase::Denied)
        .await;

    // Long enough for the five kubectl runs below on a busy machine, short enough to wait for.
    let ready = f
        .granted::<ExecAccessRequest>("alice-web", "web-exec", "alice", "20s")
        .await;
    let pod = pod_of(&ready);
    assert!(web.pod_names().contains(&pod), "{pod} is one of web's pods");

    // Her own kubectl, her own credentials, the command's real output.
    assert_hello(&hello(&f, "alice", &pod).await, &pod);

    let other = web.pod_names().into_iter().find(|p| *p != pod).unwrap();
    assert_exec_forbidden(&hello(&f, "bob", &pod).await, "bob", &pod, &f.ns);
    assert_exec_forbidden(&hello(&f, "carol", &pod).await, "carol", &pod, &f.ns);
    assert_exec_forbidden(&hello(&f, "alice", &other).await, "alice", &other, &f.ns);
    // Those refusals happened while alice's grant was in force, not because it had ended.
    let still = f
        .requests::<ExecAccessRequest>()
        .get("alice-web")
        .await
        .unwrap();
    assert_eq!(
        still.request_status().unwrap().phase,
        Some(RequestPhase::Ready),
        "the grant expired before the refusals were checked: give the request a longer duration"
    );

    // After expiresAt, her next exec is refused.
    f.wait_for::<ExecAccessRequest>("alice-web", RequestPhase::Expired)
        .await;
    assert_exec_forbidden(&hello(&f, "alice", &pod).await, "alice", &pod, &f.ns);
}

/// A directory holding only `kubectl`: a script that runs the control plane's bundled kubectl
/// (the apiserver's version), for PATH.
fn bundled_kubectl_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("streams-kubectl");
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("kubectl");
    let testenv = env().kubectl(None).unwrap().get_program().to_owned();
    let text = format!(
        "#!/bin/sh\nexec '{}' kubectl \"$@\"\n",
        Path::new(&testenv).display()
    );
    // Written next to it and renamed, so a concurrent reader never sees half a script.
    let partial = dir.join(format!("kubectl.{}", std::process::id()));
    std::fs::write(&partial, text).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&partial, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(&partial, &script).unwrap();
    dir
}

#[tokio::test]
async fn ozctl_exec_prints_the_output_of_alices_command_in_her_granted_pod() {
    let f = Fixture::new("streams-ozctl").await;
    let web = web(&f).await;
    f.template("Exec", "web-exec", "apps/v1", "Deployment", "web")
        .await;
    let ready = f
        .granted::<ExecAccessRequest>("alice-web", "web-exec", "alice", "5m")
        .await;
    let pod = pod_of(&ready);
    assert!(web.pod_names().contains(&pod), "{pod} is one of web's pods");

    // With kubectl on PATH ozctl hands over to it; without, it execs over the websocket itself.
    let with_kubectl = bundled_kubectl_dir().into_os_string();
    for (path, how) in [
        (with_kubectl.as_os_str(), "through kubectl"),
        ("/nonexistent".as_ref(), "over its own websocket"),
    ] {
        let mut ozctl = std::process::Command::new(ozctl_bin());
        ozctl
            .args(["--namespace", &f.ns, "exec", "alice-web", "--"])
            .args(HELLO)
            .env("KUBECONFIG", env().kubeconfig_of("alice").unwrap())
            .env("PATH", path);
        let output = exec::run(ozctl, RUN_TIMEOUT).await.unwrap();
        assert!(output.success(), "{how}: {output}");
        assert_eq!(
            output.stdout,
            format!("hello from {pod}\n"),
            "{how}: {output}"
        );
    }

    // bob has no request of his own to run it through, and alice's grant is hers alone.
    let mut ozctl = std::process::Command::new(ozctl_bin());
    ozctl
        .args(["--namespace", &f.ns, "exec", "alice-web", "--"])
        .args(HELLO)
        .env("KUBECONFIG", env().kubeconfig_of("bob").unwrap())
        .env("PATH", &with_kubectl);
    let bobs = exec::run(ozctl, RUN_TIMEOUT).await.unwrap();
    assert_exec_forbidden(&bobs, "bob", &pod, &f.ns);
}

/// The audit records written so far whose event is `event` (`PodExec`, ...), oldest first. A
/// line still being written is not one yet.
fn audit_records(path: &Path, event: &str) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|record| record["event"] == event)
        .collect()
}

/// Waits for an audit record of `event` and returns the latest.
async fn audit_record(path: &Path, event: &str) -> Value {
    eventually(WAIT, &format!("a {event} audit record"), || async {
        audit_records(path, event).pop()
    })
    .await
}

#[tokio::test]
async fn real_exec_attach_port_forward_and_debug_are_audited_each_with_the_grant_covering_it() {
    let audit_log = crate::support::operator::audit_log_path("streams-audit-all");
    let f = Fixture::with_webhooks("streams-audit", &audit_log).await;
    let ns = f.ns.clone();
    web(&f).await;
    f.template("Exec", "web-exec", "apps/v1", "Deployment", "web")
        .await;
    // alice asks herself: the webhook records her as the requester.
    grant(
        &f.admin,
        &ns,
        "requesters",
        vec![rule(&[oz_api::GROUP], &["execaccessrequests"], &["create"])],
        vec![subject("User", "alice")],
    )
    .await;
    let alice = env().client_as("alice").await.unwrap();
    let request: ExecAccessRequest = serde_json::from_value(json!({
        "apiVersion": "crds.wizardofoz.co/v1alpha1",
        "kind": "ExecAccessRequest",
        "metadata": {"name": "alice-web"},
        "spec": {"templateName": "web-exec", "duration": "10m"},
    }))
    .unwrap();
    let api: Api<ExecAccessRequest> = Api::namespaced(alice, &ns);
    create_once_admitted(&api, &request, "alice", &f.operator.log).await;
    let ready = f
        .wait_for::<ExecAccessRequest>("alice-web", RequestPhase::Ready)
        .await;
    let pod = pod_of(&ready);
    let grant_json =
        json!({"kind": "ExecAccessRequest", "name": "alice-web", "template": "web-exec"});
    // Her team also lets her attach, port-forward and debug there, by RBAC of its own: an
    // exec grant grants none of these, so their records name no grant.
    grant(
        &f.admin,
        &ns,
        "alice-extra",
        vec![
            rule(
                &[""],
                &["pods/attach", "pods/portforward"],
                &["create", "get"],
            ),
            rule(
                &[""],
                &["pods/ephemeralcontainers"],
                &["get", "patch", "update"],
            ),
        ],
        vec![subject("User", "alice")],
    )
    .await;

    // exec. The audit webhook may be registered a moment after the request webhooks: exec
    // until one is recorded, then look at the last.
    let command = ["sh", "-c", "echo audited exec"];
    eventually(WAIT, "alice's exec to be audited", || async {
        let mut args = vec!["exec", pod.as_str(), "-c", "app", "--"];
        args.extend(command);
        let output = f.run("alice", &args).await;
        assert!(output.success(), "{output}");
        assert_eq!(output.stdout, "audited exec\n");
        audit_records(&audit_log, "PodExec").pop()
    })
    .await;
    let record = audit_records(&audit_log, "PodExec").pop().unwrap();
    assert_eq!(record["user"], "alice", "{record}");
    assert_eq!(record["namespace"], ns.as_str(), "{record}");
    assert_eq!(record["pod"], pod.as_str(), "{record}");
    assert_eq!(record["subresource"], "exec", "{record}");
    assert_eq!(record["container"], "app", "{record}");
    assert_eq!(record["command"], json!(command), "{record}");
    assert_eq!(record["grant"], grant_json, "{record}");

    // attach: kubectl stays attached; once recorded, it is stopped.
    let mut attach =
        Session::spawn(f.kubectl(Some("alice"), &["attach", &pod, "-c", "app"])).unwrap();
    let record = audit_record(&audit_log, "PodAttach").await;
    assert!(attach.is_open(), "attached: {}", attach.stderr());
    attach.kill();
    assert_eq!(record["user"], "alice", "{record}");
    assert_eq!(record["pod"], pod.as_str(), "{record}");
    assert_eq!(record["subresource"], "attach", "{record}");
    assert_eq!(record["container"], "app", "{record}");
    assert!(record["grant"].is_null(), "{record}");

    // port-forward: traffic really flows to the pod's end and back.
    let forward = PortForward::start(
        f.kubectl(
            Some("alice"),
            &["port-forward", &format!("pod/{pod}"), ":8080"],
        ),
        WAIT,
    )
    .await
    .unwrap();
    let received = forward
        .exchange("ping through the tunnel", WAIT)
        .await
        .unwrap();
    assert_eq!(
        received,
        ["oz-testenv port-forward", "ping through the tunnel"]
    );
    let record = audit_record(&audit_log, "PodPortForward").await;
    drop(forward);
    assert_eq!(record["user"], "alice", "{record}");
    assert_eq!(record["pod"], pod.as_str(), "{record}");
    assert_eq!(record["subresource"], "portforward", "{record}");
    // kubectl names the ports in its stream headers, not in the request the webhook sees.
    assert_eq!(record.get("ports"), None, "{record}");
    assert!(record["grant"].is_null(), "{record}");

    // debug: the apiserver adds the ephemeral container (kwok never starts one, so kubectl is
    // not asked to attach to it).
    let output = f
        .run(
            "alice",
            &[
                "debug",
                &pod,
                "--image=busybox",
                "--container=oz-debug",
                "--profile=general",
                "--",
                "sh",
                "-c",
                "echo debugging",
            ],
        )
        .await;
    assert!(output.success(), "{output}");
    let record = audit_record(&audit_log, "PodDebug").await;
    assert_eq!(record["user"], "alice", "{record}");
    assert_eq!(record["pod"], pod.as_str(), "{record}");
    assert_eq!(record["operation"], "UPDATE", "{record}");
    assert_eq!(record["subresource"], "ephemeralcontainers", "{record}");
    assert_eq!(record["container"], "oz-debug", "{record}");
    assert_eq!(record["image"], "busybox", "{record}");
    assert_eq!(
        record["command"],
        json!(["sh", "-c", "echo debugging"]),
        "{record}"
    );
    assert!(record["grant"].is_null(), "{record}");
    let debugged = Api::<Pod>::namespaced(f.admin.clone(), &ns)
        .get(&pod)
        .await
        .unwrap();
    let ephemeral = debugged
        .spec
        .unwrap()
        .ephemeral_containers
        .unwrap_or_default();
    assert_eq!(ephemeral.len(), 1, "{ephemeral:?}");
    assert_eq!(ephemeral[0].name, "oz-debug");

    // One record each.
    for event in ["PodAttach", "PodPortForward", "PodDebug"] {
        assert_eq!(audit_records(&audit_log, event).len(), 1, "{event}");
    }
    drop(f);
    let _ = std::fs::remove_file(&audit_log);
}

#[tokio::test]
async fn at_pod_access_expiry_oz_deletes_the_debug_pod_and_alices_open_session_ends() {
    let f = Fixture::new("streams-podexp").await;
    web(&f).await;
    f.template("Pod", "web-debug", "apps/v1", "Deployment", "web")
        .await;
    // Long enough for the pod to start and alice's session to open on a busy machine.
    let ready = f
        .granted::<PodAccessRequest>("alice-debug", "web-debug", "alice", "20s")
        .await;
    let pod = pod_of(&ready);
    let expires = expires_at(&ready);

    // kwok ran it: bound to one of its nodes and made Ready there (this test never writes a
    // pod status).
    let running = pods::wait_ready(&f.admin, &f.ns, &pod).await.unwrap();
    let node = running.spec.as_ref().unwrap().node_name.clone().unwrap();
    assert!(node.starts_with("kwok-node-"), "{pod} runs on {node}");

    let mut session = Session::spawn(f.kubectl(
        Some("alice"),
        &[
            "exec",
            "-i",
            &pod,
            "--",
            "sh",
            "-c",
            "echo started; exec sleep 3600",
        ],
    ))
    .unwrap();
    session.wait_for_line("started", WAIT).await.unwrap();
    assert!(
        Timestamp::now() < expires,
        "the session opened after expiry: give the request a longer duration"
    );

    let ended = session.ended(WAIT).await.unwrap();
    let lag = ended.at.duration_since(expires).as_secs_f64();
    eprintln!(
        "pod access: alice's exec stream ended {lag:.3}s after expiresAt ({}; kubectl {}: {})",
        expires,
        ended.status,
        ended.stderr.trim()
    );
    assert!(lag >= 0.0, "the stream ended {:.3}s before expiry", -lag);
    assert!(lag < 30.0, "the stream outlived expiry by {lag:.3}s");
    // It ended because the pod went.
    let gone = Api::<Pod>::namespaced(f.admin.clone(), &f.ns)
        .get_opt(&pod)
        .await
        .unwrap();
    assert!(
        gone.is_none_or(|p| p.metadata.deletion_timestamp.is_some()),
        "{pod} is deleted"
    );
    f.wait_for::<PodAccessRequest>("alice-debug", RequestPhase::Expired)
        .await;
}

/// Pins the Kubernetes gap that a Direct grant (Oz's behaviour, the default) keeps: RBAC is
/// checked only when a stream opens, so an exec session opened under a grant outlives the grant.
/// `sessionMode: Brokered` closes it (`sessions/end_to_end.rs`); Direct must not change silently.
#[tokio::test]
async fn direct_grants_keep_the_kubernetes_gap_an_open_exec_session_survives_expiry() {
    let f = Fixture::new("streams-gap").await;
    web(&f).await;
    f.template("Exec", "web-exec", "apps/v1", "Deployment", "web")
        .await;
    let ready = f
        .granted::<ExecAccessRequest>("alice-web", "web-exec", "alice", "15s")
        .await;
    let pod = pod_of(&ready);
    let expires = expires_at(&ready);

    let mut session =
        Session::spawn(f.kubectl(Some("alice"), &["exec", "-i", &pod, "--", "cat"])).unwrap();
    session.echo("before expiry", WAIT).await.unwrap();
    assert!(
        Timestamp::now() < expires,
        "the session opened after expiry: give the request a longer duration"
    );

    // The grant is over: Role and RoleBinding gone, a new exec refused.
    f.wait_for::<ExecAccessRequest>("alice-web", RequestPhase::Expired)
        .await;
    assert_eq!(f.grant_objects("alice-web").await, (0, 0));
    assert_exec_forbidden(&hello(&f, "alice", &pod).await, "alice", &pod, &f.ns);

    // The session opened before still carries data both ways, for as long as it is kept:
    // here, until 5 s after expiresAt, a line a second.
    let mut sent = 0;
    let last = loop {
        sent += 1;
        let line = format!("after expiry {sent}");
        if let Err(e) = session.echo(&line, WAIT).await {
            panic!(
                "alice's Direct exec session stopped answering after her grant expired ({e}): \
                 Direct grants write RBAC only and cannot end an open stream; only Brokered \
                 grants close sessions (docs/sessions.md). Did Direct change?"
            );
        }
        let answered = Timestamp::now();
        if answered.duration_since(expires).as_secs_f64() >= 5.0 {
            break answered;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    assert!(session.is_open());
    let open_for = last.duration_since(expires).as_secs_f64();
    eprintln!(
        "exec access: alice's session still echoed {open_for:.3}s after expiresAt ({expires}); closed by the test"
    );
    session.kill();
}
