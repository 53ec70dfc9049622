//! ozctl end to end: the real binary, run as alice (devs) and bob (qa) with their own
//! kubeconfigs, against an oz-manager whose admission webhooks record who created each request.
//!
//! Each test has its own namespace with Deployment `web` (2 ready pods), ExecAccessTemplate
//! `web-exec` for devs, the requester RBAC of `hack/demo/requesters.yaml`, and an oz-manager with
//! webhooks scoped to that namespace (configurations `oz-<ns>-*`).

use std::{process::Output, time::Duration};

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use kube::{
    Api, ResourceExt,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use oz_api::{ExecAccessRequest, ExecAccessTemplate, PodAccessRequest, RequestPhase};
use oz_testenv::pods;
use serde_json::{Value, json};

use crate::support::{
    admission::written_request,
    cluster::env,
    fixture::Fixture,
    manifests::create_manifest,
    ozctl::{assert_ok, ozctl_bin, ozctl_with, stderr, stdout},
    polling::eventually,
    users::can_exec,
};

const WAIT: Duration = Duration::from_secs(30);

const EXEC_TEMPLATE: &str = "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessTemplate\n\
    metadata: {name: web-exec}\nspec:\n  accessConfig: {allowedGroups: [devs], defaultDuration: 1h, maxDuration: 2h}\n  \
    controllerTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n";

/// What the ozctl tests run and wait for in their fixture.
pub(crate) trait OzctlFixture {
    async fn new(prefix: &str) -> Fixture;

    /// Waits until oz has checked the template (its READY column reads `yes`).
    async fn wait_until_the_template_is_ready(&self);

    /// Waits until oz registered its webhooks and the apiserver calls them: a dry-run create
    /// by alice comes back with alice recorded as the requester.
    async fn wait_until_admission_is_live(&self);

    /// Runs ozctl in this namespace as `user`, with that user's kubeconfig in KUBECONFIG.
    async fn ozctl(&self, user: &str, args: &[&str]) -> Output;

    async fn exec_requests(&self) -> Vec<ExecAccessRequest>;

    /// The one ExecAccessRequest in the namespace.
    async fn only_exec_request(&self) -> ExecAccessRequest;

    /// Removes the cluster-scoped webhook configurations oz registered for this namespace.
    async fn cleanup(self);
}

impl OzctlFixture for Fixture {
    async fn new(prefix: &str) -> Fixture {
        let fixture = Fixture::builder(prefix)
            .web(2)
            .manifest(EXEC_TEMPLATE)
            // What hack/demo/requesters.yaml grants every signed-in user.
            .let_everyone_request()
            .webhooks()
            .start()
            .await;
        fixture.wait_until_admission_is_live().await;
        fixture.wait_until_the_template_is_ready().await;
        fixture
    }

    async fn wait_until_the_template_is_ready(&self) {
        let templates: Api<ExecAccessTemplate> = Api::namespaced(self.admin.clone(), &self.ns);
        let log = self.operator.log.display().to_string();
        eventually(WAIT, &format!("web-exec to be ready (log: {log})"), || {
            let templates = templates.clone();
            async move {
                let template = templates.get_opt("web-exec").await.ok().flatten()?;
                template.status.filter(|s| s.ready).map(|_| ())
            }
        })
        .await;
    }

    async fn wait_until_admission_is_live(&self) {
        let configurations: Api<MutatingWebhookConfiguration> = Api::all(self.admin.clone());
        let name = format!("oz-{}-requests", self.ns);
        let log = self.operator.log.display().to_string();
        eventually(
            WAIT,
            &format!("{name} to be registered (log: {log})"),
            || {
                let (configurations, name) = (configurations.clone(), name.clone());
                async move { configurations.get_opt(&name).await.ok().flatten() }
            },
        )
        .await;
        let alice: Api<ExecAccessRequest> =
            Api::namespaced(env().client_as("alice").await.unwrap(), &self.ns);
        let probe = written_request("probe", "web-exec");
        let dry_run = PostParams {
            dry_run: true,
            ..Default::default()
        };
        eventually(
            WAIT,
            &format!("oz's webhooks to be called (log: {log})"),
            || {
                let (alice, probe, dry_run) = (alice.clone(), probe.clone(), dry_run.clone());
                async move {
                    let stamped = alice.create(&dry_run, &probe).await.ok()?;
                    (stamped.spec.requester?.username == "alice").then_some(())
                }
            },
        )
        .await;
    }

    async fn ozctl(&self, user: &str, args: &[&str]) -> Output {
        ozctl_with(env().kubeconfig_of(user).unwrap(), &self.ns, args).await
    }

    async fn exec_requests(&self) -> Vec<ExecAccessRequest> {
        Api::<ExecAccessRequest>::namespaced(self.admin.clone(), &self.ns)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
    }

    async fn only_exec_request(&self) -> ExecAccessRequest {
        let mut requests = self.exec_requests().await;
        assert_eq!(requests.len(), 1, "{requests:#?}");
        requests.remove(0)
    }

    async fn cleanup(self) {
        // Dropping the fixture stops oz and deletes the configurations.
        drop(self);
    }
}
/// The last line of stderr: ozctl's `error: ...` line.
pub(crate) fn error_line(output: &Output) -> String {
    stderr(output)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn alice_creates_exec_access_and_is_told_the_command_for_her_pod() {
    let f = Fixture::new("ozctl-create").await;
    let output = f
        .ozctl("alice", &["create", "exec", "web-exec", "--timeout", "60s"])
        .await;
    assert_ok(&output, "ozctl create exec");

    let request = f.only_exec_request().await;
    let name = request.name_any();
    assert!(name.starts_with("alice-"), "{name}");
    assert_eq!(request.spec.requester.as_ref().unwrap().username, "alice");
    let status = request.status.clone().unwrap();
    assert_eq!(status.phase, Some(RequestPhase::Ready));
    let pod = status.pod_name.unwrap();
    assert!(
        f.web().pod_names().contains(&pod),
        "{pod} is one of web's pods"
    );

    // Oz's banner, then the command for exactly that pod between --- lines, then the end time.
    let text = stdout(&output);
    let command = format!("kubectl exec -ti -n {} {pod} -- /bin/sh", f.ns);
    assert!(
        text.starts_with(&format!(
            "Success, your access request is ready! Here are your access instructions:\n---\n{command}\n---\nAccess ends at "
        )),
        "{text}"
    );
    assert!(text.contains("(in 59m"), "{text}");
    assert!(
        text.contains(&format!("ozctl revoke {name} -n {}", f.ns)),
        "{text}"
    );
    assert!(stderr(&output).contains(&format!("Created ExecAccessRequest {name}")));
    assert!(can_exec("alice", &f.ns, &pod).await);

    // alice sees it in her list; bob's list is empty, and --all shows him alice's.
    let listed = f.ozctl("alice", &["get"]).await;
    assert_ok(&listed, "ozctl get");
    let lines: Vec<String> = stdout(&listed).lines().map(str::to_string).collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].starts_with("NAME"), "{lines:?}");
    let row: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(row[..5], [name.as_str(), "exec", "web-exec", &pod, "Ready"]);
    assert!(row[5] == "in", "{row:?}");

    let bobs = f.ozctl("bob", &["list"]).await;
    assert_ok(&bobs, "bob's ozctl list");
    assert_eq!(stdout(&bobs), "");
    assert!(
        stderr(&bobs).contains("No current requests"),
        "{}",
        stderr(&bobs)
    );
    let everyone = f.ozctl("bob", &["get", "requests", "--all"]).await;
    assert!(stdout(&everyone).contains(&name));
    assert!(stdout(&everyone).lines().nth(1).unwrap().ends_with("alice"));
    f.cleanup().await;
}

#[tokio::test]
async fn json_output_is_only_the_ready_request() {
    let f = Fixture::new("ozctl-json").await;
    let output = f
        .ozctl(
            "alice",
            &[
                "create",
                "exec",
                "web-exec",
                "-o",
                "json",
                "--timeout",
                "60s",
            ],
        )
        .await;
    assert_ok(&output, "ozctl create exec -o json");
    let object: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("stdout is JSON ({e}): {}", stdout(&output)));
    assert_eq!(object["kind"], "ExecAccessRequest");
    assert_eq!(object["status"]["phase"], "Ready");
    assert_eq!(object["spec"]["requester"]["username"], "alice");
    let stored = f.only_exec_request().await;
    assert_eq!(object["metadata"]["name"], stored.name_any());
    assert_eq!(
        object["status"]["podName"].as_str(),
        stored.status.unwrap().pod_name.as_deref()
    );
    assert!(object["metadata"].get("managedFields").is_none());

    // The request as YAML, by name.
    let yaml = f
        .ozctl(
            "alice",
            &[
                "get",
                "requests",
                &stored.metadata.name.unwrap(),
                "-o",
                "yaml",
            ],
        )
        .await;
    assert_ok(&yaml, "ozctl get requests NAME -o yaml");
    assert!(
        stdout(&yaml).contains("kind: ExecAccessRequest"),
        "{}",
        stdout(&yaml)
    );
    f.cleanup().await;
}

#[tokio::test]
async fn bob_is_told_he_is_not_allowed_before_anything_is_created() {
    let f = Fixture::new("ozctl-denied").await;
    let output = f.ozctl("bob", &["create", "exec", "web-exec"]).await;
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert_eq!(
        stderr(&output),
        "error: you (bob) are not in any of the template's allowedGroups (devs); ask to be added or use another template\n"
    );
    assert_eq!(stdout(&output), "");
    assert!(f.exec_requests().await.is_empty(), "nothing was created");

    // A template that does not exist: one line, with the command that lists them.
    let missing = f.ozctl("alice", &["create", "exec", "nope"]).await;
    assert_eq!(missing.status.code(), Some(1));
    assert_eq!(
        error_line(&missing),
        format!(
            "error: no ExecAccessTemplate \"nope\" in namespace \"{ns}\"; list them with: ozctl get templates -n {ns}",
            ns = f.ns
        )
    );
    assert!(f.exec_requests().await.is_empty());

    // The templates list says who may use what.
    for (user, may) in [("alice", "yes"), ("bob", "no")] {
        let templates = f.ozctl(user, &["get", "templates"]).await;
        assert_ok(&templates, "ozctl get templates");
        let text = stdout(&templates);
        let row: Vec<&str> = text.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(
            row,
            [
                "web-exec",
                "exec",
                "Deployment/web",
                "1h",
                "2h",
                "devs",
                "yes",
                may
            ],
            "{user}: {text}"
        );
    }
    f.cleanup().await;
}

/// `ozctl revoke` ends the access at once and keeps the request as its record: Revoked, in
/// `ozctl history` with who revoked it, and not deletable by its requester. bob may not revoke
/// alice's grant, not even by writing the annotation himself in his own name or hers.
#[tokio::test]
async fn revoke_ends_the_access_at_once_and_keeps_the_record() {
    let f = Fixture::new("ozctl-revoke").await;
    let created = f
        .ozctl("alice", &["create", "exec", "web-exec", "--timeout", "60s"])
        .await;
    assert_ok(&created, "ozctl create exec");
    let request = f.only_exec_request().await;
    let name = request.name_any();
    let pod = request.status.unwrap().pod_name.unwrap();
    assert!(can_exec("alice", &f.ns, &pod).await);

    // bob (who may patch requests in this namespace) cannot revoke it, through ozctl or by hand.
    let bobs = f.ozctl("bob", &["revoke", &name]).await;
    assert_eq!(bobs.status.code(), Some(1), "{}", stderr(&bobs));
    assert!(
        error_line(&bobs).contains("ask alice (who requested it) or a cluster admin to revoke it"),
        "{}",
        stderr(&bobs)
    );
    let as_bob = env().client_as("bob").await.unwrap();
    let api: Api<ExecAccessRequest> = Api::namespaced(as_bob, &f.ns);
    for who in ["alice", "bob"] {
        let forged = json!({"metadata": {"annotations": {oz_api::REVOKE_ANNOTATION: who}}});
        let refused = api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&forged))
            .await
            .unwrap_err()
            .to_string();
        assert!(refused.contains("denied the request"), "{who}: {refused}");
    }
    assert!(can_exec("alice", &f.ns, &pod).await, "still alice's");

    let revoked = f.ozctl("alice", &["revoke", &name]).await;
    assert_ok(&revoked, "ozctl revoke");
    assert_eq!(
        stdout(&revoked),
        format!(
            "Revoked ExecAccessRequest {name}: access to pod {pod} has ended; its record stays in ozctl history.\n"
        )
    );
    // When revoke returns, the grant is gone: no waiting here.
    assert!(!can_exec("alice", &f.ns, &pod).await, "access has ended");
    let kept = f.exec_requests().await;
    assert_eq!(kept.len(), 1, "the request is kept as the grant's record");
    assert_eq!(
        kept[0].status.as_ref().unwrap().phase,
        Some(RequestPhase::Revoked)
    );

    // The access review sees it: how it ended and who ended it.
    let history = f.ozctl("carol", &["history", "--all", "-o", "csv"]).await;
    assert_ok(&history, "ozctl history --all");
    let text = stdout(&history);
    let line = text
        .lines()
        .find(|l| l.starts_with(&name))
        .unwrap_or_else(|| panic!("{name} in {text}"));
    assert!(line.ends_with(",revoked by alice"), "{line}");

    // The record is not its requester's to erase, and there is nothing left to revoke.
    let again = f.ozctl("alice", &["revoke", &name]).await;
    assert_ok(&again, "ozctl revoke of a revoked request");
    assert!(
        stdout(&again).starts_with(&format!("ExecAccessRequest {name} was revoked by alice ")),
        "{}",
        stdout(&again)
    );
    let as_alice = env().client_as("alice").await.unwrap();
    let erased = Api::<ExecAccessRequest>::namespaced(as_alice, &f.ns)
        .delete(&name, &Default::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        erased.contains("kept as an access-review record"),
        "{erased}"
    );
    f.cleanup().await;
}

#[tokio::test]
async fn history_lists_the_expired_request() {
    let f = Fixture::new("ozctl-history").await;
    let created = f
        .ozctl(
            "alice",
            &[
                "create",
                "exec",
                "web-exec",
                "--duration",
                "2s",
                "--no-wait",
            ],
        )
        .await;
    assert_ok(&created, "ozctl create exec --no-wait");
    let name = stdout(&created).lines().next().unwrap().to_string();
    assert!(name.starts_with("alice-"), "{name}");

    // The operator keeps it (default history retention), Expired.
    let requests: Api<ExecAccessRequest> = Api::namespaced(f.admin.clone(), &f.ns);
    let expired = eventually(
        WAIT,
        &format!("{name} to expire (log: {})", f.operator.log.display()),
        || {
            let (requests, name) = (requests.clone(), name.clone());
            async move {
                let request = requests.get(&name).await.ok()?;
                (request.status.as_ref()?.phase == Some(RequestPhase::Expired)).then_some(request)
            }
        },
    )
    .await;
    // (Had oz been slower than 2s to look at it, no pod would have been chosen.)
    let pod = expired.status.unwrap().pod_name.unwrap_or_default();

    let csv = f.ozctl("alice", &["history", "-o", "csv"]).await;
    assert_ok(&csv, "ozctl history -o csv");
    let text = stdout(&csv);
    assert!(
        text.starts_with(
            "name,kind,namespace,requester,groups,template,pod,started,ended,durationSeconds,how\r\n"
        ),
        "{text}"
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    let fields: Vec<&str> = lines[1].split(',').collect();
    assert_eq!(
        fields[..7],
        [
            name.as_str(),
            "ExecAccessRequest",
            &f.ns,
            "alice",
            "devs system:authenticated",
            "web-exec",
            &pod
        ]
    );
    assert_eq!(fields[9], "2");
    assert_eq!(fields[10], "expired");

    let json = f.ozctl("alice", &["history", "-o", "json"]).await;
    let records: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(records[0]["name"], name.as_str());
    assert_eq!(records[0]["durationSeconds"], 2);

    let table = f.ozctl("alice", &["history"]).await;
    assert!(stdout(&table).lines().nth(1).unwrap().starts_with(&name));

    // It is not a current request any more, and bob's history does not show it.
    let current = f.ozctl("alice", &["get"]).await;
    assert_eq!(stdout(&current), "");
    assert!(
        stderr(&current).contains("1 ended not shown"),
        "{}",
        stderr(&current)
    );
    let bobs = f.ozctl("bob", &["history", "-o", "json"]).await;
    assert_eq!(
        serde_json::from_slice::<Value>(&bobs.stdout).unwrap(),
        json!([])
    );

    // Using it now is an error that says what to do. alice may not read pods once her grant
    // has ended, so whether its pod is still there is not known: the line leaves the pod to oz
    // (`ozctl/exec_hints.rs` has the line for the same pod).
    let exec = f.ozctl("alice", &["exec", &name]).await;
    assert_eq!(exec.status.code(), Some(1));
    let line = error_line(&exec);
    assert!(
        line.starts_with(&format!("error: ExecAccessRequest {name} expired "))
            && line.ends_with(&format!(
                "; request access again with: ozctl create exec web-exec -n {}",
                f.ns
            )),
        "{line}"
    );
    f.cleanup().await;
}

/// Oz's scenario 15 with a PodAccessRequest: the access pod is marked ready while ozctl waits.
#[tokio::test]
async fn pod_access_waits_for_the_access_pod() {
    let f = Fixture::new("ozctl-pod").await;
    create_manifest(
        &f.admin,
        &f.ns,
        "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: PodAccessTemplate\nmetadata: {name: web-debug}\n\
         spec:\n  accessConfig: {allowedGroups: [devs], defaultDuration: 1h, maxDuration: 2h}\n  \
         controllerTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n",
    )
    .await
    .unwrap();
    let kubeconfig = env().kubeconfig_of("alice").unwrap().to_path_buf();
    let ns = f.ns.clone();
    let ozctl = tokio::spawn(async move {
        ozctl_with(
            &kubeconfig,
            &ns,
            &[
                "create",
                "PodAccessRequest",
                "web-debug",
                "--timeout",
                "60s",
            ],
        )
        .await
    });

    // The access pod runs on a kwok node once oz has created it.
    let requests: Api<PodAccessRequest> = Api::namespaced(f.admin.clone(), &f.ns);
    let pod = eventually(
        WAIT,
        &format!("the access pod (log: {})", f.operator.log.display()),
        || {
            let requests = requests.clone();
            async move {
                let list = requests.list(&ListParams::default()).await.ok()?;
                list.items.first()?.status.as_ref()?.pod_name.clone()
            }
        },
    )
    .await;
    pods::wait_ready(&f.admin, &f.ns, &pod).await.unwrap();

    let output = ozctl.await.unwrap();
    assert_ok(&output, "ozctl create PodAccessRequest");
    let request = requests.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(request.len(), 1);
    assert!(request[0].name_any().starts_with("alice-"));
    let text = stdout(&output);
    assert!(
        text.starts_with(
            "Success, your access request is ready! Here are your access instructions:\n---\n"
        ) && text.contains(&format!(" {pod} -- ")),
        "{text}"
    );
    // Progress went to stderr, one line per step as it is not a terminal.
    assert!(
        stderr(&output).contains("AccessResourcesReady"),
        "{}",
        stderr(&output)
    );
    f.cleanup().await;
}

#[tokio::test]
async fn an_unreachable_cluster_is_one_line_that_names_it() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("ozctl-no-cluster");
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\ncurrent-context: gone\n\
         clusters: [{name: gone, cluster: {server: \"https://127.0.0.1:1\"}}]\n\
         users: [{name: u, user: {token: t}}]\n\
         contexts: [{name: gone, context: {cluster: gone, user: u, namespace: team}}]\n",
    )
    .unwrap();
    let output = ozctl_with(&kubeconfig, "team", &["get"]).await;
    assert_eq!(output.status.code(), Some(1));
    let text = stderr(&output);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(
        text.starts_with("error: cannot reach the cluster at https://127.0.0.1:1/: ")
            && text.ends_with("; check your kubeconfig/context\n"),
        "{text}"
    );
    assert!(text.to_lowercase().contains("connection refused"), "{text}");

    // A context that is not there.
    let output = ozctl_with(&kubeconfig, "team", &["--context", "prod", "get"]).await;
    assert_eq!(
        stderr(&output),
        "error: there is no context \"prod\" in your kubeconfig; list them with: kubectl config get-contexts\n"
    );
}

#[tokio::test]
async fn as_a_kubectl_plugin_it_calls_itself_kubectl_oz() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("ozctl-plugin");
    std::fs::create_dir_all(&dir).unwrap();
    let plugin = dir.join("kubectl-oz");
    let _ = std::fs::remove_file(&plugin);
    std::os::unix::fs::symlink(ozctl_bin(), &plugin).unwrap();
    let output = tokio::process::Command::new(&plugin)
        .arg("--help")
        .output()
        .await
        .unwrap();
    assert!(output.status.success());
    let help = stdout(&output);
    assert!(
        help.contains("Usage: kubectl oz [OPTIONS] <COMMAND>"),
        "{help}"
    );
    assert!(!help.contains("ozctl"), "{help}");
}
