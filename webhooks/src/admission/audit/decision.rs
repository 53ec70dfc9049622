//! Who is let into a pod: the grant that covers an access ([`find_grant`]), and whether an
//! access without one is denied ([`EnforceSettings`], [`denial`]). The choices are plain
//! functions over the requests and templates read; only [`find_grant`] reads them.

use std::collections::BTreeSet;

use oz_api::{AccessConfig, AccessKind, Asked, GrantSummary, PodAction, granting};

use crate::admission::{AccessLookup, LookupError};
use oz_audit::{AuditRecord, Grant};

/// Which pod accesses are denied without a grant. Off (no namespaces) by default.
///
/// Enforcement is only as strong as the webhook's failure policy: an unreachable oz behind
/// `Ignore` lets every access through. So the [`WebhookServer`](crate::WebhookServer) registers
/// these namespaces in a webhook of their own with `Fail`
/// ([`Registration::audit_enforced_namespaces`](oz_platform::Registration::audit_enforced_namespaces)):
/// while oz is down, access there is refused; elsewhere it is only not audited.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnforceSettings {
    /// Namespaces in which an access without an active grant is denied.
    pub namespaces: BTreeSet<String>,
    /// Members of these groups are never denied. Default `system:masters`.
    pub exempt_groups: BTreeSet<String>,
    /// oz's own user names (its ServiceAccount's `system:serviceaccount:NS:NAME`): an exec or
    /// attach by one of them is oz opening the stream of a brokered session, whose grant oz
    /// checked itself; it is recorded as `brokered` and never denied. Empty by default.
    pub brokers: BTreeSet<String>,
    /// Members of these groups may create, change and delete templates in [`Self::namespaces`];
    /// nobody else may there ([`crate::admission::templates`]). Default `system:masters`.
    pub template_writers: BTreeSet<String>,
}

impl Default for EnforceSettings {
    fn default() -> Self {
        Self {
            namespaces: BTreeSet::new(),
            exempt_groups: BTreeSet::from(["system:masters".to_string()]),
            brokers: BTreeSet::new(),
            template_writers: BTreeSet::from(["system:masters".to_string()]),
        }
    }
}

impl EnforceSettings {
    /// Whether `user`'s `action` is oz's own stream for a brokered session: an exec or attach
    /// by one of [`EnforceSettings::brokers`]. Port-forward and debug never are.
    pub fn is_broker(&self, user: &str, action: PodAction) -> bool {
        matches!(action, PodAction::Exec | PodAction::Attach) && self.brokers.contains(user)
    }

    /// Whether a user in `groups` needs a grant in `namespace`.
    pub fn applies(&self, namespace: &str, groups: &[String]) -> bool {
        self.namespaces.contains(namespace)
            && !groups.iter().any(|g| self.exempt_groups.contains(g))
    }
}

/// The grant that lets `asked` through ([`oz_api::granting`], the one rule the broker also
/// asks), from the requests Ready for the pod and their templates.
///
/// When `lookup` is a cache that finds none, its [`AccessLookup::uncached`] lookup is asked
/// before concluding there is none: the cache may not have seen a request become Ready yet.
pub async fn find_grant(
    lookup: &dyn AccessLookup,
    namespace: &str,
    asked: &Asked<'_>,
) -> Result<Option<Grant>, LookupError> {
    let grant = grant_in(lookup, namespace, asked).await?;
    match (grant, lookup.uncached()) {
        (None, Some(live)) => grant_in(live, namespace, asked).await,
        (grant, _) => Ok(grant),
    }
}

/// [`find_grant`], with what `lookup` reads.
async fn grant_in(
    lookup: &dyn AccessLookup,
    namespace: &str,
    asked: &Asked<'_>,
) -> Result<Option<Grant>, LookupError> {
    let candidates = lookup.may_grant(namespace, asked.pod).await?;
    // The templates only decide group grants, and one's own grant wins over those: read them
    // (each once) only when the user has none of their own here.
    let covering = candidates.iter().filter(|c| c.covers(asked));
    let own = covering.clone().any(|c| c.is_own(asked.user));
    let mut templates: Vec<(AccessKind, &str, Option<AccessConfig>)> = Vec::new();
    for candidate in covering.filter(|_| !own) {
        let (kind, name) = (candidate.kind, candidate.template.as_str());
        if !templates.iter().any(|(k, n, _)| (*k, *n) == (kind, name)) {
            let template = lookup.template(kind, namespace, name).await?;
            templates.push((kind, name, template.map(|t| t.config)));
        }
    }
    let template = |kind, name: &str| {
        templates
            .iter()
            .find(|(k, n, _)| *k == kind && *n == name)
            .and_then(|(_, _, t)| t.as_ref())
    };
    Ok(granting(&candidates, template, asked).map(grant_of))
}

fn grant_of(request: &GrantSummary) -> Grant {
    Grant {
        kind: request.kind.request_kind().into(),
        name: request.name.clone(),
        template: request.template.clone(),
        approvers: request.approvers.clone(),
        extensions: request.extensions.clone(),
    }
}

/// Why the access `record` describes is denied, if it is: enforcement applies to its user in
/// its namespace and no grant was found, or none could be looked up (enforcement fails closed).
/// `no_grant` words the first case (it is called only then): that the user has no grant, and
/// what to do ([`super::no_grant_message`]).
pub fn denial(
    enforce: &EnforceSettings,
    record: &AuditRecord,
    no_grant: impl FnOnce() -> String,
) -> Option<String> {
    if record.grant.is_some()
        || record.brokered
        || !enforce.applies(&record.namespace, &record.groups)
    {
        return None;
    }
    Some(match &record.grant_error {
        Some(e) => format!("oz could not check {}'s access requests: {e}", record.user),
        None => no_grant(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn no_grant() -> String {
        "no grant".into()
    }

    fn record(
        grant: Option<Grant>,
        grant_error: Option<&str>,
        user_groups: &[&str],
    ) -> AuditRecord {
        serde_json::from_value(json!({
            "time": "2026-11-21T00:00:00Z", "event": "PodExec", "requestUid": "r", "user": "alice",
            "groups": user_groups, "namespace": "team-a", "pod": "web-0", "operation": "CONNECT",
            "subresource": "exec", "container": null, "command": [], "tty": false,
            "stdin": false, "grant": grant, "grantError": grant_error, "dryRun": false,
            "allowed": true,
        }))
        .unwrap()
    }

    #[test]
    fn enforcement_denies_only_ungranted_unexempt_access_in_its_namespaces() {
        let enforce = EnforceSettings {
            namespaces: BTreeSet::from(["team-a".to_string()]),
            ..Default::default()
        };
        let granted = Grant {
            kind: "ExecAccessRequest".into(),
            name: "alices".into(),
            template: "web".into(),
            approvers: Vec::new(),
            extensions: Vec::new(),
        };
        assert_eq!(
            denial(&enforce, &record(Some(granted), None, &["devs"]), no_grant),
            None
        );
        assert_eq!(
            denial(&enforce, &record(None, None, &["devs"]), no_grant).as_deref(),
            Some("no grant")
        );
        assert_eq!(
            denial(
                &enforce,
                &record(None, Some("timed out"), &["devs"]),
                no_grant
            )
            .as_deref(),
            Some("oz could not check alice's access requests: timed out"),
            "fails closed"
        );
        assert_eq!(
            denial(&enforce, &record(None, None, &["system:masters"]), no_grant),
            None
        );
        assert_eq!(
            denial(
                &EnforceSettings::default(),
                &record(None, None, &[]),
                no_grant
            ),
            None
        );
    }

    #[test]
    fn ozs_own_brokered_exec_is_marked_and_never_denied() {
        let oz = "system:serviceaccount:oz-system:oz";
        let enforce = EnforceSettings {
            namespaces: BTreeSet::from(["team-a".to_string()]),
            brokers: BTreeSet::from([oz.to_string()]),
            ..Default::default()
        };
        use oz_api::PodAction;
        assert!(enforce.is_broker(oz, PodAction::Exec));
        assert!(enforce.is_broker(oz, PodAction::Attach));
        assert!(!enforce.is_broker(oz, PodAction::PortForward));
        assert!(!enforce.is_broker(oz, PodAction::Debug));
        assert!(!enforce.is_broker("alice", PodAction::Exec));
        let mut by_oz = record(None, None, &["system:serviceaccounts"]);
        by_oz.brokered = true;
        assert_eq!(denial(&enforce, &by_oz, no_grant), None);
        by_oz.brokered = false;
        assert!(
            denial(&enforce, &by_oz, no_grant).is_some(),
            "only as a broker"
        );
    }
}
