//! The one rule for "which Ready grant lets user U do action A on pod P at time T", asked by
//! the audit webhook (what to record), the enforced webhook (whether to deny) and the sessions
//! broker (what a session opens under), over one summary of a request ([`GrantSummary`]).
//!
//! A request grants an action on a pod when it is Ready, for that pod, before its `expiresAt`;
//! when its kind grants the action (an ExecAccessRequest `exec`, a PodAccessRequest `exec` and
//! `attach`; neither port-forward nor debug); when the action takes the grant's route (a
//! Direct grant's RBAC is on the core API, a Brokered grant's on oz's sessions API only); and
//! when it is the user's: they made the request, or its template grants to allowedGroups (or
//! it is a grant Oz made, which oz adopted as Oz bound it) and they are in one of them; and
//! when no AccessLock holding now matches the user, the namespace or the template. Of
//! several, the user's own wins, then the one ending last (the longest session), then the
//! first by kind and name, so the choice is stable.

use std::{borrow::Borrow, cmp::Reverse, sync::Arc};

use chrono::{DateTime, Utc};
use k8s_openapi::jiff::Timestamp;

use crate::{
    AccessConfig, AccessKind, AccessLock, AccessRequest, GrantTo, LockTarget, RequestPhase,
    SessionMode, locking,
};

/// A way into a pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PodAction {
    /// `pods/exec`.
    Exec,
    /// `pods/attach`.
    Attach,
    /// `pods/portforward`.
    PortForward,
    /// `pods/ephemeralcontainers` (`kubectl debug`).
    Debug,
}

impl PodAction {
    /// The Event reason, as Oz names the first two: `PodExec`, `PodAttach`, `PodPortForward`,
    /// `PodDebug`.
    pub fn reason(self) -> &'static str {
        match self {
            Self::Exec => "PodExec",
            Self::Attach => "PodAttach",
            Self::PortForward => "PodPortForward",
            Self::Debug => "PodDebug",
        }
    }

    /// The Event action, as Oz names the first two.
    pub fn event_action(self) -> &'static str {
        match self {
            Self::Exec => "RecordedExec",
            Self::Attach => "RecordedAttach",
            Self::PortForward => "RecordedPortForward",
            Self::Debug => "RecordedDebug",
        }
    }

    /// Whether a grant of `kind` grants this action (its Role's rules, in
    /// `src/builders/rbac.rs` and `pod.rs`).
    pub fn granted_by(self, kind: AccessKind) -> bool {
        match self {
            Self::Exec => true,
            Self::Attach => kind == AccessKind::Pod,
            Self::PortForward | Self::Debug => false,
        }
    }
}

/// How an action reaches the pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Route {
    /// Through the core API (`kubectl exec`), which a Direct grant's RBAC allows.
    Direct,
    /// Through oz's sessions API (`ozctl exec`), recorded, which a Brokered grant's RBAC allows.
    Brokered,
}

impl Route {
    /// The route a grant in `mode` allows (its `status.sessionMode`; none is Direct).
    pub fn of(mode: Option<SessionMode>) -> Self {
        match mode {
            Some(SessionMode::Brokered) => Self::Brokered,
            _ => Self::Direct,
        }
    }
}

/// What the rule reads of one request of either kind.
#[derive(Clone, Debug, PartialEq)]
pub struct GrantSummary {
    /// Its kind.
    pub kind: AccessKind,
    /// Its name.
    pub name: String,
    /// `spec.templateName`.
    pub template: String,
    /// `spec.requester.username`. `None`: the request names no requester (of requests that can
    /// be Ready, only a grant Oz made, which oz adopted).
    pub requested_by: Option<String>,
    /// `status.phase`.
    pub phase: Option<RequestPhase>,
    /// `status.podName`.
    pub pod_name: Option<String>,
    /// `status.sessionMode`: `Some(Brokered)` for a Brokered grant.
    pub session_mode: Option<SessionMode>,
    /// `status.expiresAt`.
    pub expires_at: Option<DateTime<Utc>>,
    /// The user names in `status.approvals`, oldest first; for a request a fleet hub
    /// forwarded, the approvers the hub counted, as `NAME@HUB` (a hub's user, not this
    /// cluster's).
    pub approvers: Vec<String>,
    /// The granted extensions (`status.extensions`), as the audit trail words them:
    /// `+30m asked by alice, approved by dave`.
    pub extensions: Vec<String>,
}

/// The approvers of `request`'s grant (see [`GrantSummary::approvers`]).
fn approvers<R: AccessRequest>(request: &R) -> Vec<String> {
    if let Some(forwarded) = request.forwarded() {
        return forwarded
            .approvers
            .iter()
            .map(|a| format!("{}@{}", a.approver, forwarded.hub))
            .collect();
    }
    request
        .request_status()
        .map(|s| s.approvals.iter().map(|a| a.approver.clone()).collect())
        .unwrap_or_default()
}

/// The extensions that moved `status`'s grant, as [`GrantSummary::extensions`] words them.
fn granted_extensions(status: &crate::RequestStatus) -> Vec<String> {
    status
        .extensions
        .iter()
        .filter(|e| e.phase == crate::ExtensionPhase::Granted)
        .map(|e| {
            let approvers: Vec<&str> = e.approvals.iter().map(|a| a.approver.as_str()).collect();
            let approved = match approvers.as_slice() {
                [] => String::new(),
                names => format!(", approved by {}", names.join(", ")),
            };
            let added = e.added.as_deref().unwrap_or(&e.by);
            format!("+{added} asked by {}{approved}", e.asked_by)
        })
        .collect()
}

impl GrantSummary {
    /// The summary of `request`.
    pub fn of<R: AccessRequest>(request: &R) -> Self {
        let status = request.request_status();
        Self {
            kind: R::KIND,
            name: request.meta().name.clone().unwrap_or_default(),
            template: request.template_name().to_string(),
            requested_by: request.requester().map(|r| r.username.clone()),
            phase: status.and_then(|s| s.phase),
            pod_name: status.and_then(|s| s.pod_name.clone()),
            session_mode: status.and_then(|s| s.session_mode),
            expires_at: status
                .and_then(|s| s.expires_at.as_ref())
                .and_then(|t| DateTime::from_timestamp_micros(t.0.as_microsecond())),
            approvers: approvers(request),
            extensions: status.map(granted_extensions).unwrap_or_default(),
        }
    }

    /// Whether this request is Ready for `pod`: what a lookup narrows the candidates to before
    /// [`granting`] judges them.
    pub fn ready_for(&self, pod: &str) -> bool {
        self.phase == Some(RequestPhase::Ready) && self.pod_name.as_deref() == Some(pod)
    }

    /// Whether the grant, whoever it is for, covers `asked`: Ready for the pod, not over, and
    /// granting the action by the route taken.
    pub fn covers(&self, asked: &Asked<'_>) -> bool {
        self.ready_for(asked.pod)
            && self.expires_at.is_some_and(|at| at > asked.now)
            && asked.action.granted_by(self.kind)
            && Route::of(self.session_mode) == asked.route
    }

    /// Whether `user` made this request: their own grant, which wins over a group's.
    pub fn is_own(&self, user: &str) -> bool {
        self.requested_by.as_deref() == Some(user)
    }

    /// Whether the grant is the user's: they made it, or it is bound to allowedGroups (as
    /// `template` says, or as Oz bound the grants oz adopted) and they are in one of them.
    pub fn is_for(&self, template: Option<&AccessConfig>, user: &str, groups: &[String]) -> bool {
        if self.is_own(user) {
            return true;
        }
        template.is_some_and(|t| {
            let to_groups = t.grant_to() == GrantTo::AllowedGroups || self.requested_by.is_none();
            to_groups && t.admits(groups)
        })
    }
}

/// The question: may `user` (in `groups`) take `action` on `pod` in `namespace` by `route`, at
/// `now`, with `locks` in place.
#[derive(Clone, Copy, Debug)]
pub struct Asked<'a> {
    pub user: &'a str,
    pub groups: &'a [String],
    pub namespace: &'a str,
    pub pod: &'a str,
    pub action: PodAction,
    pub route: Route,
    pub now: DateTime<Utc>,
    /// The AccessLocks: a grant one of them matches (for this user, namespace and template)
    /// lets no one through while it holds.
    pub locks: &'a [Arc<AccessLock>],
}

impl Asked<'_> {
    /// The lock that keeps this user from `grant`, if one holds.
    pub fn lock_on(&self, grant: &GrantSummary) -> Option<&AccessLock> {
        self.lock_through(Some((grant.kind, &grant.template)))
    }

    /// The lock that holds now over this user in the pod's namespace through `template` (its
    /// kind and name), or, for `None`, whatever the template: one naming a template matches
    /// only that template.
    pub fn lock_through(&self, template: Option<(AccessKind, &str)>) -> Option<&AccessLock> {
        let target = LockTarget {
            user: self.user,
            groups: self.groups,
            namespace: self.namespace,
            template,
        };
        let now = Timestamp::from_microsecond(self.now.timestamp_micros()).ok()?;
        locking(self.locks.iter().map(|l| &**l), &target, now)
    }
}

/// The grant among `requests` (those of the pod's namespace) that lets `asked` through, if
/// any, with `template(kind, name)` giving each request's template (`None`: it is gone). See
/// the module documentation for the rule and the order of preference.
pub fn granting<'r, T: Borrow<AccessConfig>>(
    requests: impl IntoIterator<Item = &'r GrantSummary>,
    template: impl Fn(AccessKind, &str) -> Option<T>,
    asked: &Asked<'_>,
) -> Option<&'r GrantSummary> {
    requests
        .into_iter()
        .filter(|r| r.covers(asked))
        .filter(|r| asked.lock_on(r).is_none())
        .filter(|r| {
            let template = template(r.kind, &r.template);
            r.is_for(
                template.as_ref().map(Borrow::borrow),
                asked.user,
                asked.groups,
            )
        })
        .min_by_key(|r| {
            (
                !r.is_own(asked.user),
                Reverse(r.expires_at),
                r.kind,
                r.name.clone(),
            )
        })
}

#[cfg(test)]
mod tests;
