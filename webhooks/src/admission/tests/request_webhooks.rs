//! The request webhooks: the requester stamped on create, then creates, updates and deletes
//! validated.

use super::*;

// === Mutating: the requester ===

/// Applies the response's JSON patch to `object`.
pub(super) fn patched(object: &Value, response: &Value) -> Value {
    assert_eq!(response["allowed"], true, "{response}");
    assert_eq!(response["patchType"], "JSONPatch");
    // kube-core sends the patch bytes as a JSON array of numbers, which the apiserver accepts.
    let bytes: Vec<u8> = serde_json::from_value(response["patch"].clone()).unwrap();
    let patch: json_patch::Patch = serde_json::from_slice(&bytes).unwrap();
    let mut object = object.clone();
    json_patch::patch(&mut object, &patch).unwrap();
    object
}

#[tokio::test]
async fn create_stamps_the_requester_over_a_forged_one() {
    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    let forged = exec_request(json!({
        "templateName": "web",
        "requester": {"username": "admin", "groups": ["system:masters"]},
    }));
    let review = create_review(
        "ExecAccessRequest",
        user("alice", &["devs"]),
        forged.clone(),
    );
    let response = h.review(MUTATE_REQUESTS_PATH, review).await;
    let object = patched(&forged, &response);
    assert_eq!(
        object["spec"]["requester"],
        json!({"username": "alice", "uid": "alice-uid", "groups": ["devs", "system:authenticated"]})
    );
    assert_eq!(object["spec"]["templateName"], "web", "the rest is kept");
}

#[tokio::test]
async fn create_stamps_the_requester_of_both_kinds_even_without_a_spec() {
    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    let bare = json!({"apiVersion": "crds.wizardofoz.co/v1alpha1", "kind": "PodAccessRequest", "metadata": {"name": "req"}});
    let review = create_review(
        "PodAccessRequest",
        json!({"username": "bob", "groups": ["qa"]}),
        bare.clone(),
    );
    let object = patched(&bare, &h.review(MUTATE_REQUESTS_PATH, review).await);
    assert_eq!(
        object["spec"]["requester"],
        json!({"username": "bob", "groups": ["qa"]}),
        "no uid is written when the authenticator gives none"
    );
}

#[tokio::test]
async fn mutation_leaves_updates_alone_and_refuses_anonymous_creates() {
    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    let object = exec_request(stamped(json!({"templateName": "web"}), "alice", &["devs"]));
    let update = update_review(user("bob", &["qa"]), object.clone(), object.clone());
    let response = h.review(MUTATE_REQUESTS_PATH, update).await;
    assert_eq!(response["allowed"], true);
    assert!(response.get("patch").is_none(), "{response}");

    let anonymous = create_review(
        "ExecAccessRequest",
        json!({"groups": ["system:unauthenticated"]}),
        object,
    );
    let response = h.review(MUTATE_REQUESTS_PATH, anonymous).await;
    assert_eq!(response["allowed"], false);
    assert!(
        message(&response).starts_with("spec.requester:"),
        "{response}"
    );
}

// === Validating: create ===

#[tokio::test]
async fn a_member_of_the_allowed_groups_may_create_a_request() {
    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    let response = create_as(
        &h,
        "alice",
        &["devs"],
        json!({"templateName": "web", "duration": "30m"}),
    )
    .await;
    assert_eq!(response["allowed"], true, "{response}");
    // No duration means the template's default.
    let response = create_as(&h, "alice", &["devs"], json!({"templateName": "web"})).await;
    assert_eq!(response["allowed"], true, "{response}");
    // Longer than maxDuration is clamped later, as in Oz, not refused.
    let response = create_as(
        &h,
        "alice",
        &["devs"],
        json!({"templateName": "web", "duration": "72h"}),
    )
    .await;
    assert_eq!(response["allowed"], true, "{response}");
}

#[tokio::test]
async fn a_request_for_a_missing_template_is_refused() {
    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    let create = |spec| create_from(&h, Some(apiserver()), "alice", &["devs"], spec);
    let response = create(json!({"templateName": "nope"})).await;
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 403);
    assert_eq!(
        message(&response),
        r#"spec.templateName: ExecAccessTemplate "nope" does not exist in namespace "team-a""#
    );
    // The template must be of the request's own family: "debug" is a PodAccessTemplate.
    let response = create(json!({"templateName": "debug"})).await;
    assert_eq!(response["allowed"], false);
    assert!(message(&response).contains(r#"ExecAccessTemplate "debug" does not exist"#));
}

#[tokio::test]
async fn an_unverified_caller_learns_nothing_of_which_templates_exist_or_whom_they_admit() {
    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    // A forged review (no client certificate): a missing template and one that does not admit
    // the user get one answer, naming neither the allowedGroups nor whether it exists.
    let missing = create_as(&h, "bob", &["qa"], json!({"templateName": "nope"})).await;
    let not_admitted = create_as(&h, "bob", &["qa"], json!({"templateName": "web"})).await;
    for (response, template) in [(&missing, "nope"), (&not_admitted, "web")] {
        assert_eq!(response["allowed"], false);
        assert_eq!(
            message(response),
            format!(
                "spec.templateName: ExecAccessTemplate {template:?} in namespace \"team-a\" does \
                 not exist or does not admit bob; list the templates you may use with `ozctl get \
                 templates -n team-a`, and ask whoever manages access there if yours is missing"
            )
        );
    }
    // What does not depend on the template is still said plainly.
    let response = create_as(
        &h,
        "alice",
        &["devs"],
        json!({"templateName": "web", "duration": "abc"}),
    )
    .await;
    assert!(message(&response).contains("duration"), "{response}");
}

#[tokio::test]
async fn a_user_outside_the_allowed_groups_is_refused() {
    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    let response = create_from(
        &h,
        Some(apiserver()),
        "bob",
        &["qa"],
        json!({"templateName": "web"}),
    )
    .await;
    assert_eq!(response["allowed"], false);
    let message = message(&response);
    assert!(
        message.starts_with("spec.requester: bob is not a member"),
        "{message}"
    );
    assert!(message.contains(r#"["devs"]"#), "{message}");
    assert!(message.contains(r#"ExecAccessTemplate "web""#), "{message}");
}

#[tokio::test]
async fn an_invalid_duration_is_refused_naming_the_field() {
    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    for duration in ["abc", "1d", "-5m"] {
        let response = create_as(
            &h,
            "alice",
            &["devs"],
            json!({"templateName": "web", "duration": duration}),
        )
        .await;
        assert_eq!(response["allowed"], false, "{duration}");
        assert!(
            message(&response).starts_with("spec.duration: "),
            "{response}"
        );
    }
}

#[tokio::test]
async fn a_start_further_ahead_than_the_templates_lead_time_is_refused() {
    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    let in_hours = |hours: i64| {
        let at = k8s_openapi::jiff::Timestamp::now()
            + k8s_openapi::jiff::SignedDuration::from_hours(hours);
        json!({"templateName": "web", "startAt": at.to_string()})
    };
    let soon = create_as(&h, "alice", &["devs"], in_hours(2)).await;
    assert_eq!(soon["allowed"], true, "{soon}");
    let far = create_as(&h, "alice", &["devs"], in_hours(48)).await;
    assert!(
        message(&far).starts_with("spec.startAt: ") && message(&far).contains("maxLeadTime (24h)"),
        "{far}"
    );
}

#[tokio::test]
async fn a_template_with_broken_durations_cannot_grant() {
    let mut broken = access_config(&["devs"], None);
    broken.default_duration = "3h".into();
    let h = harness(
        FakeLookup::default().with_template(AccessKind::Exec, "web", broken),
        EnforceSettings::default(),
    )
    .await;
    let response = create_as(&h, "alice", &["devs"], json!({"templateName": "web"})).await;
    assert_eq!(response["allowed"], false);
    assert!(
        message(&response)
            .starts_with(r#"spec.templateName: ExecAccessTemplate "web" cannot grant access"#),
        "{response}"
    );
}

#[tokio::test]
async fn a_requester_that_is_not_the_creator_is_refused() {
    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    // As if the mutating webhook had not run: the spec names someone else, or no one.
    for spec in [
        stamped(json!({"templateName": "web"}), "carol", &["devs"]),
        json!({"templateName": "web"}),
    ] {
        let review = create_review(
            "ExecAccessRequest",
            user("alice", &["devs"]),
            exec_request(spec),
        );
        let response = h.review(VALIDATE_REQUESTS_PATH, review).await;
        assert_eq!(response["allowed"], false);
        assert!(
            message(&response)
                .starts_with("spec.requester: must be the user creating the request (alice)"),
            "{response}"
        );
    }
}

#[tokio::test]
async fn creates_fail_closed_when_templates_cannot_be_read() {
    let mut lookup = standard_lookup();
    lookup.broken = true;
    let h = harness(lookup, EnforceSettings::default()).await;
    let response = create_as(&h, "alice", &["devs"], json!({"templateName": "web"})).await;
    assert_eq!(response["allowed"], false);
    assert!(
        message(&response).contains("the apiserver is away"),
        "{response}"
    );
}

#[tokio::test]
async fn pod_access_requests_are_checked_against_pod_access_templates() {
    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    let object = |who: &str, groups: &[&str]| {
        json!({
            "apiVersion": "crds.wizardofoz.co/v1alpha1",
            "kind": "PodAccessRequest",
            "metadata": {"name": "req"},
            "spec": stamped(json!({"templateName": "debug", "duration": "2h"}), who, groups),
        })
    };
    let alice = create_review(
        "PodAccessRequest",
        user("alice", &["devs"]),
        object("alice", &["devs"]),
    );
    assert_eq!(
        h.review(VALIDATE_REQUESTS_PATH, alice).await["allowed"],
        true
    );
    let bob = create_review(
        "PodAccessRequest",
        user("bob", &["qa"]),
        object("bob", &["qa"]),
    );
    let response = h.review(VALIDATE_REQUESTS_PATH, bob).await;
    assert_eq!(response["allowed"], false);
    assert!(
        message(&response).contains(r#"PodAccessTemplate "debug""#),
        "{response}"
    );
}

// === Validating: update ===

#[tokio::test]
async fn the_spec_of_a_request_cannot_change() {
    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    let old = exec_request(stamped(
        json!({"templateName": "web", "targetPod": "web-0", "duration": "1h"}),
        "alice",
        &["devs"],
    ));
    let update = |new: Value| update_review(user("alice", &["devs"]), new, old.clone());

    let mut longer = old.clone();
    longer["spec"]["duration"] = json!("9h");
    let response = h.review(VALIDATE_REQUESTS_PATH, update(longer)).await;
    assert_eq!(response["allowed"], false);
    assert_eq!(
        message(&response),
        "spec: a request cannot be changed after creation, only deleted"
    );

    let mut other_pod = old.clone();
    other_pod["spec"]["targetPod"] = json!("web-1");
    let response = h.review(VALIDATE_REQUESTS_PATH, update(other_pod)).await;
    assert_eq!(message(&response), requests::TARGET_POD_IMMUTABLE);

    let mut no_pod = old.clone();
    no_pod["spec"].as_object_mut().unwrap().remove("targetPod");
    let response = h.review(VALIDATE_REQUESTS_PATH, update(no_pod)).await;
    assert_eq!(message(&response), requests::TARGET_POD_IMMUTABLE);

    let mut takeover = old.clone();
    takeover["spec"]["requester"] = requester("bob", &["qa"]);
    let response = h.review(VALIDATE_REQUESTS_PATH, update(takeover)).await;
    assert_eq!(response["allowed"], false);
    assert!(
        message(&response).starts_with("spec.requester: "),
        "{response}"
    );
}

#[tokio::test]
async fn metadata_and_status_updates_are_allowed() {
    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    let old = exec_request(stamped(json!({"templateName": "web"}), "alice", &["devs"]));
    let mut owned = old.clone();
    owned["metadata"]["ownerReferences"] =
        json!([{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "1"}]);
    owned["status"] = json!({"phase": "Ready"});
    let review = update_review(user("system:serviceaccount:oz:oz", &[]), owned, old.clone());
    assert_eq!(
        h.review(VALIDATE_REQUESTS_PATH, review).await["allowed"],
        true
    );

    // The status subresource, should it ever be routed here.
    let mut changed = old.clone();
    changed["spec"]["duration"] = json!("9h");
    let mut status = update_review(user("alice", &["devs"]), changed, old.clone());
    status["request"]["subResource"] = json!("status");
    assert_eq!(
        h.review(VALIDATE_REQUESTS_PATH, status).await["allowed"],
        true
    );

    let delete = delete_review(user("alice", &["devs"]), old);
    assert_eq!(
        h.review(VALIDATE_REQUESTS_PATH, delete).await["allowed"],
        true
    );
}

#[tokio::test]
async fn only_the_requester_or_trusted_groups_may_delete_a_request() {
    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    let active = exec_request(stamped(json!({"templateName": "web"}), "alice", &["devs"]));
    let mut expired = active.clone();
    expired["status"] = json!({"phase": "Expired"});
    let delete = |who: Value, old: &Value| delete_review(who, old.clone());

    // The requester revokes her own access.
    let response = h
        .review(
            VALIDATE_REQUESTS_PATH,
            delete(user("alice", &["devs"]), &active),
        )
        .await;
    assert_eq!(response["allowed"], true);
    // Someone else may not, even from the same group.
    let response = h
        .review(
            VALIDATE_REQUESTS_PATH,
            delete(user("carol", &["devs"]), &active),
        )
        .await;
    assert_eq!(response["allowed"], false);
    assert!(
        message(&response).contains("only the requester (alice) or members of"),
        "{response}"
    );
    // An expired request is an access-review record: not even its requester erases it.
    let response = h
        .review(
            VALIDATE_REQUESTS_PATH,
            delete(user("alice", &["devs"]), &expired),
        )
        .await;
    assert_eq!(response["allowed"], false);
    assert!(
        message(&response).contains("kept as an access-review record"),
        "{response}"
    );
    // Administrators, the cluster's controllers and oz itself may delete anything.
    for trusted in [
        user("root", &["system:masters"]),
        user(
            "system:serviceaccount:kube-system:generic-garbage-collector",
            &["system:serviceaccounts:kube-system"],
        ),
        user(
            "system:serviceaccount:oz-system:oz-manager",
            &["system:serviceaccounts:oz-system"],
        ),
    ] {
        let response = h
            .review(VALIDATE_REQUESTS_PATH, delete(trusted.clone(), &expired))
            .await;
        assert_eq!(response["allowed"], true, "{trusted}");
    }
}

// === Extension asks ===

/// alice's Ready ExecAccessRequest through web (1h default of a 2h maximum), with `asks` in its
/// extension annotation and `records` as its `status.extensions`.
fn ready_with_asks(asks: Value, records: Value) -> Value {
    let mut request = exec_request(stamped(json!({"templateName": "web"}), "alice", &["devs"]));
    request["status"] = json!({"phase": "Ready", "extensions": records});
    if !asks.is_null() {
        request["metadata"]["annotations"] = json!({ oz_api::EXTEND_ANNOTATION: asks.to_string() });
    }
    request
}

async fn ask_as(h: &Harness, who: &str, old: &Value, new: &Value) -> Value {
    let review = update_review(user(who, &["devs"]), new.clone(), old.clone());
    h.review(VALIDATE_REQUESTS_PATH, review).await
}

#[tokio::test]
async fn the_requester_may_ask_for_more_time_on_a_ready_grant() {
    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    let old = ready_with_asks(Value::Null, json!([]));
    let asking = json!([{"by": "30m", "askedBy": "alice"}]);
    let new = ready_with_asks(asking.clone(), json!([]));
    let response = ask_as(&h, "alice", &old, &new).await;
    assert_eq!(response["allowed"], true, "{response}");

    // carol, in the same group, may not extend alice's grant, nor ask in alice's name.
    let response = ask_as(&h, "carol", &old, &new).await;
    assert!(message(&response).contains("askedBy: must be the user asking (carol)"));
    let as_carol = ready_with_asks(json!([{"by": "30m", "askedBy": "carol"}]), json!([]));
    let response = ask_as(&h, "carol", &old, &as_carol).await;
    assert!(
        message(&response).contains("only the requester (alice) may extend"),
        "{response}"
    );
    // Not on a grant that is not in force.
    let mut expired = old.clone();
    expired["status"]["phase"] = json!("Expired");
    let response = ask_as(&h, "alice", &expired, &new).await;
    assert!(message(&response).contains("not Ready"), "{response}");
}

#[tokio::test]
async fn extension_asks_are_added_one_at_a_time_and_never_rewritten() {
    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    let granted =
        json!([{"number": 1, "by": "30m", "askedBy": "alice", "phase": "Granted", "added": "30m"}]);
    let one = json!([{"by": "30m", "askedBy": "alice"}]);
    let old = ready_with_asks(one.clone(), granted.clone());
    // Rewriting the first ask to 2h, or removing the annotation: refused.
    let rewritten = ready_with_asks(json!([{"by": "2h", "askedBy": "alice"}]), granted.clone());
    let response = ask_as(&h, "alice", &old, &rewritten).await;
    assert!(
        message(&response).contains("earlier asks cannot be changed or removed"),
        "{response}"
    );
    let removed = ready_with_asks(Value::Null, granted.clone());
    let response = ask_as(&h, "alice", &old, &removed).await;
    assert!(
        message(&response).contains("cannot be removed"),
        "{response}"
    );
    // Two at once: refused.
    let two = json!([{"by": "30m", "askedBy": "alice"}, {"by": "10m", "askedBy": "alice"}, {"by": "10m", "askedBy": "alice"}]);
    let response = ask_as(&h, "alice", &old, &ready_with_asks(two, granted.clone())).await;
    assert_eq!(response["allowed"], false, "{response}");
    // A second ask within the 2h maximum: allowed; past it (1h + 30m + 30m = 2h): refused.
    let second = json!([{"by": "30m", "askedBy": "alice"}, {"by": "20m", "askedBy": "alice"}]);
    let response = ask_as(&h, "alice", &old, &ready_with_asks(second.clone(), granted)).await;
    assert_eq!(response["allowed"], true, "{response}");
    let full =
        json!([{"number": 1, "by": "1h", "askedBy": "alice", "phase": "Granted", "added": "1h"}]);
    let old = ready_with_asks(one, full.clone());
    let response = ask_as(&h, "alice", &old, &ready_with_asks(second, full)).await;
    assert!(
        message(&response).contains("already lasts the template's maxDuration (2h0m0s)"),
        "{response}"
    );
}

// === Locks ===

fn lock(name: &str, spec: Value) -> oz_api::AccessLock {
    oz_api::AccessLock::new(name, serde_json::from_value(spec).unwrap())
}

#[tokio::test]
async fn a_locked_user_is_refused_new_requests_with_the_locks_reason() {
    let locks = vec![
        lock(
            "incident-7",
            json!({"user": "alice", "reason": "incident 7: credentials leaked"}),
        ),
        lock(
            "old",
            json!({"user": "carol", "reason": "over", "expiresAt": "2020-01-01T00:00:00Z"}),
        ),
    ];
    let h = locked_harness(standard_lookup(), locks);
    let response = create_as(&h, "alice", &["devs"], json!({"templateName": "web"})).await;
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(
        message(&response),
        "spec.requester: alice may not be granted access here now: locked by AccessLock \
         incident-7: incident 7: credentials leaked"
    );
    // carol's lock has ended; bob is not locked.
    let carols = create_as(&h, "carol", &["devs"], json!({"templateName": "web"})).await;
    assert_eq!(carols["allowed"], true, "{carols}");
}

// === Limits ===

/// alice's CREATE of request `name` through `template`, stamped.
fn alice_creates(name: &str, template: &str) -> Value {
    let mut review = create_review(
        "ExecAccessRequest",
        user("alice", &["devs"]),
        exec_request(stamped(
            json!({"templateName": template}),
            "alice",
            &["devs"],
        )),
    );
    review["request"]["name"] = json!(name);
    review["request"]["object"]["metadata"]["name"] = json!(name);
    review
}

#[tokio::test]
async fn a_request_over_the_templates_limit_is_refused_even_when_two_race() {
    let mut one_each = access_config(&["devs"], None);
    one_each.max_grants_per_user = Some(1);
    let lookup = standard_lookup().with_template(AccessKind::Exec, "limited", one_each);
    let h = harness(lookup, EnforceSettings::default()).await;
    // Two at once for the last place: one is admitted, the other refused with the limit named.
    let (a, b) = tokio::join!(
        h.review(VALIDATE_REQUESTS_PATH, alice_creates("a", "limited")),
        h.review(VALIDATE_REQUESTS_PATH, alice_creates("b", "limited")),
    );
    let allowed = [&a, &b].iter().filter(|r| r["allowed"] == true).count();
    assert_eq!(allowed, 1, "{a}\n{b}");
    let refused = if a["allowed"] == true { &b } else { &a };
    assert!(
        message(refused).contains("accessConfig.maxGrantsPerUser (1)"),
        "{refused}"
    );
    // A third later, too; an unlimited template is not affected.
    let c = h
        .review(VALIDATE_REQUESTS_PATH, alice_creates("c", "limited"))
        .await;
    assert_eq!(c["allowed"], false, "{c}");
    let web = h
        .review(VALIDATE_REQUESTS_PATH, alice_creates("d", "web"))
        .await;
    assert_eq!(web["allowed"], true, "{web}");
}

#[tokio::test]
async fn one_user_holds_at_most_the_cap_across_templates() {
    // alice holds a Ready grant through web already; the cap is 2 across every template.
    let lookup = standard_lookup().with_request(super::audit_webhook::ready(
        AccessKind::Exec,
        "alices",
        "web",
        "alice",
    ));
    let h = capped_harness(lookup, 2);
    let second = h
        .review(VALIDATE_REQUESTS_PATH, alice_creates("second", "web"))
        .await;
    assert_eq!(second["allowed"], true, "{second}");
    // The third, through another template, is over the cap (the second counted from this
    // replica's own admissions, before any cache shows it).
    let mut third = alice_creates("third", "debug");
    third["request"]["kind"]["kind"] = json!("PodAccessRequest");
    third["request"]["object"]["kind"] = json!("PodAccessRequest");
    let third = h.review(VALIDATE_REQUESTS_PATH, third).await;
    assert_eq!(
        message(&third),
        "spec.requester: alice already holds 2 grants, the most oz lets one person hold at once \
         (--max-grants-per-user 2); end one (ozctl revoke) or wait for one to end"
    );
    // bob is not alice.
    let mut bobs = alice_creates("bobs", "web");
    bobs["request"]["userInfo"] = user("carol", &["devs"]);
    bobs["request"]["object"]["spec"]["requester"] = requester("carol", &["devs"]);
    let bobs = h.review(VALIDATE_REQUESTS_PATH, bobs).await;
    assert_eq!(bobs["allowed"], true, "{bobs}");
}
