//! Step: verify the extensions. Each ask in the request's extension annotation (`ozctl
//! extend`) is granted at once under a template without approval, and otherwise when the
//! AccessApprovals naming its number add up, tallied as the request's own are; what the granted
//! asks add, within the template's bounds ([`oz_api::extension::plan`]), moves `expiresAt`.
//!
//! Nothing else of the grant changes: its Role, RoleBinding, debug pod and open brokered
//! sessions stay as they are (a session follows `expiresAt`), and its expiry timer is moved to
//! the new end ([`super::timers::ExpiryTimers::extend_to`]). Like the window itself, what an
//! extension adds is recomputed from the annotation and the approvals on every pass: the
//! status only reports it, and deleting an approval withdraws the time it gave.

use chrono::TimeDelta;
use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};
use kube::{Resource, ResourceExt, runtime::events::EventType};
use oz_api::{
    AccessConfig, AccessRequest, ExtensionPhase, ExtensionRecord, Requester,
    approval::{Outcome, TalliedRequest, tally},
    duration::format_go_duration,
    extension::{Decided, ExtensionAsk, Planned, extension_asks, plan},
};

use super::{
    duration::Window,
    outcome::{Step, go_on},
    reconciling::Reconciling,
    status::Pass,
};
use crate::{builders::AccessBuilder, time};

/// The grant's `expiresAt`: `window`'s end plus what the granted asks add, recorded in the
/// status with where every ask stands. `requester`: `None` for a grant Oz made, which is never
/// extended.
pub async fn verify_extensions<B: AccessBuilder>(
    r: &Reconciling<'_, B>,
    pass: &mut Pass,
    config: &AccessConfig,
    requester: Option<&Requester>,
    window: Window,
) -> Step<Timestamp> {
    let asks = match (requester, extension_asks(r.request.meta())) {
        (Some(_), Ok(asks)) => asks,
        (None, _) => Vec::new(),
        (Some(_), Err(e)) => {
            // Only writable past oz's webhook: nothing is extended on it.
            tracing::warn!(request = %r.request.name_any(), error = %e, "ignored the extension asks");
            Vec::new()
        }
    };
    let requester = requester.map(|r| r.username.as_str()).unwrap_or_default();
    // The asks with what was decided of each, and apart, the approvals counted for each.
    let (decided, approvals): (Vec<(ExtensionAsk, Decided)>, Vec<_>) = asks
        .into_iter()
        .enumerate()
        .map(|(index, ask)| {
            let (decided, approvals) = decide(r, config, requester, index as u32 + 1);
            ((ask, decided), approvals)
        })
        .unzip();
    let planned = plan(config, window.duration, &decided);
    let added: TimeDelta = planned.iter().map(|p| p.added).sum();
    pass.status.extensions = decided
        .into_iter()
        .zip(planned)
        .zip(approvals)
        .enumerate()
        .map(|(index, (((ask, _), planned), approvals))| {
            record(index as u32 + 1, ask, planned, approvals)
        })
        .collect();
    note_changes(pass);
    let expires_at = time::add(window.ends, added);
    pass.status.expires_at = Some(Time(expires_at));
    go_on(expires_at)
}

/// What the approvals say of ask `number`, and the approvals counted towards it.
fn decide<B: AccessBuilder>(
    r: &Reconciling<'_, B>,
    config: &AccessConfig,
    requester: &str,
    number: u32,
) -> (Decided, Vec<oz_api::ApprovalRecord>) {
    let Some(approval) = &config.approval else {
        return (Decided::Granted, Vec::new());
    };
    let name = r.request.name_any();
    let asked = TalliedRequest {
        kind: B::Request::KIND.into(),
        name: &name,
        uid: &r.grant.owner.uid,
        requester,
        shared_with: config.shared_with(),
        extension: Some(number),
    };
    let cached = r.approvals.state();
    let in_namespace = cached
        .iter()
        .filter(|a| a.namespace().as_deref() == Some(r.grant.namespace.as_str()))
        .map(|a| &**a);
    let tally = tally(approval, asked, in_namespace);
    let decided = match &tally.outcome {
        Outcome::Approved { .. } => Decided::Granted,
        Outcome::Pending => Decided::Pending,
        Outcome::Denied { by, comment, .. } => {
            Decided::Denied(match comment.as_deref().filter(|c| !c.trim().is_empty()) {
                Some(comment) => format!("denied by {by}: {comment}"),
                None => format!("denied by {by}"),
            })
        }
    };
    (decided, tally.records)
}

fn record(
    number: u32,
    ask: ExtensionAsk,
    planned: Planned,
    approvals: Vec<oz_api::ApprovalRecord>,
) -> ExtensionRecord {
    let approved_by =
        (planned.phase == ExtensionPhase::Granted && !approvals.is_empty()).then(|| {
            let names: Vec<&str> = approvals.iter().map(|a| a.approver.as_str()).collect();
            format!("approved by {}", names.join(", "))
        });
    let message = match (approved_by, planned.message) {
        (Some(approved), Some(cut)) => Some(format!("{approved}; {cut}")),
        (approved, cut) => approved.or(cut),
    };
    ExtensionRecord {
        number,
        by: ask.by,
        asked_by: ask.asked_by,
        reason: ask.reason,
        phase: planned.phase,
        added: (!planned.added.is_zero()).then(|| format_go_duration(planned.added)),
        approvals,
        message,
    }
}

/// An Event for each ask that is new, granted or denied since the last pass.
fn note_changes(pass: &mut Pass) {
    let changed: Vec<ExtensionRecord> = pass
        .status
        .extensions
        .iter()
        .filter(|now| {
            let before = pass.previous().extensions.get(now.number as usize - 1);
            before.is_none_or(|b| b.phase != now.phase)
        })
        .cloned()
        .collect();
    for ask in changed {
        let (kind, reason, sentence) = match ask.phase {
            ExtensionPhase::PendingApproval => (
                EventType::Normal,
                "ExtensionPending",
                format!(
                    "{} asks for {} more; waiting for approval",
                    ask.asked_by, ask.by
                ),
            ),
            ExtensionPhase::Granted => (
                EventType::Normal,
                "Extended",
                format!("extended by {}", ask.added.as_deref().unwrap_or_default()),
            ),
            ExtensionPhase::Denied => (
                EventType::Warning,
                "ExtensionDenied",
                "extension denied".to_string(),
            ),
        };
        let message = match &ask.message {
            Some(why) => format!("extension {}: {sentence} ({why})", ask.number),
            None => format!("extension {}: {sentence}", ask.number),
        };
        pass.note(kind, reason, message);
    }
}
