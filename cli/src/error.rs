//! ozctl's errors: each one is a single line that says what went wrong and how to fix it.

/// Everything ozctl can fail with. `Display` is the whole message a user sees after `error: `.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The kubeconfig could not be found, read or used.
    #[error("{0}")]
    Kubeconfig(String),

    /// The cluster did not answer: connection refused, DNS, TLS, timeout.
    #[error("cannot reach the cluster at {server}: {reason}; check your kubeconfig/context")]
    Unreachable { server: String, reason: String },

    /// The cluster answered 401: the credentials in the kubeconfig are not accepted.
    #[error(
        "the cluster at {server} does not accept your credentials ({message}); log in again or check the user of your kubeconfig context"
    )]
    Unauthorized { server: String, message: String },

    /// RBAC refused an operation.
    #[error("{message}; ask a cluster admin to grant it")]
    Forbidden { message: String },

    /// An admission webhook (oz's, usually) refused an operation RBAC allowed: its message says
    /// why and what to do, so it is shown as it is.
    #[error("{0}")]
    Refused(String),

    /// Revoking someone else's request was refused: its requester may end it, or an admin.
    #[error("{message}; ask {requester} (who requested it) or a cluster admin to revoke it")]
    NotYours { message: String, requester: String },

    /// The oz API is not served by the cluster.
    #[error(
        "this cluster does not serve oz's {kind} (crds.wizardofoz.co/v1alpha1); install oz first, or check your context"
    )]
    NotInstalled { kind: &'static str },

    /// The template named on the command line does not exist.
    #[error("no {kind} {name:?} in namespace {namespace:?}; list them with: {hint}")]
    NoTemplate {
        kind: &'static str,
        name: String,
        namespace: String,
        hint: String,
    },

    /// The user is in none of the template's allowedGroups.
    #[error(
        "you ({user}) are not in any of the template's allowedGroups ({groups}); ask to be added or use another template"
    )]
    NotAllowed { user: String, groups: String },

    /// The request named on the command line does not exist.
    #[error("no access request {name:?} in namespace {namespace:?}; list yours with: {hint}")]
    NoRequest {
        name: String,
        namespace: String,
        hint: String,
    },

    /// `ozctl exec` was given a pod's name, and the user holds a request for that pod.
    #[error(
        "{pod} is a pod, not an access request; your {kind} {request} ({phase}) is for it: {hint}"
    )]
    PodNotRequest {
        pod: String,
        kind: &'static str,
        request: String,
        phase: String,
        hint: String,
    },

    /// `ozctl exec` was given a pod's name, and the user holds no request for it: `advice` says
    /// which templates could grant it ([`oz_api::grant_hint`]).
    #[error(
        "{pod} is a pod in namespace {namespace:?}, not an access request, and you hold no grant for it; {advice}"
    )]
    NoGrantForPod {
        pod: String,
        namespace: String,
        advice: String,
    },

    /// Both kinds have a request of that name.
    #[error(
        "both an ExecAccessRequest and a PodAccessRequest are named {name:?}; say which with --kind exec or --kind pod"
    )]
    AmbiguousRequest { name: String },

    /// The request's access window has ended.
    #[error("{kind} {name} expired {when}; request access again with: {hint}")]
    Expired {
        kind: &'static str,
        name: String,
        when: String,
        hint: String,
    },

    /// The request's grant was revoked before its window ended.
    #[error("{kind} {name} was revoked by {by} {when}; request access again with: {hint}")]
    Revoked {
        kind: &'static str,
        name: String,
        by: String,
        when: String,
        hint: String,
    },

    /// oz refused the request (the requester may not use the template).
    #[error("{kind} {name} was denied: {reason}")]
    Denied {
        kind: &'static str,
        name: String,
        reason: String,
    },

    /// oz could not set up the access.
    #[error("{kind} {name} failed: {reason}; fix it and create a new request (see: {hint})")]
    Failed {
        kind: &'static str,
        name: String,
        reason: String,
        hint: String,
    },

    /// The request was deleted while ozctl waited for it.
    #[error("{kind} {name} was deleted while waiting for it (revoked?); create a new one")]
    Deleted { kind: &'static str, name: String },

    /// The wait ran out.
    #[error(
        "timed out after {after} waiting for {kind} {name} ({last}); it is still there: follow it with `{hint}`, or wait longer with --timeout"
    )]
    Timeout {
        kind: &'static str,
        name: String,
        after: String,
        last: String,
        hint: String,
    },

    /// `ozctl exec` waited for a request that still waits for approval; `next` says how to
    /// follow it and use it once approved.
    #[error(
        "{kind} {name} is still PendingApproval after {after} ({progress}): it can be used once approved; {next}"
    )]
    AwaitingApproval {
        kind: &'static str,
        name: String,
        after: String,
        progress: String,
        next: String,
    },

    /// `ozctl exec` on a request whose access starts later (`spec.startAt`).
    #[error("{kind} {name} is Scheduled: its access starts at {starts}; run `{hint}` then")]
    Scheduled {
        kind: &'static str,
        name: String,
        starts: String,
        hint: String,
    },

    /// A flag or argument that clap accepted but that makes no sense.
    #[error("{0}")]
    Usage(String),

    /// The cluster refused or failed an operation for another reason.
    #[error("{0}")]
    Api(String),

    /// Running a command (kubectl, or exec in the pod) failed.
    #[error("{0}")]
    Exec(String),

    /// Writing output failed.
    #[error("cannot write the output: {0}")]
    Output(String),

    /// An audit file, or a key to check it with, could not be read: the check could not run.
    #[error("{0}")]
    Unverifiable(String),
}

impl CliError {
    /// The exit code for this error: 2 for usage errors, as clap uses, and for an audit check
    /// that could not run (1 is its verdict that something is wrong); 1 for everything else.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) | CliError::Unverifiable(_) => 2,
            _ => 1,
        }
    }

    /// Turns a client error into the line a user needs: what failed at `server`, and the fix.
    pub fn from_kube(error: kube::Error, server: &str) -> CliError {
        match error {
            kube::Error::Api(status) => match status.code {
                401 => CliError::Unauthorized {
                    server: server.to_string(),
                    message: status.message,
                },
                // The apiserver's words for any webhook's denial, whatever code it chose.
                _ if status.message.starts_with("admission webhook ") => {
                    CliError::Refused(status.message)
                }
                403 => CliError::Forbidden {
                    message: status.message,
                },
                _ if status.message.is_empty() => CliError::Api(format!(
                    "the cluster answered {} {}",
                    status.code, status.reason
                )),
                _ => CliError::Api(status.message),
            },
            kube::Error::InferKubeconfig(e) => CliError::Kubeconfig(kubeconfig_message(&e)),
            kube::Error::SerdeError(e) => CliError::Api(format!(
                "the cluster at {server} sent an object ozctl cannot read ({e}); are ozctl and oz the same version?"
            )),
            other => CliError::Unreachable {
                server: server.to_string(),
                reason: root_cause(&other),
            },
        }
    }
}

/// The kubeconfig problem, with the fix.
pub fn kubeconfig_message(error: &kube::config::KubeconfigError) -> String {
    use kube::config::KubeconfigError as E;
    match error {
        E::LoadContext(context) => format!(
            "there is no context {context:?} in your kubeconfig; list them with: kubectl config get-contexts"
        ),
        E::CurrentContextNotSet => "your kubeconfig has no current-context; pass --context NAME, or set one with: kubectl config use-context NAME".into(),
        E::FindPath => "cannot find a kubeconfig: $HOME is not set and neither is $KUBECONFIG; set KUBECONFIG or pass --kubeconfig".into(),
        E::ReadConfig(e, path) => format!(
            "cannot read the kubeconfig {}: {e}; set KUBECONFIG or pass --kubeconfig",
            path.display()
        ),
        other => format!(
            "your kubeconfig cannot be used: {}; check it with: kubectl config view",
            root_cause(other)
        ),
    }
}

/// The innermost cause of an error, which is the part that says what actually happened
/// ("Connection refused (os error 111)"), not the layers of "client error" around it.
pub fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut current = error;
    while let Some(next) = current.source() {
        current = next;
    }
    current.to_string()
}

/// Every error's causes, joined: for messages where the layers matter.
pub fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut current = error.source();
    while let Some(next) = current {
        let part = next.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        current = next.source();
    }
    text
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::Output(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            code,
            message: message.into(),
            reason: "Reason".into(),
            ..Default::default()
        }))
    }

    #[test]
    fn connection_failures_name_the_server_and_the_fix() {
        let io = std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "Connection refused (os error 111)",
        );
        let error = kube::Error::Service(Box::new(io));
        assert_eq!(
            CliError::from_kube(error, "https://127.0.0.1:1/").to_string(),
            "cannot reach the cluster at https://127.0.0.1:1/: Connection refused (os error 111); check your kubeconfig/context"
        );
    }

    #[test]
    fn api_errors_keep_the_apiserver_message() {
        let forbidden = CliError::from_kube(
            api_error(
                403,
                "execaccessrequests is forbidden: User \"bob\" cannot create",
            ),
            "s",
        );
        assert!(
            forbidden
                .to_string()
                .starts_with("execaccessrequests is forbidden")
        );
        assert!(forbidden.to_string().contains("ask a cluster admin"));
        assert!(matches!(
            CliError::from_kube(api_error(401, "Unauthorized"), "s"),
            CliError::Unauthorized { .. }
        ));
        assert_eq!(
            CliError::from_kube(api_error(422, "spec.duration: bad"), "s").to_string(),
            "spec.duration: bad"
        );
        assert_eq!(
            CliError::from_kube(api_error(500, ""), "s").to_string(),
            "the cluster answered 500 Reason"
        );
    }

    #[test]
    fn a_webhook_refusal_is_not_an_rbac_problem() {
        // RBAC allowed the delete; oz's webhook refused it, and says why.
        let message = "admission webhook \"request-deletes.oz.wizardofoz.co\" denied the request: \
                       only the requester (alice) or members of system:masters may revoke this request";
        let refused = CliError::from_kube(api_error(403, message), "s");
        assert_eq!(refused.to_string(), message);
    }

    #[test]
    fn messages_are_one_line() {
        let errors = [
            CliError::NotAllowed {
                user: "bob".into(),
                groups: "devs".into(),
            },
            CliError::NoTemplate {
                kind: "ExecAccessTemplate",
                name: "x".into(),
                namespace: "y".into(),
                hint: "ozctl get templates -n y".into(),
            },
        ];
        assert_eq!(
            errors[0].to_string(),
            "you (bob) are not in any of the template's allowedGroups (devs); ask to be added or use another template"
        );
        assert_eq!(
            errors[1].to_string(),
            r#"no ExecAccessTemplate "x" in namespace "y"; list them with: ozctl get templates -n y"#
        );
        for e in errors {
            assert!(!e.to_string().contains('\n'));
        }
    }

    #[test]
    fn exec_says_what_to_run_instead() {
        let pod = CliError::PodNotRequest {
            pod: "web-0".into(),
            kind: "ExecAccessRequest",
            request: "alice-x7k2p".into(),
            phase: "Ready".into(),
            hint: "ozctl exec alice-x7k2p -n shop".into(),
        };
        assert_eq!(
            pod.to_string(),
            "web-0 is a pod, not an access request; your ExecAccessRequest alice-x7k2p (Ready) \
             is for it: ozctl exec alice-x7k2p -n shop"
        );
        let ungranted = CliError::NoGrantForPod {
            pod: "web-0".into(),
            namespace: "shop".into(),
            advice: "ExecAccessTemplate web can grant it to you: \
                     ozctl create exec web --target-pod web-0 -n shop"
                .into(),
        };
        assert_eq!(
            ungranted.to_string(),
            "web-0 is a pod in namespace \"shop\", not an access request, and you hold no grant \
             for it; ExecAccessTemplate web can grant it to you: \
             ozctl create exec web --target-pod web-0 -n shop"
        );
        let scheduled = CliError::Scheduled {
            kind: "ExecAccessRequest",
            name: "alice-x7k2p".into(),
            starts: "2026-12-01 23:00:00 +01:00".into(),
            hint: "ozctl exec alice-x7k2p -n shop".into(),
        };
        assert_eq!(
            scheduled.to_string(),
            "ExecAccessRequest alice-x7k2p is Scheduled: its access starts at 2026-12-01 \
             23:00:00 +01:00; run `ozctl exec alice-x7k2p -n shop` then"
        );
        let waiting = CliError::AwaitingApproval {
            kind: "ExecAccessRequest",
            name: "alice-x7k2p".into(),
            after: "2m".into(),
            progress: "Approved: 0 of 1 approvals; waiting for a member of leads".into(),
            next: "follow it with `ozctl get requests alice-x7k2p -n shop`".into(),
        };
        assert_eq!(
            waiting.to_string(),
            "ExecAccessRequest alice-x7k2p is still PendingApproval after 2m (Approved: 0 of 1 \
             approvals; waiting for a member of leads): it can be used once approved; follow it \
             with `ozctl get requests alice-x7k2p -n shop`"
        );
    }

    #[test]
    fn kubeconfig_problems_say_what_to_run() {
        let missing = kube::config::KubeconfigError::LoadContext("prod".into());
        assert_eq!(
            kubeconfig_message(&missing),
            r#"there is no context "prod" in your kubeconfig; list them with: kubectl config get-contexts"#
        );
    }
}
