//! A session's entry in its request's status: the serving replica appends it when the session
//! starts and completes it when it ends (`status.sessions`, `status.sessionCounts`), with a JSON
//! merge patch on the status subresource under the field manager [`FIELD_MANAGER`], guarded by
//! `metadata.resourceVersion` and retried on a conflict. A write that fails is logged; it never
//! ends the session.

use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};
use oz_api::{
    AccessKind, AccessRequest, ExecAccessRequest, PodAccessRequest, RequestStatus, SessionCounts,
    SessionRecord, session::with_session,
};
use serde_json::json;
use tracing::{debug, warn};

use crate::session::GrantRef;

/// The field manager of the broker's status writes.
pub const FIELD_MANAGER: &str = "oz-sessions";

/// How many times a write is tried when others write the status meanwhile.
const ATTEMPTS: usize = 8;

/// What happened to a session.
#[derive(Clone, Debug, PartialEq)]
pub enum SessionChange {
    /// It opened (its record, recording key set).
    Started(SessionRecord),
    /// It ended (its record with endedAt and endReason).
    Ended(SessionRecord),
}

/// `status.sessions` and `status.sessionCounts` after `change`.
pub fn changed(
    status: &RequestStatus,
    change: &SessionChange,
) -> (Vec<SessionRecord>, SessionCounts) {
    let mut counts = status.session_counts.unwrap_or_default();
    let record = match change {
        SessionChange::Started(record) => {
            counts.total += 1;
            counts.open += 1;
            record
        }
        SessionChange::Ended(record) => {
            counts.open = counts.open.saturating_sub(1);
            record
        }
    };
    (
        with_session(status.sessions.clone(), record.clone()),
        counts,
    )
}

/// Writes `change` into the status of `grant`'s request in `namespace`: the request of that
/// name and uid only, so a request deleted and made again under the same name never inherits
/// another grant's sessions. Returns whether it was written (the request may be gone or made
/// again, or the apiserver unreachable: logged).
pub async fn record(
    client: &Client,
    namespace: &str,
    grant: &GrantRef,
    change: &SessionChange,
) -> bool {
    let (kind, name) = (grant.kind, grant.name.as_str());
    let written = match kind {
        AccessKind::Exec => {
            write::<ExecAccessRequest>(Api::namespaced(client.clone(), namespace), grant, change)
                .await
        }
        AccessKind::Pod => {
            write::<PodAccessRequest>(Api::namespaced(client.clone(), namespace), grant, change)
                .await
        }
    };
    match written {
        Ok(done) => done,
        Err(e) => {
            warn!(error = %e, %namespace, request = %name, "could not record a session in the request's status");
            false
        }
    }
}

async fn write<R: AccessRequest>(
    api: Api<R>,
    grant: &GrantRef,
    change: &SessionChange,
) -> kube::Result<bool> {
    let name = grant.name.as_str();
    for _ in 0..ATTEMPTS {
        let Some(request) = api.get_opt(name).await? else {
            debug!(request = %name, "the request is gone: no session status to write");
            return Ok(false);
        };
        // The patch carries the resourceVersion read here, so the request cannot be replaced
        // between this check and the write.
        if request.meta().uid.as_deref() != Some(grant.uid.as_str()) {
            debug!(request = %name, "the request was made again since the session opened: its status is not this session's");
            return Ok(false);
        }
        let status = request.request_status().cloned().unwrap_or_default();
        let (sessions, counts) = changed(&status, change);
        let patch = json!({
            "metadata": {"resourceVersion": request.meta().resource_version},
            "status": {"sessions": sessions, "sessionCounts": counts},
        });
        match api
            .patch_status(name, &params(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(false),
            Err(e) => return Err(e),
        }
    }
    warn!(request = %name, "could not record a session in the request's status: it kept changing");
    Ok(false)
}

/// Merge patches take a field manager, and no `force`.
fn params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};
    use oz_api::{SessionEndReason, SessionStream};

    use super::*;

    fn record(id: &str) -> SessionRecord {
        SessionRecord {
            id: id.into(),
            user: "alice".into(),
            stream: SessionStream::Exec,
            pod: "web-0".into(),
            container: None,
            command: vec!["sh".into()],
            tty: false,
            started_at: Time(Timestamp::UNIX_EPOCH),
            ended_at: None,
            end_reason: None,
            recording: Some(format!("shop/{id}.cast")),
        }
    }

    #[test]
    fn a_start_counts_and_appends_and_its_end_completes_the_same_entry() {
        let mut status = RequestStatus::default();
        let (sessions, counts) = changed(&status, &SessionChange::Started(record("a")));
        assert_eq!(counts, SessionCounts { total: 1, open: 1 });
        status.sessions = sessions;
        status.session_counts = Some(counts);
        let (sessions, counts) = changed(&status, &SessionChange::Started(record("b")));
        assert_eq!(counts, SessionCounts { total: 2, open: 2 });
        status.sessions = sessions;
        status.session_counts = Some(counts);
        let mut ended = record("a");
        ended.ended_at = Some(Time(Timestamp::UNIX_EPOCH));
        ended.end_reason = Some(SessionEndReason::Exited);
        let (sessions, counts) = changed(&status, &SessionChange::Ended(ended.clone()));
        assert_eq!(counts, SessionCounts { total: 2, open: 1 });
        assert_eq!(sessions, vec![ended, record("b")]);
        let (_, counts) = changed(
            &RequestStatus::default(),
            &SessionChange::Ended(record("c")),
        );
        assert_eq!(counts.open, 0, "never below zero");
    }
}
