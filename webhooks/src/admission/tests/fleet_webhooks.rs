//! A fleet spoke's rules (`--fleet-hub-user`): the hub's templates are written by the hub's
//! credential alone, which writes nothing else; requests through them come from the hub alone,
//! with its attestation; `spec.forwarded` from nobody else.

use super::{request_webhooks::patched, *};
use oz_api::{HUB_MANAGED_LABEL, PrefixMap};
use oz_platform::registration::VALIDATE_TEMPLATES_PATH;

/// The hub's credential on the spoke, as `oz::install::fleet::hub_user` names it.
const HUB_USER: &str = "system:serviceaccount:oz-system:oz-fleet-hub";
/// The hub's name, on its copies' label.
const HUB: &str = "hub-1";

/// The hub's credential, as the apiserver authenticates a ServiceAccount.
fn hub() -> Value {
    json!({
        "username": HUB_USER,
        "uid": "hub-sa-uid",
        "groups": ["system:serviceaccounts", "system:serviceaccounts:oz-system", "system:authenticated"],
    })
}

/// The standard templates (the spoke's own), and the hub's copies `fleet-web` (exec) and
/// `fleet-debug` (pod), both for devs.
fn spoke_lookup() -> FakeLookup {
    standard_lookup()
        .with_hub_template(
            AccessKind::Exec,
            "fleet-web",
            access_config(&["devs"], None),
            HUB,
        )
        .with_hub_template(
            AccessKind::Pod,
            "fleet-debug",
            access_config(&["devs"], None),
            HUB,
        )
}

async fn spoke() -> Harness {
    spoke_harness(spoke_lookup(), EnforceSettings::default(), HUB_USER).await
}

// === Templates ===

/// An ExecAccessTemplate `web` in [`NS`], labelled as hub `hub`'s copy if given.
fn template(hub: Option<&str>) -> Value {
    let mut template = json!({
        "apiVersion": "crds.wizardofoz.co/v1alpha1",
        "kind": "ExecAccessTemplate",
        "metadata": {"name": "web", "namespace": NS},
        "spec": {
            "controllerTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "accessConfig": {"allowedGroups": ["devs"], "defaultDuration": "1h", "maxDuration": "2h"},
        },
    });
    if let Some(hub) = hub {
        template["metadata"]["labels"] = json!({ HUB_MANAGED_LABEL: hub });
    }
    template
}

/// `operation` of template `web` by `user_info`, from `old` to `new`.
fn template_write(
    operation: &str,
    user_info: Value,
    old: Option<Value>,
    new: Option<Value>,
) -> Value {
    let null = || Value::Null;
    let (new, old) = (new.unwrap_or_else(null), old.unwrap_or_else(null));
    let mut review = request_review("ExecAccessTemplate", operation, user_info, new, old);
    review["request"]["name"] = json!("web");
    review
}

/// `operation` of template `web` as it is in `before` and `after` (CREATE reads `after`,
/// DELETE `before`).
fn write_of(operation: &str, user_info: Value, before: Value, after: Value) -> Value {
    match operation {
        "CREATE" => template_write(operation, user_info, None, Some(after)),
        "DELETE" => template_write(operation, user_info, Some(before), None),
        _ => template_write(operation, user_info, Some(before), Some(after)),
    }
}

#[tokio::test]
async fn a_hub_managed_template_is_written_by_the_hub_alone() {
    let h = spoke().await;
    for operation in ["CREATE", "UPDATE", "DELETE"] {
        let copy = || template(Some(HUB));
        for someone in [user("alice", &["devs"]), user("root", &["system:masters"])] {
            let review = write_of(operation, someone.clone(), copy(), copy());
            let response = h.review(VALIDATE_TEMPLATES_PATH, review).await;
            assert_eq!(response["allowed"], false, "{operation} by {someone}");
            assert_eq!(response["status"]["code"], 403);
            let message = message(&response);
            assert!(
                message.contains(&format!("ExecAccessTemplate {NS}/web"))
                    && message.contains(r#"managed by fleet hub "hub-1""#)
                    && message.contains("change it on the hub"),
                "{message}"
            );
        }
        let review = write_of(operation, hub(), copy(), copy());
        let response = h.review(VALIDATE_TEMPLATES_PATH, review).await;
        assert_eq!(
            response["allowed"], true,
            "{operation} by the hub: {response}"
        );
    }
}

#[tokio::test]
async fn nobody_else_puts_the_label_on_a_template_or_takes_it_off() {
    let h = spoke().await;
    let alice = || user("alice", &["devs"]);
    let labelling = write_of("UPDATE", alice(), template(None), template(Some(HUB)));
    let unlabelling = write_of("UPDATE", alice(), template(Some(HUB)), template(None));
    let another_hub = write_of(
        "UPDATE",
        alice(),
        template(Some(HUB)),
        template(Some("hub-2")),
    );
    for review in [labelling, unlabelling, another_hub] {
        let response = h.review(VALIDATE_TEMPLATES_PATH, review).await;
        assert_eq!(response["allowed"], false, "{response}");
        assert!(
            message(&response).contains("managed by fleet hub"),
            "{response}"
        );
    }
    // The cluster's own templates are anyone's RBAC allows, as before.
    for operation in ["CREATE", "UPDATE", "DELETE"] {
        let review = write_of(operation, alice(), template(None), template(None));
        let response = h.review(VALIDATE_TEMPLATES_PATH, review).await;
        assert_eq!(response["allowed"], true, "{operation}: {response}");
    }
}

#[tokio::test]
async fn the_hubs_credential_writes_no_template_of_the_spokes_own() {
    let h = spoke().await;
    for operation in ["CREATE", "UPDATE", "DELETE"] {
        let review = write_of(operation, hub(), template(None), template(None));
        let response = h.review(VALIDATE_TEMPLATES_PATH, review).await;
        assert_eq!(response["allowed"], false, "{operation}: {response}");
        let message = message(&response);
        assert!(
            message.contains(HUB_USER)
                && message.contains("only hub-managed templates")
                && message.contains(&format!(
                    "ExecAccessTemplate {NS}/web is this cluster's own"
                )),
            "{message}"
        );
    }
    // Taking over one of the spoke's templates by labelling it is changing it.
    let labelling = write_of("UPDATE", hub(), template(None), template(Some(HUB)));
    let response = h.review(VALIDATE_TEMPLATES_PATH, labelling).await;
    assert_eq!(response["allowed"], false, "{response}");
    // Nor may it let go of one of its copies, which would become the spoke's own.
    let unlabelling = write_of("UPDATE", hub(), template(Some(HUB)), template(None));
    let response = h.review(VALIDATE_TEMPLATES_PATH, unlabelling).await;
    assert_eq!(response["allowed"], false, "{response}");
    assert!(
        message(&response).contains("may not remove the label"),
        "{response}"
    );
}

#[tokio::test]
async fn the_clusters_controllers_may_delete_a_hub_template_and_status_is_not_judged() {
    let h = spoke().await;
    // The namespace controller empties a namespace that is being deleted.
    let namespace_controller = user(
        "system:serviceaccount:kube-system:namespace-controller",
        &[
            "system:serviceaccounts",
            "system:serviceaccounts:kube-system",
        ],
    );
    let copy = || template(Some(HUB));
    let delete = write_of("DELETE", namespace_controller.clone(), copy(), copy());
    let response = h.review(VALIDATE_TEMPLATES_PATH, delete).await;
    assert_eq!(response["allowed"], true, "{response}");
    let update = write_of("UPDATE", namespace_controller, copy(), copy());
    let response = h.review(VALIDATE_TEMPLATES_PATH, update).await;
    assert_eq!(response["allowed"], false, "{response}");

    // oz's own status writes, on the hub's copies as on any template.
    let mut status = write_of(
        "UPDATE",
        user("system:serviceaccount:oz-system:oz", &[]),
        copy(),
        copy(),
    );
    status["request"]["subResource"] = json!("status");
    let response = h.review(VALIDATE_TEMPLATES_PATH, status).await;
    assert_eq!(response["allowed"], true, "{response}");
}

#[tokio::test]
async fn without_a_hub_a_labelled_template_is_like_any_other() {
    let h = harness(spoke_lookup(), EnforceSettings::default()).await;
    for operation in ["CREATE", "UPDATE", "DELETE"] {
        let review = write_of(
            operation,
            user("alice", &["devs"]),
            template(Some(HUB)),
            template(Some(HUB)),
        );
        let response = h.review(VALIDATE_TEMPLATES_PATH, review).await;
        assert_eq!(response["allowed"], true, "{operation}: {response}");
    }
}

#[tokio::test]
async fn where_access_is_enforced_the_template_admin_groups_still_decide() {
    let enforce = EnforceSettings {
        namespaces: BTreeSet::from([NS.to_string()]),
        template_writers: BTreeSet::from(["platform".to_string()]),
        ..EnforceSettings::default()
    };
    let h = spoke_harness(spoke_lookup(), enforce, HUB_USER).await;
    let copy = || template(Some(HUB));
    // The hub's credential is no template admin here: where exec needs a grant, writing a
    // template is granting access.
    let response = h
        .review(
            VALIDATE_TEMPLATES_PATH,
            write_of("UPDATE", hub(), copy(), copy()),
        )
        .await;
    assert_eq!(response["allowed"], false, "{response}");
    assert!(
        message(&response).contains("--template-admin-groups"),
        "{response}"
    );
    // A template admin writes the spoke's own, not the hub's.
    let paula = || user("paula", &["platform"]);
    let own = write_of("UPDATE", paula(), template(None), template(None));
    assert_eq!(
        h.review(VALIDATE_TEMPLATES_PATH, own).await["allowed"],
        true
    );
    let response = h
        .review(
            VALIDATE_TEMPLATES_PATH,
            write_of("UPDATE", paula(), copy(), copy()),
        )
        .await;
    assert_eq!(response["allowed"], false, "{response}");
    assert!(
        message(&response).contains("managed by fleet hub"),
        "{response}"
    );
}

// === Requests ===

/// What the hub attests about its request `alice-x1`, decided for spoke `spoke-1`.
fn forwarded() -> Value {
    json!({
        "hub": HUB, "cluster": "spoke-1", "requestName": "alice-x1", "requestUid": "uid-x1",
        "approvers": [{"approver": "bob", "at": "2026-11-21T00:00:00Z"}],
    })
}

/// The hub's request through `template`, for alice in devs.
fn hubs_request(template: &str) -> Value {
    exec_request(json!({
        "templateName": template,
        "requester": requester("alice", &["devs"]),
        "forwarded": forwarded(),
    }))
}

/// The CREATE of `object` by `user_info`, as the apiserver sends it to oz's mutating webhook,
/// then (unless refused) the object as patched to its validating one: the first refusal, or
/// validation's answer.
async fn create(h: &Harness, user_info: Value, object: Value) -> Value {
    let review = create_review("ExecAccessRequest", user_info.clone(), object.clone());
    let mutated = h.review(MUTATE_REQUESTS_PATH, review).await;
    if mutated["allowed"] != true {
        return mutated;
    }
    let object = match mutated.get("patch") {
        Some(_) => patched(&object, &mutated),
        None => object,
    };
    validate(h, user_info, object).await
}

/// Validates the CREATE of `object` by `user_info` alone, as if the mutating webhook had not
/// answered.
async fn validate(h: &Harness, user_info: Value, object: Value) -> Value {
    let review = create_review("ExecAccessRequest", user_info, object);
    h.review_from(Some(apiserver()), VALIDATE_REQUESTS_PATH, review)
        .await
}

#[tokio::test]
async fn only_the_hub_requests_access_through_a_hub_managed_template() {
    let h = spoke().await;
    let alices = exec_request(stamped(
        json!({"templateName": "fleet-web"}),
        "alice",
        &["devs"],
    ));
    let response = create(&h, user("alice", &["devs"]), alices).await;
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(
        message(&response),
        "spec.templateName: ExecAccessTemplate \"fleet-web\" is managed by fleet hub \"hub-1\": \
         request access on the hub (ozctl create exec fleet-web --fleet-cluster NAME)"
    );
    // Of both kinds.
    let object = json!({
        "apiVersion": "crds.wizardofoz.co/v1alpha1", "kind": "PodAccessRequest",
        "metadata": {"name": "req"},
        "spec": stamped(json!({"templateName": "fleet-debug"}), "alice", &["devs"]),
    });
    let review = create_review("PodAccessRequest", user("alice", &["devs"]), object);
    let response = h
        .review_from(Some(apiserver()), VALIDATE_REQUESTS_PATH, review)
        .await;
    assert!(
        message(&response).contains(r#"PodAccessTemplate "fleet-debug" is managed by fleet hub"#),
        "{response}"
    );

    let response = create(&h, hub(), hubs_request("fleet-web")).await;
    assert_eq!(response["allowed"], true, "{response}");
}

#[tokio::test]
async fn the_requester_the_hub_attests_is_kept_and_judged_by_the_allowed_groups() {
    let h = spoke().await;
    let request = hubs_request("fleet-web");
    let review = create_review("ExecAccessRequest", hub(), request.clone());
    let response = h.review(MUTATE_REQUESTS_PATH, review).await;
    assert_eq!(response["allowed"], true, "{response}");
    // The same names here as on the hub: the hub's requester, recorded as the hub's too.
    let admitted = patched(&request, &response);
    assert_eq!(admitted["spec"]["requester"], request["spec"]["requester"]);
    assert_eq!(
        admitted["spec"]["forwarded"]["requester"],
        request["spec"]["requester"]
    );

    // bob asked on the hub, but the spoke's copy admits devs alone.
    let mut bobs = request;
    bobs["spec"]["requester"] = requester("bob", &["qa"]);
    let response = create(&h, hub(), bobs).await;
    assert_eq!(response["allowed"], false, "{response}");
    assert!(
        message(&response)
            .starts_with("spec.requester: bob is not a member of any of the allowedGroups"),
        "{response}"
    );
}

#[tokio::test]
async fn a_hub_request_carries_who_asked_and_the_hubs_attestation() {
    let h = spoke().await;
    let with = |change: &dyn Fn(&mut Value)| {
        let mut request = hubs_request("fleet-web");
        change(&mut request["spec"]);
        request
    };
    let refused = [
        (
            with(&|s| drop(s.as_object_mut().unwrap().remove("requester"))),
            "spec.requester: required",
        ),
        (
            with(&|s| s["requester"]["username"] = json!("")),
            "spec.requester.username: must not be empty",
        ),
        (
            with(&|s| s["requester"] = json!({"username": HUB_USER})),
            "spec.requester: names the fleet hub's own credential",
        ),
        (
            with(&|s| drop(s.as_object_mut().unwrap().remove("forwarded"))),
            "spec.forwarded: required",
        ),
        (
            with(&|s| s["forwarded"]["hub"] = json!("hub-2")),
            r#"spec.forwarded.hub: must be "hub-1""#,
        ),
        (
            with(&|s| s["forwarded"]["cluster"] = json!("")),
            "spec.forwarded.cluster: must not be empty",
        ),
        (
            with(&|s| s["forwarded"]["requestName"] = json!(" ")),
            "spec.forwarded.requestName: must not be empty",
        ),
        (
            with(&|s| s["forwarded"]["requestUid"] = json!("")),
            "spec.forwarded.requestUid: must not be empty",
        ),
    ];
    for (request, expected) in refused {
        let response = create(&h, hub(), request).await;
        assert_eq!(response["allowed"], false, "{expected}: {response}");
        assert!(
            message(&response).starts_with(expected),
            "{expected}: {response}"
        );
    }
}

#[tokio::test]
async fn the_hubs_credential_requests_nothing_through_the_spokes_own_templates() {
    let h = spoke().await;
    let response = create(&h, hub(), hubs_request("web")).await;
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(
        message(&response),
        "spec.templateName: the fleet hub's credential creates requests only through \
         hub-managed templates; ExecAccessTemplate \"web\" is this cluster's own"
    );
    // The mutating webhook takes the hub's spec.requester whatever the template: it is
    // validation that refuses the hub's requests through the spoke's own.
    let review = create_review("ExecAccessRequest", hub(), hubs_request("web"));
    let response = h.review(MUTATE_REQUESTS_PATH, review).await;
    assert_eq!(response["allowed"], true, "{response}");
}

/// A spoke whose authenticator knows the hub's `hub-NAME` as `corp-NAME`, in groups alike
/// (`--fleet-user-prefix=hub-=corp-`, `--fleet-group-prefix=hub-=corp-`), with the hub's
/// copy `fleet-corp` for corp-devs.
async fn corp_spoke() -> Harness {
    let corp = PrefixMap::parse("--fleet-user-prefix", "hub-=corp-").unwrap();
    let names = FleetNames {
        users: Some(corp.clone()),
        groups: Some(corp),
    };
    let lookup = spoke_lookup().with_hub_template(
        AccessKind::Exec,
        "fleet-corp",
        access_config(&["corp-devs"], None),
        HUB,
    );
    naming_spoke_harness(lookup, EnforceSettings::default(), HUB_USER, names).await
}

/// The hub's request through `fleet-corp` for `name` in `groups` (hub names).
fn hubs_corp_request(name: &str, groups: &[&str]) -> Value {
    exec_request(json!({
        "templateName": "fleet-corp",
        "requester": requester(name, groups),
        "forwarded": forwarded(),
    }))
}

#[tokio::test]
async fn a_spoke_grants_the_hubs_requester_under_its_own_names_and_keeps_the_hubs() {
    let h = corp_spoke().await;
    let mut request = hubs_corp_request("hub-alice", &["hub-devs", "devs"]);
    // Whatever the hub writes as its own names is replaced by what it attests.
    request["spec"]["forwarded"]["requester"] = requester("hub-mallory", &["hub-devs"]);
    let review = create_review("ExecAccessRequest", hub(), request.clone());
    let response = h.review(MUTATE_REQUESTS_PATH, review).await;
    assert_eq!(response["allowed"], true, "{response}");
    let admitted = patched(&request, &response);
    assert_eq!(
        admitted["spec"]["requester"],
        json!({"username": "corp-alice", "groups": ["corp-devs", "system:authenticated"]}),
        "{admitted}"
    );
    assert_eq!(
        admitted["spec"]["forwarded"]["requester"],
        requester("hub-alice", &["hub-devs", "devs"])
    );
    let response = validate(&h, hub(), admitted.clone()).await;
    assert_eq!(response["allowed"], true, "{response}");

    // The copy's allowedGroups judge this cluster's names: corp-devs, not the hub's.
    let response = create(&h, hub(), hubs_corp_request("hub-bob", &["devs"])).await;
    assert!(
        message(&response).starts_with("spec.requester: corp-bob is not a member"),
        "{response}"
    );

    // Should the mutating webhook not have answered, nothing is granted under the hub's names.
    let response = validate(&h, hub(), request).await;
    assert!(
        message(&response).starts_with("spec.requester: must be the hub's requester"),
        "{response}"
    );
    let response = validate(&h, hub(), hubs_corp_request("hub-alice", &["hub-devs"])).await;
    assert!(
        message(&response).starts_with("spec.forwarded.requester: missing"),
        "{response}"
    );
}

#[tokio::test]
async fn a_hub_user_without_the_hubs_prefix_is_refused_naming_the_flag() {
    let h = corp_spoke().await;
    let response = create(&h, hub(), hubs_corp_request("alice", &["hub-devs"])).await;
    assert_eq!(response["allowed"], false, "{response}");
    let said = message(&response);
    assert!(
        said.starts_with(
            "spec.requester.username: the hub's user \"alice\" does not start with \"hub-\""
        ) && said.contains("--fleet-user-prefix=hub-=corp-"),
        "{response}"
    );
    // Validation says the same, should the mutating webhook not have answered.
    let mut unmapped = hubs_corp_request("alice", &["hub-devs"]);
    unmapped["spec"]["forwarded"]["requester"] = unmapped["spec"]["requester"].clone();
    let response = validate(&h, hub(), unmapped).await;
    assert_eq!(message(&response), said, "{response}");
}

#[tokio::test]
async fn nobody_but_the_hub_writes_spec_forwarded_even_without_a_hub() {
    let alices = || {
        let mut spec = stamped(json!({"templateName": "web"}), "alice", &["devs"]);
        spec["forwarded"] = forwarded();
        exec_request(spec)
    };
    let h = spoke().await;
    let response = create(&h, user("alice", &["devs"]), alices()).await;
    assert_eq!(response["allowed"], false, "{response}");
    assert!(
        message(&response).starts_with("spec.forwarded: records what a fleet hub attests")
            && message(&response).contains("only the fleet hub's credential writes it"),
        "{response}"
    );

    let h = harness(standard_lookup(), EnforceSettings::default()).await;
    let response = create(&h, user("alice", &["devs"]), alices()).await;
    assert_eq!(response["allowed"], false, "{response}");
    assert!(
        message(&response).contains("this cluster has no fleet hub"),
        "{response}"
    );
}

// === Deletes ===

/// The hub withdraws the live requests it made, and nothing else: not another's request, not
/// an ended one (the spoke's record), though its account is one of oz's namespace, whose
/// service accounts may otherwise delete anything.
#[test]
fn the_hub_deletes_only_the_live_requests_it_made() {
    use crate::admission::requests::{DeletePolicy, check_delete};
    let policy = DeletePolicy {
        fleet_hub_user: Some(HUB_USER.into()),
        ..DeletePolicy::new(["system:masters".to_string()], "oz-system")
    };
    let hub: k8s_openapi::api::authentication::v1::UserInfo =
        serde_json::from_value(hub()).unwrap();
    let request = |labelled: bool, forwarded: bool, phase: &str| {
        let mut request = json!({
            "metadata": {"name": "r", "namespace": NS},
            "spec": {"templateName": "fleet-web", "requester": {"username": "alice", "groups": ["devs"]}},
            "status": {"phase": phase},
        });
        if labelled {
            request["metadata"]["labels"] = json!({ HUB_MANAGED_LABEL: HUB });
        }
        if forwarded {
            request["spec"]["forwarded"] =
                json!({"hub": HUB, "cluster": "b", "requestName": "r", "requestUid": "u"});
        }
        request
    };
    assert_eq!(
        check_delete(Some(&request(true, true, "Ready")), &hub, &policy),
        Ok(())
    );
    for refused in [
        request(true, true, "Expired"),
        request(true, true, "Revoked"),
        request(false, false, "Ready"),
        request(true, false, "Ready"),
    ] {
        let why = check_delete(Some(&refused), &hub, &policy).unwrap_err();
        assert!(why.contains("only the live requests it made"), "{why}");
    }
    // Without a fleet, the same account is one of oz's namespace, trusted as before.
    let no_fleet = DeletePolicy::new(["system:masters".to_string()], "oz-system");
    assert_eq!(
        check_delete(Some(&request(false, false, "Expired")), &hub, &no_fleet),
        Ok(())
    );
}
