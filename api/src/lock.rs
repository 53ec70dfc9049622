//! Locks: a kill switch that ends everything matching it at once. An [`AccessLock`] names a
//! user, a group, a template or a namespace (several together must all match), with a reason
//! and an optional end. While it holds, oz revokes every matching grant and closes every
//! matching open brokered session, the grant rule grants nothing it matches, and oz's webhooks
//! refuse matching new requests and decisions on them, with its reason.
//!
//! A lock is cluster-scoped: it is a security team's tool that must reach every namespace at
//! once, and a namespaced lock could be written (or deleted) by whoever administers that
//! namespace, the people a lock may be aimed at. Only the groups bound to the install's
//! `oz-lock-admin` ClusterRole may write locks.

use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::{AccessKind, approval::MAX_REASON_LENGTH};

/// What an AccessLock locks: all of the fields given must match.
// Each printcolumn says `type_ = "string"`, which clippy takes for a repeated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "crds.wizardofoz.co",
    version = "v1alpha1",
    kind = "AccessLock",
    shortname = "lock",
    category = "oz",
    printcolumn(name = "User", type_ = "string", json_path = ".spec.user"),
    printcolumn(name = "Group", type_ = "string", json_path = ".spec.group"),
    printcolumn(name = "Namespace", type_ = "string", json_path = ".spec.namespace"),
    printcolumn(name = "Template", type_ = "string", json_path = ".spec.template.name"),
    printcolumn(name = "Until", type_ = "string", json_path = ".spec.expiresAt"),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".spec.reason",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.user) || has(self.group) || has(self.namespace) || has(self.template)")
    .message("an AccessLock must name at least one of spec.user, spec.group, spec.namespace and spec.template"))]
pub struct AccessLockSpec {
    /// The user whose access is locked (their own grants, and grants they use through a group).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub user: Option<String>,
    /// A group whose members' access is locked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub group: Option<String>,
    /// A namespace in which all access is locked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub namespace: Option<String>,
    /// A template whose grants are locked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<LockedTemplate>,
    /// Why: told to everyone refused because of the lock, and kept in the records.
    #[schemars(length(min = 1, max = MAX_REASON_LENGTH))]
    pub reason: String,
    /// When the lock stops holding (RFC 3339). Grants it ended stay ended. Unset: until it is
    /// deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Time>,
}

/// A template a lock names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct LockedTemplate {
    /// Its namespace.
    #[schemars(length(min = 1, max = 63))]
    pub namespace: String,
    /// Its name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// `ExecAccessTemplate` or `PodAccessTemplate`; unset: a template of either kind by that name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<LockedKind>,
}

/// The kind of a locked template.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum LockedKind {
    ExecAccessTemplate,
    PodAccessTemplate,
}

/// What a lock is matched against: someone's access through a template in a namespace.
#[derive(Clone, Copy, Debug)]
pub struct LockTarget<'a> {
    /// The user.
    pub user: &'a str,
    /// Their groups.
    pub groups: &'a [String],
    /// The namespace.
    pub namespace: &'a str,
    /// The template's kind and name, when known.
    pub template: Option<(AccessKind, &'a str)>,
}

impl AccessLockSpec {
    /// Whether the lock holds at `now`: it has not reached its `expiresAt`.
    pub fn holds(&self, now: Timestamp) -> bool {
        self.expires_at.as_ref().is_none_or(|end| now < end.0)
    }

    /// Whether every field the lock gives matches `target`.
    pub fn matches(&self, target: &LockTarget<'_>) -> bool {
        let user = self.user.as_deref().is_none_or(|u| u == target.user);
        let group = self
            .group
            .as_ref()
            .is_none_or(|g| target.groups.contains(g));
        let namespace = self
            .namespace
            .as_deref()
            .is_none_or(|n| n == target.namespace);
        let template = self.template.as_ref().is_none_or(|locked| {
            target.template.is_some_and(|(kind, name)| {
                locked.namespace == target.namespace
                    && locked.name == name
                    && locked.kind.is_none_or(|k| k.access_kind() == kind)
            })
        });
        user && group && namespace && template
    }

    /// The sentence a refused user reads: `locked by AccessLock NAME: REASON`.
    pub fn refusal(&self, name: &str) -> String {
        format!("locked by AccessLock {name}: {}", self.reason)
    }
}

impl LockedKind {
    /// The access kind of a template of this kind.
    pub fn access_kind(self) -> AccessKind {
        match self {
            LockedKind::ExecAccessTemplate => AccessKind::Exec,
            LockedKind::PodAccessTemplate => AccessKind::Pod,
        }
    }
}

impl AccessLock {
    /// Its name.
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// The sentence a refused user reads: `locked by AccessLock NAME: REASON`.
    pub fn refusal(&self) -> String {
        self.spec.refusal(self.name())
    }
}

/// The first of `locks` that holds at `now` (and is not being deleted) and matches `target`,
/// by name: the one whose reason a refused user reads.
pub fn locking<'a>(
    locks: impl IntoIterator<Item = &'a AccessLock>,
    target: &LockTarget<'_>,
    now: Timestamp,
) -> Option<&'a AccessLock> {
    locks
        .into_iter()
        .filter(|lock| lock.metadata.deletion_timestamp.is_none())
        .filter(|lock| lock.spec.holds(now) && lock.spec.matches(target))
        .min_by_key(|lock| lock.name().to_string())
}

#[cfg(test)]
mod tests;
