//! Approvals end to end, without the webhooks: a real oz-manager process against the real
//! control plane, with requests and AccessApprovals created by admin with `spec.requester`,
//! `spec.approver` and `spec.requestUid` filled in as oz's mutating webhook fills them. alice
//! (in devs) asks; bob, carol and dave (in leads) decide.
//!
//! Every test watches the namespace's oz-managed Roles and RoleBindings from before its request
//! exists, so "nothing granted" means none ever appeared, not none at the end.

use std::time::Duration;

use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::{
    Api, Resource, ResourceExt,
    api::{ListParams, Patch, PatchParams},
};
use oz_api::{AccessApproval, ExecAccessRequest, RequestPhase, condition_type};
use serde_json::json;

use crate::{
    notifications::{TestSink, events, of_request, sink_secret},
    support::{
        fixture::Fixture,
        manifests::create_manifest,
        operator::{http_get, metric_value},
        polling::{event_reasons_once, eventually},
    },
};

/// How long a wait for oz may take on a loaded machine.
const SETTLE: Duration = Duration::from_secs(60);

/// The approval tests' requests, decisions and what they waited for.
trait ApprovalsFixture {
    /// A namespace with Deployment `web` (1 ready pod), ExecAccessTemplate `web-exec` for devs
    /// (default 1h, max 2h) with the approval block given, a recorder of every grant object, and an
    /// oz-manager watching it.
    async fn new(prefix: &str, approval: &str) -> Fixture;

    fn requests(&self) -> Api<ExecAccessRequest>;

    /// alice's request `name`, as she gets it through the webhook.
    async fn request(&self, name: &str) -> ExecAccessRequest;

    /// `who`'s decision on `request`, as the webhook stamps it: alice is in devs, anyone
    /// else in leads.
    async fn decide(
        &self,
        name: &str,
        request: &ExecAccessRequest,
        who: &str,
        decision: &str,
        extra: &str,
    ) -> AccessApproval;

    /// Waits until request `name` is in a state `check` accepts.
    async fn wait_until(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&ExecAccessRequest) -> bool,
    ) -> ExecAccessRequest;

    async fn wait_for(&self, name: &str, phase: RequestPhase) -> ExecAccessRequest;

    /// The grant objects (Roles and RoleBindings, by kind/name) ever seen for `request`.
    fn grants_of(&self, request: &ExecAccessRequest) -> Vec<String>;

    /// The reasons of the Events about request `name`, once `reason` is among them.
    async fn events_once(&self, name: &str, reason: &str) -> Vec<String>;
}

impl ApprovalsFixture for Fixture {
    async fn new(prefix: &str, approval: &str) -> Fixture {
        let template = format!(
            "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessTemplate\nmetadata: {{name: web-exec}}\nspec:\n  \
             accessConfig:\n    allowedGroups: [devs]\n    defaultDuration: 1h\n    maxDuration: 2h\n    \
             approval: {approval}\n  \
             controllerTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: web}}\n"
        );
        Fixture::builder(prefix)
            .web(1)
            .manifest(template)
            .record_grants()
            .metrics()
            // Its test sinks listen on 127.0.0.1.
            .operator_args(&["--notifications-allow-sinks-in=loopback"])
            .start()
            .await
    }

    fn requests(&self) -> Api<ExecAccessRequest> {
        Api::namespaced(self.admin.clone(), &self.ns)
    }

    async fn request(&self, name: &str) -> ExecAccessRequest {
        let yaml = format!(
            "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessRequest\nmetadata: {{name: {name}}}\n\
             spec:\n  templateName: web-exec\n  reason: deploy is stuck\n  \
             requester: {{username: alice, groups: [devs, system:authenticated]}}\n"
        );
        create_manifest(&self.admin, &self.ns, &yaml).await.unwrap();
        self.requests().get(name).await.unwrap()
    }

    async fn decide(
        &self,
        name: &str,
        request: &ExecAccessRequest,
        who: &str,
        decision: &str,
        extra: &str,
    ) -> AccessApproval {
        let groups = match who {
            "alice" => "[devs, system:authenticated]",
            _ => "[leads, system:authenticated]",
        };
        let yaml = format!(
            "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: AccessApproval\nmetadata: {{name: {name}}}\n\
             spec:\n  requestRef: {{kind: ExecAccessRequest, name: {request}}}\n  decision: {decision}\n  \
             comment: {who} decided\n  approver: {{username: {who}, groups: {groups}}}\n  \
             requestUid: {uid}\n{extra}",
            request = request.name_any(),
            uid = request.uid().unwrap(),
        );
        create_manifest(&self.admin, &self.ns, &yaml).await.unwrap();
        Api::<AccessApproval>::namespaced(self.admin.clone(), &self.ns)
            .get(name)
            .await
            .unwrap()
    }

    async fn wait_until(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&ExecAccessRequest) -> bool,
    ) -> ExecAccessRequest {
        let requests = self.requests();
        let check = &check;
        eventually(
            SETTLE,
            &format!("{name}: {what} (log: {})", self.operator.log.display()),
            || {
                let requests = requests.clone();
                async move {
                    let request = requests.get(name).await.ok()?;
                    check(&request).then_some(request)
                }
            },
        )
        .await
    }

    async fn wait_for(&self, name: &str, phase: RequestPhase) -> ExecAccessRequest {
        self.wait_until(name, &format!("phase {phase:?}"), |r| {
            r.status.as_ref().and_then(|s| s.phase) == Some(phase)
        })
        .await
    }

    fn grants_of(&self, request: &ExecAccessRequest) -> Vec<String> {
        let prefix = format!("/{}-", request.name_any());
        self.recorded_grants()
            .lock()
            .unwrap()
            .iter()
            .filter(|g| g.contains(&prefix))
            .cloned()
            .collect()
    }

    async fn events_once(&self, name: &str, reason: &str) -> Vec<String> {
        event_reasons_once(&self.admin, &self.ns, name, reason, SETTLE).await
    }
}

fn condition<'a>(request: &'a ExecAccessRequest, type_: &str) -> &'a oz_api::Condition {
    request
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_() == type_)
        .unwrap_or_else(|| panic!("no {type_} condition: {request:?}"))
}

fn progress(request: &ExecAccessRequest) -> Option<&str> {
    request.status.as_ref()?.approval_progress.as_deref()
}

fn expires_at(request: &ExecAccessRequest) -> k8s_openapi::jiff::Timestamp {
    request
        .status
        .as_ref()
        .unwrap()
        .expires_at
        .as_ref()
        .unwrap()
        .0
}

fn approvers(request: &ExecAccessRequest) -> Vec<String> {
    request
        .status
        .as_ref()
        .map(|s| s.approvals.iter().map(|a| a.approver.clone()).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn two_of_three_approvers_grant_from_the_second_approval() {
    let f = Fixture::new("approvals-2of3", "{approverGroups: [leads], required: 2}").await;
    let request = f.request("two").await;
    let pending = f.wait_for("two", RequestPhase::PendingApproval).await;
    assert_eq!(progress(&pending), Some("0/2"));
    let approved = condition(&pending, condition_type::APPROVED);
    assert_eq!(
        (approved.status(), approved.reason()),
        ("False", "PendingApproval")
    );
    assert_eq!(
        approved.message,
        "0 of 2 approvals; waiting for a member of leads"
    );

    f.decide("bob-ok", &request, "bob", "Approve", "").await;
    let one = f
        .wait_until("two", "1 of 2 approvals counted", |r| {
            progress(r) == Some("1/2")
        })
        .await;
    assert_eq!(
        one.status.as_ref().unwrap().phase,
        Some(RequestPhase::PendingApproval)
    );
    assert!(one.status.as_ref().unwrap().expires_at.is_none());
    assert!(
        f.grants_of(&request).is_empty(),
        "one approval of two grants nothing"
    );

    let second = f.decide("carol-ok", &request, "carol", "Approve", "").await;
    let ready = f.wait_for("two", RequestPhase::Ready).await;
    let status = ready.status.as_ref().unwrap();
    let approved_at = status.approved_at.as_ref().unwrap().0;
    assert_eq!(
        approved_at,
        second.meta().creation_timestamp.as_ref().unwrap().0
    );
    let expires_at = status.expires_at.as_ref().unwrap().0;
    assert_eq!(
        expires_at.duration_since(approved_at).as_secs(),
        3600,
        "the window starts at approval (request created at {:?})",
        request.meta().creation_timestamp
    );
    assert_eq!(approvers(&ready), ["bob", "carol"]);
    assert_eq!(status.approval_progress.as_deref(), Some("2/2"));
    assert_eq!(condition(&ready, condition_type::APPROVED).status(), "True");
    assert!(status.ready);
    assert!(!f.grants_of(&request).is_empty());
}

#[tokio::test]
async fn a_deny_after_one_approval_ends_it_denied_with_nothing_ever_granted() {
    let f = Fixture::new("approvals-deny", "{approverGroups: [leads], required: 2}").await;
    let request = f.request("denied").await;
    f.decide("bob-ok", &request, "bob", "Approve", "").await;
    f.wait_until("denied", "1 of 2 approvals counted", |r| {
        progress(r) == Some("1/2")
    })
    .await;
    f.decide("carol-no", &request, "carol", "Deny", "").await;
    let denied = f.wait_for("denied", RequestPhase::Denied).await;
    let approved = condition(&denied, condition_type::APPROVED);
    assert_eq!((approved.status(), approved.reason()), ("False", "Denied"));
    assert_eq!(approved.message, "denied by carol: carol decided");
    f.events_once("denied", "Denied").await;
    // Denied is final: a later approval changes nothing.
    f.decide("dave-ok", &request, "dave", "Approve", "").await;
    assert!(
        f.grants_of(&request).is_empty(),
        "a denied request was granted: {:?}",
        f.grants_of(&request)
    );
    let still = f.requests().get("denied").await.unwrap();
    assert_eq!(still.status.unwrap().phase, Some(RequestPhase::Denied));
}

#[tokio::test]
async fn an_undecided_request_expires_after_its_pending_timeout() {
    let f = Fixture::new(
        "approvals-timeout",
        "{approverGroups: [leads], pendingTimeout: 3s}",
    )
    .await;
    let request = f.request("late").await;
    f.wait_for("late", RequestPhase::PendingApproval).await;
    let expired = f.wait_for("late", RequestPhase::Expired).await;
    let approved = condition(&expired, condition_type::APPROVED);
    assert_eq!((approved.status(), approved.reason()), ("False", "Timeout"));
    assert_eq!(approved.message, "no decision within pendingTimeout 3s");
    assert!(
        f.grants_of(&request).is_empty(),
        "{:?}",
        f.grants_of(&request)
    );
}

#[tokio::test]
async fn each_approver_counts_once_however_their_approvals_arrive() {
    let f = Fixture::new(
        "approvals-distinct",
        "{approverGroups: [leads], required: 2}",
    )
    .await;
    // Two approvers at once: both counted, once each.
    let both = f.request("both").await;
    futures::join!(
        f.decide("bob-ok", &both, "bob", "Approve", ""),
        f.decide("carol-ok", &both, "carol", "Approve", ""),
    );
    let ready = f.wait_for("both", RequestPhase::Ready).await;
    let mut who = approvers(&ready);
    who.sort();
    assert_eq!(who, ["bob", "carol"]);

    // One approver twice at once: counted once, so dave's approval is the second.
    let twice = f.request("twice").await;
    futures::join!(
        f.decide("bob-1", &twice, "bob", "Approve", ""),
        f.decide("bob-2", &twice, "bob", "Approve", ""),
    );
    let one = f
        .wait_until("twice", "bob's approval counted", |r| {
            progress(r) == Some("1/2")
        })
        .await;
    assert_eq!(
        one.status.unwrap().phase,
        Some(RequestPhase::PendingApproval)
    );
    f.decide("dave-ok", &twice, "dave", "Approve", "").await;
    let ready = f.wait_for("twice", RequestPhase::Ready).await;
    assert_eq!(approvers(&ready), ["bob", "dave"]);
}

#[tokio::test]
async fn an_approval_written_into_the_status_grants_nothing() {
    let f = Fixture::new("approvals-forged", "{approverGroups: [leads]}").await;
    let request = f.request("forged").await;
    let pending = f.wait_for("forged", RequestPhase::PendingApproval).await;
    let created = pending.meta().creation_timestamp.clone().unwrap();
    f.requests()
        .patch_status(
            "forged",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "approvedAt": created,
                "approvals": [{"approver": "mallory", "at": created, "name": "forged"}],
                "approvalProgress": "1/1",
            }})),
        )
        .await
        .unwrap();
    // The next reconcile puts the tally back.
    let back = f
        .wait_until("forged", "the forged approval undone", |r| {
            r.status
                .as_ref()
                .is_some_and(|s| s.approved_at.is_none() && s.approvals.is_empty())
        })
        .await;
    let status = back.status.unwrap();
    assert_eq!(status.phase, Some(RequestPhase::PendingApproval));
    assert_eq!(status.approval_progress.as_deref(), Some("0/1"));
    assert!(
        f.grants_of(&request).is_empty(),
        "{:?}",
        f.grants_of(&request)
    );
}

#[tokio::test]
async fn a_break_glass_self_approval_grants_at_once_and_is_announced() {
    let f = Fixture::new(
        "approvals-glass",
        "{approverGroups: [leads, devs], required: 2, breakGlass: true}",
    )
    .await;
    let request = f.request("glass").await;
    f.wait_for("glass", RequestPhase::PendingApproval).await;
    f.decide(
        "alice-glass",
        &request,
        "alice",
        "Approve",
        "  breakGlass: true\n",
    )
    .await;
    let ready = f.wait_for("glass", RequestPhase::Ready).await;
    let approved = condition(&ready, condition_type::APPROVED);
    assert_eq!(
        (approved.status(), approved.reason()),
        ("True", "BreakGlass")
    );
    assert_eq!(
        approved.message,
        "break-glass self-approval by alice: alice decided"
    );
    assert!(ready.status.as_ref().unwrap().approvals[0].break_glass);
    f.events_once("glass", "BreakGlass").await;
    let url = format!("http://127.0.0.1:{}/metrics", f.operator.metrics_port());
    let sample = "oz_break_glass_total{kind=\"ExecAccessRequest\"}";
    let count = eventually(SETTLE, "the break-glass metric", || {
        let url = url.clone();
        // Exported at 0 from the start: wait for the count, then check it counted once.
        async move { metric_value(&http_get(&url).await, sample).filter(|n| *n > 0.0) }
    })
    .await;
    assert_eq!(count, 1.0);
}

#[tokio::test]
async fn deleting_the_approval_of_a_granted_request_ends_it_denied_and_revoked() {
    let f = Fixture::new("approvals-withdrawn", "{approverGroups: [leads]}").await;
    let request = f.request("withdrawn").await;
    f.decide("bob-ok", &request, "bob", "Approve", "").await;
    f.wait_for("withdrawn", RequestPhase::Ready).await;
    assert!(!f.grants_of(&request).is_empty());
    Api::<AccessApproval>::namespaced(f.admin.clone(), &f.ns)
        .delete("bob-ok", &Default::default())
        .await
        .unwrap();
    let denied = f.wait_for("withdrawn", RequestPhase::Denied).await;
    let approved = condition(&denied, condition_type::APPROVED);
    assert_eq!((approved.status(), approved.reason()), ("False", "Denied"));
    assert_eq!(
        approved.message,
        "approval withdrawn: 0 of 1 approvals remain; the grant is revoked"
    );
    // Revoked before the status said Denied.
    let roles: Api<Role> = Api::namespaced(f.admin.clone(), &f.ns);
    let bindings: Api<RoleBinding> = Api::namespaced(f.admin.clone(), &f.ns);
    let managed = ListParams::default().labels("app.kubernetes.io/managed-by=oz");
    assert!(roles.list(&managed).await.unwrap().items.is_empty());
    assert!(bindings.list(&managed).await.unwrap().items.is_empty());
}

/// The controller's news of a request reaches the namespace's sink through a real oz-manager:
/// pendingapproval, approved and ready, once each and in that order, although the sink
/// refused (503) every POST until the request was already Ready: an outage delays the news,
/// never the grant.
#[tokio::test]
async fn news_of_a_request_reaches_the_namespace_sink_in_order_after_an_outage() {
    let sink = TestSink::start().await;
    sink.state
        .down
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let f = Fixture::new("approvals-news", "{approverGroups: [leads]}").await;
    sink_secret(&f.admin, &f.ns, "oz-notifications", &sink.url, None, true).await;

    let request = f.request("news").await;
    f.wait_for("news", RequestPhase::PendingApproval).await;
    eventually(
        SETTLE,
        "the sink to refuse the pendingapproval notice twice",
        || async {
            (sink
                .state
                .attempts
                .load(std::sync::atomic::Ordering::SeqCst)
                >= 2)
                .then_some(())
        },
    )
    .await;
    f.decide("bob-ok", &request, "bob", "Approve", "").await;
    f.wait_for("news", RequestPhase::Ready).await;
    assert!(sink.accepted().is_empty(), "the sink was down all along");

    sink.state
        .down
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let received = sink.wait_for(3, "the three notices after the outage").await;
    let subject = format!("{}/news", f.ns);
    assert_eq!(
        of_request(&events(&received), &subject)[..3],
        ["pendingapproval", "approved", "ready"],
        "{received:?}"
    );
    let ready = &received[2].body;
    assert_eq!(ready["id"], format!("{}.ready", request.uid().unwrap()));
    assert_eq!(ready["data"]["requester"], "alice");
    assert_eq!(ready["data"]["reason"], "deploy is stuck");
    assert_eq!(ready["data"]["approvers"], json!(["bob"]));
}

#[tokio::test]
async fn a_request_scheduled_ahead_is_approved_ahead_and_granted_exactly_its_window() {
    let f = Fixture::new("approvals-schedule", "{approverGroups: [leads]}").await;
    // Whole seconds: a Time is written to the second.
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    let start = k8s_openapi::jiff::Timestamp::from_second(now + 15).unwrap();
    let yaml = format!(
        "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessRequest\nmetadata: {{name: planned}}\n\
         spec:\n  templateName: web-exec\n  duration: 20s\n  startAt: {start}\n  \
         requester: {{username: alice, groups: [devs, system:authenticated]}}\n"
    );
    create_manifest(&f.admin, &f.ns, &yaml).await.unwrap();
    let request = f.requests().get("planned").await.unwrap();
    f.wait_for("planned", RequestPhase::PendingApproval).await;

    // Approved ahead: it waits for its start, granted nothing, its window fixed from the start.
    f.decide("bob-ok", &request, "bob", "Approve", "").await;
    let scheduled = f.wait_for("planned", RequestPhase::Scheduled).await;
    let status = scheduled.status.as_ref().unwrap();
    assert!(
        k8s_openapi::jiff::Timestamp::now() < start,
        "scheduled seen before the start"
    );
    let end = start + k8s_openapi::jiff::SignedDuration::from_secs(20);
    assert_eq!(status.expires_at.as_ref().unwrap().0, end);
    assert!(!status.ready);
    let started = condition(&scheduled, condition_type::ACCESS_STARTED);
    assert_eq!((started.status(), started.reason()), ("False", "Scheduled"));
    assert!(f.grants_of(&request).is_empty(), "nothing before the start");

    // At the start it is granted, on its timer: nothing was created before.
    let ready = f.wait_for("planned", RequestPhase::Ready).await;
    assert_eq!(expires_at(&ready), end);
    assert_eq!(
        condition(&ready, condition_type::ACCESS_STARTED).status(),
        "True"
    );
    let roles: Api<Role> = Api::namespaced(f.admin.clone(), &f.ns);
    let role = roles
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|r| r.owner_references().iter().any(|o| o.name == "planned"))
        .expect("the grant's Role");
    assert!(
        role.meta().creation_timestamp.as_ref().unwrap().0 >= start,
        "granted at {:?}, before its start {start}",
        role.meta().creation_timestamp
    );
    let expired = f.wait_for("planned", RequestPhase::Expired).await;
    assert_eq!(expires_at(&expired), end);
}
