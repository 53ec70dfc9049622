//! The approval webhooks: who decided stamped on create, then each decision validated.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use oz_api::AccessApproval;

use super::*;
use oz_platform::registration::{MUTATE_APPROVALS_PATH, VALIDATE_APPROVALS_PATH};

/// Template `gated`: devs request, leads or ops decide. `glass`: the same, with breakGlass.
/// `selfish`: devs decide, their own requests included.
fn approval_lookup() -> FakeLookup {
    let gated = |approval: Value| {
        let mut config = access_config(&["devs"], None);
        config.approval = Some(serde_json::from_value(approval).unwrap());
        config
    };
    FakeLookup::default()
        .with_template(AccessKind::Exec, "web", access_config(&["devs"], None))
        .with_template(
            AccessKind::Exec,
            "gated",
            gated(json!({"approverGroups": ["leads", "ops"]})),
        )
        .with_template(
            AccessKind::Exec,
            "glass",
            gated(json!({"approverGroups": ["leads", "ops"], "breakGlass": true})),
        )
        .with_template(
            AccessKind::Exec,
            "selfish",
            gated(json!({"approverGroups": ["devs"], "allowSelfApproval": true})),
        )
        .with_request_state(waiting("r", "gated"))
        .with_request_state(waiting("g", "glass"))
        .with_request_state(waiting("s", "selfish"))
        .with_request_state(waiting("open", "web"))
        .with_template(AccessKind::Exec, "shared", {
            let mut config = access_config(&["devs"], Some("AllowedGroups"));
            config.approval =
                Some(serde_json::from_value(json!({"approverGroups": ["leads"]})).unwrap());
            config
        })
        .with_request_state(waiting("sh", "shared"))
}

/// alice's request `name` through `template`, waiting for approval.
fn waiting(name: &str, template: &str) -> RequestState {
    RequestState {
        kind: AccessKind::Exec,
        name: name.into(),
        uid: Some(format!("uid-{name}")),
        template: template.into(),
        requester: Some(Requester {
            username: "alice".into(),
            uid: Some("alice-uid".into()),
            groups: vec!["devs".into(), "system:authenticated".into()],
        }),
        phase: Some(RequestPhase::PendingApproval),
        approved_at: None,
        extension_asks: 0,
        extensions: Vec::new(),
    }
}

fn approval(name: &str, request: &str, decision: &str, comment: Option<&str>) -> Value {
    let mut spec = json!({
        "requestRef": {"kind": "ExecAccessRequest", "name": request},
        "decision": decision,
    });
    if let Some(comment) = comment {
        spec["comment"] = json!(comment);
    }
    json!({
        "apiVersion": "crds.wizardofoz.co/v1alpha1",
        "kind": "AccessApproval",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    })
}

fn approval_review(operation: &str, user_info: Value, object: Value, old: Value) -> Value {
    let mut review = request_review("AccessApproval", operation, user_info, object, old);
    review["request"]["name"] = review["request"]["object"]["metadata"]["name"].clone();
    review
}

/// Applies the response's JSON patch to `object`.
fn patched(object: &Value, response: &Value) -> Value {
    assert_eq!(response["allowed"], true, "{response}");
    let bytes: Vec<u8> = serde_json::from_value(response["patch"].clone()).unwrap();
    let patch: json_patch::Patch = serde_json::from_slice(&bytes).unwrap();
    let mut object = object.clone();
    json_patch::patch(&mut object, &patch).unwrap();
    object
}

/// `object` created by `who` as the apiserver would store it: through the mutating webhook.
async fn mutated(h: &Harness, who: &Value, object: Value) -> Value {
    let review = approval_review("CREATE", who.clone(), object.clone(), Value::Null);
    patched(&object, &h.review(MUTATE_APPROVALS_PATH, review).await)
}

/// `object`, stamped by the mutating webhook as `who`, then validated; the response.
async fn decide(h: &Harness, who: Value, object: Value) -> Value {
    let stamped = mutated(h, &who, object).await;
    let review = approval_review("CREATE", who, stamped, Value::Null);
    h.review(VALIDATE_APPROVALS_PATH, review).await
}

fn bob() -> Value {
    user("bob", &["leads"])
}

fn alice() -> Value {
    user("alice", &["devs"])
}

fn refused(response: &Value) -> String {
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(response["status"]["code"], 403, "{response}");
    message(response)
}

// === Mutating: the approver, the request, break-glass, the owner ===

#[tokio::test]
async fn create_stamps_the_approver_the_request_uid_and_the_owner_over_forged_ones() {
    let h = harness(approval_lookup(), EnforceSettings::default()).await;
    let mut forged = approval("r-bob", "r", "Approve", None);
    forged["spec"]["approver"] = json!({"username": "admin", "groups": ["system:masters"]});
    forged["spec"]["requestUid"] = json!("someone-elses");
    forged["spec"]["breakGlass"] = json!(true);
    let other_owner =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "keep", "uid": "cm-uid"});
    forged["metadata"]["ownerReferences"] = json!([
        other_owner,
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "forged", "uid": "uid-r"},
    ]);
    let object = mutated(&h, &bob(), forged).await;
    assert_eq!(
        object["spec"]["approver"],
        json!({"username": "bob", "uid": "bob-uid", "groups": ["leads", "system:authenticated"]})
    );
    assert_eq!(object["spec"]["requestUid"], "uid-r");
    assert_eq!(object["spec"]["breakGlass"], false);
    assert_eq!(
        object["metadata"]["ownerReferences"],
        json!([other_owner, {
            "apiVersion": "crds.wizardofoz.co/v1alpha1", "kind": "ExecAccessRequest",
            "name": "r", "uid": "uid-r", "controller": false, "blockOwnerDeletion": false,
        }]),
        "the request replaces a reference forged with its uid; others are kept"
    );
    assert_eq!(object["spec"]["decision"], "Approve", "the rest is kept");
}

#[tokio::test]
async fn create_marks_only_the_requesters_own_approval_under_break_glass() {
    let h = harness(approval_lookup(), EnforceSettings::default()).await;
    let own = mutated(
        &h,
        &alice(),
        approval("g-alice", "g", "Approve", Some("pager")),
    )
    .await;
    assert_eq!(own["spec"]["breakGlass"], true);
    let bobs = mutated(&h, &bob(), approval("g-bob", "g", "Approve", None)).await;
    assert_eq!(
        bobs["spec"]["breakGlass"], false,
        "bob is not the requester"
    );
    let gated = mutated(&h, &alice(), approval("r-alice", "r", "Approve", None)).await;
    assert_eq!(
        gated["spec"]["breakGlass"], false,
        "gated has no breakGlass"
    );
}

#[tokio::test]
async fn create_on_a_missing_request_is_refused_naming_it() {
    let h = harness(approval_lookup(), EnforceSettings::default()).await;
    let review = approval_review(
        "CREATE",
        bob(),
        approval("x", "nope", "Approve", None),
        Value::Null,
    );
    let response = h.review(MUTATE_APPROVALS_PATH, review).await;
    assert_eq!(
        refused(&response),
        "spec.requestRef.name: ExecAccessRequest \"nope\" does not exist in namespace \"team-a\""
    );
}

// === Validating: who may decide ===

#[tokio::test]
async fn an_approver_may_approve_and_deny_with_a_comment() {
    let h = harness(approval_lookup(), EnforceSettings::default()).await;
    let response = decide(&h, bob(), approval("r-bob", "r", "Approve", None)).await;
    assert_eq!(response["allowed"], true, "{response}");
    let response = decide(&h, bob(), approval("r-bob", "r", "Deny", Some("not today"))).await;
    assert_eq!(response["allowed"], true, "{response}");
}

#[tokio::test]
async fn a_hand_written_approver_is_refused() {
    let h = harness(approval_lookup(), EnforceSettings::default()).await;
    let mut object = approval("r-bob", "r", "Approve", None);
    object["spec"]["approver"] = json!({"username": "admin", "groups": ["leads"]});
    object["spec"]["requestUid"] = json!("uid-r");
    let review = approval_review("CREATE", bob(), object, Value::Null);
    let message = refused(&h.review(VALIDATE_APPROVALS_PATH, review).await);
    assert!(
        message.starts_with("spec.approver: must be the user creating the approval (bob)"),
        "{message}"
    );
}

#[tokio::test]
async fn a_decision_on_a_recreated_request_is_refused() {
    let h = harness(approval_lookup(), EnforceSettings::default()).await;
    let mut object = mutated(&h, &bob(), approval("r-bob", "r", "Approve", None)).await;
    object["spec"]["requestUid"] = json!("uid-of-the-old-r");
    let review = approval_review("CREATE", bob(), object, Value::Null);
    let message = refused(&h.review(VALIDATE_APPROVALS_PATH, review).await);
    assert!(message.starts_with("spec.requestUid:"), "{message}");
}

#[tokio::test]
async fn the_requester_cannot_approve_their_own_request() {
    let h = harness(approval_lookup(), EnforceSettings::default()).await;
    let message = refused(&decide(&h, alice(), approval("r-alice", "r", "Approve", None)).await);
    assert_eq!(
        message,
        "you cannot approve your own request: ExecAccessTemplate \"gated\" does not \
         allowSelfApproval (and has no breakGlass); ask a member of leads, ops"
    );
    // Not even as a member of approverGroups.
    let leader = user("alice", &["devs", "leads"]);
    let message = refused(&decide(&h, leader, approval("r-alice", "r", "Approve", None)).await);
    assert!(
        message.starts_with("you cannot approve your own request"),
        "{message}"
    );
}

#[tokio::test]
async fn an_approver_the_grant_would_also_bind_cannot_approve_it() {
    // Template `shared` grants to its allowedGroups (devs): dave, a lead also in devs, would
    // grant himself access by approving alice's request.
    let h = harness(approval_lookup(), EnforceSettings::default()).await;
    let dave = user("dave", &["leads", "devs"]);
    let message =
        refused(&decide(&h, dave.clone(), approval("sh-dave", "sh", "Approve", None)).await);
    assert_eq!(
        message,
        "you cannot approve request \"sh\": ExecAccessTemplate \"shared\" grants to its \
         allowedGroups and you are in devs, so approving it would grant you access too, and it \
         does not allowSelfApproval; ask an approver outside its allowedGroups"
    );
    // He may still deny it, and a lead outside devs may approve it.
    let response = decide(&h, dave, approval("sh-dave", "sh", "Deny", Some("no"))).await;
    assert_eq!(response["allowed"], true, "{response}");
    let response = decide(&h, bob(), approval("sh-bob", "sh", "Approve", None)).await;
    assert_eq!(response["allowed"], true, "{response}");
}

#[tokio::test]
async fn allow_self_approval_lets_a_requester_who_is_an_approver_approve() {
    let h = harness(approval_lookup(), EnforceSettings::default()).await;
    let response = decide(&h, alice(), approval("s-alice", "s", "Approve", None)).await;
    assert_eq!(response["allowed"], true, "{response}");
}

#[tokio::test]
async fn someone_outside_approver_groups_cannot_decide() {
    let h = harness(approval_lookup(), EnforceSettings::default()).await;
    let carol = user("carol", &["devs"]);
    let message = refused(&decide(&h, carol, approval("r-carol", "r", "Approve", None)).await);
    assert_eq!(
        message,
        "carol is not in the template's approverGroups (leads, ops): only they may decide on \
         requests through ExecAccessTemplate \"gated\""
    );
}

#[tokio::test]
async fn a_deny_needs_a_comment() {
    let h = harness(approval_lookup(), EnforceSettings::default()).await;
    for comment in [None, Some("  ")] {
        let message = refused(&decide(&h, bob(), approval("r-bob", "r", "Deny", comment)).await);
        assert_eq!(
            message,
            "a Deny needs spec.comment: say why, for the requester"
        );
    }
}

#[tokio::test]
async fn break_glass_needs_a_comment_and_only_approves() {
    let h = harness(approval_lookup(), EnforceSettings::default()).await;
    let message = refused(&decide(&h, alice(), approval("g-alice", "g", "Approve", None)).await);
    assert_eq!(
        message,
        "a break-glass approval needs spec.comment: say why no approver could decide"
    );
    let response = decide(
        &h,
        alice(),
        approval("g-alice", "g", "Approve", Some("prod down, nobody on call")),
    )
    .await;
    assert_eq!(response["allowed"], true, "{response}");
    let message = refused(&decide(&h, alice(), approval("g-alice", "g", "Deny", Some("x"))).await);
    assert!(
        message.starts_with("you cannot deny your own request"),
        "{message}"
    );
}

#[tokio::test]
async fn a_hand_written_break_glass_is_refused() {
    let h = harness(approval_lookup(), EnforceSettings::default()).await;
    let mut object = mutated(&h, &bob(), approval("g-bob", "g", "Approve", Some("x"))).await;
    object["spec"]["breakGlass"] = json!(true);
    let review = approval_review("CREATE", bob(), object, Value::Null);
    let message = refused(&h.review(VALIDATE_APPROVALS_PATH, review).await);
    assert!(
        message.starts_with("spec.breakGlass: must be false"),
        "{message}"
    );
}

// === Validating: when a decision may be made ===

#[tokio::test]
async fn decisions_are_taken_only_while_the_request_waits() {
    for (phase, approved, expected) in [
        (
            Some(RequestPhase::Ready),
            false,
            "request \"r\" is already Ready",
        ),
        (
            Some(RequestPhase::Denied),
            false,
            "request \"r\" is already Denied",
        ),
        (
            Some(RequestPhase::Expired),
            false,
            "request \"r\" is already Expired",
        ),
        (
            Some(RequestPhase::Failed),
            false,
            "request \"r\" is already Failed",
        ),
        (
            Some(RequestPhase::Pending),
            true,
            "request \"r\" is already approved",
        ),
    ] {
        let mut state = waiting("r", "gated");
        state.phase = phase;
        if approved {
            state.approved_at = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        }
        let lookup = approval_lookup();
        lookup
            .request_states
            .lock()
            .unwrap()
            .retain(|r| r.name != "r");
        let h = harness(lookup.with_request_state(state), EnforceSettings::default()).await;
        let message = refused(&decide(&h, bob(), approval("r-bob", "r", "Approve", None)).await);
        assert_eq!(
            message,
            format!("{expected}: decisions are taken only while it waits for approval")
        );
    }
    // No status yet: the controller has not seen it, so it waits.
    let mut fresh = waiting("r", "gated");
    fresh.phase = None;
    let lookup = approval_lookup();
    lookup
        .request_states
        .lock()
        .unwrap()
        .retain(|r| r.name != "r");
    let h = harness(lookup.with_request_state(fresh), EnforceSettings::default()).await;
    let response = decide(&h, bob(), approval("r-bob", "r", "Approve", None)).await;
    assert_eq!(response["allowed"], true, "{response}");
}

#[tokio::test]
async fn a_template_without_approval_takes_no_decisions() {
    let h = harness(approval_lookup(), EnforceSettings::default()).await;
    let message = refused(&decide(&h, bob(), approval("o-bob", "open", "Approve", None)).await);
    assert_eq!(
        message,
        "spec.requestRef.name: ExecAccessTemplate \"web\" requires no approval: requests \
         through it are granted without decisions"
    );
}

/// bob's stored decision `name` on request `request` (uid `uid`).
fn stored(name: &str, uid: &str, deleting: bool) -> AccessApproval {
    let mut object = approval(name, "r", "Approve", None);
    object["spec"]["approver"] = json!({"username": "bob", "groups": ["leads"]});
    object["spec"]["requestUid"] = json!(uid);
    if deleting {
        object["metadata"]["deletionTimestamp"] = json!("2026-11-21T00:00:00Z");
    }
    serde_json::from_value(object).unwrap()
}

#[tokio::test]
async fn one_decision_per_person_and_request() {
    let lookup = approval_lookup().with_decision(stored("r-bob", "uid-r", false));
    let h = harness(lookup, EnforceSettings::default()).await;
    let message = refused(&decide(&h, bob(), approval("r-bob-2", "r", "Deny", Some("no"))).await);
    assert_eq!(
        message,
        "bob has already decided on request \"r\" (AccessApproval \"r-bob\"); delete that \
         decision to make another"
    );
    let dave = user("dave", &["ops"]);
    let response = decide(&h, dave, approval("r-dave", "r", "Approve", None)).await;
    assert_eq!(
        response["allowed"], true,
        "another approver still may: {response}"
    );

    // A withdrawn decision, or one on an earlier request of the same name, does not count.
    let lookup = approval_lookup()
        .with_decision(stored("r-bob", "uid-r", true))
        .with_decision(stored("r-bob-old", "uid-of-the-old-r", false));
    let h = harness(lookup, EnforceSettings::default()).await;
    let response = decide(&h, bob(), approval("r-bob-2", "r", "Approve", None)).await;
    assert_eq!(response["allowed"], true, "{response}");
}

#[tokio::test]
async fn an_unreadable_cluster_refuses_decisions() {
    let lookup = FakeLookup {
        broken: true,
        ..approval_lookup()
    };
    let h = harness(lookup, EnforceSettings::default()).await;
    let review = approval_review(
        "CREATE",
        bob(),
        approval("r-bob", "r", "Approve", None),
        Value::Null,
    );
    let message = refused(&h.review(MUTATE_APPROVALS_PATH, review).await);
    assert!(message.contains("could not read"), "{message}");
}

// === Validating: updates ===

#[tokio::test]
async fn a_decision_never_changes_but_its_metadata_may() {
    let h = harness(approval_lookup(), EnforceSettings::default()).await;
    let old = mutated(&h, &bob(), approval("r-bob", "r", "Approve", None)).await;
    let mut labelled = old.clone();
    labelled["metadata"]["labels"] = json!({"team": "payments"});
    let review = approval_review("UPDATE", bob(), labelled, old.clone());
    let response = h.review(VALIDATE_APPROVALS_PATH, review).await;
    assert_eq!(response["allowed"], true, "{response}");

    let mut changed = old.clone();
    changed["spec"]["decision"] = json!("Deny");
    let review = approval_review("UPDATE", bob(), changed, old);
    assert_eq!(
        refused(&h.review(VALIDATE_APPROVALS_PATH, review).await),
        "spec: a decision cannot be changed after it is made; delete it and make a new one"
    );
}

#[tokio::test]
async fn approval_webhooks_refuse_other_kinds() {
    let h = harness(approval_lookup(), EnforceSettings::default()).await;
    let review = create_review(
        "ExecAccessRequest",
        bob(),
        exec_request(json!({"templateName": "web"})),
    );
    for path in [MUTATE_APPROVALS_PATH, VALIDATE_APPROVALS_PATH] {
        let message = refused(&h.review(path, review.clone()).await);
        assert!(message.contains("only admit AccessApproval"), "{message}");
    }
}

// === Requests: reasonRequired ===

#[tokio::test]
async fn a_template_that_requires_a_reason_refuses_requests_without_one() {
    let mut config = access_config(&["devs"], None);
    config.approval = Some(
        serde_json::from_value(json!({"approverGroups": ["leads"], "reasonRequired": true}))
            .unwrap(),
    );
    let lookup = FakeLookup::default().with_template(AccessKind::Exec, "gated", config);
    let h = harness(lookup, EnforceSettings::default()).await;
    for spec in [
        json!({"templateName": "gated"}),
        json!({"templateName": "gated", "reason": " "}),
    ] {
        let response = create_as(&h, "alice", &["devs"], spec).await;
        assert_eq!(
            refused(&response),
            "spec.reason: ExecAccessTemplate \"gated\" requires a reason on each request: say \
             why you need access (ozctl create --reason TEXT)"
        );
    }
    let response = create_as(
        &h,
        "alice",
        &["devs"],
        json!({"templateName": "gated", "reason": "INC-42: checkout is down"}),
    )
    .await;
    assert_eq!(response["allowed"], true, "{response}");
}

#[tokio::test]
async fn an_extension_of_a_ready_grant_takes_decisions_of_its_own() {
    let with = |phase: RequestPhase, asks: usize, recorded: Option<oz_api::ExtensionPhase>| {
        let mut state = waiting("r", "gated");
        state.phase = Some(phase);
        state.approved_at = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        state.extension_asks = asks;
        state.extensions = recorded
            .map(|phase| {
                serde_json::from_value(json!([{
                    "number": 1, "by": "30m", "askedBy": "alice", "phase": phase,
                }]))
                .unwrap()
            })
            .unwrap_or_default();
        let lookup = approval_lookup();
        lookup
            .request_states
            .lock()
            .unwrap()
            .retain(|r| r.name != "r");
        lookup.with_request_state(state)
    };
    let on_extension = |number: u32| {
        let mut object = approval("r-extension-bob", "r", "Approve", None);
        object["spec"]["extension"] = json!(number);
        object
    };
    // Asked and waiting (recorded or not yet): bob decides on it.
    for recorded in [None, Some(oz_api::ExtensionPhase::PendingApproval)] {
        let h = harness(
            with(RequestPhase::Ready, 1, recorded),
            EnforceSettings::default(),
        )
        .await;
        let response = decide(&h, bob(), on_extension(1)).await;
        assert_eq!(response["allowed"], true, "{response}");
        // A decision on the request itself, Ready, points at the extension.
        let message = refused(&decide(&h, bob(), approval("r-bob", "r", "Approve", None)).await);
        assert!(message.contains("name it in spec.extension"), "{message}");
    }
    // No such ask, an ask already decided, a grant no longer in force: refused.
    let h = harness(
        with(RequestPhase::Ready, 1, None),
        EnforceSettings::default(),
    )
    .await;
    let message = refused(&decide(&h, bob(), on_extension(2)).await);
    assert!(message.contains("there is no number 2"), "{message}");
    let granted = with(
        RequestPhase::Ready,
        1,
        Some(oz_api::ExtensionPhase::Granted),
    );
    let h = harness(granted, EnforceSettings::default()).await;
    let message = refused(&decide(&h, bob(), on_extension(1)).await);
    assert!(
        message.contains("extension 1 of request \"r\" is already Granted"),
        "{message}"
    );
    let h = harness(
        with(RequestPhase::Expired, 1, None),
        EnforceSettings::default(),
    )
    .await;
    let message = refused(&decide(&h, bob(), on_extension(1)).await);
    assert!(message.contains("is not Ready"), "{message}");
    // alice may not approve her own extension (no self-approval, no break-glass).
    let h = harness(
        with(RequestPhase::Ready, 1, None),
        EnforceSettings::default(),
    )
    .await;
    let message = refused(&decide(&h, alice(), on_extension(1)).await);
    assert!(message.contains("your own request"), "{message}");
}

#[tokio::test]
async fn a_decision_on_a_locked_users_request_is_refused() {
    let group_lock = oz_api::AccessLock::new(
        "devs-freeze",
        serde_json::from_value(json!({"group": "devs", "namespace": NS, "reason": "freeze"}))
            .unwrap(),
    );
    let h = locked_harness(approval_lookup(), vec![group_lock]);
    let message = refused(&decide(&h, bob(), approval("r-bob", "r", "Approve", None)).await);
    assert!(
        message.ends_with("cannot be decided on now: locked by AccessLock devs-freeze: freeze"),
        "{message}"
    );
}
