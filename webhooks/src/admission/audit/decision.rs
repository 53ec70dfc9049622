//! Who is let into a pod: the grant that covers an access ([`find_grant`]), and whether an
//! access without one is denied ([`EnforceSettings`], [`denial`]). The choices are plain
//! functions over the requests and templates read; only [`find_grant`] reads them.

use std::collections::BTreeSet;

use oz_api::{AccessConfig, GrantTo};

use super::{AuditRecord, Grant};
use crate::admission::{AccessLookup, LookupError, RequestSummary};

/// Which pod accesses are denied without a grant. Off (no namespaces) by default.
///
/// Enforcement is only as strong as the webhook's failure policy: an unreachable oz behind
/// `Ignore` lets every access through. So the [`WebhookServer`](crate::WebhookServer) registers
/// these namespaces in a webhook of their own with `Fail`
/// ([`Registration::audit_enforced_namespaces`](crate::Registration::audit_enforced_namespaces)):
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
    pub fn is_broker(&self, user: &str, action: super::PodAction) -> bool {
        matches!(action, super::PodAction::Exec | super::PodAction::Attach)
            && self.brokers.contains(user)
    }

    /// Whether a user in `groups` needs a grant in `namespace`.
    pub fn applies(&self, namespace: &str, groups: &[String]) -> bool {
        self.namespaces.contains(namespace)
            && !groups.iter().any(|g| self.exempt_groups.contains(g))
    }
}

/// The active grant that lets `user` (in `groups`) into `pod`: a Ready request in the pod's
/// namespace whose `status.podName` is the pod, and which `user` created, or whose template
/// grants to its allowedGroups and `user` is in one of them. The user's own requests win;
/// ties go to the first by kind and name.
///
/// When `lookup` is a cache that finds none, its [`AccessLookup::uncached`] lookup is asked
/// before concluding there is none: the cache may not have seen a request become Ready yet.
pub async fn find_grant(
    lookup: &dyn AccessLookup,
    namespace: &str,
    pod: &str,
    user: &str,
    groups: &[String],
) -> Result<Option<Grant>, LookupError> {
    let grant = grant_in(lookup, namespace, pod, user, groups).await?;
    match (grant, lookup.uncached()) {
        (None, Some(live)) => grant_in(live, namespace, pod, user, groups).await,
        (grant, _) => Ok(grant),
    }
}

/// [`find_grant`], with what `lookup` reads.
async fn grant_in(
    lookup: &dyn AccessLookup,
    namespace: &str,
    pod: &str,
    user: &str,
    groups: &[String],
) -> Result<Option<Grant>, LookupError> {
    let candidates = candidates(lookup.may_grant(namespace, pod).await?, pod);
    if let Some(own) = own_grant(&candidates, user) {
        return Ok(Some(grant_of(own)));
    }
    for candidate in &candidates {
        let template = lookup
            .template(candidate.kind, namespace, &candidate.template)
            .await?;
        if template.is_some_and(|t| grants_to_groups(candidate, &t, groups)) {
            return Ok(Some(grant_of(candidate)));
        }
    }
    Ok(None)
}

/// The requests that could grant access to `pod`: Ready, and for that pod; in the order
/// grants are chosen, by kind then name.
pub fn candidates(requests: Vec<RequestSummary>, pod: &str) -> Vec<RequestSummary> {
    let mut candidates: Vec<RequestSummary> =
        requests.into_iter().filter(|r| r.may_grant(pod)).collect();
    candidates.sort_by(|a, b| (a.kind, &a.name).cmp(&(b.kind, &b.name)));
    candidates
}

/// The first of `candidates` that `user` created: one's own grant wins over a group's.
pub fn own_grant<'a>(candidates: &'a [RequestSummary], user: &str) -> Option<&'a RequestSummary> {
    candidates
        .iter()
        .find(|r| r.requested_by.as_deref() == Some(user))
}

/// Whether `request`, through `template`, also lets a user in `groups` in: the user is in one
/// of the template's allowedGroups, and the template grants to them, or the request is a grant
/// Oz made and oz adopted (Ready with no requester: nothing else is), which Oz bound to the
/// allowedGroups and oz keeps so until its end (docs/migrating-from-oz.md).
pub fn grants_to_groups(
    request: &RequestSummary,
    template: &AccessConfig,
    groups: &[String],
) -> bool {
    let to_groups = template.grant_to() == GrantTo::AllowedGroups || request.requested_by.is_none();
    to_groups && template.admits(groups)
}

fn grant_of(request: &RequestSummary) -> Grant {
    Grant {
        kind: request.kind.request_kind().into(),
        name: request.name.clone(),
        template: request.template.clone(),
        approvers: request.approvers.clone(),
    }
}

/// Why the access `record` describes is denied, if it is: enforcement applies to its user in
/// its namespace and no grant was found, or none could be looked up (enforcement fails closed).
pub fn denial(enforce: &EnforceSettings, record: &AuditRecord) -> Option<String> {
    if record.grant.is_some()
        || record.brokered
        || !enforce.applies(&record.namespace, &record.groups)
    {
        return None;
    }
    Some(match &record.grant_error {
        Some(e) => format!("oz could not check {}'s access requests: {e}", record.user),
        None => format!(
            "{} has no active access request for pod {}/{}: create an ExecAccessRequest \
             or PodAccessRequest and wait until it is Ready",
            record.user, record.namespace, record.pod
        ),
    })
}

#[cfg(test)]
mod tests {
    use oz_api::{AccessKind, RequestPhase};
    use serde_json::json;

    use super::*;

    fn request(kind: AccessKind, name: &str, user: &str, phase: RequestPhase) -> RequestSummary {
        RequestSummary {
            kind,
            name: name.into(),
            template: "web".into(),
            requested_by: Some(user.into()),
            phase: Some(phase),
            pod_name: Some("web-0".into()),
            approvers: Vec::new(),
        }
    }

    fn groups(names: &[&str]) -> Vec<String> {
        names.iter().map(|g| g.to_string()).collect()
    }

    #[test]
    fn only_ready_requests_for_the_pod_are_candidates_in_kind_then_name_order() {
        let mut elsewhere = request(
            AccessKind::Exec,
            "a-other-pod",
            "alice",
            RequestPhase::Ready,
        );
        elsewhere.pod_name = Some("web-1".into());
        let found = candidates(
            vec![
                request(AccessKind::Pod, "b", "bob", RequestPhase::Ready),
                request(AccessKind::Exec, "z", "carol", RequestPhase::Ready),
                request(
                    AccessKind::Exec,
                    "a-pending",
                    "alice",
                    RequestPhase::Pending,
                ),
                elsewhere,
                request(AccessKind::Exec, "c", "dave", RequestPhase::Ready),
            ],
            "web-0",
        );
        let names: Vec<_> = found.iter().map(|r| (r.kind, r.name.as_str())).collect();
        assert_eq!(
            names,
            [
                (AccessKind::Exec, "c"),
                (AccessKind::Exec, "z"),
                (AccessKind::Pod, "b")
            ]
        );
    }

    #[test]
    fn ones_own_request_is_the_grant() {
        let found = [
            request(AccessKind::Exec, "carols", "carol", RequestPhase::Ready),
            request(AccessKind::Pod, "alices", "alice", RequestPhase::Ready),
        ];
        assert_eq!(
            own_grant(&found, "alice").map(|r| r.name.as_str()),
            Some("alices")
        );
        assert_eq!(own_grant(&found, "mallory"), None);
    }

    #[test]
    fn only_a_template_granting_to_its_groups_or_a_grant_oz_made_lets_other_members_in() {
        let config = |grant_to: &str| -> AccessConfig {
            serde_json::from_value(json!({
                "allowedGroups": ["devs"], "defaultDuration": "1h", "maxDuration": "2h",
                "grantTo": grant_to,
            }))
            .unwrap()
        };
        let carols = request(AccessKind::Exec, "carols", "carol", RequestPhase::Ready);
        let shared = config("AllowedGroups");
        assert!(grants_to_groups(&carols, &shared, &groups(&["qa", "devs"])));
        assert!(!grants_to_groups(&carols, &shared, &groups(&["qa"])));
        assert!(!grants_to_groups(
            &carols,
            &config("Requester"),
            &groups(&["devs"])
        ));
        // A grant Oz made, adopted by oz: Oz bound the allowedGroups, whatever grantTo says.
        let ozs = RequestSummary {
            requested_by: None,
            ..carols
        };
        assert!(grants_to_groups(
            &ozs,
            &config("Requester"),
            &groups(&["devs"])
        ));
        assert!(!grants_to_groups(
            &ozs,
            &config("Requester"),
            &groups(&["qa"])
        ));
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
        };
        assert_eq!(
            denial(&enforce, &record(Some(granted), None, &["devs"])),
            None
        );
        assert_eq!(
            denial(&enforce, &record(None, None, &["devs"])).as_deref(),
            Some(
                "alice has no active access request for pod team-a/web-0: create an \
                 ExecAccessRequest or PodAccessRequest and wait until it is Ready"
            )
        );
        assert_eq!(
            denial(&enforce, &record(None, Some("timed out"), &["devs"])).as_deref(),
            Some("oz could not check alice's access requests: timed out"),
            "fails closed"
        );
        assert_eq!(
            denial(&enforce, &record(None, None, &["system:masters"])),
            None
        );
        assert_eq!(
            denial(&EnforceSettings::default(), &record(None, None, &[])),
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
        use super::super::PodAction;
        assert!(enforce.is_broker(oz, PodAction::Exec));
        assert!(enforce.is_broker(oz, PodAction::Attach));
        assert!(!enforce.is_broker(oz, PodAction::PortForward));
        assert!(!enforce.is_broker(oz, PodAction::Debug));
        assert!(!enforce.is_broker("alice", PodAction::Exec));
        let mut by_oz = record(None, None, &["system:serviceaccounts"]);
        by_oz.brokered = true;
        assert_eq!(denial(&enforce, &by_oz), None);
        by_oz.brokered = false;
        assert!(denial(&enforce, &by_oz).is_some(), "only as a broker");
    }
}
