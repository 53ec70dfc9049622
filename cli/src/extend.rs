//! `ozctl extend NAME --by DURATION`: more time on a grant in force, without ending it: its
//! pod, its RBAC and any open `ozctl exec` session stay as they are. ozctl adds an ask to the
//! request's annotation `crds.wizardofoz.co/extensions`, naming you; oz's webhook lets only the
//! requester ask, one ask at a time, within the template's bounds, and oz grants it at once
//! or, under a template with approval, once approvers approve it (`ozctl approve NAME`).

use std::time::Duration;

use clap::Args;
use kube::{
    Api,
    api::{Patch, PatchParams},
    runtime::wait::await_condition,
};
use oz_api::{
    AccessKind, AccessRequest, EXTEND_ANNOTATION, ExecAccessRequest, ExtensionPhase,
    ExtensionRecord, PodAccessRequest, RequestPhase,
    duration::parse_positive_duration,
    extension::{ExtensionAsk, parse_asks},
};

use super::{
    create::WaitArgs,
    error::CliError,
    identity::whoami,
    kind_arg, output,
    requests::{self, RequestView},
    session::Session,
    timefmt,
};

/// `ozctl extend`.
#[derive(Args, Debug)]
pub struct ExtendArgs {
    /// The request to extend (either kind); it must be Ready
    pub name: String,
    /// How much longer, such as 30m or 1h
    #[arg(long, value_name = "DURATION", value_parser = by_parser)]
    pub by: String,
    /// Why, for approvers and the audit trail (required by templates whose approval says
    /// reasonRequired)
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
    /// Which kind, when both an exec and a pod request have this name
    #[arg(long, value_parser = kind_arg::parser())]
    pub kind: Option<AccessKind>,
    #[command(flatten)]
    pub wait: WaitArgs,
}

fn by_parser(text: &str) -> Result<String, String> {
    parse_positive_duration(text)
        .map(|_| text.to_string())
        .map_err(|e| format!("{} (for example 30m)", e.go_message()))
}

/// Runs `ozctl extend`.
pub async fn run(session: &Session, args: ExtendArgs) -> Result<(), CliError> {
    let view = requests::find(session, &args.name, args.kind).await?;
    if view.phase() != Some(RequestPhase::Ready) {
        return Err(CliError::Refused(format!(
            "{} {} is {}: only a Ready grant can be extended; ask for a new one with: {}",
            view.kind.request_kind(),
            view.name,
            view.phase_word(),
            session.hint(&format!("create {} {}", view.kind, view.template))
        )));
    }
    let me = whoami(session).await?.username;
    let ask = ExtensionAsk {
        by: args.by.clone(),
        reason: args.reason.clone(),
        asked_by: me,
    };
    let number = add_ask(session, &view, ask).await?;
    let before = view.expires_at().map(timefmt::local).unwrap_or_default();
    if !args.wait.enabled() {
        return output::print(&format!(
            "Asked to extend {} by {} (extension {number}); it ends at {before} unless granted.\n",
            view.name, args.by
        ));
    }
    let decided = until_decided(session, &view, number, args.wait.timeout).await?;
    let Some((record, expires_at)) = decided else {
        return output::print(&format!(
            "Extension {number} of {} waits for approval; access still ends at {before} unless \
             it is approved first. An approver runs: {}\nFollow it with: {}\n",
            view.name,
            session.hint(&format!("approve {} --extension {number}", view.name)),
            session.hint(&format!("get {}", view.name))
        ));
    };
    match record.phase {
        ExtensionPhase::Granted => output::print(&format!(
            "Extended {} by {}: access now ends at {}{}.\n",
            view.name,
            record.added.as_deref().unwrap_or_default(),
            expires_at.map(timefmt::local).unwrap_or_default(),
            record
                .message
                .as_deref()
                .map(|m| format!(" ({m})"))
                .unwrap_or_default()
        )),
        _ => Err(CliError::Refused(format!(
            "extension {number} of {} was denied: {}; access still ends at {before}",
            view.name,
            record.message.as_deref().unwrap_or("no reason given")
        ))),
    }
}

/// Adds `ask` to the request's asks and returns its number. The patch carries the
/// resourceVersion read, so two asks at once never overwrite each other: the later is retried
/// on the request as it is then.
async fn add_ask(
    session: &Session,
    view: &RequestView,
    ask: ExtensionAsk,
) -> Result<usize, CliError> {
    let mut current = view.object.clone();
    for _ in 0..3 {
        let written = current
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(EXTEND_ANNOTATION))
            .and_then(|v| v.as_str());
        let mut asks = match written {
            Some(value) => parse_asks(value).map_err(CliError::Api)?,
            None => Vec::new(),
        };
        asks.push(ask.clone());
        let patch = serde_json::json!({
            "metadata": {
                "resourceVersion": current.pointer("/metadata/resourceVersion"),
                "annotations": {EXTEND_ANNOTATION: serde_json::to_string(&asks).unwrap_or_default()},
            },
        });
        match patch_request(session, view, &patch).await {
            Ok(()) => return Ok(asks.len()),
            Err(kube::Error::Api(status)) if status.code == 409 => {
                let again = requests::get(session, view.kind, &view.name).await?;
                current = again
                    .ok_or_else(|| CliError::Deleted {
                        kind: view.kind.request_kind(),
                        name: view.name.clone(),
                    })?
                    .object;
            }
            Err(e) => return Err(session.error(e)),
        }
    }
    Err(CliError::Api(format!(
        "{} kept changing while ozctl asked to extend it; try again",
        view.name
    )))
}

async fn patch_request(
    session: &Session,
    view: &RequestView,
    patch: &serde_json::Value,
) -> Result<(), kube::Error> {
    let (params, patch) = (PatchParams::default(), Patch::Merge(patch));
    match view.kind {
        AccessKind::Exec => {
            let api: Api<ExecAccessRequest> = session.api();
            api.patch(&view.name, &params, &patch).await.map(drop)
        }
        AccessKind::Pod => {
            let api: Api<PodAccessRequest> = session.api();
            api.patch(&view.name, &params, &patch).await.map(drop)
        }
    }
}

/// Waits until oz has granted or denied extension `number` of `view`, and returns its record
/// with the grant's end; `None` if it still waits (for approval) at `timeout`.
async fn until_decided(
    session: &Session,
    view: &RequestView,
    number: usize,
    timeout: Duration,
) -> Result<Option<(ExtensionRecord, Option<k8s_openapi::jiff::Timestamp>)>, CliError> {
    fn decided<R: AccessRequest>(number: usize) -> impl Fn(Option<&R>) -> bool {
        move |request| {
            let ended = request
                .and_then(|r| r.request_status()?.phase)
                .is_some_and(|p| p != RequestPhase::Ready);
            let record =
                request.and_then(|r| r.request_status()?.extensions.get(number - 1).cloned());
            ended || record.is_some_and(|r| r.phase != ExtensionPhase::PendingApproval)
        }
    }
    let name = view.name.as_str();
    let seen = match view.kind {
        AccessKind::Exec => {
            let api: Api<ExecAccessRequest> = session.api();
            tokio::time::timeout(timeout, await_condition(api, name, decided(number)))
                .await
                .map(|done| done.map(|r| r.map(|r| RequestView::of(&r))))
        }
        AccessKind::Pod => {
            let api: Api<PodAccessRequest> = session.api();
            tokio::time::timeout(timeout, await_condition(api, name, decided(number)))
                .await
                .map(|done| done.map(|r| r.map(|r| RequestView::of(&r))))
        }
    };
    let view = match seen {
        Err(_) => return Ok(None),
        Ok(Ok(Some(view))) => view,
        Ok(Ok(None)) => {
            return Err(CliError::Deleted {
                kind: view.kind.request_kind(),
                name: name.to_string(),
            });
        }
        Ok(Err(e)) => {
            return Err(CliError::Api(format!(
                "could not follow extension {number} of {name}: {e}"
            )));
        }
    };
    match view.status.extensions.get(number - 1) {
        Some(record) if record.phase != ExtensionPhase::PendingApproval => {
            Ok(Some((record.clone(), view.expires_at())))
        }
        _ => Err(CliError::Refused(format!(
            "{} {name} is {} now: its grant ended before extension {number} was decided",
            view.kind.request_kind(),
            view.phase_word()
        ))),
    }
}
