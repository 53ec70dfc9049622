//! What comes back from a command ozctl runs in a pod over the API server's websocket, for
//! both ways it does ([`super::exec`] for a Direct grant without kubectl, [`super::brokered`]
//! through oz's sessions API): the output copied to ours, and the exit code the final Status
//! carries.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kube::api::AttachedProcess;
use tokio::io::AsyncRead;

use super::error::chain;

/// How long output that arrived before a connection failed may take to reach our stdout.
const FLUSH_AFTER_FAILURE: Duration = Duration::from_millis(500);

/// Copies the pod's stdout (and stderr) to ours until the stream ends, and returns the final
/// Status (`None` when the connection closed without one).
///
/// kube's stream task, when the connection fails rather than closes (the server behind the
/// apiserver died, the network went), returns without closing the output pipes it feeds, so a
/// copy from them would wait forever and the user's terminal would hang. So the task's own end
/// is watched as well: after a failure, the output that arrived is flushed and the failure
/// returned.
pub async fn pipe_output(
    attached: AttachedProcess,
    mut from_pod: impl AsyncRead + Unpin,
    errors: Option<impl AsyncRead + Unpin>,
    status: impl Future<Output = Option<Status>>,
) -> Result<Option<Status>, String> {
    let streams = async {
        let mut stdout = tokio::io::stdout();
        let out = tokio::io::copy(&mut from_pod, &mut stdout);
        match errors {
            Some(mut errors) => {
                let mut stderr = tokio::io::stderr();
                let err = tokio::io::copy(&mut errors, &mut stderr);
                let _ = tokio::join!(out, err);
            }
            None => {
                let _ = out.await;
            }
        }
        status.await
    };
    let task = attached.join();
    tokio::pin!(streams, task);
    tokio::select! {
        status = &mut streams => {
            let _ = task.await;
            Ok(status)
        }
        ended = &mut task => match ended {
            Ok(()) => Ok(streams.await),
            Err(error) => {
                let _ = tokio::time::timeout(FLUSH_AFTER_FAILURE, &mut streams).await;
                Err(format!(
                    "the connection ended before the command did: {}",
                    chain(&error)
                ))
            }
        },
    }
}

/// The exit code of a command run over the websocket, from the Status the API server sends
/// when it ends: 0 on success, the command's code when it exits non-zero.
pub fn exit_code(status: Option<&Status>) -> Result<u8, String> {
    let Some(status) = status else {
        return Err("the connection to the pod ended without an exit status".into());
    };
    if status.status.as_deref() == Some("Success") {
        return Ok(0);
    }
    let code = status
        .details
        .as_ref()
        .and_then(|d| d.causes.as_ref())
        .into_iter()
        .flatten()
        .find(|cause| cause.reason.as_deref() == Some("ExitCode"))
        .and_then(|cause| cause.message.as_deref()?.parse::<i64>().ok());
    match (code, status.message.as_deref()) {
        (Some(code), _) => Ok(code.clamp(1, 255) as u8),
        (None, Some(message)) if !message.is_empty() => {
            Err(format!("the command failed in the pod: {message}"))
        }
        (None, _) => Err(format!(
            "the command failed in the pod ({})",
            status.reason.as_deref().unwrap_or("no reason given")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_come_from_the_status() {
        let success = Status {
            status: Some("Success".into()),
            ..Default::default()
        };
        assert_eq!(exit_code(Some(&success)), Ok(0));
        let failed = crate::fixtures::exited_with(42);
        assert_eq!(exit_code(Some(&failed)), Ok(42));
        let broken = Status {
            status: Some("Failure".into()),
            message: Some("container not found".into()),
            ..Default::default()
        };
        assert_eq!(
            exit_code(Some(&broken)),
            Err("the command failed in the pod: container not found".into())
        );
        assert!(exit_code(None).is_err());
    }
}
