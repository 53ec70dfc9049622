//! Brokered sessions, the broker's part: oz's broker, run in the test process with
//! the admin client behind a test front door that names the user (the real one verifies the
//! apiserver's front-proxy certificate first), pipes `cat` through to a pod that kwok runs, and
//! closes the session when the grant ends: at expiresAt, when the request is deleted, when its
//! template is deleted, after the template's idle timeout, and when the broker shuts down. Each
//! session's start and end are in the request's status and in the audit file.
//!
//! The shared control plane serves no APIService here: the test talks to the broker directly.

use std::{path::PathBuf, time::Duration};

use axum::{extract::Request, middleware::Next, response::Response};
use futures::{SinkExt, StreamExt};
use k8s_openapi::jiff::Timestamp;
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams},
};
use oz_api::{AccessRequest, ExecAccessRequest, ExecAccessTemplate, SessionEndReason};
use oz_audit::AuditLog;
use oz_sessions::{
    Broker, BrokerConfig, Identity, SessionMetrics,
    recording::{Recordings, limits::RecordingLimits},
};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::{self, Message, client::IntoClientRequest};

use crate::{
    access::streams::{StreamsFixture, WAIT, web},
    support::{
        fixture::Fixture, manifests::create_manifest, operator::audit_log_path,
        polling::eventually, timing::strict_timing,
    },
};

/// A broker serving on 127.0.0.1, its audit file and recordings, and the fixture it brokers
/// for. Shared with `recorded.rs`.
pub(crate) struct Brokered {
    pub(crate) f: Fixture,
    broker: Broker,
    url: String,
    pub(crate) audit: PathBuf,
    /// The recordings directory (`<namespace>/<id>.cast`).
    pub(crate) recordings: PathBuf,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for Brokered {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// The test's front door: the user and groups from `x-test-user` / `x-test-groups`.
async fn identify(mut request: Request, next: Next) -> Response {
    let (user, groups) = {
        let header = |name: &str| -> Option<String> {
            let value = request.headers().get(name)?;
            value.to_str().ok().map(String::from)
        };
        (header("x-test-user"), header("x-test-groups"))
    };
    if let Some(user) = user {
        let groups = groups.unwrap_or_default();
        request.extensions_mut().insert(Identity {
            user,
            groups: groups.split(',').map(String::from).collect(),
            ..Default::default()
        });
    }
    next.run(request).await
}

impl Brokered {
    /// oz's exec and pod controllers for a new namespace with the Deployment `web`, and a
    /// broker for it.
    pub(crate) async fn new(prefix: &str) -> Brokered {
        Self::with_limits(prefix, RecordingLimits::default()).await
    }

    /// [`Brokered::new`], its recordings capped by `limits`.
    pub(crate) async fn with_limits(prefix: &str, limits: RecordingLimits) -> Brokered {
        let f = Fixture::new(prefix).await;
        web(&f).await;
        let audit = audit_log_path(prefix);
        let signer = oz_audit::Signer::generate().unwrap();
        let audit_log = AuditLog::open(
            &audit,
            signer,
            oz_audit::Rotation::default(),
            oz_audit::LogCounters::default(),
        )
        .unwrap();
        let recordings = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("broker-recordings")
            .join(&f.ns);
        let store = Recordings::open(recordings.to_str().unwrap())
            .unwrap()
            .with_limits(limits);
        let broker = start_broker(&f, audit_log, store);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("ws://{}", listener.local_addr().unwrap());
        let app = broker.router().layer(axum::middleware::from_fn(identify));
        let server = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Brokered {
            f,
            broker,
            url,
            audit,
            recordings,
            server,
        }
    }

    /// A Brokered ExecAccessTemplate for devs on `web`, with `extra` access config.
    pub(crate) async fn template(&self, name: &str, extra: &str) {
        let yaml = format!(
            "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessTemplate\nmetadata: {{name: {name}}}\n\
             spec:\n  accessConfig: {{allowedGroups: [devs], defaultDuration: 1h, maxDuration: 2h, \
             sessionMode: Brokered{extra}}}\n  \
             controllerTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: web}}\n"
        );
        create_manifest(&self.f.admin, &self.f.ns, &yaml)
            .await
            .unwrap();
    }

    /// Opens `cat` in `pod` as `user` (groups `devs`): the websocket, or the HTTP refusal.
    async fn cat(&self, user: &str, pod: &str) -> Result<Client, (u16, String)> {
        self.exec(user, pod, &["cat"]).await
    }

    /// [`Self::cat`] as `user` in `group`.
    async fn cat_in(&self, user: &str, group: &str, pod: &str) -> Result<Client, (u16, String)> {
        self.exec_in(user, group, pod, &["cat"]).await
    }

    /// Opens `command` in `pod` as `user` (groups `devs`), stdin open, no terminal.
    pub(crate) async fn exec(
        &self,
        user: &str,
        pod: &str,
        command: &[&str],
    ) -> Result<Client, (u16, String)> {
        self.exec_in(user, "devs", pod, command).await
    }

    /// [`Self::exec`] as `user` in `group`.
    async fn exec_in(
        &self,
        user: &str,
        group: &str,
        pod: &str,
        command: &[&str],
    ) -> Result<Client, (u16, String)> {
        let escaped = |word: &str| -> String {
            word.bytes()
                .map(|b| match b {
                    b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => {
                        char::from(b).to_string()
                    }
                    _ => format!("%{b:02X}"),
                })
                .collect()
        };
        let query: String = command
            .iter()
            .map(|word| format!("command={}&", escaped(word)))
            .collect();
        let url = format!(
            "{}/namespaces/{}/pods/{pod}/exec?{query}stdin=true&stdout=true&stderr=true",
            self.url, self.f.ns,
        );
        let mut request = url.into_client_request().unwrap();
        let headers = request.headers_mut();
        headers.insert(
            "sec-websocket-protocol",
            "v5.channel.k8s.io, v4.channel.k8s.io".parse().unwrap(),
        );
        headers.insert("x-test-user", user.parse().unwrap());
        headers.insert(
            "x-test-groups",
            format!("{group},system:authenticated").parse().unwrap(),
        );
        match tokio_tungstenite::connect_async(request).await {
            Ok((socket, response)) => {
                assert_eq!(
                    response.headers()["sec-websocket-protocol"],
                    "v5.channel.k8s.io"
                );
                Ok(Client { socket })
            }
            Err(tungstenite::Error::Http(response)) => Err((
                response.status().as_u16(),
                String::from_utf8_lossy(response.body().as_deref().unwrap_or_default())
                    .into_owned(),
            )),
            Err(e) => panic!("could not connect to the broker: {e}"),
        }
    }

    /// The audit file's records of `event`.
    pub(crate) fn audit_records(&self, event: &str) -> Vec<Value> {
        std::fs::read_to_string(&self.audit)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|entry| entry["type"] == "record" && entry["event"] == event)
            .collect()
    }

    /// Waits until request `name`'s status says session `id` ended, and returns its record.
    pub(crate) async fn ended_record(&self, name: &str) -> (Value, Value) {
        let api = self.f.requests::<ExecAccessRequest>();
        eventually(
            WAIT,
            &format!("{name}'s status to record a session's end"),
            || {
                let api = api.clone();
                async move {
                    let request = api.get(name).await.ok()?;
                    let status = serde_json::to_value(request.request_status()?).ok()?;
                    let session = status["sessions"].as_array()?.last()?.clone();
                    (!session["endReason"].is_null())
                        .then(|| (session, status["sessionCounts"].clone()))
                }
            },
        )
        .await
    }
}

fn start_broker(f: &Fixture, audit_log: AuditLog, recordings: Recordings) -> Broker {
    Broker::start(
        f.admin.clone(),
        BrokerConfig {
            recordings,
            audit_log,
            watch_namespaces: vec![f.ns.clone()],
            replica: "test".into(),
            metrics: SessionMetrics::default(),
        },
    )
}

/// A websocket client speaking v5.channel.k8s.io.
pub(crate) struct Client {
    pub(crate) socket: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
}

/// What the user saw of a session, up to its close.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    pub(crate) stdout: String,
    status: Option<Value>,
    closed_at: Option<Timestamp>,
}

impl Client {
    pub(crate) async fn send(&mut self, text: &str) {
        let mut frame = vec![0u8];
        frame.extend_from_slice(text.as_bytes());
        self.socket
            .send(Message::Binary(frame.into()))
            .await
            .unwrap();
    }

    /// Reads until stdout contains `text`.
    pub(crate) async fn until_stdout(&mut self, text: &str) -> String {
        let mut stdout = String::new();
        tokio::time::timeout(WAIT, async {
            while !stdout.contains(text) {
                match self.socket.next().await {
                    Some(Ok(Message::Binary(frame))) if frame.first() == Some(&1) => {
                        stdout.push_str(&String::from_utf8_lossy(&frame[1..]))
                    }
                    Some(Ok(_)) => {}
                    other => panic!("the stream ended before {text:?} ({stdout:?}): {other:?}"),
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no {text:?} on stdout within {WAIT:?}: {stdout:?}"));
        stdout
    }

    /// Reads everything up to the close.
    pub(crate) async fn until_closed(mut self, timeout: Duration) -> Seen {
        let mut seen = Seen::default();
        tokio::time::timeout(timeout, async {
            loop {
                match self.socket.next().await {
                    Some(Ok(Message::Binary(frame))) => match frame.first() {
                        Some(1) => seen.stdout.push_str(&String::from_utf8_lossy(&frame[1..])),
                        Some(3) => seen.status = serde_json::from_slice(&frame[1..]).ok(),
                        _ => {}
                    },
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => {
                        seen.closed_at = Some(Timestamp::now());
                        return;
                    }
                    Some(Ok(_)) => {}
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("the session was not closed within {timeout:?}: {seen:?}"));
        seen
    }
}

/// Asserts the user was told the session closed for `reason`, on stdout and in the Status.
#[track_caller]
fn assert_told(seen: &Seen, reason: SessionEndReason) {
    let line = format!("\r\noz: {}; session closed\r\n", reason.describe());
    assert!(seen.stdout.ends_with(&line), "{seen:?}");
    let status = seen.status.as_ref().expect("a Status on channel 3");
    assert_eq!(status["status"], "Failure", "{status}");
    assert_eq!(status["reason"], "Forbidden", "{status}");
    assert_eq!(
        status["message"],
        format!("oz closed the session: {}", reason.describe())
    );
}

pub(crate) fn pod_of(request: &ExecAccessRequest) -> String {
    request.request_status().unwrap().pod_name.clone().unwrap()
}

#[tokio::test]
async fn alices_cat_echoes_through_the_broker_bob_is_refused_and_both_ends_are_recorded() {
    let b = Brokered::new("sessions-pipe").await;
    b.template("web-brokered", "").await;
    let granted =
        b.f.granted::<ExecAccessRequest>("alice-web", "web-brokered", "alice", "30m")
            .await;
    let pod = pod_of(&granted);

    let (code, body) = b.cat("bob", &pod).await.err().expect("bob is refused");
    assert_eq!(code, 403, "{body}");
    let status: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["reason"], "Forbidden", "{body}");
    let message = status["message"].as_str().unwrap();
    assert!(
        message.contains("\"bob\"") && message.contains(&format!("{}/{pod}", b.f.ns)),
        "names the user and the pod: {message}"
    );

    let mut alice = b
        .cat("alice", &pod)
        .await
        .expect("alice's grant lets her in");
    alice.send("hello through oz\n").await;
    alice.until_stdout("hello through oz\n").await;

    // While it is open, the status counts it.
    let api = b.f.requests::<ExecAccessRequest>();
    let open = eventually(WAIT, "the session's start in the status", || {
        let api = api.clone();
        async move {
            let status = api.get("alice-web").await.ok()?.request_status()?.clone();
            (status.session_counts?.open == 1).then_some(status)
        }
    })
    .await;
    assert_eq!(open.sessions.len(), 1);
    let started = &open.sessions[0];
    assert_eq!(
        (started.user.as_str(), started.pod.as_str()),
        ("alice", pod.as_str())
    );
    assert_eq!(started.command, ["cat"]);
    assert!(started.recording.is_some() && started.end_reason.is_none());

    // alice leaves: the session ends as Exited.
    alice.socket.close(None).await.unwrap();
    let (ended, counts) = b.ended_record("alice-web").await;
    assert_eq!(ended["id"], started.id.as_str());
    assert_eq!(ended["endReason"], "Exited");
    assert!(!ended["endedAt"].is_null());
    assert_eq!(counts, serde_json::json!({"total": 1, "open": 0}));

    let start = eventually(WAIT, "the session-start audit record", || async {
        b.audit_records("session-start").pop()
    })
    .await;
    let end = eventually(WAIT, "the session-end audit record", || async {
        b.audit_records("session-end").pop()
    })
    .await;
    for record in [&start, &end] {
        assert_eq!(record["user"], "alice", "{record}");
        assert_eq!(record["pod"], pod.as_str(), "{record}");
        assert_eq!(record["command"], serde_json::json!(["cat"]), "{record}");
        assert_eq!(record["grant"]["name"], "alice-web", "{record}");
        assert_eq!(record["session"]["id"], started.id.as_str(), "{record}");
        assert_eq!(
            record["session"]["recording"],
            started.recording.as_deref().unwrap(),
            "{record}"
        );
    }
    assert!(start["session"].get("endReason").is_none(), "{start}");
    assert_eq!(end["session"]["endReason"], "exited", "{end}");
    assert_eq!(
        b.audit_records("session-start").len(),
        1,
        "bob's refusal opened nothing"
    );
}

#[tokio::test]
async fn sessions_close_when_the_grant_expires_is_revoked_or_idles_or_its_template_goes_or_oz_stops()
 {
    let mut b = Brokered::new("sessions-close").await;
    b.template("web-brokered", "").await;
    b.template("web-idle", ", sessionIdleTimeout: 3s").await;
    b.template("web-doomed", "").await;
    let requests = b.f.requests::<ExecAccessRequest>();

    // 1. At expiresAt, within 2 s.
    let expiring =
        b.f.granted::<ExecAccessRequest>("alice-expiring", "web-brokered", "alice", "25s")
            .await;
    let expires_at = expiring
        .request_status()
        .unwrap()
        .expires_at
        .clone()
        .unwrap()
        .0;
    let mut alice = b.cat("alice", &pod_of(&expiring)).await.unwrap();
    alice.send("still here\n").await;
    alice.until_stdout("still here\n").await;
    let seen = {
        let _timing = strict_timing().await;
        alice.until_closed(WAIT).await
    };
    assert_told(&seen, SessionEndReason::Expired);
    let lag = seen.closed_at.unwrap().duration_since(expires_at);
    println!("closed {lag:#} after expiresAt");
    assert!(
        lag.is_positive() && lag.as_secs_f64() < 2.0,
        "closed {lag:#} after expiresAt"
    );
    let (ended, _) = b.ended_record("alice-expiring").await;
    assert_eq!(ended["endReason"], "Expired");

    // 2. After the template's sessionIdleTimeout without input.
    let idle =
        b.f.granted::<ExecAccessRequest>("alice-idle", "web-idle", "alice", "30m")
            .await;
    let alice = b.cat("alice", &pod_of(&idle)).await.unwrap();
    let seen = alice.until_closed(WAIT).await;
    assert_told(&seen, SessionEndReason::IdleTimeout);
    let (ended, _) = b.ended_record("alice-idle").await;
    assert_eq!(ended["endReason"], "IdleTimeout");

    // 3. When the broker shuts down.
    let long =
        b.f.granted::<ExecAccessRequest>("alice-long", "web-brokered", "alice", "30m")
            .await;
    let mut alice = b.cat("alice", &pod_of(&long)).await.unwrap();
    alice.send("ping\n").await;
    alice.until_stdout("ping\n").await;
    let closing = tokio::spawn(alice.until_closed(WAIT));
    b.broker.shutdown().await;
    assert_eq!(b.broker.open_sessions(), 0);
    assert_told(&closing.await.unwrap(), SessionEndReason::ServerShutdown);
    let (ended, _) = b.ended_record("alice-long").await;
    assert_eq!(ended["endReason"], "ServerShutdown");

    // The stopped broker refuses new sessions (503): serve a new one.
    let (code, body) = b.cat("alice", &pod_of(&long)).await.err().expect("refused");
    assert_eq!(code, 503, "{body}");
    let store = Recordings::open(b.recordings.to_str().unwrap()).unwrap();
    b.broker = start_broker(&b.f, AuditLog::log_only(), store);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    b.url = format!("ws://{}", listener.local_addr().unwrap());
    let app = b.broker.router().layer(axum::middleware::from_fn(identify));
    b.server.abort();
    b.server = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });

    // 4. When the request is deleted: at once.
    let mut alice = b.cat("alice", &pod_of(&long)).await.unwrap();
    alice.send("pong\n").await;
    alice.until_stdout("pong\n").await;
    requests
        .delete("alice-long", &DeleteParams::default())
        .await
        .unwrap();
    assert_told(&alice.until_closed(WAIT).await, SessionEndReason::Revoked);

    // 5. When its template is deleted.
    let doomed =
        b.f.granted::<ExecAccessRequest>("alice-doomed", "web-doomed", "alice", "30m")
            .await;
    let mut alice = b.cat("alice", &pod_of(&doomed)).await.unwrap();
    alice.send("last\n").await;
    alice.until_stdout("last\n").await;
    Api::<ExecAccessTemplate>::namespaced(b.f.admin.clone(), &b.f.ns)
        .delete("web-doomed", &DeleteParams::default())
        .await
        .unwrap();
    assert_told(
        &alice.until_closed(WAIT).await,
        SessionEndReason::TemplateDeleted,
    );
}

/// A template narrowed while sessions are open under it: bob's session, open under alice's grant
/// because the template shared it with qa, closes within a second of the template leaving qa
/// out (and of a grantTo that keeps grants to their requesters); alice's own stays open.
#[tokio::test]
async fn a_template_narrowed_under_an_open_session_closes_it_within_a_second() {
    let b = Brokered::new("sessions-narrowed").await;
    let templates = Api::<ExecAccessTemplate>::namespaced(b.f.admin.clone(), &b.f.ns);
    for (name, narrowing) in [
        (
            "web-groups",
            json!({"spec": {"accessConfig": {"allowedGroups": ["devs"]}}}),
        ),
        (
            "web-grant-to",
            json!({"spec": {"accessConfig": {"grantTo": "Requester"}}}),
        ),
    ] {
        let yaml = format!(
            "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessTemplate\nmetadata: {{name: {name}}}\n\
             spec:\n  accessConfig: {{allowedGroups: [devs, qa], grantTo: AllowedGroups, \
             defaultDuration: 1h, maxDuration: 2h, sessionMode: Brokered}}\n  \
             controllerTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: web}}\n"
        );
        create_manifest(&b.f.admin, &b.f.ns, &yaml).await.unwrap();
        let request = format!("alice-{name}");
        let granted =
            b.f.granted::<ExecAccessRequest>(&request, name, "alice", "30m")
                .await;
        let pod = pod_of(&granted);
        let mut bob = b.cat_in("bob", "qa", &pod).await.expect("shared with qa");
        bob.send("bob here\n").await;
        bob.until_stdout("bob here\n").await;
        let mut alice = b.cat("alice", &pod).await.unwrap();
        alice.send("alice here\n").await;
        alice.until_stdout("alice here\n").await;

        let seen = {
            let _timing = strict_timing().await;
            let closing = tokio::spawn(bob.until_closed(WAIT));
            let narrowed_at = Timestamp::now();
            templates
                .patch(name, &PatchParams::default(), &Patch::Merge(&narrowing))
                .await
                .unwrap();
            let seen = closing.await.unwrap();
            let lag = seen.closed_at.unwrap().duration_since(narrowed_at);
            println!("{name}: bob's session closed {lag:#} after the template narrowed");
            assert!(lag.as_secs_f64() < 1.0, "{name}: closed {lag:#} after");
            seen
        };
        assert_told(&seen, SessionEndReason::Revoked);
        // alice's own grant is hers whatever the template shares.
        alice.send("alice still here\n").await;
        alice.until_stdout("alice still here\n").await;
    }
}

/// One client message larger than the broker takes ends the session instead of being held in
/// memory (copied, escaped and recorded); messages of kubectl's sizes go through.
#[tokio::test]
async fn a_message_larger_than_the_broker_takes_ends_the_session_unread() {
    let b = Brokered::new("sessions-big").await;
    b.template("web-brokered", "").await;
    let granted =
        b.f.granted::<ExecAccessRequest>("alice-web", "web-brokered", "alice", "30m")
            .await;
    let pod = pod_of(&granted);
    let mut alice = b
        .cat("alice", &pod)
        .await
        .expect("alice's grant lets her in");
    // 64 KiB of stdin, echoed: the ordinary case.
    let line = format!("{}\n", "x".repeat(64 << 10));
    alice.send(&line).await;
    alice.until_stdout(&line).await;

    // 2 MiB in one message: refused as too big, so the session ends without echoing it.
    let big = format!("{}\n", "y".repeat(2 << 20));
    let mut frame = vec![0u8];
    frame.extend_from_slice(big.as_bytes());
    let _ = alice.socket.send(Message::Binary(frame.into())).await;
    let seen = alice.until_closed(WAIT).await;
    assert!(
        !seen.stdout.contains("yyyy"),
        "the big message was read and echoed"
    );
    let (ended, _) = b.ended_record("alice-web").await;
    assert!(!ended["endReason"].is_null(), "{ended}");
}

/// A session's status entry goes to the request it was opened under, by uid: a request
/// deleted and made again under the same name does not inherit another grant's sessions.
#[tokio::test]
async fn a_request_made_again_under_the_same_name_inherits_no_sessions() {
    use oz_api::{SessionRecord, SessionStream};
    use oz_sessions::{
        session::GrantRef,
        status::{self, SessionChange},
    };

    let b = Brokered::new("sessions-uid").await;
    b.template("web-brokered", "").await;
    let api = b.f.requests::<ExecAccessRequest>();
    let first =
        b.f.granted::<ExecAccessRequest>("alice-web", "web-brokered", "alice", "30m")
            .await;
    let grant = |request: &ExecAccessRequest| GrantRef {
        kind: oz_api::AccessKind::Exec,
        name: "alice-web".into(),
        uid: request.metadata.uid.clone().unwrap(),
        template: "web-brokered".into(),
    };
    let old_grant = grant(&first);
    api.delete("alice-web", &DeleteParams::default())
        .await
        .unwrap();
    eventually(WAIT, "alice-web to be gone", || async {
        api.get_opt("alice-web")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    let second =
        b.f.granted::<ExecAccessRequest>("alice-web", "web-brokered", "alice", "30m")
            .await;
    assert_ne!(second.metadata.uid, first.metadata.uid);

    let session = SessionRecord {
        id: "20261127-120000-abcdefgh".into(),
        user: "alice".into(),
        stream: SessionStream::Exec,
        pod: pod_of(&second),
        container: None,
        command: vec!["sh".into()],
        tty: false,
        started_at: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::now()),
        ended_at: None,
        end_reason: None,
        recording: None,
    };
    // The first request's session, written after its name was taken again: not written.
    let written = status::record(
        &b.f.admin,
        &b.f.ns,
        &old_grant,
        &SessionChange::Started(session.clone()),
    )
    .await;
    assert!(
        !written,
        "a session of the first request was written to the second"
    );
    let sessions = |r: ExecAccessRequest| r.request_status().map(|s| s.sessions.len()).unwrap_or(0);
    assert_eq!(sessions(api.get("alice-web").await.unwrap()), 0);
    // Its own sessions are.
    assert!(
        status::record(
            &b.f.admin,
            &b.f.ns,
            &grant(&second),
            &SessionChange::Started(session)
        )
        .await
    );
    assert_eq!(sessions(api.get("alice-web").await.unwrap()), 1);
}
