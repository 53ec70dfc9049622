//! Notifications delivered by oz's real [`Notifier`], started as oz-manager starts it, with a
//! client of the test control plane (its sinks are Secrets there), to HTTP sinks served by the
//! test on 127.0.0.1. The notices are sent by the test itself, so these tests need no
//! controller.

use std::{
    collections::BTreeMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use axum::{
    Router,
    body::Bytes,
    extract::State,
    http::{HeaderMap, StatusCode, header},
};
use k8s_openapi::api::{core::v1::Secret, rbac::v1::PolicyRule};
use kube::{
    Api, Client,
    api::{ObjectMeta, PostParams},
};
use oz::{
    install::{InstallOptions, watched_namespace_rules},
    notify::{
        Backoff, DeliveryConfig, Notice, NoticeKind, Notifier, NotifierConfig, NotifyMetrics,
    },
    scope::Scope,
};
use oz_api::{
    AccessKind, NotificationConfig, SecretRef,
    notifications::{NAMESPACE_SINK_SECRET, SINK_LABEL},
};
use serde_json::Value;

use crate::support::{
    cluster::env,
    polling::eventually,
    rbac::{grant, subject},
};

const WAIT: Duration = Duration::from_secs(60);

/// What a test sink was sent, in the order it answered.
#[derive(Clone, Debug)]
pub(crate) struct Received {
    content_type: String,
    pub(crate) body: Value,
}

#[derive(Default)]
pub(crate) struct SinkState {
    /// Every POST, whatever the answer.
    pub(crate) attempts: AtomicUsize,
    /// The POSTs answered 200.
    accepted: Mutex<Vec<Received>>,
    /// While set, every POST is answered 503.
    pub(crate) down: AtomicBool,
    /// While set, no POST is ever answered.
    hangs: AtomicBool,
}

/// An HTTP sink on 127.0.0.1, with switches the test flips.
pub(crate) struct TestSink {
    pub(crate) url: String,
    pub(crate) state: Arc<SinkState>,
}

impl TestSink {
    pub(crate) async fn start() -> Self {
        let state = Arc::new(SinkState::default());
        let app = Router::new().fallback(receive).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hooks/T0/SECRET", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url, state }
    }

    pub(crate) fn accepted(&self) -> Vec<Received> {
        self.state.accepted.lock().unwrap().clone()
    }

    /// Waits until the sink has accepted `count` notices, and returns them.
    pub(crate) async fn wait_for(&self, count: usize, what: &str) -> Vec<Received> {
        eventually(WAIT, what, || async {
            let got = self.accepted();
            (got.len() >= count).then_some(got)
        })
        .await
    }
}

async fn receive(
    State(state): State<Arc<SinkState>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    state.attempts.fetch_add(1, Ordering::SeqCst);
    if state.hangs.load(Ordering::SeqCst) {
        std::future::pending::<()>().await;
    }
    if state.down.load(Ordering::SeqCst) {
        return StatusCode::SERVICE_UNAVAILABLE;
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    state
        .accepted
        .lock()
        .unwrap()
        .push(Received { content_type, body });
    StatusCode::OK
}

/// A Secret naming `url` as a sink, with the sink label unless `labelled` is false.
pub(crate) async fn sink_secret(
    client: &Client,
    ns: &str,
    name: &str,
    url: &str,
    format: Option<&str>,
    labelled: bool,
) {
    let mut data = BTreeMap::from([("url".to_string(), url.to_string())]);
    if let Some(format) = format {
        data.insert("format".into(), format.into());
    }
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: labelled.then(|| BTreeMap::from([(SINK_LABEL.into(), "true".into())])),
            ..Default::default()
        },
        string_data: Some(data),
        ..Default::default()
    };
    Api::<Secret>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
}

/// The notifier as oz-manager starts it, working in `ns`, with retries fast enough for a test.
fn notifier(client: Client, ns: &str, metrics: &NotifyMetrics) -> Notifier {
    notifier_with(
        client,
        ns,
        metrics,
        NotifierConfig::default().sink_cache_ttl,
    )
}

fn notifier_with(
    client: Client,
    ns: &str,
    metrics: &NotifyMetrics,
    sink_cache_ttl: Duration,
) -> Notifier {
    let config = NotifierConfig {
        sink_cache_ttl,
        delivery: DeliveryConfig {
            post_timeout: Duration::from_secs(600),
            retry_for: Duration::from_secs(600),
            backoff: Backoff {
                initial: Duration::from_millis(50),
                max: Duration::from_millis(200),
            },
            // The test sinks listen on 127.0.0.1.
            sink_networks: oz::notify::SinkNetworks {
                private: false,
                loopback: true,
            },
            ..NotifierConfig::default().delivery
        },
        ..NotifierConfig::default()
    };
    Notifier::start(
        client,
        &[Scope::Namespace(ns.to_string())],
        config,
        metrics.clone(),
    )
}

fn notice(ns: &str, request: &str, kind: NoticeKind, template_sinks: &[&str]) -> Notice {
    Notice {
        kind,
        access: AccessKind::Exec,
        namespace: ns.into(),
        name: request.into(),
        uid: format!("uid-{request}"),
        sinks: (!template_sinks.is_empty()).then(|| NotificationConfig {
            secret_refs: template_sinks
                .iter()
                .map(|name| SecretRef {
                    name: name.to_string(),
                })
                .collect(),
            expiring_soon_before: None,
        }),
        requester: "alice".into(),
        template: "debug".into(),
        reason: Some("INC-7".into()),
        ticket: None,
        pod: None,
        expires_at: None,
        approvers: vec![],
        message: format!("{kind:?}"),
    }
}

/// (subject, type suffix) of each CloudEvent received.
pub(crate) fn events(received: &[Received]) -> Vec<(String, String)> {
    received
        .iter()
        .map(|r| {
            let ty = r.body["type"].as_str().unwrap_or_default();
            (
                r.body["subject"].as_str().unwrap_or_default().to_string(),
                ty.trim_start_matches("co.wizardofoz.access.request.")
                    .to_string(),
            )
        })
        .collect()
}

pub(crate) fn of_request(events: &[(String, String)], subject: &str) -> Vec<String> {
    events
        .iter()
        .filter(|(s, _)| s == subject)
        .map(|(_, t)| t.clone())
        .collect()
}

#[tokio::test]
async fn notices_reach_the_template_and_namespace_sinks_once_each_in_order_per_request() {
    let ns = env().namespace("notify-order").await.unwrap();
    let admin = env().admin().await.unwrap();
    let (team, namespace_sink) = (TestSink::start().await, TestSink::start().await);
    sink_secret(&admin, &ns, "team-sink", &team.url, None, true).await;
    sink_secret(
        &admin,
        &ns,
        "oz-notifications",
        &namespace_sink.url,
        Some("CloudEvents"),
        true,
    )
    .await;
    let metrics = NotifyMetrics::default();
    let notifier = notifier(admin, &ns, &metrics);

    use NoticeKind::*;
    let sent = [
        ("r1", PendingApproval),
        ("r2", PendingApproval),
        ("r1", Approved),
        ("r1", Ready),
        ("r2", Denied),
        ("r1", Ready), // a level-triggered repeat: dropped
        ("r2", PendingApproval),
        ("r1", ExpiringSoon),
        ("r1", Expired),
        ("r3", Ready), // the last: once it is in, everything before it is
    ];
    for (request, kind) in sent {
        notifier.send(notice(&ns, request, kind, &["team-sink"]));
    }
    for sink in [&team, &namespace_sink] {
        let received = sink.wait_for(8, "the last notice").await;
        let got = events(&received);
        assert_eq!(
            got.last().unwrap(),
            &(format!("{ns}/r3"), "ready".to_string())
        );
        assert_eq!(
            of_request(&got, &format!("{ns}/r1")),
            [
                "pendingapproval",
                "approved",
                "ready",
                "expiringsoon",
                "expired"
            ]
        );
        assert_eq!(
            of_request(&got, &format!("{ns}/r2")),
            ["pendingapproval", "denied"]
        );
        assert_eq!(got.len(), 8, "{got:?}");
        let first = &received[0];
        assert_eq!(first.content_type, "application/cloudevents+json");
        assert_eq!(first.body["specversion"], "1.0");
        assert_eq!(first.body["id"], "uid-r1.pendingapproval");
        assert_eq!(
            first.body["source"],
            format!("/apis/crds.wizardofoz.co/v1alpha1/namespaces/{ns}/execaccessrequests/r1")
        );
        assert_eq!(first.body["data"]["requester"], "alice");
        assert_eq!(first.body["data"]["reason"], "INC-7");
    }
    // Sent again after delivery: still dropped.
    notifier.send(notice(&ns, "r1", Approved, &["team-sink"]));
    notifier.send(notice(&ns, "r4", Ready, &["team-sink"]));
    let received = team.wait_for(9, "the notice after the repeat").await;
    assert_eq!(
        events(&received)[8],
        (format!("{ns}/r4"), "ready".to_string())
    );
    namespace_sink
        .wait_for(9, "the notice after the repeat")
        .await;
    // Counted per sink that took it: r1, r3 and r4 at two sinks each.
    assert_eq!(metrics.sent_count(Ready), 6);
}

#[tokio::test]
async fn a_sink_answering_503_gets_every_notice_in_order_once_it_recovers() {
    let ns = env().namespace("notify-retry").await.unwrap();
    let admin = env().admin().await.unwrap();
    let sink = TestSink::start().await;
    sink.state.down.store(true, Ordering::SeqCst);
    sink_secret(&admin, &ns, "oz-notifications", &sink.url, None, true).await;
    let metrics = NotifyMetrics::default();
    let notifier = notifier(admin, &ns, &metrics);

    use NoticeKind::*;
    let kinds = [PendingApproval, Approved, Ready, ExpiringSoon, Expired];
    for kind in kinds {
        notifier.send(notice(&ns, "r1", kind, &[]));
    }
    // Refused several times: retried, nothing accepted, nothing given up on.
    eventually(WAIT, "three refused attempts", || async {
        (sink.state.attempts.load(Ordering::SeqCst) >= 3).then_some(())
    })
    .await;
    assert!(sink.accepted().is_empty());
    sink.state.down.store(false, Ordering::SeqCst);

    let received = sink
        .wait_for(kinds.len(), "every notice after recovery")
        .await;
    assert_eq!(
        of_request(&events(&received), &format!("{ns}/r1")),
        [
            "pendingapproval",
            "approved",
            "ready",
            "expiringsoon",
            "expired"
        ]
    );
    for reason in ["gave_up", "rejected", "lane_full", "queue_full"] {
        assert_eq!(metrics.dead_lettered_count(reason), 0, "{reason}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_returns_at_once_while_a_sink_hangs_and_other_sinks_still_get_their_notices() {
    let ns = env().namespace("notify-hang").await.unwrap();
    let admin = env().admin().await.unwrap();
    let (stuck, healthy) = (TestSink::start().await, TestSink::start().await);
    stuck.state.hangs.store(true, Ordering::SeqCst);
    sink_secret(&admin, &ns, "stuck", &stuck.url, None, true).await;
    sink_secret(&admin, &ns, "oz-notifications", &healthy.url, None, true).await;
    let metrics = NotifyMetrics::default();
    // The POST timeout is 10 minutes: if `send` waited for delivery, it would not return
    // within the test.
    let notifier = notifier(admin, &ns, &metrics);

    const REQUESTS: usize = 40;
    let (sender, namespace) = (notifier.clone(), ns.clone());
    let sending = tokio::task::spawn_blocking(move || {
        for i in 0..REQUESTS {
            sender.send(notice(
                &namespace,
                &format!("r{i}"),
                NoticeKind::Ready,
                &["stuck"],
            ));
        }
    });
    tokio::time::timeout(WAIT, sending)
        .await
        .expect("send blocked on a sink that never answers")
        .unwrap();

    let received = healthy
        .wait_for(REQUESTS, "every notice at the healthy sink")
        .await;
    assert_eq!(received.len(), REQUESTS);
    eventually(WAIT, "the stuck sink to be called", || async {
        (stuck.state.attempts.load(Ordering::SeqCst) >= 1).then_some(())
    })
    .await;
    assert!(stuck.accepted().is_empty());
}

#[tokio::test]
async fn a_secret_without_the_sink_label_is_not_used() {
    let ns = env().namespace("notify-label").await.unwrap();
    let admin = env().admin().await.unwrap();
    let (unlabelled, labelled) = (TestSink::start().await, TestSink::start().await);
    sink_secret(&admin, &ns, "not-a-sink", &unlabelled.url, None, false).await;
    sink_secret(&admin, &ns, "oz-notifications", &labelled.url, None, true).await;
    let metrics = NotifyMetrics::default();
    let notifier = notifier(admin, &ns, &metrics);

    notifier.send(notice(&ns, "r1", NoticeKind::Ready, &["not-a-sink"]));
    labelled.wait_for(1, "the labelled sink's notice").await;
    // The refusal is counted before the other sinks are handed the notice.
    assert_eq!(metrics.dead_lettered_count("invalid_sink"), 1);
    notifier.send(notice(&ns, "r2", NoticeKind::Ready, &["not-a-sink"]));
    labelled.wait_for(2, "the second notice").await;
    assert_eq!(metrics.dead_lettered_count("invalid_sink"), 2);
    assert_eq!(unlabelled.state.attempts.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_slack_sink_gets_a_text_message() {
    let ns = env().namespace("notify-slack").await.unwrap();
    let admin = env().admin().await.unwrap();
    let slack = TestSink::start().await;
    sink_secret(&admin, &ns, "slack", &slack.url, Some("Slack"), true).await;
    let metrics = NotifyMetrics::default();
    let notifier = notifier(admin, &ns, &metrics);

    let mut denied = notice(&ns, "r1", NoticeKind::Denied, &["slack"]);
    denied.message = "denied by bob: not during the freeze".into();
    notifier.send(denied);
    let received = slack.wait_for(1, "the Slack message").await;
    assert_eq!(received[0].content_type, "application/json");
    let body = received[0].body.as_object().unwrap();
    assert_eq!(body.keys().collect::<Vec<_>>(), ["text"], "{body:?}");
    let text = body["text"].as_str().unwrap();
    assert!(text.starts_with("Denied: ExecAccessRequest "), "{text}");
    assert!(text.contains(&format!("{ns}/r1 by alice")), "{text}");
    assert!(
        text.contains("denied by bob: not during the freeze"),
        "{text}"
    );
    assert!(text.contains("Reason: INC-7"), "{text}");
}

/// Grants the test's oz (user `oz-operator`) in `ns` what the install grants it on Secrets
/// (`oz_notifications_verbs` on the name `oz-notifications`), plus `get` on `team-sink`, as a
/// template's owner would (docs/approvals.md).
async fn grant_operator_secrets(admin: &Client, ns: &str, oz_notifications_verbs: &[&str]) {
    let named = |name: &str, verbs: &[&str]| PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec!["secrets".into()]),
        resource_names: Some(vec![name.into()]),
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        ..Default::default()
    };
    grant(
        admin,
        ns,
        "oz-reads-sinks",
        vec![
            named(NAMESPACE_SINK_SECRET, oz_notifications_verbs),
            named("team-sink", &["get"]),
        ],
        vec![subject("User", "oz-operator")],
    )
    .await;
}

/// oz's notifier, as user `oz-operator`, in a namespace of its own: a template's sink
/// `team-sink` exists there, the namespace's sink not yet.
struct SinkLookups {
    admin: Client,
    ns: String,
    notifier: Notifier,
    metrics: NotifyMetrics,
    team: TestSink,
    namespace_sink: TestSink,
}

impl SinkLookups {
    /// With `oz_notifications_verbs` on the namespace's sink's name, and sink answers kept for
    /// `ttl`.
    async fn start(prefix: &str, oz_notifications_verbs: &[&str], ttl: Duration) -> Self {
        let ns = env().namespace(prefix).await.unwrap();
        let admin = env().admin().await.unwrap();
        grant_operator_secrets(&admin, &ns, oz_notifications_verbs).await;
        let (team, namespace_sink) = (TestSink::start().await, TestSink::start().await);
        sink_secret(&admin, &ns, "team-sink", &team.url, None, true).await;
        let metrics = NotifyMetrics::default();
        let oz = env().client_as("oz-operator").await.unwrap();
        let notifier = notifier_with(oz, &ns, &metrics, ttl);
        Self {
            admin,
            ns,
            notifier,
            metrics,
            team,
            namespace_sink,
        }
    }

    /// Sends 20 notices naming `team-sink` and waits until it has them all.
    async fn burst(&self) {
        const BURST: usize = 20;
        for i in 0..BURST {
            self.notifier.send(notice(
                &self.ns,
                &format!("r{i}"),
                NoticeKind::Ready,
                &["team-sink"],
            ));
        }
        self.team.wait_for(BURST, "the burst").await;
    }

    /// Creates the namespace's sink, then sends notices until it has one.
    async fn namespace_sink_created(&self, timeout: Duration) {
        sink_secret(
            &self.admin,
            &self.ns,
            NAMESPACE_SINK_SECRET,
            &self.namespace_sink.url,
            None,
            true,
        )
        .await;
        let mut next = 0;
        eventually(timeout, "the namespace sink created later", || {
            next += 1;
            self.notifier.send(notice(
                &self.ns,
                &format!("later{next}"),
                NoticeKind::Ready,
                &["team-sink"],
            ));
            let got = self.namespace_sink.accepted().len();
            async move { (got > 0).then_some(()) }
        })
        .await;
    }
}

#[tokio::test]
async fn under_the_installs_rbac_the_namespace_sink_is_watched_and_costs_no_get() {
    let install_verbs: Vec<String> = watched_namespace_rules(&InstallOptions::default())
        .into_iter()
        .map(|r| r.rule)
        .find(|r| {
            r.resource_names
                .iter()
                .flatten()
                .any(|n| n == NAMESPACE_SINK_SECRET)
        })
        .expect("the install grants oz the namespace sink")
        .verbs;
    let install_verbs: Vec<&str> = install_verbs.iter().map(String::as_str).collect();
    // An hour: a missing Secret read by GET would stay missing for the whole test, so the
    // namespace sink created below can only be seen through the watch.
    let t = SinkLookups::start("notify-watch", &install_verbs, Duration::from_secs(3600)).await;

    t.burst().await;
    // One GET, for the template's Secret; the namespace's, missing, is known from the watch.
    assert_eq!(t.metrics.sink_lookups.get(), 1);
    t.namespace_sink_created(WAIT).await;
    assert_eq!(t.metrics.sink_lookups.get(), 1);
}

#[tokio::test]
async fn with_get_only_the_namespace_sink_is_read_once_per_ttl_and_found_when_created() {
    // An older install's RBAC: the watch is refused, and the notifier reads the Secret instead.
    // The TTL is long enough that the burst fits in one on a loaded machine, short enough to
    // wait out.
    let ttl = Duration::from_secs(20);
    let t = SinkLookups::start("notify-get", &["get"], ttl).await;

    t.burst().await;
    // One GET for the template's Secret, one for the missing oz-notifications: not one per
    // notice.
    assert_eq!(t.metrics.sink_lookups.get(), 2);
    // The missing namespace sink is remembered as missing only for the TTL.
    t.namespace_sink_created(WAIT + ttl).await;
}
