//! Following a request until oz has decided it: a watch on that one object, each change shown
//! as progress, until its phase is Ready, Denied, Failed or Expired, or the time is up.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use kube::{
    Api,
    runtime::{WatchStreamExt, conditions::is_deleted, wait::await_condition, watcher},
};
use oz_api::{AccessKind, AccessRequest, ExecAccessRequest, PodAccessRequest, RequestPhase};

use super::{
    error::CliError, progress::Progress, requests::RequestView, session::Session, timefmt,
};

/// Whether oz has decided a request in this phase: Ready, Scheduled (it waits for its start,
/// which may be hours away), Denied, Expired, or Failed (oz retries a Failed request, but only
/// a fix helps it, not waiting).
pub fn is_settled(phase: Option<RequestPhase>) -> bool {
    matches!(
        phase,
        Some(
            RequestPhase::Ready
                | RequestPhase::Scheduled
                | RequestPhase::Denied
                | RequestPhase::Failed
                | RequestPhase::Expired
                | RequestPhase::Revoked
        )
    )
}

/// Waits until request `name` of `kind` is settled ([`is_settled`]) and returns it, showing
/// each step on `progress`. Errors if it is deleted, or on `timeout`.
pub async fn until_settled(
    session: &Session,
    kind: AccessKind,
    name: &str,
    timeout: Duration,
    progress: &mut Progress,
) -> Result<RequestView, CliError> {
    let watched = match kind {
        AccessKind::Exec => {
            let api: Api<ExecAccessRequest> = session.api();
            tokio::time::timeout(timeout, follow(session, api, name, progress)).await
        }
        AccessKind::Pod => {
            let api: Api<PodAccessRequest> = session.api();
            tokio::time::timeout(timeout, follow(session, api, name, progress)).await
        }
    };
    watched.unwrap_or_else(|_| {
        Err(CliError::Timeout {
            kind: kind.request_kind(),
            name: name.to_string(),
            after: timefmt::compact(timeout),
            last: progress.last().to_string(),
            hint: session.hint(&format!("get requests {name}")),
        })
    })
}

async fn follow<R: AccessRequest>(
    session: &Session,
    api: Api<R>,
    name: &str,
    progress: &mut Progress,
) -> Result<RequestView, CliError> {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = watcher(api, config).default_backoff().boxed();
    let deleted = || CliError::Deleted {
        kind: R::KIND.request_kind(),
        name: name.to_string(),
    };
    let mut seen = false;
    loop {
        let event = match events.try_next().await {
            Ok(Some(event)) => event,
            Ok(None) => return Err(deleted()),
            Err(e) => {
                if let Some(fatal) = fatal(session, &e) {
                    return Err(fatal);
                }
                // Anything else is retried by the watcher, with backoff.
                progress.set(&format!("retrying the watch: {e}"));
                continue;
            }
        };
        match event {
            watcher::Event::Apply(request) | watcher::Event::InitApply(request) => {
                seen = true;
                let view = RequestView::of(&request);
                progress.set(&view.progress());
                if is_settled(view.phase()) && !view.deleting {
                    return Ok(view);
                }
            }
            watcher::Event::Delete(_) => return Err(deleted()),
            watcher::Event::InitDone if !seen => return Err(deleted()),
            watcher::Event::Init | watcher::Event::InitDone => {}
        }
    }
}

/// A watch error that waiting longer will not fix: no permission, no such API.
fn fatal(session: &Session, error: &watcher::Error) -> Option<CliError> {
    match error {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
            if matches!(status.code, 401 | 403 | 404) =>
        {
            Some(CliError::from_kube(
                kube::Error::Api(status.clone()),
                &session.server,
            ))
        }
        _ => None,
    }
}

/// Waits until oz has revoked `request`'s grant (phase Revoked, or Expired if its window ended
/// first) and returns it. Errors if it is deleted, and `Ok(None)` on `timeout`.
pub async fn until_revoked(
    session: &Session,
    request: &RequestView,
    timeout: Duration,
) -> Result<Option<RequestView>, CliError> {
    fn ended<R: AccessRequest>(request: Option<&R>) -> bool {
        request
            .and_then(|r| r.request_status()?.phase)
            .is_some_and(RequestPhase::is_ended)
    }
    let name = request.name.as_str();
    let seen = match request.kind {
        AccessKind::Exec => {
            let api: Api<ExecAccessRequest> = session.api();
            tokio::time::timeout(timeout, await_condition(api, name, ended))
                .await
                .map(|done| done.map(|r| r.map(|r| RequestView::of(&r))))
        }
        AccessKind::Pod => {
            let api: Api<PodAccessRequest> = session.api();
            tokio::time::timeout(timeout, await_condition(api, name, ended))
                .await
                .map(|done| done.map(|r| r.map(|r| RequestView::of(&r))))
        }
    };
    match seen {
        Ok(Ok(Some(view))) => Ok(Some(view)),
        Ok(Ok(None)) => Err(CliError::Deleted {
            kind: request.kind.request_kind(),
            name: name.to_string(),
        }),
        Ok(Err(e)) => Err(CliError::Api(format!(
            "could not follow the revocation of {} {name}: {e}",
            request.kind.request_kind()
        ))),
        Err(_) => Ok(None),
    }
}

/// Waits until `request` no longer exists (the object with its uid: a new request of the same
/// name does not count). Errors on `timeout`.
pub async fn until_gone(
    session: &Session,
    request: &RequestView,
    timeout: Duration,
) -> Result<(), CliError> {
    let uid = request.object["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let name = request.name.as_str();
    let gone = match request.kind {
        AccessKind::Exec => {
            let api: Api<ExecAccessRequest> = session.api();
            tokio::time::timeout(timeout, await_condition(api, name, is_deleted(&uid)))
                .await
                .map(|done| done.map(drop))
        }
        AccessKind::Pod => {
            let api: Api<PodAccessRequest> = session.api();
            tokio::time::timeout(timeout, await_condition(api, name, is_deleted(&uid)))
                .await
                .map(|done| done.map(drop))
        }
    };
    match gone {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(CliError::Api(format!(
            "could not follow the deletion of {} {name}: {e}",
            request.kind.request_kind()
        ))),
        Err(_) => Err(CliError::Timeout {
            kind: request.kind.request_kind(),
            name: name.to_string(),
            after: timefmt::compact(timeout),
            last: "its Role, RoleBinding and pod are still being deleted".into(),
            hint: session.hint(&format!("get requests {name}")),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settled_phases() {
        assert!(!is_settled(None));
        assert!(!is_settled(Some(RequestPhase::Pending)));
        for phase in [
            RequestPhase::Ready,
            RequestPhase::Denied,
            RequestPhase::Failed,
            RequestPhase::Expired,
        ] {
            assert!(is_settled(Some(phase)));
        }
    }
}
