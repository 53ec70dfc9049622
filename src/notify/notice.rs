//! One piece of news about one request: what the request controller hands the notifier.

use k8s_openapi::jiff::Timestamp;
use oz_api::{AccessKind, NotificationConfig};

/// What happened to a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NoticeKind {
    PendingApproval,
    Approved,
    Denied,
    Ready,
    ExpiringSoon,
    Expired,
    BreakGlass,
    /// An ask to extend the grant waits for approval.
    ExtensionPending,
    /// The grant was extended.
    Extended,
    /// An ask to extend the grant was denied.
    ExtensionDenied,
}

/// One piece of news about one request, with what a sink is told about it.
#[derive(Clone, Debug, PartialEq)]
pub struct Notice {
    pub kind: NoticeKind,
    /// Which kind of request.
    pub access: AccessKind,
    pub namespace: String,
    pub name: String,
    /// The request's uid: with `kind`, it makes the CloudEvent's id, so a sink can drop
    /// duplicates. An extension's notices carry the uid with the ask's number
    /// (`UID.extension-2`), so each ask is announced once.
    pub uid: String,
    /// The template's `accessConfig.notifications`, if it has one.
    pub sinks: Option<NotificationConfig>,
    /// The request's requester.
    pub requester: String,
    /// The template's name.
    pub template: String,
    /// `spec.reason` and `spec.ticket`.
    pub reason: Option<String>,
    pub ticket: Option<String>,
    /// The pod, once chosen.
    pub pod: Option<String>,
    /// `status.expiresAt`, once fixed.
    pub expires_at: Option<Timestamp>,
    /// Who approved (or denied), in order.
    pub approvers: Vec<String>,
    /// A sentence for humans: what happened and why.
    pub message: String,
}
