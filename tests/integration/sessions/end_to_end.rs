//! Brokered sessions end to end, every part real: the install's objects and RBAC applied to a
//! control plane of the test's own ([`SessionsPlane`]: the APIService is singular), oz-manager
//! run with its ServiceAccount's token and the Deployment's flags, alice's `ozctl exec` through
//! the apiserver's aggregation layer into oz, oz's own exec into a kwok pod, in a namespace where
//! access without a grant is denied (so oz's exec passes only as the broker's). The parts are
//! tested one by one in `broker.rs`, `front_door.rs` and `recordings.rs`.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    sync::{Arc, Mutex},
    time::Duration,
};

use k8s_openapi::{
    api::coordination::v1::Lease,
    jiff::{SignedDuration, Timestamp},
};
use kube::{Api, Client};
use oz::install::{Component, InstallOptions, install_yaml};
use oz_api::{AccessRequest, ExecAccessRequest, RequestPhase, SessionEndReason, SessionRecord};
use oz_testenv::{
    exec,
    workloads::{self, WorkloadSpec},
};
use serde_json::{Value, json};
use tokio::{io::AsyncWriteExt, process::Child};

use crate::{
    sessions::plane::{SERVICE, SessionsPlane},
    support::{
        admission::create_once_admitted,
        install::{SHARED_KINDS, apply_install, operator_args, service_account_kubeconfig},
        manifests::create_manifest,
        operator::{Operator, free_port},
        ozctl::{ozctl_bin, ozctl_with},
        polling::eventually,
        rbac::{grant, rule, subject},
    },
};

/// How long oz, the controllers and kwok may take to get somewhere on a busy 2-core machine.
pub(crate) const WAIT: Duration = Duration::from_secs(90);
/// oz's bound on how long after `expiresAt` an open session may last, seen by the client.
pub(crate) const CLOSE_WITHIN: Duration = Duration::from_secs(2);

/// The install applied to a private control plane, its oz-managers run as its ServiceAccount.
pub(crate) struct Installed {
    pub(crate) sessions: SessionsPlane,
    /// The watched namespace, where access without a grant is denied.
    pub(crate) ns: String,
    /// The install's namespace: its ServiceAccount and leader-election Lease.
    pub(crate) operator_ns: String,
    yaml: String,
    kubeconfig: PathBuf,
    /// Where every replica stores recordings (as one bucket would be shared).
    pub(crate) recordings: PathBuf,
    pub(crate) dir: PathBuf,
}

/// One oz-manager process.
pub(crate) struct Replica {
    pub(crate) operator: Operator,
    pub(crate) audit_log: PathBuf,
}

impl Replica {
    /// Its name in leader election and in recordings.
    fn identity(&self) -> String {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
        format!("{}-{}", host.trim(), self.operator.pid())
    }
}

impl Installed {
    pub(crate) async fn start(prefix: &str) -> Self {
        let sessions = SessionsPlane::start(prefix).await;
        let ns = sessions.namespace.clone();
        let admin = sessions.admin.clone();
        let operator_ns = sessions
            .plane
            .namespace(&format!("{prefix}-oz"))
            .await
            .unwrap();
        let options = InstallOptions {
            namespace: operator_ns.clone(),
            name: operator_ns.clone(),
            watch_namespaces: vec![ns.clone()],
            controllers: Component::ALL.to_vec(),
            crds: false,
            ..InstallOptions::default()
        };
        let yaml = install_yaml(&options).unwrap();
        // oz-manager registers the APIService and the webhooks itself, for its local ports.
        apply_install(&admin, &yaml, |object| {
            !SHARED_KINDS.contains(&object.types.as_ref().unwrap().kind.as_str())
        })
        .await;
        let kubeconfig = service_account_kubeconfig(
            &sessions.plane,
            &admin,
            &operator_ns,
            &format!("{operator_ns}-manager"),
        )
        .await;
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(&ns);
        let recordings = dir.join("recordings");
        std::fs::create_dir_all(&recordings).unwrap();

        // A workload per template: a session's grant is any of alice's grants on its pod, so
        // a grant that ends while another on the same pod goes on would close nothing.
        for (name, target, record_input) in [("web-exec", "web", true), ("db-exec", "db", false)] {
            workloads::deployment(&admin, &ns, WorkloadSpec::new(target, 1))
                .await
                .unwrap();
            let template = format!(
                "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessTemplate\nmetadata: {{name: {name}}}\n\
                 spec:\n  accessConfig: {{allowedGroups: [devs], defaultDuration: 1h, maxDuration: 2h, \
                 sessionMode: Brokered, recordInput: {record_input}}}\n  \
                 controllerTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: {target}}}\n"
            );
            create_manifest(&admin, &ns, &template).await.unwrap();
        }
        grant(
            &admin,
            &ns,
            "devs",
            vec![
                rule(&[""], &["pods"], &["get", "list"]),
                rule(
                    &[oz_api::GROUP],
                    &[
                        "execaccessrequests",
                        "podaccessrequests",
                        "execaccesstemplates",
                        "podaccesstemplates",
                    ],
                    // patch: `ozctl revoke` and `ozctl extend`, as the install's requester role.
                    &["get", "list", "watch", "create", "patch"],
                ),
            ],
            vec![subject("Group", "devs")],
        )
        .await;
        Self {
            sessions,
            ns,
            operator_ns,
            yaml,
            kubeconfig,
            recordings,
            dir,
        }
    }

    /// Starts an oz-manager with the Deployment's flags made local: its own webhook port,
    /// sessions on `sessions_port`, an APIService (when it leads) naming `api_port` on the
    /// ExternalName Service, `--audit-enforce-namespaces` on the watched namespace, and a
    /// 4-second Lease so that a follower takes over soon after its leader dies.
    pub(crate) fn replica(&self, sessions_port: u16, api_port: u16) -> Replica {
        self.replica_with(sessions_port, api_port, &[])
    }

    /// [`Installed::replica`] with more flags (`Some` sets one, `None` drops it).
    pub(crate) fn replica_with(
        &self,
        sessions_port: u16,
        api_port: u16,
        more: &[(&str, Option<String>)],
    ) -> Replica {
        let webhook_port = free_port();
        let audit_log = self.dir.join(format!("audit-{sessions_port}.jsonl"));
        let args = operator_args(
            &self.yaml,
            &[
                ("--webhook-service", None),
                (
                    "--webhook-url-base",
                    Some(format!("https://127.0.0.1:{webhook_port}")),
                ),
                ("--webhook-port", Some(webhook_port.to_string())),
                ("--sessions-port", Some(sessions_port.to_string())),
                (
                    "--sessions-service",
                    Some(format!("{}/{SERVICE}:{api_port}", self.ns)),
                ),
                (
                    "--session-recordings",
                    Some(self.recordings.display().to_string()),
                ),
                ("--audit-log-path", Some(audit_log.display().to_string())),
                ("--audit-enforce-namespaces", Some(self.ns.clone())),
                ("--leader-elect-lease-duration", Some("4".into())),
                ("--log-format", None),
            ]
            .into_iter()
            .chain(more.iter().cloned())
            .collect::<Vec<_>>(),
        );
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Replica {
            operator: Operator::start_with_kubeconfig(&self.ns, &self.kubeconfig, &args),
            audit_log,
        }
    }

    /// The replica holding the leader-election Lease: `<host>-<pid>`, as oz-manager names
    /// itself outside a pod.
    async fn leader(&self) -> Option<String> {
        let leases: Api<Lease> = Api::namespaced(self.admin().clone(), &self.operator_ns);
        leases
            .get(&format!("{}-manager", self.operator_ns))
            .await
            .ok()?
            .spec?
            .holder_identity
    }

    fn admin(&self) -> &Client {
        &self.sessions.admin
    }

    pub(crate) fn requests(&self) -> Api<ExecAccessRequest> {
        Api::namespaced(self.admin().clone(), &self.ns)
    }

    /// alice asks for `duration` through `template`, once oz's webhooks admit her.
    pub(crate) async fn asked(
        &self,
        name: &str,
        template: &str,
        duration: &str,
        replica: &Replica,
    ) {
        self.asked_as("alice", name, (template, duration), replica)
            .await;
    }

    /// `user` asks for `duration` through `template`, once oz's webhooks admit them.
    pub(crate) async fn asked_as(
        &self,
        user: &str,
        name: &str,
        (template, duration): (&str, &str),
        replica: &Replica,
    ) {
        let asking: Api<ExecAccessRequest> =
            Api::namespaced(self.sessions.plane.client_as(user).await.unwrap(), &self.ns);
        let request: ExecAccessRequest = serde_json::from_value(json!({
            "apiVersion": "crds.wizardofoz.co/v1alpha1",
            "kind": "ExecAccessRequest",
            "metadata": {"name": name},
            "spec": {"templateName": template, "duration": duration},
        }))
        .unwrap();
        create_once_admitted(&asking, &request, user, &replica.operator.log).await;
    }

    /// alice asks for `duration` through `template`, once oz's webhooks admit her, and gets it.
    pub(crate) async fn granted(
        &self,
        name: &str,
        template: &str,
        duration: &str,
        replica: &Replica,
    ) -> ExecAccessRequest {
        self.asked(name, template, duration, replica).await;
        self.ready(name, replica).await
    }

    /// Request `name`, once Ready (and Brokered).
    pub(crate) async fn ready(&self, name: &str, replica: &Replica) -> ExecAccessRequest {
        let requests = self.requests();
        let ready = eventually(
            WAIT,
            &format!(
                "{name} to be Ready (log: {})",
                replica.operator.log.display()
            ),
            || async {
                let request = requests.get(name).await.ok()?;
                (request.request_status()?.phase == Some(RequestPhase::Ready)).then_some(request)
            },
        )
        .await;
        let status = ready.request_status().unwrap();
        assert_eq!(
            status.session_mode,
            Some(oz_api::SessionMode::Brokered),
            "{status:?}"
        );
        ready
    }

    /// `ozctl ARGS` in the namespace as `user` (admin for `None`), stdin empty.
    pub(crate) async fn ozctl(&self, user: Option<&str>, args: &[&str]) -> exec::Output {
        let mut ozctl = std::process::Command::new(ozctl_bin());
        ozctl
            .args(["--namespace", &self.ns])
            .args(args)
            .env("KUBECONFIG", self.kubeconfig_of(user));
        exec::run(ozctl, exec::RUN_TIMEOUT).await.unwrap()
    }

    pub(crate) fn kubeconfig_of(&self, user: Option<&str>) -> &Path {
        match user {
            Some(user) => self.sessions.plane.kubeconfig_of(user).unwrap(),
            None => self.sessions.plane.admin_kubeconfig(),
        }
    }

    /// Request `name`'s latest session running `command` that `wanted` accepts, once its status
    /// lists one (`what` names the wait).
    async fn session_where(
        &self,
        name: &str,
        command: &[&str],
        what: &str,
        wanted: impl Fn(&SessionRecord) -> bool,
    ) -> SessionRecord {
        let requests = self.requests();
        eventually(WAIT, &format!("{name}'s status to {what}"), || async {
            let request = requests.get(name).await.ok()?;
            let sessions = request.request_status()?.sessions.clone();
            sessions
                .into_iter()
                .rev()
                .find(|s| s.command == command && wanted(s))
        })
        .await
    }

    /// Request `name`'s session running `command`, as its status lists it.
    async fn session(&self, name: &str, command: &[&str]) -> SessionRecord {
        self.session_where(name, command, "list its session", |_| true)
            .await
    }

    /// [`Installed::session`], once its end is recorded (the replica writes it after the
    /// stream has closed).
    pub(crate) async fn ended_session(&self, name: &str, command: &[&str]) -> SessionRecord {
        self.session_where(name, command, "record its session's end", |s| {
            s.end_reason.is_some()
        })
        .await
    }

    /// The recording of session `id`, fetched through the apiserver by `ozctl replay --output`
    /// as admin (who holds `get` on recordings).
    async fn recording(&self, id: &str) -> Recording {
        self.saved_recording(id)
            .await
            .unwrap_or_else(|refused| panic!("{refused}"))
    }

    /// [`Installed::recording`], or what `ozctl replay` said when it could not save it.
    async fn saved_recording(&self, id: &str) -> Result<Recording, exec::Output> {
        let file = self.dir.join(format!("{id}.cast"));
        let saved = self
            .ozctl(None, &["replay", id, "--output", file.to_str().unwrap()])
            .await;
        if !saved.success() {
            return Err(saved);
        }
        Ok(Recording::parse(&std::fs::read_to_string(&file).unwrap()))
    }
}

/// A recording's header and its events' texts by code.
struct Recording {
    header: Value,
    events: Vec<(String, String)>,
}

impl Recording {
    fn parse(text: &str) -> Self {
        let mut lines = text.lines();
        let header = serde_json::from_str(lines.next().unwrap()).unwrap();
        let events = lines
            .map(|line| {
                let event: Value = serde_json::from_str(line).unwrap();
                (
                    event[1].as_str().unwrap().to_string(),
                    event[2].as_str().unwrap().to_string(),
                )
            })
            .collect();
        Self { header, events }
    }

    /// Every event of `code` (`o` output, `i` input, `m` marker) joined.
    fn joined(&self, code: &str) -> String {
        self.events
            .iter()
            .filter(|(c, _)| c == code)
            .map(|(_, data)| data.as_str())
            .collect()
    }
}

/// `ozctl exec REQUEST -- sh` as alice, whose stdin is a pipe the test types into.
pub(crate) struct Shell {
    child: Child,
    stdin: Option<tokio::process::ChildStdin>,
    stdout: Arc<Mutex<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    readers: Vec<tokio::task::JoinHandle<()>>,
    typed: String,
}

/// How an [`Shell`] ended.
pub(crate) struct Ended {
    pub(crate) code: Option<i32>,
    /// When the test saw ozctl exit.
    pub(crate) at: Timestamp,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Shell {
    pub(crate) fn open(installed: &Installed, request: &str) -> Self {
        Self::open_as(installed, "alice", request)
    }

    /// A shell `user` opens with `ozctl exec` on their request `request`.
    pub(crate) fn open_as(installed: &Installed, user: &str, request: &str) -> Self {
        let mut child = tokio::process::Command::new(ozctl_bin())
            .args(["--namespace", &installed.ns, "exec", request, "--", "sh"])
            .env("KUBECONFIG", installed.kubeconfig_of(Some(user)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let (stdout, stderr) = (Arc::default(), Arc::default());
        let readers = vec![
            collect(child.stdout.take().unwrap(), Arc::clone(&stdout)),
            collect(child.stderr.take().unwrap(), Arc::clone(&stderr)),
        ];
        Self {
            stdin: child.stdin.take(),
            child,
            stdout,
            stderr,
            readers,
            typed: String::new(),
        }
    }

    /// Types `line` and a newline, as alice would.
    pub(crate) async fn type_line(&mut self, line: &str) {
        let text = format!("{line}\n");
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(text.as_bytes()).await.unwrap();
        stdin.flush().await.unwrap();
        self.typed.push_str(&text);
    }

    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.stdout.lock().unwrap()).into_owned()
    }

    /// Waits until the session has printed `text` (or ozctl exited, which fails the test with
    /// what it said).
    pub(crate) async fn wait_for(&mut self, text: &str) {
        let printed = eventually(WAIT, &format!("the session to print {text:?}"), || {
            let printed = self.stdout().contains(text);
            let exited = matches!(self.child.try_wait(), Ok(Some(_)));
            async move { (printed || exited).then_some(printed) }
        })
        .await;
        assert!(
            printed,
            "ozctl exited before printing {text:?}: {}{}",
            self.stdout(),
            String::from_utf8_lossy(&self.stderr.lock().unwrap())
        );
    }

    /// Waits for ozctl to exit, noting when.
    pub(crate) async fn ended(mut self, within: Duration) -> Ended {
        let status = tokio::time::timeout(within, self.child.wait())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "the session did not end: {}{}",
                    self.stdout(),
                    String::from_utf8_lossy(&self.stderr.lock().unwrap())
                )
            })
            .unwrap();
        let at = Timestamp::now();
        for reader in self.readers.drain(..) {
            reader.await.unwrap();
        }
        Ended {
            code: status.code(),
            at,
            stdout: self.stdout(),
            stderr: String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned(),
        }
    }
}

fn collect(
    mut from: impl tokio::io::AsyncRead + Unpin + Send + 'static,
    into: Arc<Mutex<Vec<u8>>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut buffer = [0u8; 4096];
        loop {
            match tokio::io::AsyncReadExt::read(&mut from, &mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => into.lock().unwrap().extend_from_slice(&buffer[..n]),
            }
        }
    })
}

pub(crate) fn expires_at(request: &ExecAccessRequest) -> Timestamp {
    request
        .request_status()
        .unwrap()
        .expires_at
        .clone()
        .unwrap()
        .0
}

/// The audit records in `path` whose `event` is `event`.
pub(crate) fn audit_records(path: &Path, event: &str) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|record| record["event"] == event)
        .collect()
}

#[tokio::test]
async fn alices_session_runs_through_oz_ends_at_expires_at_and_replays_to_what_she_saw() {
    let installed = Installed::start("sessions-e2e").await;
    let ns = installed.ns.clone();
    let port = free_port();
    let replica = installed.replica(port, port);
    installed.sessions.wait_available().await;

    // A command through oz: its output, and the exit code of the command.
    let ready = installed
        .granted("alice-db", "db-exec", "10m", &replica)
        .await;
    let pod = ready.request_status().unwrap().pod_name.clone().unwrap();
    let hello = installed
        .ozctl(
            Some("alice"),
            &[
                "exec",
                "alice-db",
                "--",
                "sh",
                "-c",
                "echo hello from $POD_NAME",
            ],
        )
        .await;
    assert!(hello.success(), "{hello}");
    assert_eq!(hello.stdout, format!("hello from {pod}\n"), "{hello}");

    // Core exec is not hers, even into the granted pod; bob's call through oz is refused by
    // the apiserver (no RBAC in the sessions group), before oz.
    let core = installed
        .sessions
        .kubectl(Some("alice"), &["exec", "-n", &ns, &pod, "--", "true"])
        .await;
    assert!(core.forbidden(), "{core}");
    let bob = installed
        .ozctl(Some("bob"), &["exec", "alice-db", "--", "true"])
        .await;
    assert!(!bob.success() && bob.stderr.contains("forbidden"), "{bob}");

    // Input not recorded where the template says so; output recorded as she saw it.
    let mut quiet = Shell::open(&installed, "alice-db");
    quiet.type_line("echo quiet-$((6*7))").await;
    quiet.wait_for("quiet-42\n").await;
    quiet.type_line("exit").await;
    let quiet = quiet.ended(WAIT).await;
    assert_eq!(quiet.code, Some(0), "{}", quiet.stderr);
    let record = installed.ended_session("alice-db", &["sh"]).await;
    assert_eq!(record.end_reason, Some(SessionEndReason::Exited));
    let recording = installed.recording(&record.id).await;
    assert_eq!(recording.joined("o"), quiet.stdout);
    assert_eq!(recording.joined("i"), "", "recordInput: false");

    // A shell open at expiresAt: closed by oz, seen by ozctl within CLOSE_WITHIN.
    let expiring = installed
        .granted("alice-expiring", "web-exec", "20s", &replica)
        .await;
    let mut shell = Shell::open(&installed, "alice-expiring");
    shell.type_line("echo before-$((40+2))").await;
    shell.wait_for("before-42\n").await;
    let ended = shell.ended(WAIT).await;
    let expiry = expires_at(&expiring);
    let lag = ended.at.duration_since(expiry);
    assert!(
        lag >= SignedDuration::ZERO && lag < SignedDuration::try_from(CLOSE_WITHIN).unwrap(),
        "closed {lag:?} after expiresAt {expiry} (stdout {:?})",
        ended.stdout
    );
    assert_eq!(ended.code, Some(3), "oz closed it: {}", ended.stderr);
    let closing = SessionEndReason::Expired.closed_message();
    assert!(ended.stderr.contains(&closing), "{}", ended.stderr);
    assert!(
        ended.stdout.starts_with("before-42\n") && ended.stdout.len() > "before-42\n".len(),
        "oz's line follows the output: {:?}",
        ended.stdout
    );

    // The recording, through the apiserver: exactly her output and her input; replayed, her
    // screen again.
    let record = installed.ended_session("alice-expiring", &["sh"]).await;
    assert_eq!(record.end_reason, Some(SessionEndReason::Expired));
    assert_eq!(record.user, "alice");
    let recording = installed.recording(&record.id).await;
    assert_eq!(recording.joined("o"), ended.stdout);
    assert_eq!(recording.joined("i"), shell_typed("echo before-$((40+2))"));
    assert_eq!(recording.header["oz"]["user"], "alice");
    assert_eq!(
        recording.header["oz"]["pod"],
        expiring
            .request_status()
            .unwrap()
            .pod_name
            .as_deref()
            .unwrap()
    );
    // Byte for byte: ozctl_with keeps the bytes (exec::run reads lines).
    let replayed = ozctl_with(
        installed.kubeconfig_of(None),
        &ns,
        &["replay", &record.id, "--no-wait"],
    )
    .await;
    assert!(replayed.status.success(), "{replayed:?}");
    assert_eq!(String::from_utf8_lossy(&replayed.stdout), ended.stdout);

    // The audit trail: oz's own exec into the pod passed the enforcing webhook as the broker's,
    // and the session's start and end name alice.
    let brokered = audit_records(&replica.audit_log, "PodExec");
    assert!(
        brokered
            .iter()
            .any(|r| r["brokered"] == true && r["allowed"] == true && r["pod"] == pod.as_str()),
        "{brokered:#?}"
    );
    for event in [
        oz_sessions::audit::SESSION_START,
        oz_sessions::audit::SESSION_END,
    ] {
        let records = audit_records(&replica.audit_log, event);
        assert!(
            records
                .iter()
                .any(|r| r["user"] == "alice" && r["session"]["id"] == record.id.as_str()),
            "{event}: {records:#?}"
        );
    }
}

/// What the test typed for one line.
fn shell_typed(line: &str) -> String {
    format!("{line}\n")
}

#[tokio::test]
async fn a_follower_closes_its_sessions_at_expires_at_after_the_leader_dies_and_a_recording_survives_its_restart()
 {
    let installed = Installed::start("sessions-failover").await;
    // The leader first. The APIService it registers names the follower's port, so every
    // session is the follower's, as a Service may send any session to any replica.
    let (leader_port, follower_port) = (free_port(), free_port());
    let mut leader = installed.replica(leader_port, follower_port);
    eventually(WAIT, "the first replica to lead", || async {
        (installed.leader().await? == leader.identity()).then_some(())
    })
    .await;
    let mut follower = installed.replica(follower_port, follower_port);
    installed.sessions.wait_available().await;

    let expiring = installed
        .granted("alice-expiring", "web-exec", "40s", &leader)
        .await;
    installed
        .granted("alice-kept", "db-exec", "10m", &leader)
        .await;
    let mut shell = Shell::open(&installed, "alice-expiring");
    shell.type_line("echo before-$((40+2))").await;
    shell.wait_for("before-42\n").await;
    let mut kept = Shell::open(&installed, "alice-kept");
    kept.type_line("echo kept-$((6*7))").await;
    kept.wait_for("kept-42\n").await;
    assert_eq!(installed.leader().await, Some(leader.identity()));

    // The leader dies; the follower takes over the Lease, and closes its session on time from
    // its own cache and timers.
    leader.operator.kill();
    let ended = shell.ended(WAIT).await;
    let expiry = expires_at(&expiring);
    let lag = ended.at.duration_since(expiry);
    assert!(
        lag >= SignedDuration::ZERO && lag < SignedDuration::try_from(CLOSE_WITHIN).unwrap(),
        "closed {lag:?} after expiresAt {expiry}"
    );
    assert_eq!(ended.code, Some(3), "oz closed it: {}", ended.stderr);
    assert!(
        ended
            .stderr
            .contains(&SessionEndReason::Expired.closed_message()),
        "{}",
        ended.stderr
    );
    let record = installed.ended_session("alice-expiring", &["sh"]).await;
    assert_eq!(record.end_reason, Some(SessionEndReason::Expired));
    let recording = installed.recording(&record.id).await;
    assert_eq!(
        recording.header["oz"]["replica"],
        follower.identity().as_str()
    );
    assert_eq!(recording.joined("o"), ended.stdout);
    eventually(WAIT, "the follower to lead", || async {
        (installed.leader().await? == follower.identity()).then_some(())
    })
    .await;

    // The follower is killed mid-session: what was flushed before is kept and, once it is
    // back, readable through the apiserver (no end recorded: nobody saw the session end).
    let id = installed.session("alice-kept", &["sh"]).await.id;
    let parts = installed.recordings.join(&installed.ns).join(&id);
    eventually(WAIT, "the open session's output to be flushed", || async {
        std::fs::read_dir(&parts)
            .ok()?
            .filter_map(|entry| std::fs::read_to_string(entry.ok()?.path()).ok())
            .any(|part| part.contains("kept-42"))
            .then_some(())
    })
    .await;
    follower.operator.kill();
    let cut = kept.ended(WAIT).await;
    assert_ne!(cut.code, Some(0), "the session was cut: {}", cut.stderr);
    follower.operator.restart();
    let recording = eventually(WAIT, "the recording to be served again", || async {
        installed.saved_recording(&id).await.ok()
    })
    .await;
    assert!(
        recording.joined("o").starts_with("kept-42\n"),
        "{:?}",
        recording.events
    );
    assert_eq!(recording.joined("i"), "", "db-exec does not record input");
    assert!(
        !recording.joined("m").contains("end"),
        "{:?}",
        recording.events
    );
}
