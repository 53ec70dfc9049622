//! Extending a grant in force: more time on the same grant, so its Role, RoleBinding, debug pod
//! and open brokered sessions stay as they are.
//!
//! The requester asks by appending to the request's annotation [`EXTEND_ANNOTATION`] (`ozctl
//! extend`); oz's webhook lets only the requester append, one ask at a time, and never change
//! an earlier ask ([`check_ask`]). Each ask is granted at once under a template without
//! approval, and otherwise by AccessApprovals naming its number (`spec.extension`), tallied as
//! the request's own approvals are. What a granted ask adds is bounded here ([`plan`]): the
//! whole window, from the grant's start, never passes the template's `maxTotalDuration`
//! (default `maxDuration`), and no more than `maxExtensions` asks are granted.
//!
//! The grant's `expiresAt` is the start plus the decided duration plus what the granted asks
//! add, recomputed on every reconcile from the annotation and the approvals, never from the
//! status (which only reports it).

use chrono::TimeDelta;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use crate::{
    AccessConfig, ApprovalRecord,
    approval::MAX_REASON_LENGTH,
    duration::{format_go_duration, parse_go_duration, parse_positive_duration},
};

/// The annotation holding a request's extension asks, oldest first: a JSON array of
/// [`ExtensionAsk`]. Written by `ozctl extend`; oz's webhook checks every change to it.
pub const EXTEND_ANNOTATION: &str = "crds.wizardofoz.co/extensions";

/// The most asks one request keeps: the annotation stays small, whatever a template allows.
pub const MAX_ASKS: usize = 20;

/// One ask for more time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtensionAsk {
    /// How much longer: a positive Go duration such as `30m`.
    pub by: String,
    /// Why, for approvers and the audit trail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Who asked: oz's webhook refuses an ask whose `askedBy` is not the user making it, and
    /// any ask but the requester's.
    pub asked_by: String,
}

/// Where one ask stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum ExtensionPhase {
    /// Waiting for the approvals the template requires; the grant ends at its current end
    /// unless they come first.
    PendingApproval,
    /// Granted: `expiresAt` includes what it added.
    Granted,
    /// Refused by an approver, or past the template's bounds; the grant ends as before.
    Denied,
}

/// One ask, as `status.extensions` reports it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExtensionRecord {
    /// Its number, from 1: what an AccessApproval's `spec.extension` names.
    pub number: u32,
    /// How much longer was asked.
    pub by: String,
    /// Who asked.
    pub asked_by: String,
    /// Why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Where it stands.
    pub phase: ExtensionPhase,
    /// Granted: how much it added to the grant (less than `by` when the template's bound cut
    /// it), as a Go duration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub added: Option<String>,
    /// The approvals counted towards it, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<ApprovalRecord>,
    /// Why it stands so, for humans: who approved or denied it, or the bound that cut it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The request's extension asks, oldest first; none without the annotation.
pub fn extension_asks(meta: &ObjectMeta) -> Result<Vec<ExtensionAsk>, String> {
    let Some(value) = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(EXTEND_ANNOTATION))
    else {
        return Ok(Vec::new());
    };
    parse_asks(value)
}

/// The asks in an annotation value.
pub fn parse_asks(value: &str) -> Result<Vec<ExtensionAsk>, String> {
    serde_json::from_str(value).map_err(|e| {
        format!(
            "metadata.annotations[{EXTEND_ANNOTATION:?}] must be a JSON array of \
             {{\"by\": DURATION, \"askedBy\": USER, \"reason\": TEXT}}: {e}"
        )
    })
}

/// How long a grant through `config` may last in all, extensions included: `maxTotalDuration`,
/// or `maxDuration` without it.
pub fn total_cap(config: &AccessConfig) -> Result<TimeDelta, String> {
    let (field, value) = match &config.max_total_duration {
        Some(total) => ("maxTotalDuration", total),
        None => ("maxDuration", &config.max_duration),
    };
    parse_positive_duration(value)
        .map_err(|e| format!("spec.accessConfig.{field}: {}", e.go_message()))
}

/// What the approvals say of one ask (always [`Decided::Granted`] without approval).
#[derive(Clone, Debug, PartialEq)]
pub enum Decided {
    Pending,
    Granted,
    Denied(String),
}

/// What one ask adds, in the order asked.
#[derive(Clone, Debug, PartialEq)]
pub struct Planned {
    pub phase: ExtensionPhase,
    pub added: TimeDelta,
    pub message: Option<String>,
}

/// What each of `asks` (with its decision) adds to a grant whose decided duration is `base`,
/// under `config`: a granted ask adds its `by`, cut so that the whole never passes
/// [`total_cap`]; past `maxExtensions`, or with nothing left to add, an ask is denied. A
/// pending ask reserves nothing.
pub fn plan(
    config: &AccessConfig,
    base: TimeDelta,
    asks: &[(ExtensionAsk, Decided)],
) -> Vec<Planned> {
    let cap = total_cap(config);
    let max_count = config.max_extensions.map_or(MAX_ASKS, |m| m as usize);
    let mut total = TimeDelta::zero();
    let mut planned = Vec::with_capacity(asks.len());
    for (index, (ask, decided)) in asks.iter().enumerate() {
        let denied = |message: String| Planned {
            phase: ExtensionPhase::Denied,
            added: TimeDelta::zero(),
            message: Some(message),
        };
        let step = match decided {
            _ if index >= max_count => denied(format!(
                "past the template's maxExtensions ({max_count}); ask for a new grant instead"
            )),
            Decided::Denied(message) => denied(message.clone()),
            Decided::Pending => Planned {
                phase: ExtensionPhase::PendingApproval,
                added: TimeDelta::zero(),
                message: None,
            },
            Decided::Granted => match (&cap, parse_positive_duration(&ask.by)) {
                (Err(e), _) => denied(e.clone()),
                (_, Err(e)) => denied(format!("by: {}", e.go_message())),
                (Ok(cap), Ok(by)) => {
                    let room = (*cap - base - total).max(TimeDelta::zero());
                    let added = by.min(room);
                    if added.is_zero() {
                        denied(no_room_message(config, *cap))
                    } else {
                        total += added;
                        let message = (added < by).then(|| {
                            format!(
                                "cut to {} by the template's bound of {} in all",
                                format_go_duration(added),
                                format_go_duration(*cap)
                            )
                        });
                        Planned {
                            phase: ExtensionPhase::Granted,
                            added,
                            message,
                        }
                    }
                }
            },
        };
        planned.push(step);
    }
    planned
}

fn no_room_message(config: &AccessConfig, cap: TimeDelta) -> String {
    let field = match config.max_total_duration {
        Some(_) => "maxTotalDuration",
        None => "maxDuration",
    };
    format!(
        "the grant already lasts the template's {field} ({}) in all; ask for a new grant instead",
        format_go_duration(cap)
    )
}

/// Checks a new ask, `ask`, made by `user` on a request whose requester is `requester` and
/// which stands as `state` says, through `config`. The error names the field and what to do
/// instead.
pub fn check_ask(
    ask: &ExtensionAsk,
    user: &str,
    requester: Option<&str>,
    state: AskedOf,
    config: &AccessConfig,
) -> Result<(), String> {
    if ask.asked_by != user {
        return Err(format!(
            "askedBy: must be the user asking ({user}); `ozctl extend` sets it"
        ));
    }
    if requester != Some(user) {
        return Err(format!(
            "only the requester ({}) may extend this grant; ask for a grant of your own with \
             `ozctl create`",
            requester.unwrap_or("none recorded")
        ));
    }
    if !state.ready {
        return Err(
            "the request is not Ready: only a grant in force can be extended; ask for a new \
             one with `ozctl create`"
                .into(),
        );
    }
    if state.pending {
        return Err(
            "an earlier extension of this grant still waits for approval (or for oz to record \
             it); wait for it with `ozctl get`"
                .into(),
        );
    }
    parse_positive_duration(&ask.by)
        .map_err(|e| format!("by: {} (for example 30m)", e.go_message()))?;
    if ask
        .reason
        .as_ref()
        .is_some_and(|r| r.chars().count() > MAX_REASON_LENGTH as usize)
    {
        return Err(format!("reason: at most {MAX_REASON_LENGTH} characters"));
    }
    let needs_reason = config.approval.as_ref().is_some_and(|a| a.reason_required);
    if needs_reason && ask.reason.as_deref().is_none_or(|r| r.trim().is_empty()) {
        return Err(
            "reason: the template's approval requires a reason; say why with --reason".into(),
        );
    }
    let max_count = config.max_extensions.map_or(MAX_ASKS, |m| m as usize);
    if state.earlier >= max_count {
        return Err(format!(
            "this grant has had {} extension asks, the most the template allows \
             (maxExtensions {max_count}); ask for a new grant with `ozctl create`",
            state.earlier
        ));
    }
    let cap = total_cap(config)?;
    if state.base + state.added >= cap {
        return Err(no_room_message(config, cap));
    }
    Ok(())
}

/// What [`check_ask`] reads of the request an ask is made on.
#[derive(Clone, Copy, Debug)]
pub struct AskedOf {
    /// Whether it is Ready.
    pub ready: bool,
    /// Its decided duration.
    pub base: TimeDelta,
    /// How many asks it had before this one.
    pub earlier: usize,
    /// What its granted asks add, as its status says.
    pub added: TimeDelta,
    /// Whether one of its asks still waits (or is not recorded in its status yet).
    pub pending: bool,
}

impl AskedOf {
    /// What `records` (its `status.extensions`) and `earlier` say, for a request in `ready`
    /// with decided duration `base`.
    pub fn of(ready: bool, base: TimeDelta, earlier: usize, records: &[ExtensionRecord]) -> Self {
        let added = records
            .iter()
            .filter_map(|r| r.added.as_deref())
            .filter_map(|a| parse_go_duration(a).ok())
            .fold(TimeDelta::zero(), |sum, a| sum + a);
        let pending = records.len() < earlier
            || records
                .iter()
                .any(|r| r.phase == ExtensionPhase::PendingApproval);
        Self {
            ready,
            base,
            earlier,
            added,
            pending,
        }
    }
}

/// What `records` (a `status.extensions`) say the granted asks added: where the reconcile
/// finds how much of a recorded `expiresAt` is extension, to keep the rest from growing.
pub fn recorded_added(records: &[ExtensionRecord]) -> TimeDelta {
    AskedOf::of(false, TimeDelta::zero(), 0, records).added
}

#[cfg(test)]
mod tests;
