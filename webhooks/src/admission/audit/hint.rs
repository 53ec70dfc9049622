//! What a denial for want of a grant tells the user to do: use the Brokered grant they hold
//! through oz, or ask through a template that can grant them the pod ([`oz_api::grant_hint`]).
//! Worded from what the lookup holds in memory ([`AccessLookup::denial_facts`]), so the denial
//! waits for no apiserver call of its own.
//!
//! [`AccessLookup::denial_facts`]: crate::admission::AccessLookup::denial_facts

use std::collections::BTreeSet;

use oz_api::{
    Asked, PodAction, Route,
    grant_hint::{Refused, Voice, grant_hint},
};

use crate::admission::DenialFacts;

/// The program the hints name. A user who runs it as the kubectl plugin knows it as `kubectl oz`
/// too; the webhook cannot tell which they use.
const OZCTL: &str = "ozctl";

/// The message denying `asked` in `namespace` for want of a grant: that the user has none for
/// the pod, then what to do, from `facts`. Where access is enforced, templates are written by
/// the members of `template_writers`: the message names them as whom to ask for one.
pub fn no_grant_message(
    facts: &DenialFacts,
    template_writers: &BTreeSet<String>,
    namespace: &str,
    asked: &Asked<'_>,
) -> String {
    let (user, pod) = (asked.user, asked.pod);
    let reason = format!("{user} has no active access request for pod {namespace}/{pod}");
    // Locked out: no template would help, the lock says why.
    if let Some(lock) = asked.lock_through(None) {
        return format!("{reason}: {}", lock.refusal());
    }
    // Their own grant for the pod, Brokered: a core exec is refused because it is not the
    // route the grant takes, and `ozctl exec` is what they want, not a new request.
    let brokered = Asked {
        route: Route::Brokered,
        ..*asked
    };
    let held = facts
        .ready
        .iter()
        .filter(|r| r.is_own(user) && r.covers(&brokered))
        .min_by(|a, b| (a.kind, &a.name).cmp(&(b.kind, &b.name)));
    if let (PodAction::Exec, Some(held)) = (asked.action, held) {
        return format!(
            "{reason} that admits kubectl exec; {user}'s {} {name} for it is Brokered, used \
             through oz: {OZCTL} exec {name} -n {namespace}",
            held.kind.request_kind(),
            name = held.name,
        );
    }
    let refused = Refused {
        user,
        groups: asked.groups,
        namespace,
        pod,
        action: asked.action,
    };
    let hint = grant_hint(&refused, facts.owner.clone(), &facts.templates);
    let writers: Vec<String> = template_writers.iter().cloned().collect();
    let voice = Voice {
        program: OZCTL,
        user,
        template_writers: &writers,
    };
    format!("{reason}; {}", hint.advice(&voice))
}

#[cfg(test)]
mod tests {
    use chrono::{TimeDelta, Utc};
    use oz_api::{
        AccessKind, ControllerKind, GrantSummary, RequestPhase, SessionMode,
        grant_hint::{PodOwner, PodWorkload, TemplateTarget},
    };

    use super::*;

    fn asked<'a>(groups: &'a [String], action: PodAction) -> Asked<'a> {
        Asked {
            user: "alice",
            groups,
            namespace: "team-a",
            locks: &[],
            pod: "web-0",
            action,
            route: Route::Direct,
            now: Utc::now(),
        }
    }

    fn web() -> PodWorkload {
        PodWorkload {
            kind: ControllerKind::Deployment,
            name: "web".into(),
        }
    }

    fn template(name: &str, mode: SessionMode) -> TemplateTarget {
        TemplateTarget {
            kind: AccessKind::Exec,
            name: name.into(),
            workload: Some(web()),
            allowed_groups: vec!["devs".into()],
            session_mode: mode,
            hub: None,
            names_clusters: false,
        }
    }

    fn ready(name: &str, by: &str, mode: Option<SessionMode>) -> GrantSummary {
        GrantSummary {
            kind: AccessKind::Exec,
            name: name.into(),
            template: "web-rec".into(),
            requested_by: Some(by.into()),
            phase: Some(RequestPhase::Ready),
            pod_name: Some("web-0".into()),
            session_mode: mode,
            expires_at: Some(Utc::now() + TimeDelta::hours(1)),
            approvers: Vec::new(),
            extensions: Vec::new(),
        }
    }

    fn writers() -> BTreeSet<String> {
        BTreeSet::from(["system:masters".to_string()])
    }

    #[test]
    fn a_denial_names_the_templates_that_can_grant_the_pod_and_how_to_ask() {
        let facts = DenialFacts {
            owner: PodOwner::Workload(web()),
            templates: vec![
                template("web-rec", SessionMode::Brokered),
                template("web", SessionMode::Direct),
            ],
            ready: Vec::new(),
        };
        let devs = ["devs".to_string()];
        assert_eq!(
            no_grant_message(&facts, &writers(), "shop", &asked(&devs, PodAction::Exec)),
            "alice has no active access request for pod shop/web-0; ExecAccessTemplates that \
             can grant it to alice: web: ozctl create exec web --target-pod web-0 -n shop; \
             web-rec (Brokered: its grant is used with ozctl exec, not kubectl exec): \
             ozctl create exec web-rec --target-pod web-0 -n shop"
        );
        let qa = ["qa".to_string()];
        assert_eq!(
            no_grant_message(&facts, &writers(), "shop", &asked(&qa, PodAction::Exec)),
            "alice has no active access request for pod shop/web-0; no template grants it to \
             alice: ExecAccessTemplates web (admits devs), web-rec (admits devs); ask to be \
             added to one of those groups, or ask a template admin of shop (a member of \
             system:masters) for a template"
        );
        assert_eq!(
            no_grant_message(
                &DenialFacts::default(),
                &writers(),
                "shop",
                &asked(&devs, PodAction::PortForward)
            ),
            "alice has no active access request for pod shop/web-0; no template can grant \
             port-forward: oz grants exec and attach only"
        );
    }

    #[test]
    fn a_locked_user_is_told_the_lock_not_the_templates() {
        let facts = DenialFacts {
            owner: PodOwner::Workload(web()),
            templates: vec![template("web", SessionMode::Direct)],
            ready: Vec::new(),
        };
        let devs = ["devs".to_string()];
        let locks = [std::sync::Arc::new(oz_api::AccessLock::new(
            "alice-x",
            serde_json::from_value(serde_json::json!({"user": "alice", "reason": "INC-9"}))
                .unwrap(),
        ))];
        let locked = Asked {
            locks: &locks,
            ..asked(&devs, PodAction::Exec)
        };
        assert_eq!(
            no_grant_message(&facts, &writers(), "shop", &locked),
            "alice has no active access request for pod shop/web-0: locked by AccessLock alice-x: INC-9"
        );
    }

    #[test]
    fn a_user_holding_a_brokered_grant_is_sent_to_ozctl_exec() {
        let devs = ["devs".to_string()];
        let mut facts = DenialFacts {
            owner: PodOwner::Workload(web()),
            templates: vec![template("web-rec", SessionMode::Brokered)],
            ready: vec![
                ready("bobs", "bob", Some(SessionMode::Brokered)),
                ready("alices", "alice", Some(SessionMode::Brokered)),
            ],
        };
        assert_eq!(
            no_grant_message(&facts, &writers(), "shop", &asked(&devs, PodAction::Exec)),
            "alice has no active access request for pod shop/web-0 that admits kubectl exec; \
             alice's ExecAccessRequest alices for it is Brokered, used through oz: \
             ozctl exec alices -n shop"
        );
        // Only her own, only Brokered, only before it ends.
        facts.ready = vec![
            ready("bobs", "bob", Some(SessionMode::Brokered)),
            ready("alices", "alice", None),
        ];
        let mut ended = ready("old", "alice", Some(SessionMode::Brokered));
        ended.expires_at = Some(Utc::now() - TimeDelta::minutes(1));
        facts.ready.push(ended);
        let told = no_grant_message(&facts, &writers(), "shop", &asked(&devs, PodAction::Exec));
        assert!(told.contains("ExecAccessTemplate web-rec"), "{told}");
    }
}
