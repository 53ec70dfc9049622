//! The two request kinds seen the same way: a [`RequestView`] of either, and finding, listing
//! and deleting them without the user having to say which kind a name is.

use k8s_openapi::jiff::Timestamp;
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PropagationPolicy},
};
use oz_api::{
    AccessKind, AccessRequest, ExecAccessRequest, PodAccessRequest, RequestPhase, RequestStatus,
    Requester, condition_reason, conditions::failing,
};

use super::{error::CliError, kind_arg, output::object_json, session::Session};

/// What ozctl shows of a request of either kind.
#[derive(Clone, Debug)]
pub struct RequestView {
    pub kind: AccessKind,
    pub name: String,
    pub namespace: String,
    /// `spec.templateName`.
    pub template: String,
    /// `spec.requester`, as oz's admission webhook recorded it.
    pub requester: Option<Requester>,
    /// `spec.reason`: why access is needed.
    pub reason: Option<String>,
    /// `spec.ticket`: the ticket or incident it is for.
    pub ticket: Option<String>,
    /// `spec.cluster`: on a fleet hub, the spoke cluster it asks to be granted on.
    pub cluster: Option<String>,
    pub created: Option<Timestamp>,
    /// Whether it is being deleted.
    pub deleting: bool,
    /// Its status; empty until oz first looks at it.
    pub status: RequestStatus,
    /// The whole object, for `-o json|yaml`, without managedFields (as kubectl shows it).
    pub object: serde_json::Value,
}

impl RequestView {
    /// The view of a typed request.
    pub fn of<R: AccessRequest>(request: &R) -> RequestView {
        RequestView {
            kind: R::KIND,
            name: request.name_any(),
            namespace: request.namespace().unwrap_or_default(),
            template: request.template_name().to_string(),
            requester: request.requester().cloned(),
            reason: request.reason().map(str::to_string),
            ticket: request.ticket().map(str::to_string),
            cluster: request.cluster().map(str::to_string),
            created: request.meta().creation_timestamp.as_ref().map(|t| t.0),
            deleting: request.meta().deletion_timestamp.is_some(),
            status: request.request_status().cloned().unwrap_or_default(),
            object: object_json(request),
        }
    }

    /// `status.phase`.
    /// The number of its extension ask that waits for approval, if it is Ready and one does:
    /// the one oz records waiting, else a newer ask oz has not recorded yet.
    pub fn waiting_extension(&self) -> Option<u32> {
        if self.phase() != Some(RequestPhase::Ready) {
            return None;
        }
        let recorded = &self.status.extensions;
        let waiting = recorded
            .iter()
            .rev()
            .find(|r| r.phase == oz_api::ExtensionPhase::PendingApproval)
            .map(|r| r.number);
        let asks = self.extension_asks();
        waiting.or_else(|| (asks > recorded.len()).then_some(asks as u32))
    }

    /// How many extension asks it holds (`ozctl extend`), recorded by oz or not yet.
    pub fn extension_asks(&self) -> usize {
        self.object
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(oz_api::EXTEND_ANNOTATION))
            .and_then(|v| v.as_str())
            .and_then(|v| oz_api::extension::parse_asks(v).ok())
            .map_or(0, |asks| asks.len())
    }

    pub fn phase(&self) -> Option<RequestPhase> {
        self.status.phase
    }

    /// Who revoked the grant and when, once oz has (phase Revoked): the annotation asking for
    /// it, and the transition of AccessStillValid to Revoked.
    pub fn revocation(&self) -> Option<(String, Timestamp)> {
        if self.phase() != Some(RequestPhase::Revoked) {
            return None;
        }
        let by = self.object["metadata"]["annotations"][oz_api::REVOKE_ANNOTATION]
            .as_str()
            .unwrap_or("?")
            .to_string();
        let at = self
            .status
            .conditions
            .iter()
            .find(|c| c.reason() == oz_api::condition_reason::REVOKED)
            .map(|c| c.last_transition_time.0)?;
        Some((by, at))
    }

    /// [`CliError::Revoked`] for this request, once revoked; `hint` is the command to ask again.
    pub fn revoked_error(&self, hint: String) -> Option<CliError> {
        let (by, at) = self.revocation()?;
        Some(CliError::Revoked {
            kind: self.kind.request_kind(),
            name: self.name.clone(),
            by: crate::terminal_text::printable_line(&by).into_owned(),
            when: crate::timefmt::ago(Timestamp::now(), at),
            hint,
        })
    }

    /// When the grant ended: its revocation, or its expiresAt.
    pub fn ended_at(&self) -> Option<Timestamp> {
        match self.revocation() {
            Some((_, at)) => Some(at),
            None => self.expires_at(),
        }
    }

    /// The phase in a word, for tables: `Pending` until oz has set one, `Revoking` while it is
    /// deleted.
    pub fn phase_word(&self) -> String {
        if self.deleting {
            return "Revoking".into();
        }
        match self.status.phase {
            Some(phase) => format!("{phase:?}"),
            None => "Pending".into(),
        }
    }

    /// `status.expiresAt`.
    pub fn expires_at(&self) -> Option<Timestamp> {
        self.status.expires_at.as_ref().map(|t| t.0)
    }

    /// `spec.startAt`: when a scheduled request's access starts.
    pub fn starts_at(&self) -> Option<Timestamp> {
        self.object
            .pointer("/spec/startAt")
            .and_then(|v| v.as_str())
            .and_then(|t| t.parse().ok())
    }

    /// The user who made it, or `?` when no requester was recorded.
    pub fn requester_name(&self) -> &str {
        self.requester.as_ref().map_or("?", |r| r.username.as_str())
    }

    /// Whether `username` made it.
    pub fn is_by(&self, username: &str) -> bool {
        self.requester
            .as_ref()
            .is_some_and(|r| r.username == username)
    }

    /// What it is waiting for, in a line: the first condition that is not yet True, as
    /// `Type: message`.
    pub fn progress(&self) -> String {
        if self.deleting {
            return "being revoked".into();
        }
        if let Some(waiting) = self.waiting_for_spoke() {
            return waiting;
        }
        match failing(&self.status.conditions).next() {
            Some(c) if c.message.is_empty() => format!("{}: {}", c.type_(), c.reason()),
            Some(c) => format!("{}: {}", c.type_(), c.message),
            None if self.status.conditions.is_empty() => "waiting for oz to pick it up".into(),
            None => self.phase_word(),
        }
    }

    /// What a fleet hub's request waits for while its spoke grants it: phase Pending, with the
    /// hub's condition that it was forwarded to the spoke, or that the spoke cannot be reached
    /// yet; that condition's message says which.
    pub fn waiting_for_spoke(&self) -> Option<String> {
        if self.phase() != Some(RequestPhase::Pending) {
            return None;
        }
        let forwarding = self.status.conditions.iter().find(|c| {
            [
                condition_reason::FORWARDED,
                condition_reason::SPOKE_UNREACHABLE,
            ]
            .contains(&c.reason())
        })?;
        Some(format!("waiting for the spoke: {}", forwarding.message))
    }

    /// Why it did not work out, for Denied and Failed: the message of the first condition that
    /// is not True.
    pub fn problem(&self) -> String {
        failing(&self.status.conditions)
            .next()
            .map(|c| format!("{} ({})", c.message, c.type_()))
            .unwrap_or_else(|| "oz gave no reason; see the request's events".into())
    }
}

/// Request `name` of `kind`, if it exists.
pub async fn get(
    session: &Session,
    kind: AccessKind,
    name: &str,
) -> Result<Option<RequestView>, CliError> {
    match kind {
        AccessKind::Exec => get_typed::<ExecAccessRequest>(session, name).await,
        AccessKind::Pod => get_typed::<PodAccessRequest>(session, name).await,
    }
}

async fn get_typed<R: AccessRequest>(
    session: &Session,
    name: &str,
) -> Result<Option<RequestView>, CliError> {
    let api: Api<R> = session.api();
    let found = api.get_opt(name).await.map_err(|e| session.error(e))?;
    Ok(found.map(|r| RequestView::of(&r)))
}

/// Request `name`, of `kind` if given, else of whichever kind has it.
pub async fn find(
    session: &Session,
    name: &str,
    kind: Option<AccessKind>,
) -> Result<RequestView, CliError> {
    let mut found = Vec::new();
    for kind in kind_arg::or_both(kind) {
        if let Some(view) = get(session, kind, name).await? {
            found.push(view);
        }
    }
    match found.len() {
        0 => Err(CliError::NoRequest {
            name: name.to_string(),
            namespace: session.namespace.clone(),
            hint: session.hint("get"),
        }),
        1 => Ok(found.remove(0)),
        _ => Err(CliError::AmbiguousRequest { name: name.into() }),
    }
}

/// Every request of these kinds in the session's namespace, oldest first.
pub async fn list(session: &Session, kinds: &[AccessKind]) -> Result<Vec<RequestView>, CliError> {
    list_in(session, kinds, false).await
}

/// Every request of these kinds in the session's namespace, or in every namespace, oldest
/// first.
pub async fn list_in(
    session: &Session,
    kinds: &[AccessKind],
    all_namespaces: bool,
) -> Result<Vec<RequestView>, CliError> {
    let mut views = Vec::new();
    for &kind in kinds {
        let mut listed = match kind {
            AccessKind::Exec => list_typed::<ExecAccessRequest>(session, all_namespaces).await?,
            AccessKind::Pod => list_typed::<PodAccessRequest>(session, all_namespaces).await?,
        };
        views.append(&mut listed);
    }
    views.sort_by(|a, b| (a.created, &a.name).cmp(&(b.created, &b.name)));
    Ok(views)
}

async fn list_typed<R: AccessRequest>(
    session: &Session,
    all_namespaces: bool,
) -> Result<Vec<RequestView>, CliError> {
    let api: Api<R> = if all_namespaces {
        Api::all(session.client.clone())
    } else {
        session.api()
    };
    match api.list(&ListParams::default()).await {
        Ok(list) => Ok(list.items.iter().map(RequestView::of).collect()),
        Err(kube::Error::Api(status)) if status.code == 404 => Err(CliError::NotInstalled {
            kind: R::KIND.request_kind(),
        }),
        Err(e) => Err(session.error(e)),
    }
}

/// Asks oz to revoke the request's grant and keep the request as its record: the
/// [`oz_api::REVOKE_ANNOTATION`] annotation, naming `me` (oz's webhook checks it is the caller,
/// and the requester or an admin).
pub async fn ask_revocation(
    session: &Session,
    view: &RequestView,
    me: &str,
) -> Result<(), CliError> {
    let patch = serde_json::json!({
        "metadata": {"annotations": {oz_api::REVOKE_ANNOTATION: me}},
    });
    let params = PatchParams::default();
    let patch = Patch::Merge(&patch);
    let result = match view.kind {
        AccessKind::Exec => session
            .api::<ExecAccessRequest>()
            .patch(&view.name, &params, &patch)
            .await
            .map(drop),
        AccessKind::Pod => session
            .api::<PodAccessRequest>()
            .patch(&view.name, &params, &patch)
            .await
            .map(drop),
    };
    result.map_err(|e| session.error(e))
}

/// Deletes a request in the foreground: the apiserver keeps it until the garbage collector has
/// deleted everything it owns (Role, RoleBinding, access pod), so once it is gone the access is.
pub async fn delete(session: &Session, view: &RequestView) -> Result<(), CliError> {
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Foreground),
        ..Default::default()
    };
    let result = match view.kind {
        AccessKind::Exec => session
            .api::<ExecAccessRequest>()
            .delete(&view.name, &params)
            .await
            .map(|_| ()),
        AccessKind::Pod => session
            .api::<PodAccessRequest>()
            .delete(&view.name, &params)
            .await
            .map(|_| ()),
    };
    match result {
        Ok(()) => Ok(()),
        // Gone already: so is the access.
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(e) => Err(session.error(e)),
    }
}

#[cfg(test)]
mod tests {
    use oz_api::Condition;

    use super::*;

    fn condition(type_: &str, status: &str, message: &str) -> Condition {
        Condition::new(
            type_,
            status,
            "Reason",
            message.into(),
            None,
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::UNIX_EPOCH),
        )
    }

    fn view(conditions: Vec<Condition>) -> RequestView {
        let mut request = crate::fixtures::exec_request(Some(Requester {
            username: "alice".into(),
            uid: None,
            groups: vec!["devs".into()],
        }));
        request.metadata.managed_fields = Some(vec![Default::default()]);
        request.status = Some(RequestStatus {
            conditions,
            ..Default::default()
        });
        RequestView::of(&request)
    }

    #[test]
    fn progress_shows_the_first_condition_not_yet_true() {
        assert_eq!(view(vec![]).progress(), "waiting for oz to pick it up");
        let pending = view(vec![
            condition("TargetTemplateExists", "True", "Found Target Template"),
            condition(
                "AccessResourcesReady",
                "False",
                "waiting for pod \"web-0\" to become ready",
            ),
            condition("Other", "Unknown", ""),
        ]);
        assert_eq!(
            pending.progress(),
            "AccessResourcesReady: waiting for pod \"web-0\" to become ready"
        );
        assert_eq!(
            pending.problem(),
            "waiting for pod \"web-0\" to become ready (AccessResourcesReady)"
        );
        let done = view(vec![condition("TargetTemplateExists", "True", "ok")]);
        assert_eq!(done.progress(), "Pending");
    }

    #[test]
    fn a_fleet_request_says_it_waits_for_its_spoke() {
        let with = |phase, reason: &str, message: &str| {
            let mut v = view(vec![
                condition("TargetTemplateExists", "True", "Found Target Template"),
                Condition::new(
                    "AccessResourcesCreated",
                    if reason == "Forwarded" {
                        "True"
                    } else {
                        "False"
                    },
                    reason,
                    message.into(),
                    None,
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::UNIX_EPOCH),
                ),
                condition(
                    "AccessResourcesReady",
                    "False",
                    "waiting for cluster \"east\" to grant it",
                ),
            ]);
            v.cluster = Some("east".into());
            v.status.phase = phase;
            v
        };
        let forwarded = with(
            Some(RequestPhase::Pending),
            "Forwarded",
            "forwarded to cluster \"east\", whose oz grants it",
        );
        assert_eq!(
            forwarded.progress(),
            "waiting for the spoke: forwarded to cluster \"east\", whose oz grants it"
        );
        let unreachable = with(
            Some(RequestPhase::Pending),
            "SpokeUnreachable",
            "cluster \"east\" could not be reached: connection refused",
        );
        assert_eq!(
            unreachable.progress(),
            "waiting for the spoke: cluster \"east\" could not be reached: connection refused"
        );
        // Granted (or ended) there: the spoke is waited for no more.
        let ready = with(Some(RequestPhase::Ready), "Forwarded", "forwarded");
        assert_eq!(ready.waiting_for_spoke(), None);
        assert!(ready.progress().starts_with("AccessResourcesReady: "));
    }

    #[test]
    fn views_know_their_requester_and_hide_managed_fields() {
        let v = view(vec![]);
        assert!(v.is_by("alice"));
        assert!(!v.is_by("bob"));
        assert_eq!(v.requester_name(), "alice");
        assert_eq!(v.object["kind"], "ExecAccessRequest");
        assert!(v.object["metadata"].get("managedFields").is_none());
        assert_eq!(v.phase_word(), "Pending");
        assert_eq!(v.cluster, None);
        let mut fleet = crate::fixtures::exec_request(None);
        fleet.spec.cluster = Some("east".into());
        assert_eq!(RequestView::of(&fleet).cluster.as_deref(), Some("east"));
    }
}
