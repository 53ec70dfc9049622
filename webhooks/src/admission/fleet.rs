//! A fleet spoke's rules: what its hub's credential may write here, and what only it may.
//!
//! A hub keeps copies of its templates on its spokes, labelled [`HUB_MANAGED_LABEL`] with the
//! hub's name, and writes them with its own credential, a ServiceAccount whose user name
//! oz-manager is given as `--fleet-hub-user`. With that flag set:
//!
//! - templates ([`template_write`]): a hub-managed template (labelled before or after the
//!   write) is created, changed and deleted by the hub's credential alone, and that credential
//!   writes nothing else: a spoke's own templates stay its own.
//! - requests ([`request_through`]): only the hub's credential creates a request through a
//!   hub-managed template, the hub's credential creates requests through nothing else, and what
//!   it creates carries the hub's attestation ([`check_forwarded`]) and the requester the hub
//!   attests ([`attested_requester`]), whom the template's allowedGroups judge as usual.
//! - names ([`requester_in_our_names`]): the mutating webhook puts the requester the hub
//!   attests into this cluster's names (`--fleet-user-prefix`, `--fleet-group-prefix`), and
//!   keeps the hub's in `spec.forwarded.requester`; everything after it (validation, the
//!   controller, the RoleBinding, sessions, the audit trail) reads this cluster's names.
//!
//! `spec.forwarded` is refused from anyone but the hub's credential ([`check_forwarded_writer`])
//! whether or not the flag is set: with no hub, nobody may attest for one.

use json_patch::{AddOperation, Patch, PatchOperation, jsonptr::PointerBuf};
use k8s_openapi::api::authentication::v1::UserInfo;
use kube::core::{
    DynamicObject,
    admission::{AdmissionRequest, Operation},
};
use oz_api::{
    AccessKind, FleetNames, Forwarded, HUB_MANAGED_LABEL, Requester, fleet::managing_hub,
};
use serde_json::{Value, json};

use super::TemplateSummary;

/// The group of kube-system's service accounts: the namespace controller and the garbage
/// collector run as them.
const CLUSTER_CONTROLLERS_GROUP: &str = "system:serviceaccounts:kube-system";

/// Whether `user` is the fleet hub's credential, `hub_user` (`None`: this cluster has no hub).
pub fn is_hub(hub_user: Option<&str>, user: &UserInfo) -> bool {
    hub_user.is_some_and(|hub| user.username.as_deref() == Some(hub))
}

/// Whether the template write `request` keeps to the fleet's rule on a spoke whose hub's
/// credential is `hub_user`: a template labelled [`HUB_MANAGED_LABEL`], before or after the
/// write, is written by the hub alone, and the hub writes only such templates (so it may not
/// take the label off one either). The cluster's own controllers may delete a hub's copy: the
/// namespace controller empties a namespace being deleted, and a delete only removes access.
pub fn template_write(
    hub_user: &str,
    request: &AdmissionRequest<DynamicObject>,
) -> Result<(), String> {
    let (old, new) = (request.old_object.as_ref(), request.object.as_ref());
    // What the operation touches: the object as it is (UPDATE, DELETE) and as it will be
    // (CREATE, UPDATE). A review missing one of them counts as unlabelled.
    let touched: &[Option<&DynamicObject>] = match request.operation {
        Operation::Create => &[new],
        Operation::Update => &[old, new],
        Operation::Delete => &[old],
        Operation::Connect => &[],
    };
    let user = request.user_info.username.as_deref().unwrap_or_default();
    let verb = verb(&request.operation);
    let what = format!(
        "{} {}/{}",
        request.kind.kind,
        request.namespace.as_deref().unwrap_or_default(),
        request.name
    );
    if user == hub_user {
        if touched.iter().all(|o| hub_of(*o).is_some()) {
            return Ok(());
        }
        if hub_of(old).is_some() {
            return Err(format!(
                "the fleet hub's credential ({user}) may not remove the label \
                 {HUB_MANAGED_LABEL} from {what}: that would make the hub's copy this cluster's \
                 own template, which the hub may not write"
            ));
        }
        return Err(format!(
            "the fleet hub's credential ({user}) may {verb} only hub-managed templates (labelled \
             {HUB_MANAGED_LABEL}); {what} is this cluster's own"
        ));
    }
    let Some(hub) = hub_of(old).or(hub_of(new)) else {
        return Ok(());
    };
    let groups = request.user_info.groups.as_deref().unwrap_or_default();
    if request.operation == Operation::Delete
        && groups.iter().any(|g| g == CLUSTER_CONTROLLERS_GROUP)
    {
        return Ok(());
    }
    Err(format!(
        "{user} may not {verb} {what}: it is managed by fleet hub {hub:?} (label \
         {HUB_MANAGED_LABEL}), which keeps it in step with the hub's template; change it on the hub",
        user = if user.is_empty() {
            "an unknown user"
        } else {
            user
        },
    ))
}

/// `spec.forwarded` is the hub's attestation: refused from anyone but the hub's credential
/// (`by_hub`), and from everyone where no hub is set (`hub_user`).
pub fn check_forwarded_writer(
    hub_user: Option<&str>,
    by_hub: bool,
    forwarded: Option<&Forwarded>,
) -> Result<(), String> {
    if forwarded.is_none() || by_hub {
        return Ok(());
    }
    let why = match hub_user {
        Some(_) => "only the fleet hub's credential writes it",
        None => "this cluster has no fleet hub (oz-manager --fleet-hub-user), so nobody writes it",
    };
    Err(format!(
        "spec.forwarded: records what a fleet hub attests about a request it decided, and {why}; \
         leave it out"
    ))
}

/// The requester of a request the hub's credential creates: the one the hub attests, who
/// asked on the hub, in this cluster's names. By the time validation reads it, oz's mutating
/// webhook has put it into `spec.requester` under this cluster's `names` and kept the hub's in
/// `spec.forwarded.requester` ([`requester_in_our_names`]); the two must agree, so a request
/// that missed that webhook is refused rather than granted under the hub's names. (Without
/// `spec.forwarded`, [`check_forwarded`] refuses it.)
pub fn attested_requester(
    requester: Option<&Requester>,
    forwarded: Option<&Forwarded>,
    hub_user: &str,
    names: &FleetNames,
) -> Result<Requester, String> {
    let requester = match requester {
        Some(r) if r.username.trim().is_empty() => {
            return Err(format!(
                "spec.requester.username: must not be empty: the fleet hub ({hub_user}) attests \
                 who asked on the hub"
            ));
        }
        Some(r) if r.username == hub_user => {
            return Err(format!(
                "spec.requester: names the fleet hub's own credential ({hub_user}); the hub \
                 attests who asked on the hub"
            ));
        }
        Some(r) => r,
        None => {
            return Err(format!(
                "spec.requester: required on a request the fleet hub ({hub_user}) creates: the \
                 hub attests who asked on the hub"
            ));
        }
    };
    let Some(forwarded) = forwarded else {
        return Ok(requester.clone());
    };
    let Some(hubs) = &forwarded.requester else {
        return Err(
            "spec.forwarded.requester: missing: oz's mutating webhook on this cluster records \
             there the requester the hub attests, as it writes spec.requester in this \
             cluster's names; create the request again once that webhook answers"
                .into(),
        );
    };
    let ours = names.requester(hubs)?;
    if &ours != requester {
        return Err(format!(
            "spec.requester: must be the hub's requester (spec.forwarded.requester, {hub:?}) in \
             this cluster's names ({ours:?}); oz's mutating webhook writes both",
            hub = hubs.username,
            ours = ours.username,
        ));
    }
    Ok(ours)
}

/// The mutating webhook's patch for a request the hub's credential creates, `object`: the
/// requester the hub attests (`spec.requester` as the hub wrote it) is kept, in the hub's names,
/// as `spec.forwarded.requester` (replacing anything the hub wrote there), and `spec.requester`
/// becomes the same person in this cluster's `names`. `Ok(None)`: no requester or no
/// attestation to record, which validation refuses. `Err`: the hub's user has no name here
/// ([`FleetNames::requester`]'s refusal).
pub fn requester_in_our_names(object: &Value, names: &FleetNames) -> Result<Option<Patch>, String> {
    let spec = object.get("spec");
    let hubs = spec
        .and_then(|s| s.get("requester"))
        .and_then(|r| serde_json::from_value::<Requester>(r.clone()).ok());
    let attested = spec
        .and_then(|s| s.get("forwarded"))
        .is_some_and(Value::is_object);
    let Some(hubs) = hubs.filter(|_| attested) else {
        return Ok(None);
    };
    let ours = names.requester(&hubs)?;
    let add = |path: &str, value: Value| {
        PatchOperation::Add(AddOperation {
            path: PointerBuf::parse(path).expect("a constant, valid JSON pointer"),
            value,
        })
    };
    Ok(Some(Patch(vec![
        add("/spec/forwarded/requester", json!(hubs)),
        add("/spec/requester", json!(ours)),
    ])))
}

/// Whether a request may be made through `template` (`None`: it does not exist, which the
/// request's own checks say) by the hub's credential (`by_hub`) or by anyone else: a
/// hub-managed template by the hub alone, carrying its attestation; any other template by
/// anyone but the hub.
pub fn request_through(
    kind: AccessKind,
    name: &str,
    template: Option<&TemplateSummary>,
    by_hub: bool,
    forwarded: Option<&Forwarded>,
) -> Result<(), String> {
    let Some(template) = template else {
        return Ok(());
    };
    let template_kind = kind.template_kind();
    match (&template.hub, by_hub) {
        (Some(hub), true) => check_forwarded(hub, forwarded),
        (Some(hub), false) => Err(format!(
            "spec.templateName: {template_kind} {name:?} is managed by fleet hub {hub:?}: request \
             access on the hub (ozctl create {word} {name} --fleet-cluster NAME)",
            word = kind.word(),
        )),
        (None, true) => Err(format!(
            "spec.templateName: the fleet hub's credential creates requests only through \
             hub-managed templates; {template_kind} {name:?} is this cluster's own"
        )),
        (None, false) => Ok(()),
    }
}

/// What a request the hub creates must attest: which hub (the one managing its template,
/// `hub`), this spoke's name there, and the hub's request.
pub fn check_forwarded(hub: &str, forwarded: Option<&Forwarded>) -> Result<(), String> {
    let Some(forwarded) = forwarded else {
        return Err(format!(
            "spec.forwarded: required on a request through a template of fleet hub {hub:?}: the \
             hub attests its hub, cluster, requestName and requestUid"
        ));
    };
    if forwarded.hub != hub {
        return Err(format!(
            "spec.forwarded.hub: must be {hub:?}, the hub that manages the template, not {:?}",
            forwarded.hub
        ));
    }
    for (field, value) in [
        ("cluster", &forwarded.cluster),
        ("requestName", &forwarded.request_name),
        ("requestUid", &forwarded.request_uid),
    ] {
        if value.trim().is_empty() {
            return Err(format!("spec.forwarded.{field}: must not be empty"));
        }
    }
    Ok(())
}

/// The hub that manages `object`, if there is one and it is hub-managed.
fn hub_of(object: Option<&DynamicObject>) -> Option<&str> {
    object.and_then(|o| managing_hub(&o.metadata))
}

fn verb(operation: &Operation) -> &'static str {
    match operation {
        Operation::Create => "create",
        Operation::Delete => "delete",
        _ => "change",
    }
}
