//! Admission of ExecAccessRequests and PodAccessRequests.
//!
//! - Mutating ([`mutation`]): on CREATE, `spec.requester` is set from the AdmissionReview's
//!   userInfo, replacing whatever the user wrote; except from a fleet hub's credential, whose
//!   `spec.requester` is the hub's attestation of who asked on the hub, put into this cluster's
//!   names ([`super::fleet::requester_in_our_names`]).
//! - Validating ([`validation`]): a CREATE must name an existing template of the same family
//!   in the same namespace, come from a member of one of its allowedGroups, carry the requester
//!   the mutating webhook stamped, give `spec.reason` if the template's approval requires one,
//!   and have a valid duration (a too-long one is clamped later,
//!   as in Oz). On a fleet spoke, a hub-managed template takes requests from the hub's
//!   credential alone, with the hub's attestation ([`super::fleet`]). An UPDATE may change
//!   metadata and status, never the spec; an extension ask it adds is checked
//!   (`extensions.rs`).
//!
//! The CRD schema also makes the spec immutable; this is the same rule again, defence in depth
//! should the schema be replaced.
//!
//! A CREATE is checked on the request decoded into its kind's own type ([`parse_object`]).
//! UPDATE and DELETE read the stored JSON instead: an update is refused if its spec changes in
//! any way, fields this version of oz does not know included, and a delete must be judged even
//! for an object that no longer decodes (written by another version of oz).

use std::sync::Arc;

use axum::{Extension, Json, extract::State};
use json_patch::{AddOperation, Patch, PatchOperation, jsonptr::PointerBuf};
use k8s_openapi::jiff::Timestamp;
use k8s_openapi::{
    api::authentication::v1::UserInfo, apimachinery::pkg::apis::meta::v1::OwnerReference,
};
use kube::core::{
    DynamicObject,
    admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation},
};
use oz_api::{
    AccessConfig, AccessKind, AccessRequest, ExecAccessRequest, FleetNames, PodAccessRequest,
    Requester,
    duration::{DurationDecisionError, decide_access_duration},
};
use serde_json::{Value, json};
use tracing::info;

pub use super::delete_policy::DeletePolicy;
pub use super::request_changes::{check_delete, check_revocation, check_update};
use super::{
    AccessLookup, AdmissionState, Review, deny,
    extensions::check_extension_update,
    fleet,
    locks::Locks,
    parse_object,
    places::{AdmittedPlaces, Asking},
    reply,
};
use oz_audit::CallerKind;
use oz_platform::callers::Caller;

/// Oz's message for a changed `spec.targetPod`, kept as the CRD schema words it.
pub const TARGET_POD_IMMUTABLE: &str =
    "error - Spec.TargetPod is an immutable field, create a new ExecAccessRequest instead";

/// The mutating handler.
pub async fn mutate(
    State(state): State<Arc<AdmissionState>>,
    Review(request): Review,
) -> Json<AdmissionReview<DynamicObject>> {
    let owner = template_owner(state.lookup.as_ref(), &request).await;
    let by_hub = fleet::is_hub(state.fleet_hub_user.as_deref(), &request.user_info);
    let hub_names = by_hub.then_some(&state.fleet_names);
    reply(mutation(&request, owner, hub_names))
}

/// The owner reference to the template a new request names, if the lookup knows the template's
/// uid. The controller makes the template its request's owner, as Oz does; set here, at
/// creation, it costs the controller a write per grant less. `blockOwnerDeletion` stays unset:
/// where OwnerReferencesPermissionEnforcement is on it would need the requester to hold update
/// on the template's finalizers.
async fn template_owner(
    lookup: &dyn AccessLookup,
    request: &AdmissionRequest<DynamicObject>,
) -> Option<OwnerReference> {
    let kind = AccessKind::of_request(&request.kind)?;
    if request.operation != Operation::Create {
        return None;
    }
    let object = request.object.as_ref()?;
    let name = object.data.pointer("/spec/templateName")?.as_str()?;
    let namespace = request.namespace.as_deref()?;
    let uid = lookup.template_uid(kind, namespace, name).await.ok()??;
    Some(OwnerReference {
        api_version: format!("{}/{}", oz_api::GROUP, oz_api::VERSION),
        kind: kind.template_kind().into(),
        name: name.into(),
        uid,
        controller: Some(true),
        block_owner_deletion: None,
    })
}

/// The validating handler.
pub async fn validate(
    State(state): State<Arc<AdmissionState>>,
    caller: Option<Extension<Caller>>,
    Review(request): Review,
) -> Json<AdmissionReview<DynamicObject>> {
    let verified = caller.is_some_and(|Extension(caller)| caller.kind() == CallerKind::Apiserver);
    let hub_user = state.fleet_hub_user.as_deref();
    reply(
        validation(
            (state.lookup.as_ref(), &state.locks, &state.places),
            &state.deletes,
            (hub_user, &state.fleet_names),
            &request,
            verified,
        )
        .await,
    )
}

/// The mutating decision: on CREATE of a request, a JSON patch that sets `spec.requester`, and
/// makes `owner` (its template) its controller unless it names a controller already. From the
/// fleet hub's credential (`hub_names`: this cluster's names for the hub's, given only for
/// the hub's credential), `spec.requester` is the one the hub attests, put into this cluster's
/// names, and refused if it has none here: whatever template the request names, since
/// validation refuses the hub's requests through any but the hub's own templates, and asking
/// here would be one more read, racing validation's.
pub fn mutation(
    request: &AdmissionRequest<DynamicObject>,
    owner: Option<OwnerReference>,
    hub_names: Option<&FleetNames>,
) -> AdmissionResponse {
    if AccessKind::of_request(&request.kind).is_none() {
        return deny(request, unknown_kind(request));
    }
    if request.operation != Operation::Create {
        return AdmissionResponse::from(request);
    }
    let Some(requester) = requester_of(&request.user_info) else {
        return deny(request, NO_USER);
    };
    let Some(object) = &request.object else {
        return deny(request, "the CREATE review carries no object");
    };
    let mut patch = match hub_names {
        Some(names) => match fleet::requester_in_our_names(&object.data, names) {
            Ok(patch) => patch.unwrap_or_default(),
            Err(message) => {
                info!(name = %request.name, %message, "refused the fleet hub's requester");
                return deny(request, message);
            }
        },
        None => requester_patch(&object.data, &requester),
    };
    if let Some(owner) = owner {
        patch.0.extend(owner_patch(&object.data, owner).0);
    }
    if patch.0.is_empty() {
        return AdmissionResponse::from(request);
    }
    match AdmissionResponse::from(request).with_patch(patch) {
        Ok(response) => response,
        Err(e) => deny(
            request,
            format!("could not encode the requester patch: {e}"),
        ),
    }
}

/// The validating decision for a request CREATE, UPDATE or DELETE; subresources are allowed.
/// For a caller that is not `verified` to be the apiserver, a CREATE refused for its template
/// gets the same answer whether the template is missing or does not admit the user
/// ([`UNVERIFIED_TEMPLATE_REFUSAL`]): anyone who reaches the port could otherwise ask which
/// templates exist and whom they admit. `spoke`: on a fleet spoke, the user of its hub's
/// credential and this cluster's names for the hub's ([`super::fleet`]).
pub async fn validation(
    (lookup, locks, places): (&dyn AccessLookup, &Locks, &AdmittedPlaces),
    deletes: &DeletePolicy,
    spoke: (Option<&str>, &FleetNames),
    request: &AdmissionRequest<DynamicObject>,
    verified: bool,
) -> AdmissionResponse {
    let Some(kind) = AccessKind::of_request(&request.kind) else {
        return deny(request, unknown_kind(request));
    };
    if request.sub_resource.is_some() {
        return AdmissionResponse::from(request);
    }
    let decision = match request.operation {
        Operation::Create => match kind {
            AccessKind::Exec => {
                validate_create::<ExecAccessRequest>(
                    (lookup, locks, places),
                    spoke,
                    request,
                    verified,
                )
                .await
            }
            AccessKind::Pod => {
                validate_create::<PodAccessRequest>(
                    (lookup, locks, places),
                    spoke,
                    request,
                    verified,
                )
                .await
            }
        },
        Operation::Update => {
            let (old, new) = (request.old_object.as_ref(), request.object.as_ref());
            let namespace = request.namespace.as_deref().unwrap_or_default();
            match check_update(kind, old.map(|o| &o.data), new.map(|o| &o.data))
                .and_then(|()| check_revocation(old, new, &request.user_info, deletes))
            {
                Ok(()) => {
                    check_extension_update(lookup, kind, namespace, old, new, &request.user_info)
                        .await
                }
                refused => refused,
            }
        }
        Operation::Delete => check_delete(
            request.old_object.as_ref().map(|o| &o.data),
            &request.user_info,
            deletes,
        ),
        Operation::Connect => Ok(()),
    };
    match decision {
        Ok(()) => AdmissionResponse::from(request),
        Err(message) => {
            info!(
                kind = kind.request_kind(), namespace = request.namespace.as_deref().unwrap_or_default(),
                name = %request.name, user = request.user_info.username.as_deref().unwrap_or_default(),
                operation = ?request.operation, %message, "denied a request"
            );
            deny(request, message)
        }
    }
}

async fn validate_create<R: AccessRequest>(
    (lookup, locks, places): (&dyn AccessLookup, &Locks, &AdmittedPlaces),
    (hub_user, names): (Option<&str>, &FleetNames),
    request: &AdmissionRequest<DynamicObject>,
    verified: bool,
) -> Result<(), String> {
    let object = request
        .object
        .as_ref()
        .ok_or("the CREATE review carries no object")?;
    let created = parse_object::<R>(object)?;
    let namespace = request.namespace.as_deref().unwrap_or_default();
    let template_name = created.template_name();
    let template = lookup
        .template(R::KIND, namespace, template_name)
        .await
        .map_err(|e| {
            format!(
                "spec.templateName: could not read {} {template_name:?}: {e}",
                R::KIND.template_kind(),
            )
        })?;
    let by_hub = fleet::is_hub(hub_user, &request.user_info);
    fleet::check_forwarded_writer(hub_user, by_hub, created.forwarded())?;
    let requester = match hub_user.filter(|_| by_hub) {
        Some(hub_user) => {
            fleet::attested_requester(created.requester(), created.forwarded(), hub_user, names)?
        }
        None => stamped_requester(&created, &request.user_info)?,
    };
    if !verified
        && template
            .as_ref()
            .is_none_or(|t| !t.config.admits(&requester.groups))
    {
        return Err(unverified_template_refusal::<R>(
            namespace,
            template_name,
            &request.user_info,
        ));
    }
    if hub_user.is_some() {
        fleet::request_through(
            R::KIND,
            template_name,
            template.as_ref(),
            by_hub,
            created.forwarded(),
        )?;
    }
    check_create(
        namespace,
        &created,
        &requester,
        template.as_ref().map(|t| &t.config),
    )?;
    if let Some(refusal) = locks.refusal(&requester, namespace, (R::KIND, template_name)) {
        return Err(format!(
            "spec.requester: {} may not be granted access here now: {refusal}",
            requester.username
        ));
    }
    // Last: a place is counted only for a request admitted otherwise.
    let Some(template) = &template else {
        return Ok(());
    };
    let asking = Asking {
        namespace,
        kind: R::KIND,
        template: template_name,
        name: &request.name,
        user: &requester.username,
        dry_run: request.dry_run,
    };
    places.take(lookup, &template.config, asking).await
}

/// The one answer an unverified caller gets for a template that is missing or does not admit
/// the user: it says what to do without saying which it is.
pub const UNVERIFIED_TEMPLATE_REFUSAL: &str = "does not exist or does not admit";

fn unverified_template_refusal<R: AccessRequest>(
    namespace: &str,
    template: &str,
    user: &UserInfo,
) -> String {
    let kind = R::KIND.template_kind();
    format!(
        "spec.templateName: {kind} {template:?} in namespace {namespace:?} \
         {UNVERIFIED_TEMPLATE_REFUSAL} {user}; list the templates you may use with `ozctl get \
         templates -n {namespace}`, and ask whoever manages access there if yours is missing",
        user = user.username.as_deref().unwrap_or("you"),
    )
}

const NO_USER: &str =
    "spec.requester: the request has no authenticated user name, so oz cannot record who asks";

/// The requester as the apiserver authenticated them, if it named a user.
pub fn requester_of(user: &UserInfo) -> Option<Requester> {
    let username = user.username.clone().filter(|u| !u.is_empty())?;
    Some(Requester {
        username,
        uid: user.uid.clone().filter(|u| !u.is_empty()),
        groups: user.groups.clone().unwrap_or_default(),
    })
}

/// A JSON patch that sets `spec.requester` of `object` to `requester`. RFC 6902 `add` replaces
/// an existing member, so a forged requester is overwritten.
pub fn requester_patch(object: &Value, requester: &Requester) -> Patch {
    let requester = json!(requester);
    let (path, value) = if object.get("spec").is_some_and(Value::is_object) {
        ("/spec/requester", requester)
    } else {
        ("/spec", json!({ "requester": requester }))
    };
    Patch(vec![PatchOperation::Add(AddOperation {
        path: PointerBuf::parse(path).expect("a constant, valid JSON pointer"),
        value,
    })])
}

/// A JSON patch that adds `owner` to the object's ownerReferences, unless one of them is a
/// controller already (an object has at most one).
pub fn owner_patch(object: &Value, owner: OwnerReference) -> Patch {
    let existing = object
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array);
    let has_controller = existing
        .into_iter()
        .flatten()
        .any(|o| o.get("controller") == Some(&Value::Bool(true)));
    if has_controller {
        return Patch(Vec::new());
    }
    let (path, value) = match existing {
        Some(_) => ("/metadata/ownerReferences/-", json!(owner)),
        None => ("/metadata/ownerReferences", json!([owner])),
    };
    Patch(vec![PatchOperation::Add(AddOperation {
        path: PointerBuf::parse(path).expect("a constant, valid JSON pointer"),
        value,
    })])
}

/// The requester of `created`, which must be `user` as oz's mutating webhook stamped them.
fn stamped_requester<R: AccessRequest>(created: &R, user: &UserInfo) -> Result<Requester, String> {
    let requester = requester_of(user).ok_or(NO_USER)?;
    if created.requester() != Some(&requester) {
        return Err(format!(
            "spec.requester: must be the user creating the request ({}); oz's mutating webhook \
             sets it and it cannot be written by hand",
            requester.username
        ));
    }
    Ok(requester)
}

/// Checks a new request in `namespace`, asked for by `requester` (as stamped, or as a fleet hub
/// attests), against its template (`None`: it does not exist). The error names the field at
/// fault.
pub fn check_create<R: AccessRequest>(
    namespace: &str,
    created: &R,
    requester: &Requester,
    template: Option<&AccessConfig>,
) -> Result<(), String> {
    let template_kind = R::KIND.template_kind();
    let template_name = created.template_name();
    let Some(template) = template else {
        return Err(format!(
            "spec.templateName: {template_kind} {template_name:?} does not exist in namespace {namespace:?}"
        ));
    };
    if !template.admits(&requester.groups) {
        return Err(format!(
            "spec.requester: {user} is not a member of any of the allowedGroups {allowed:?} of \
             {template_kind} {template_name:?}; {user}'s groups are {groups:?}",
            user = requester.username,
            allowed = template.allowed_groups,
            groups = requester.groups,
        ));
    }
    if template
        .approval
        .as_ref()
        .is_some_and(|approval| approval.reason_required)
        && created
            .reason()
            .is_none_or(|reason| reason.trim().is_empty())
    {
        return Err(format!(
            "spec.reason: {template_kind} {template_name:?} requires a reason on each request: \
             say why you need access (ozctl create --reason TEXT)"
        ));
    }
    oz_api::schedule::check_start(created.start_at(), Timestamp::now(), template)?;
    match decide_access_duration(
        created.duration(),
        &template.default_duration,
        &template.max_duration,
    ) {
        Ok(_) => Ok(()),
        Err(e @ DurationDecisionError::Request(_)) => Err(e.to_string()),
        Err(e @ DurationDecisionError::Template(_)) => Err(format!(
            "spec.templateName: {template_kind} {template_name:?} cannot grant access: {e}"
        )),
    }
}

fn unknown_kind(request: &AdmissionRequest<DynamicObject>) -> String {
    format!(
        "oz's request webhooks only admit ExecAccessRequest and PodAccessRequest \
         ({}), not {:?} in group {:?}",
        oz_api::GROUP,
        request.kind.kind,
        request.kind.group
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(data: Value) -> DynamicObject {
        serde_json::from_value(data).unwrap()
    }

    fn web_template() -> OwnerReference {
        OwnerReference {
            api_version: "crds.wizardofoz.co/v1alpha1".into(),
            kind: "ExecAccessTemplate".into(),
            name: "web".into(),
            uid: "t-1".into(),
            controller: Some(true),
            block_owner_deletion: None,
        }
    }

    /// alice's request in `phase`, with the revoke annotation naming `revoked_by` if given, as
    /// an AdmissionReview carries it (metadata apart from the rest).
    fn alices(phase: &str, revoked_by: Option<&str>) -> DynamicObject {
        serde_json::from_value(alices_json(phase, revoked_by)).unwrap()
    }

    fn alices_json(phase: &str, revoked_by: Option<&str>) -> Value {
        let annotations = match revoked_by {
            Some(user) => json!({oz_api::REVOKE_ANNOTATION: user}),
            None => json!({}),
        };
        json!({
            "apiVersion": "crds.wizardofoz.co/v1alpha1", "kind": "ExecAccessRequest",
            "metadata": {"name": "alice-web", "annotations": annotations},
            "spec": {"templateName": "web", "requester": {"username": "alice", "groups": ["devs"]}},
            "status": {"phase": phase},
        })
    }

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            username: Some(name.into()),
            groups: Some(groups.iter().map(|g| g.to_string()).collect()),
            ..Default::default()
        }
    }

    /// Asking oz to revoke a grant: the requester or an admin, naming themselves, while the
    /// grant has not ended; once asked, never changed or taken back.
    #[test]
    fn a_revocation_is_asked_by_the_requester_or_an_admin_in_their_own_name_once() {
        let policy = DeletePolicy::new(["system:masters".to_string()], "oz-system");
        let revoke = |phase: &str, by: &str, caller: UserInfo| {
            check_revocation(
                Some(&alices(phase, None)),
                Some(&alices(phase, Some(by))),
                &caller,
                &policy,
            )
        };
        let alice = || user("alice", &["devs"]);
        let bob = || user("bob", &["qa"]);
        let admin = || user("root", &["system:masters"]);
        assert_eq!(revoke("Ready", "alice", alice()), Ok(()));
        assert_eq!(revoke("PendingApproval", "alice", alice()), Ok(()));
        assert_eq!(revoke("Ready", "root", admin()), Ok(()));
        let theirs = revoke("Ready", "bob", bob()).unwrap_err();
        assert!(theirs.contains("only the requester (alice)"), "{theirs}");
        let forged = revoke("Ready", "root", alice()).unwrap_err();
        assert!(forged.contains("must be your own user name"), "{forged}");
        let ended = revoke("Expired", "alice", alice()).unwrap_err();
        assert!(ended.contains("already ended"), "{ended}");

        // Once set: neither changed nor removed, by anyone.
        for (new, caller) in [(Some("root"), admin()), (None, alice()), (None, admin())] {
            let refused = check_revocation(
                Some(&alices("Revoked", Some("alice"))),
                Some(&alices("Revoked", new)),
                &caller,
                &policy,
            )
            .unwrap_err();
            assert!(
                refused.contains("cannot be changed or removed"),
                "{refused}"
            );
        }
        // Updates that leave it alone are not its business.
        assert_eq!(
            check_revocation(
                Some(&alices("Ready", None)),
                Some(&alices("Ready", None)),
                &bob(),
                &policy
            ),
            Ok(())
        );
        // A revoked request is a kept record, as an expired one.
        let deleted = check_delete(
            Some(&alices_json("Revoked", Some("alice"))),
            &alice(),
            &policy,
        )
        .unwrap_err();
        assert!(
            deleted.contains("kept as an access-review record"),
            "{deleted}"
        );
    }

    /// `data` after `patch`.
    fn patched(mut data: Value, patch: Patch) -> Value {
        json_patch::patch(&mut data, &patch).unwrap();
        data
    }

    #[test]
    fn a_new_request_is_owned_by_its_template_unless_it_names_a_controller() {
        let bare = json!({"metadata": {"name": "req"}, "spec": {"templateName": "web"}});
        let owned = patched(bare.clone(), owner_patch(&bare, web_template()));
        assert_eq!(
            owned["metadata"]["ownerReferences"],
            json!([{"apiVersion": "crds.wizardofoz.co/v1alpha1", "kind": "ExecAccessTemplate",
                    "name": "web", "uid": "t-1", "controller": true}])
        );
        let other = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "c-1"});
        let with_other = json!({"metadata": {"ownerReferences": [other]}});
        let both = patched(with_other.clone(), owner_patch(&with_other, web_template()));
        assert_eq!(
            both["metadata"]["ownerReferences"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        let controlled = json!({"metadata": {"ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "c-1", "controller": true}
        ]}});
        assert!(owner_patch(&controlled, web_template()).0.is_empty());
    }

    #[test]
    fn a_request_is_decoded_into_its_kinds_own_type() {
        let exec: ExecAccessRequest = parse_object(&object(json!({
            "apiVersion": "crds.wizardofoz.co/v1alpha1", "kind": "ExecAccessRequest",
            "metadata": {"name": "req", "namespace": "team-a"},
            "spec": {"templateName": "web", "targetPod": "web-0", "duration": "30m"},
            "status": {"phase": "Ready"},
        })))
        .unwrap();
        assert_eq!(exec.template_name(), "web");
        assert_eq!(exec.duration(), Some("30m"));
        assert_eq!(exec.spec.target_pod.as_deref(), Some("web-0"));
        assert_eq!(exec.metadata.name.as_deref(), Some("req"));
        assert!(
            exec.status.is_none(),
            "the status is not the requester's to write"
        );
    }

    #[test]
    fn a_malformed_spec_is_named_as_the_field_at_fault() {
        let parse = |data: Value| parse_object::<PodAccessRequest>(&object(data)).unwrap_err();
        let meta = json!({"name": "req"});
        assert_eq!(parse(json!({"metadata": meta})), "spec: required");
        assert_eq!(
            parse(json!({"metadata": meta, "spec": {"duration": "1h"}})),
            "spec: missing field `templateName`"
        );
        assert_eq!(
            parse(json!({"metadata": meta, "spec": {"templateName": "web", "duration": 3600}})),
            "spec: invalid type: integer `3600`, expected a string"
        );
    }
}
