//! `ozctl revoke NAME`: end a grant now and keep its record. ozctl asks oz to revoke it (the
//! annotation `crds.wizardofoz.co/revoked-by`, naming you); oz deletes its Role, RoleBinding
//! (and access pod) and marks the request Revoked, which `ozctl history` lists for the history
//! retention. Once ozctl says the access has ended, it has. If oz does not answer within the
//! wait, the request is deleted instead (the garbage collector then removes what it owns): the
//! access ends all the same, but no record is kept, and ozctl says so.

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
    if let Some(ended) = already_ended(&view, Timestamp::now()) {
        return output::print(&ended);
    }
    let me = whoami(session).await?.username;
    if !view.is_by(&me) {
        eprintln!(
            "note: {} was requested by {}, not by you",
            view.name,
            printable_line(view.requester_name())
        );
    }
    requests::ask_revocation(session, &view, &me)
        .await
        .map_err(|e| refusal(e, &view, Some(&me)))?;
    let pod = view
        .status
        .pod_name
        .as_deref()
        .map(|p| format!(" to pod {p}"))
        .unwrap_or_default();
    if !args.wait.enabled() {
        return output::print(&format!(
            "Revoking {kind} {}: oz deletes its access resources and keeps the request as its record (ozctl history).\n",
            view.name
        ));
    }
    let mut progress = Progress::new(format!("Revoking {}", view.name));
    progress.set(match view.kind {
        AccessKind::Exec => "waiting for oz to delete its Role and RoleBinding",
        AccessKind::Pod => "waiting for oz to delete its Role, RoleBinding and pod",
    });
    let revoked = wait::until_revoked(session, &view, args.wait.timeout).await;
    progress.finish();
    if revoked?.is_some() {
        return output::print(&format!(
            "Revoked {kind} {}: access{pod} has ended; its record stays in ozctl history.\n",
            view.name
        ));
    }
    // oz did not answer (not running, or far behind): end the access without it.
    eprintln!(
        "oz did not revoke {} within {}: deleting the request instead, which ends the access \
         but keeps no record of it",
        view.name,
        timefmt::compact(args.wait.timeout)
    );
    requests::delete(session, &view)
        .await
        .map_err(|e| refusal(e, &view, Some(&me)))?;
    wait::until_gone(session, &view, args.wait.timeout).await?;
    output::print(&format!(
        "Revoked {kind} {} by deleting it: access{pod} has ended.\n",
        view.name
    ))
}

/// What to say of a request whose grant has already ended, or `None` while it has not.
fn already_ended(view: &RequestView, now: Timestamp) -> Option<String> {
    let kind = view.kind.request_kind();
    let ago = |t: Option<Timestamp>| t.map_or_else(|| "already".into(), |t| timefmt::ago(now, t));
    match view.phase() {
        Some(RequestPhase::Expired) => Some(format!(
            "{kind} {} expired {}: there is no access left to revoke (its record is kept for access reviews).\n",
            view.name,
            ago(view.expires_at())
        )),
        Some(RequestPhase::Revoked) => {
            let (by, at) = view.revocation().unzip();
            Some(format!(
                "{kind} {} was revoked by {} {}: there is no access left to revoke (its record is kept for access reviews).\n",
                view.name,
                printable_line(by.as_deref().unwrap_or("?")),
                ago(at)
            ))
        }
        _ => None,
    }
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
