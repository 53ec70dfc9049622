//! What `ozctl exec` says when it cannot run, so the next command is in the error: for a pod
//! named in place of a request, the user's request for it, or the templates that could grant it
//! to them with the `ozctl create` line for each (the rule and words the enforced webhook uses,
//! [`oz_api::grant_hint`]); for a request that is not Ready, the command that asks again for
//! the same pod; for one still waiting for approval, how to follow it.
//!
//! Everything here is read with the user's own rights, and only on the way to an error: a read
//! they are refused makes the hint plainer, never the error another.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use oz_api::{
    AccessKind, ExecAccessTemplate, PodAction, RequestPhase,
    grant_hint::{GrantHint, PodOwner, Refused, TemplateTarget, Voice, grant_hint},
};

use super::{
    error::CliError,
    identity::{Me, whoami},
    requests::{self, RequestView},
    session::Session,
    terminal_text::printable_line,
    timefmt,
};

/// What the hint reads of the cluster about one pod, as the user may read it.
struct PodFacts {
    me: Me,
    /// [`PodOwner::Unknown`] when the user may not read the pod.
    owner: PodOwner,
    templates: Vec<TemplateTarget>,
}

impl PodFacts {
    /// Who `pod` in the session's namespace belongs to, the ExecAccessTemplates there and who
    /// the user is. `None` when the pod does not exist, or the templates or the user cannot be
    /// read (then there is nothing to offer).
    async fn read(session: &Session, pod: &str) -> Option<Self> {
        let owner = match session.api::<Pod>().get_metadata_opt(pod).await {
            Ok(None) => return None,
            Ok(Some(found)) => PodOwner::of_pod(&found.metadata),
            // Most requesters may not read pods: the templates are still worth naming.
            Err(_) => PodOwner::Unknown,
        };
        let templates = session
            .api::<ExecAccessTemplate>()
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .iter()
            .map(TemplateTarget::of)
            .collect();
        let me = whoami(session).await.ok()?;
        Some(Self {
            me,
            owner,
            templates,
        })
    }

    /// The templates that could grant the user exec into `pod`.
    fn hint(&self, session: &Session, pod: &str) -> GrantHint {
        let refused = Refused {
            user: &self.me.username,
            groups: &self.me.groups,
            namespace: &session.namespace,
            pod,
            action: PodAction::Exec,
        };
        grant_hint(&refused, self.owner.clone(), &self.templates)
    }
}

/// `ozctl exec NAME` found no request NAME (`missing`): when NAME is a pod here, the user's
/// request for it, or else the templates that could grant it to them. Otherwise `missing`.
pub async fn not_a_request(session: &Session, name: &str, missing: CliError) -> CliError {
    let Some(facts) = PodFacts::read(session, name).await else {
        return missing;
    };
    if facts.owner == PodOwner::Unknown {
        // Not readable: whether NAME is a pod at all is not known.
        return missing;
    }
    let mine = requests::list(session, &AccessKind::ALL)
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|r| held_for(r, &facts.me.username, name))
        // A Ready one first, then the newest.
        .max_by_key(|r| (r.phase() == Some(RequestPhase::Ready), r.created));
    if let Some(request) = mine {
        return CliError::PodNotRequest {
            pod: name.to_string(),
            kind: request.kind.request_kind(),
            phase: request.phase_word(),
            hint: session.hint(&format!("exec {}", request.name)),
            request: request.name,
        };
    }
    let voice = Voice {
        program: &session.hints.program,
        user: "you",
        template_writers: &[],
    };
    CliError::NoGrantForPod {
        pod: name.to_string(),
        namespace: session.namespace.clone(),
        advice: printable_line(&facts.hint(session, name).advice(&voice)).into_owned(),
    }
}

/// Whether `request` is `user`'s, for `pod`, and Ready or on its way to it.
fn held_for(request: &RequestView, user: &str, pod: &str) -> bool {
    use RequestPhase::{Pending, PendingApproval, Ready};
    request
        .requester
        .as_ref()
        .is_some_and(|r| r.username == user)
        && request.status.pod_name.as_deref() == Some(pod)
        && !request.deleting
        && matches!(
            request.phase(),
            None | Some(Ready | Pending | PendingApproval)
        )
}

/// The command that asks again for what `request`, which is not Ready, asked for: through its
/// template for its pod when that template can still grant the pod to the user; else through
/// the first template that can (in [`oz_api::grant_hint`]'s order); else through its template,
/// leaving the pod to oz (also for pod access, whose pod was a copy).
pub async fn ask_again(session: &Session, request: &RequestView) -> String {
    let plain = session.hint(&format!(
        "create {} {}",
        request.kind.word(),
        request.template
    ));
    let (AccessKind::Exec, Some(pod)) = (request.kind, request.status.pod_name.as_deref()) else {
        return plain;
    };
    let Some(facts) = PodFacts::read(session, pod).await else {
        return plain;
    };
    let hint = facts.hint(session, pod);
    let same = (hint.granting.iter()).find(|t| t.name == request.template && t.hub.is_none());
    match same.or(hint.granting.first()) {
        Some(template) => hint.create_line(template, &session.hints.program),
        None => plain,
    }
}

/// `ozctl exec` waited `timeout` for request `name` of `kind` and it is not settled
/// (`timed_out`): when it still waits for approval, that, and how to follow it. Otherwise
/// `timed_out`.
pub async fn still_waiting(
    session: &Session,
    kind: AccessKind,
    name: &str,
    timeout: Duration,
    timed_out: CliError,
) -> CliError {
    let Ok(Some(request)) = requests::get(session, kind, name).await else {
        return timed_out;
    };
    if request.phase() != Some(RequestPhase::PendingApproval) {
        return timed_out;
    }
    CliError::AwaitingApproval {
        kind: kind.request_kind(),
        name: name.to_string(),
        after: timefmt::compact(timeout),
        progress: printable_line(&request.progress()).into_owned(),
        next: format!(
            "follow it with `{}` and run `{}` then, or wait longer with --timeout",
            session.hint(&format!("get requests {name}")),
            session.hint(&format!("exec {name}")),
        ),
    }
}

#[cfg(test)]
mod tests {
    use oz_api::Requester;

    use super::*;
    use crate::fixtures::exec_request;

    fn request(by: &str, pod: Option<&str>, phase: Option<RequestPhase>) -> RequestView {
        let mut request = exec_request(Some(Requester {
            username: by.into(),
            ..Default::default()
        }));
        let status = request.status.get_or_insert_with(Default::default);
        status.pod_name = pod.map(str::to_string);
        status.phase = phase;
        RequestView::of(&request)
    }

    #[test]
    fn a_pod_is_held_by_the_users_own_request_for_it_until_it_is_over() {
        use RequestPhase::*;
        for phase in [None, Some(Ready), Some(Pending), Some(PendingApproval)] {
            assert!(
                held_for(&request("alice", Some("web-0"), phase), "alice", "web-0"),
                "{phase:?}"
            );
        }
        for phase in [Expired, Revoked, Denied, Failed] {
            let over = request("alice", Some("web-0"), Some(phase));
            assert!(!held_for(&over, "alice", "web-0"), "{phase:?}");
        }
        let ready = Some(Ready);
        assert!(!held_for(
            &request("bob", Some("web-0"), ready),
            "alice",
            "web-0"
        ));
        assert!(!held_for(
            &request("alice", Some("web-1"), ready),
            "alice",
            "web-0"
        ));
        assert!(!held_for(&request("alice", None, ready), "alice", "web-0"));
    }
}
