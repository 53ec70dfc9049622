//! Admission of AccessApprovals: one person's decision on one request.
//!
//! - Mutating ([`mutation`]): on CREATE, oz records who decided (`spec.approver`, from the
//!   AdmissionReview's userInfo), which request they decided on (`spec.requestUid`), whether it
//!   is a break-glass self-approval (`spec.breakGlass`), replacing whatever the user wrote, and
//!   makes the request an owner of the decision, so the garbage collector deletes a request's
//!   decisions with it. A decision on a request that does not exist is refused here already.
//! - Validating ([`validation`]): a CREATE must carry what the mutating webhook stamped, name a
//!   request that still waits for approval through a template that asks for it, and come from
//!   someone the template lets decide ([`check_decision`]); an UPDATE may change metadata,
//!   never the spec (the CRD's CEL rule says the same, defence in depth).
//!
//! The request decided on and the decisions already made are read from the apiserver, not
//! from the handlers' cache ([`AccessLookup::request`], [`AccessLookup::decisions`]):
//! decisions are rare, and one made a moment after the request became Ready, or a person's
//! second decision made a moment after their first, must be seen. Two decisions by one person
//! created at the same instant can still both pass (neither sees the other); that is tolerated
//! because the controller's tally counts each person once, whatever is stored.
//!
//! Those reads are what a review costs oz, so a caller that is not verified to be the
//! apiserver could make oz read as fast as it can post. Reviews from unverified callers share
//! a small budget of reads ([`UnverifiedReads`]); past it they are refused before any read.
//! People decide at human pace, so the budget is far above what approvals need.

use std::sync::Arc;

use axum::{Extension, Json, extract::State};
use json_patch::{AddOperation, Patch, PatchOperation, jsonptr::PointerBuf};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::{
    ResourceExt,
    core::{
        DynamicObject,
        admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation},
    },
};
use oz_api::{
    AccessApproval, AccessConfig, AccessKind, ApprovalConfig, Decision, ExtensionPhase,
    RequestPhase, Requester,
};
use serde_json::{Value, json};
use tracing::info;

use oz_audit::CallerKind;
use oz_platform::callers::Caller;

pub use super::unverified_reads::UnverifiedReads;
use super::{
    AccessLookup, AdmissionState, RequestState, Review, deny, locks::Locks, parse_object, reply,
    requests::requester_of,
};

/// The kind these handlers admit.
const KIND: &str = "AccessApproval";

const NO_USER: &str =
    "spec.approver: the approval has no authenticated user name, so oz cannot record who decides";

/// The answer to an unverified caller once [`UnverifiedReads`] is spent.
pub const UNVERIFIED_BUDGET_SPENT: &str = "oz is answering more approval reviews from callers it \
     cannot verify than it reads the apiserver for; try again in a few seconds";

/// Whether a review that reads the apiserver may be answered: always for the verified
/// apiserver, else while the unverified callers' budget lasts.
fn may_answer(
    state: &AdmissionState,
    request: &AdmissionRequest<DynamicObject>,
    verified: bool,
) -> bool {
    let reads = is_approval(request) && request.operation == Operation::Create;
    verified || !reads || state.unverified_reads.take()
}

fn is_verified(caller: Option<Extension<Caller>>) -> bool {
    caller.is_some_and(|Extension(caller)| caller.kind() == CallerKind::Apiserver)
}

/// The mutating handler.
pub async fn mutate(
    State(state): State<Arc<AdmissionState>>,
    caller: Option<Extension<Caller>>,
    Review(request): Review,
) -> Json<AdmissionReview<DynamicObject>> {
    if !may_answer(&state, &request, is_verified(caller)) {
        return reply(deny(&request, UNVERIFIED_BUDGET_SPENT));
    }
    reply(mutation(state.lookup.as_ref(), &request).await)
}

/// The validating handler.
pub async fn validate(
    State(state): State<Arc<AdmissionState>>,
    caller: Option<Extension<Caller>>,
    Review(request): Review,
) -> Json<AdmissionReview<DynamicObject>> {
    if !may_answer(&state, &request, is_verified(caller)) {
        return reply(deny(&request, UNVERIFIED_BUDGET_SPENT));
    }
    reply(validation((state.lookup.as_ref(), &state.locks), &request).await)
}

/// The mutating decision: on CREATE, a JSON patch that stamps `spec.approver`,
/// `spec.requestUid`, `spec.breakGlass` and an ownerReference to the request.
pub async fn mutation(
    lookup: &dyn AccessLookup,
    request: &AdmissionRequest<DynamicObject>,
) -> AdmissionResponse {
    if !is_approval(request) {
        return deny(request, unknown_kind(request));
    }
    if request.operation != Operation::Create {
        return AdmissionResponse::from(request);
    }
    match stamp(lookup, request).await {
        Ok(patch) => match AdmissionResponse::from(request).with_patch(patch) {
            Ok(response) => response,
            Err(e) => deny(request, format!("could not encode the approver patch: {e}")),
        },
        Err(message) => {
            log_denial(request, &message);
            deny(request, message)
        }
    }
}

async fn stamp(
    lookup: &dyn AccessLookup,
    request: &AdmissionRequest<DynamicObject>,
) -> Result<Patch, String> {
    let approver = requester_of(&request.user_info).ok_or(NO_USER)?;
    let object = request
        .object
        .as_ref()
        .ok_or("the CREATE review carries no object")?;
    let approval = parse_object::<AccessApproval>(object)?;
    let namespace = request.namespace.as_deref().unwrap_or_default();
    let target = decided_request(lookup, namespace, &approval).await?;
    let kind = target.kind;
    let template = lookup
        .template(kind, namespace, &target.template)
        .await
        .map_err(|e| could_not_read(kind.template_kind(), &target.template, e))?;
    let break_glass = template
        .as_ref()
        .and_then(|t| t.config.approval.as_ref())
        .is_some_and(|config| is_break_glass(config, &approver, &target));
    Ok(approval_patch(object, &approver, &target, break_glass))
}

/// Whether `approver`'s decision on `target` under `config` is a break-glass self-approval:
/// the requester decides, and the template has `breakGlass` without `allowSelfApproval`.
pub fn is_break_glass(
    config: &ApprovalConfig,
    approver: &Requester,
    target: &RequestState,
) -> bool {
    is_own(approver, target) && config.break_glass && !config.allow_self_approval
}

fn is_own(approver: &Requester, target: &RequestState) -> bool {
    target
        .requester
        .as_ref()
        .is_some_and(|r| r.username == approver.username)
}

/// The JSON patch that stamps `object` (an AccessApproval) with `approver`, `target`'s uid,
/// `break_glass` and an ownerReference to `target`. RFC 6902 `add` replaces an existing member,
/// so whatever the user wrote in those fields is overwritten; the ownerReferences they wrote
/// are kept, but for one naming the same uid, which this one replaces.
pub fn approval_patch(
    object: &DynamicObject,
    approver: &Requester,
    target: &RequestState,
    break_glass: bool,
) -> Patch {
    let uid = target.uid.clone().unwrap_or_default();
    let mut owners: Vec<OwnerReference> = object
        .metadata
        .owner_references
        .iter()
        .flatten()
        .filter(|o| o.uid != uid)
        .cloned()
        .collect();
    owners.push(OwnerReference {
        api_version: format!("{}/{}", oz_api::GROUP, oz_api::VERSION),
        kind: target.kind.request_kind().into(),
        name: target.name.clone(),
        uid: uid.clone(),
        // Not the controller of the approval, and deleting the request never waits on it.
        controller: Some(false),
        block_owner_deletion: Some(false),
    });
    let add = |path: &str, value: Value| {
        PatchOperation::Add(AddOperation {
            path: PointerBuf::parse(path).expect("a constant, valid JSON pointer"),
            value,
        })
    };
    Patch(vec![
        add("/spec/approver", json!(approver)),
        add("/spec/requestUid", json!(uid)),
        add("/spec/breakGlass", json!(break_glass)),
        add("/metadata/ownerReferences", json!(owners)),
    ])
}

/// The validating decision for an AccessApproval CREATE or UPDATE; anything else is allowed.
pub async fn validation(
    (lookup, locks): (&dyn AccessLookup, &Locks),
    request: &AdmissionRequest<DynamicObject>,
) -> AdmissionResponse {
    if !is_approval(request) {
        return deny(request, unknown_kind(request));
    }
    if request.sub_resource.is_some() {
        return AdmissionResponse::from(request);
    }
    let decision = match request.operation {
        Operation::Create => validate_create((lookup, locks), request).await,
        Operation::Update => check_update(
            request.old_object.as_ref().map(|o| &o.data),
            request.object.as_ref().map(|o| &o.data),
        ),
        Operation::Delete | Operation::Connect => Ok(()),
    };
    match decision {
        Ok(()) => AdmissionResponse::from(request),
        Err(message) => {
            log_denial(request, &message);
            deny(request, message)
        }
    }
}

async fn validate_create(
    (lookup, locks): (&dyn AccessLookup, &Locks),
    request: &AdmissionRequest<DynamicObject>,
) -> Result<(), String> {
    let caller = requester_of(&request.user_info).ok_or(NO_USER)?;
    let object = request
        .object
        .as_ref()
        .ok_or("the CREATE review carries no object")?;
    let approval = parse_object::<AccessApproval>(object)?;
    // The stamp first: it needs no read.
    check_approver(&approval, &caller)?;
    let namespace = request.namespace.as_deref().unwrap_or_default();
    let target = decided_request(lookup, namespace, &approval).await?;
    if let Some(refusal) = target
        .requester
        .as_ref()
        .and_then(|requester| locks.refusal(requester, namespace, (target.kind, &target.template)))
    {
        return Err(format!(
            "spec.requestRef.name: request {:?} cannot be decided on now: {refusal}",
            target.name
        ));
    }
    let template = lookup
        .template(target.kind, namespace, &target.template)
        .await
        .map_err(|e| could_not_read(target.kind.template_kind(), &target.template, e))?;
    let decisions = lookup.decisions(namespace).await.map_err(|e| {
        format!("could not read the AccessApprovals in namespace {namespace:?}: {e}")
    })?;
    check_decision(
        namespace,
        &approval,
        &caller,
        &target,
        template.as_ref().map(|t| &t.config),
        &decisions,
    )
}

/// The request `approval` names, read from the apiserver; an error naming
/// `spec.requestRef.name` if it does not exist.
async fn decided_request(
    lookup: &dyn AccessLookup,
    namespace: &str,
    approval: &AccessApproval,
) -> Result<RequestState, String> {
    let kind = AccessKind::from(approval.spec.request_ref.kind);
    let name = &approval.spec.request_ref.name;
    lookup
        .request(kind, namespace, name)
        .await
        .map_err(|e| {
            format!(
                "spec.requestRef.name: could not read {} {name:?}: {e}",
                kind.request_kind()
            )
        })?
        .ok_or_else(|| {
            format!(
                "spec.requestRef.name: {} {name:?} does not exist in namespace {namespace:?}",
                kind.request_kind()
            )
        })
}

pub fn check_approver(approval: &AccessApproval, caller: &Requester) -> Result<(), String> {
    if approval.spec.approver.as_ref() == Some(caller) {
        return Ok(());
    }
    Err(format!(
        "spec.approver: must be the user creating the approval ({}); oz's mutating webhook \
         sets it and it cannot be written by hand",
        caller.username
    ))
}

/// Checks `caller`'s new decision `approval` on `target` in `namespace`, against `target`'s
/// template (`None`: it does not exist) and the `decisions` already stored in the namespace.
/// The error names the field at fault and what to do instead.
pub fn check_decision(
    namespace: &str,
    approval: &AccessApproval,
    caller: &Requester,
    target: &RequestState,
    template: Option<&AccessConfig>,
    decisions: &[AccessApproval],
) -> Result<(), String> {
    check_approver(approval, caller)?;
    let spec = &approval.spec;
    let request_name = &target.name;
    if target.uid.is_none() || spec.request_uid != target.uid {
        return Err(format!(
            "spec.requestUid: {} {request_name:?} is not the request this decision was made on \
             (it was deleted and created again); decide again",
            target.kind.request_kind()
        ));
    }
    let template_kind = target.kind.template_kind();
    let template_name = &target.template;
    let Some(template) = template else {
        return Err(format!(
            "spec.requestRef.name: request {request_name:?} was made through {template_kind} \
             {template_name:?}, which does not exist in namespace {namespace:?}"
        ));
    };
    let Some(config) = template.approval.as_ref() else {
        return Err(format!(
            "spec.requestRef.name: {template_kind} {template_name:?} requires no approval: \
             requests through it are granted without decisions"
        ));
    };
    check_still_open(target, spec.extension)?;
    let break_glass = is_break_glass(config, caller, target);
    if spec.break_glass != break_glass {
        return Err(format!(
            "spec.breakGlass: must be {break_glass}; oz's mutating webhook sets it and it cannot \
             be written by hand"
        ));
    }
    let has_comment = spec.has_comment();
    let user = &caller.username;
    if is_own(caller, target) && !config.allow_self_approval {
        if !config.break_glass {
            return Err(format!(
                "you cannot {} your own request: {template_kind} {template_name:?} does not \
                 allowSelfApproval (and has no breakGlass); ask a member of {}",
                verb(spec.decision),
                config.approver_groups.join(", ")
            ));
        }
        if spec.decision == Decision::Deny {
            return Err(
                "you cannot deny your own request: delete it instead to withdraw it".into(),
            );
        }
        if !has_comment {
            return Err(
                "a break-glass approval needs spec.comment: say why no approver could decide"
                    .into(),
            );
        }
    } else if config.approving_group(&caller.groups).is_none() {
        return Err(format!(
            "{user} is not in the template's approverGroups ({}): only they may decide on \
             requests through {template_kind} {template_name:?}",
            config.approver_groups.join(", ")
        ));
    } else if spec.decision == Decision::Approve
        && !config.allow_self_approval
        && let Some(group) = caller
            .groups
            .iter()
            .find(|g| template.shared_with().contains(g))
    {
        return Err(format!(
            "you cannot approve request {request_name:?}: {template_kind} {template_name:?} \
             grants to its allowedGroups and you are in {group}, so approving it would grant you \
             access too, and it does not allowSelfApproval; ask an approver outside its \
             allowedGroups"
        ));
    }
    if spec.decision == Decision::Deny && !has_comment {
        return Err("a Deny needs spec.comment: say why, for the requester".into());
    }
    let this = approval.metadata.name.as_deref();
    if let Some(earlier) = decisions.iter().find(|d| {
        d.spec.request_uid == target.uid
            && d.spec.extension == spec.extension
            && d.spec.approver.as_ref().is_some_and(|a| a.username == *user)
            // Being deleted: withdrawn, so a new decision may replace it.
            && d.metadata.deletion_timestamp.is_none()
            && d.metadata.name.as_deref() != this
    }) {
        return Err(format!(
            "{user} has already decided on request {request_name:?} (AccessApproval {:?}); \
             delete that decision to make another",
            earlier.name_any()
        ));
    }
    Ok(())
}

/// Whether what `extension` names (an ask of `target`, or `None`: `target` itself) still
/// waits for decisions: a request until it is approved; an ask while its request is Ready and
/// oz has not recorded it decided.
fn check_still_open(target: &RequestState, extension: Option<u32>) -> Result<(), String> {
    let request_name = &target.name;
    let Some(number) = extension else {
        if let Some(
            phase @ (RequestPhase::Ready
            | RequestPhase::Denied
            | RequestPhase::Expired
            | RequestPhase::Revoked
            | RequestPhase::Failed),
        ) = target.phase
        {
            let extensions = if phase == RequestPhase::Ready && target.extension_asks > 0 {
                "; to decide on its extension, name it in spec.extension (`ozctl approve` does)"
            } else {
                ""
            };
            return Err(format!(
                "request {request_name:?} is already {phase:?}: decisions are taken only while \
                 it waits for approval{extensions}"
            ));
        }
        if target.approved_at.is_some() {
            return Err(format!(
                "request {request_name:?} is already approved: decisions are taken only while \
                 it waits for approval"
            ));
        }
        return Ok(());
    };
    if target.phase != Some(RequestPhase::Ready) {
        return Err(format!(
            "spec.extension: request {request_name:?} is not Ready, so it has no extension to \
             decide on"
        ));
    }
    if number as usize > target.extension_asks {
        return Err(format!(
            "spec.extension: request {request_name:?} has {} extension asks; there is no \
             number {number}",
            target.extension_asks
        ));
    }
    let recorded = target.extensions.get(number as usize - 1);
    if let Some(phase @ (ExtensionPhase::Granted | ExtensionPhase::Denied)) =
        recorded.map(|r| r.phase)
    {
        return Err(format!(
            "spec.extension: extension {number} of request {request_name:?} is already \
             {phase:?}: decisions are taken only while it waits for approval"
        ));
    }
    Ok(())
}

fn verb(decision: Decision) -> &'static str {
    match decision {
        Decision::Approve => "approve",
        Decision::Deny => "deny",
    }
}

/// An update may change metadata, never the spec.
pub fn check_update(old: Option<&Value>, new: Option<&Value>) -> Result<(), String> {
    if old.and_then(|o| o.get("spec")) == new.and_then(|o| o.get("spec")) {
        return Ok(());
    }
    Err("spec: a decision cannot be changed after it is made; delete it and make a new one".into())
}

fn is_approval(request: &AdmissionRequest<DynamicObject>) -> bool {
    request.kind.group == oz_api::GROUP && request.kind.kind == KIND
}

fn could_not_read(kind: &str, name: &str, e: super::LookupError) -> String {
    format!("spec.requestRef.name: could not read the request's {kind} {name:?}: {e}")
}

fn log_denial(request: &AdmissionRequest<DynamicObject>, message: &str) {
    info!(
        kind = KIND, namespace = request.namespace.as_deref().unwrap_or_default(),
        name = %request.name, user = request.user_info.username.as_deref().unwrap_or_default(),
        operation = ?request.operation, %message, "denied an approval"
    );
}

fn unknown_kind(request: &AdmissionRequest<DynamicObject>) -> String {
    format!(
        "oz's approval webhooks only admit AccessApproval ({}), not {:?} in group {:?}",
        oz_api::GROUP,
        request.kind.kind,
        request.kind.group
    )
}
