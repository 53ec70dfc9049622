//! `ozctl revoke NAME`: end a grant now. The request is deleted in the foreground, so it
//! disappears only after the Role, RoleBinding (and access pod) it owns; once ozctl says the
//! access has ended, it has.

use clap::Args;
use k8s_openapi::jiff::Timestamp;
use oz_api::{AccessKind, RequestPhase};

use super::{
    create::WaitArgs, error::CliError, identity::whoami, kind_arg, output, progress::Progress,
    requests, session::Session, terminal_text::printable_line, timefmt, wait,
};

/// `ozctl revoke`.
#[derive(Args, Debug)]
pub struct RevokeArgs {
    /// The request to revoke (either kind)
    pub name: String,
    /// Which kind, when both an exec and a pod request have this name
    #[arg(long, value_parser = kind_arg::parser())]
    pub kind: Option<AccessKind>,
    #[command(flatten)]
    pub wait: WaitArgs,
}

/// Runs `ozctl revoke`.
pub async fn run(session: &Session, args: RevokeArgs) -> Result<(), CliError> {
    let view = requests::find(session, &args.name, args.kind).await?;
    let kind = view.kind.request_kind();
    if view.phase() == Some(RequestPhase::Expired) {
        // Nothing is granted any more, and the record is kept for access reviews.
        let when = view
            .expires_at()
            .map_or_else(|| "already".into(), |t| timefmt::ago(Timestamp::now(), t));
        return output::print(&format!(
            "{kind} {} expired {when}: there is no access left to revoke (its record is kept for access reviews).\n",
            view.name
        ));
    }
    if let Ok(me) = whoami(session).await
        && !view.is_by(&me.username)
    {
        eprintln!(
            "note: {} was requested by {}, not by you",
            view.name,
            printable_line(view.requester_name())
        );
    }
    requests::delete(session, &view).await?;
    let pod = view
        .status
        .pod_name
        .as_deref()
        .map(|p| format!(" to pod {p}"))
        .unwrap_or_default();
    if !args.wait.enabled() {
        return output::print(&format!(
            "Revoking {kind} {}: access{pod} ends once oz's Role and RoleBinding are deleted.\n",
            view.name
        ));
    }
    let mut progress = Progress::new(format!("Revoking {}", view.name));
    progress.set(match view.kind {
        AccessKind::Exec => "waiting for its Role and RoleBinding to be deleted",
        AccessKind::Pod => "waiting for its Role, RoleBinding and pod to be deleted",
    });
    let gone = wait::until_gone(session, &view, args.wait.timeout).await;
    progress.finish();
    gone?;
    output::print(&format!(
        "Revoked {kind} {}: access{pod} has ended.\n",
        view.name
    ))
}
