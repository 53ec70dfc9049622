//! `ozctl revoke NAME`: end a grant now. The request is deleted in the foreground, so it
//! disappears only after the Role, RoleBinding (and access pod) it owns; once ozctl says the
//! access has ended, it has.

use clap::Args;
use k8s_openapi::jiff::Timestamp;
use oz_api::{AccessKind, RequestPhase};

use super::{
    create::WaitArgs,
    error::CliError,
    identity::whoami,
    kind_arg, output,
    progress::Progress,
    requests::{self, RequestView},
    session::Session,
    terminal_text::printable_line,
    timefmt, wait,
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
    let me = whoami(session).await.ok().map(|me| me.username);
    if let Some(me) = &me
        && !view.is_by(me)
    {
        eprintln!(
            "note: {} was requested by {}, not by you",
            view.name,
            printable_line(view.requester_name())
        );
    }
    requests::delete(session, &view)
        .await
        .map_err(|e| refusal(e, &view, me.as_deref()))?;
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

/// A refused revoke, with whom to ask. Revoking someone else's request (`me` is not its
/// requester) is refused by oz's webhook, or by RBAC where users may not delete requests at
/// all: its requester may end it, or an admin; no grant of RBAC would let `me` do it. Revoking
/// my own is an RBAC problem, which the error says already.
pub fn refusal(error: CliError, view: &RequestView, me: Option<&str>) -> CliError {
    let theirs = me.is_some_and(|me| !view.is_by(me)) && view.requester.is_some();
    match error {
        CliError::Refused(message) | CliError::Forbidden { message } if theirs => {
            CliError::NotYours {
                message,
                requester: printable_line(view.requester_name()).into_owned(),
            }
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use oz_api::Requester;

    use super::*;

    fn alices() -> RequestView {
        RequestView::of(&crate::fixtures::exec_request(Some(Requester {
            username: "alice".into(),
            uid: None,
            groups: vec!["devs".into()],
        })))
    }

    const WEBHOOK: &str = "admission webhook \"request-deletes.oz.wizardofoz.co\" denied the request: \
                           only the requester (alice) or members of system:masters may revoke this request";

    #[test]
    fn bob_is_told_to_ask_the_requester_not_to_be_granted_rbac() {
        let refused = refusal(CliError::Refused(WEBHOOK.into()), &alices(), Some("bob"));
        assert_eq!(
            refused.to_string(),
            format!("{WEBHOOK}; ask alice (who requested it) or a cluster admin to revoke it")
        );
        // RBAC that lets no user delete requests: the same people can end it.
        let forbidden = CliError::Forbidden {
            message: "execaccessrequests \"alice-x7k2p\" is forbidden".into(),
        };
        let refused = refusal(forbidden, &alices(), Some("bob")).to_string();
        assert!(
            refused.ends_with("; ask alice (who requested it) or a cluster admin to revoke it"),
            "{refused}"
        );
        assert!(!refused.contains("grant"), "{refused}");
    }

    #[test]
    fn alice_revoking_her_own_keeps_the_message() {
        let forbidden = || CliError::Forbidden {
            message: "execaccessrequests \"alice-x7k2p\" is forbidden".into(),
        };
        for me in [Some("alice"), None] {
            let refused = refusal(forbidden(), &alices(), me).to_string();
            assert!(
                refused.ends_with("; ask a cluster admin to grant it"),
                "{refused}"
            );
        }
        let unreachable = CliError::Api("timeout".into());
        assert_eq!(
            refusal(unreachable, &alices(), Some("bob")).to_string(),
            "timeout"
        );
    }
}
