//! `ozctl exec` for a Brokered grant: the session goes through oz's aggregated API
//! (`/apis/sessions.wizardofoz.co/v1alpha1/namespaces/{ns}/pods/{pod}/exec`), which the grant's
//! Role allows, never through core `pods/exec`, which it does not (so never through kubectl).
//!
//! kube's `Api::exec` works for any resource marked [`Execute`](kube::api::Execute):
//! [`BrokeredPod`] is the pod as oz serves it, so the session is the usual websocket
//! `AttachedProcess`. With a terminal on
//! stdin and stdout, the terminal is put in raw mode ([`RawTerminal`], restored when dropped,
//! on every way out) and its size follows the window (SIGWINCH). rustix (already in the lock,
//! through tempfile) does the termios calls with a safe API; no terminal crate is needed for
//! raw mode and a window size.
//!
//! When oz closes the session (the grant expired or was revoked, the template was deleted, the
//! session idled), its last line arrives on stdout, and the final Status says why: ozctl prints
//! that message on stderr and exits with [`OZ_CLOSED_EXIT_CODE`].

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kube::{
    Api,
    api::{AttachParams, TerminalSize},
};
use oz_api::BrokeredPod;

use super::{
    error::{CliError, chain},
    pod_output::{exit_code, pipe_output},
    session::Session,
    terminal_text::printable_line,
};

/// The exit status of `ozctl exec` when oz closed the session (rather than the command ending).
pub const OZ_CLOSED_EXIT_CODE: u8 = 3;

/// The parameters of a brokered exec: stdin and stdout always; with a terminal, a tty (whose
/// stderr is merged into stdout, as kubectl does), else stderr apart.
pub fn attach_params(container: Option<&str>, tty: bool) -> AttachParams {
    let mut params = AttachParams::default()
        .stdin(true)
        .stdout(true)
        .stderr(!tty)
        .tty(tty);
    if let Some(container) = container {
        params = params.container(container);
    }
    params
}

/// How a brokered session ended, from its final Status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ending {
    /// The command ended with this exit code.
    Exited(u8),
    /// oz closed it; the message says why.
    ClosedByOz(String),
}

/// The ending a final Status says: oz's own Failure (its message starts with
/// `oz closed the session`), else the command's exit code, as for any exec.
pub fn ending(status: Option<&Status>) -> Result<Ending, String> {
    if let Some(message) = status
        .filter(|s| s.status.as_deref() == Some("Failure"))
        .and_then(|s| s.message.as_deref())
        .filter(|m| m.starts_with(oz_api::session::CLOSED_BY_OZ))
    {
        return Ok(Ending::ClosedByOz(message.to_string()));
    }
    exit_code(status).map(Ending::Exited)
}

/// Runs `command` in `pod` through oz; returns the exit status of `ozctl exec`.
pub async fn exec(
    session: &Session,
    pod: &str,
    container: Option<&str>,
    command: Vec<String>,
    tty: bool,
) -> Result<u8, CliError> {
    let pods: Api<BrokeredPod> = session.api();
    let params = attach_params(container, tty);
    let mut attached = pods
        .exec(pod, command, &params)
        .await
        .map_err(|e| match e {
            kube::Error::Api(_) => session.error(e),
            other => CliError::Exec(format!(
                "cannot open a session into pod {pod} through oz: {}",
                chain(&other)
            )),
        })?;
    let (Some(mut to_pod), Some(from_pod), Some(status)) =
        (attached.stdin(), attached.stdout(), attached.take_status())
    else {
        return Err(CliError::Exec(
            "the session through oz has no stdin or stdout".into(),
        ));
    };
    let errors = attached.stderr();
    let resize = attached.terminal_size();
    // Restored when dropped: on return, on error and on a panic's unwinding.
    let raw = if tty {
        Some(RawTerminal::enter()?)
    } else {
        None
    };
    if let (Some(resize), true) = (resize, tty) {
        tokio::spawn(follow_window_size(resize));
    }
    // stdin is copied until the session ends, then left behind (a blocking read of the
    // terminal cannot be cancelled); the runtime is shut down without waiting for it.
    tokio::spawn(async move {
        let _ = tokio::io::copy(&mut tokio::io::stdin(), &mut to_pod).await;
        let _ = tokio::io::AsyncWriteExt::shutdown(&mut to_pod).await;
    });
    let streams = pipe_output(attached, from_pod, errors, status);
    let status = tokio::select! {
        status = streams => status,
        signal = terminated() => {
            drop(raw);
            return Err(CliError::Exec(format!("interrupted by {signal}; the session is closed")));
        }
    };
    let status = status.map_err(|e| {
        CliError::Exec(format!(
            "the session through oz was cut off ({e}); oz or the apiserver went away: open it again"
        ))
    });
    drop(raw);
    match ending(status?.as_ref()).map_err(CliError::Exec)? {
        Ending::Exited(code) => Ok(code),
        Ending::ClosedByOz(message) => {
            eprintln!("{}", printable_line(&message));
            Ok(OZ_CLOSED_EXIT_CODE)
        }
    }
}

/// Sends the terminal's size now, and again on every SIGWINCH, until the session ends.
async fn follow_window_size(resize: futures::channel::mpsc::Sender<TerminalSize>) {
    use futures::SinkExt;
    let mut resize = resize;
    let size = || terminal_size().map(|(width, height)| TerminalSize { width, height });
    if let Some(now) = size()
        && resize.send(now).await.is_err()
    {
        return;
    }
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut changes) = signal(SignalKind::window_change()) else {
            return;
        };
        while changes.recv().await.is_some() {
            if let Some(now) = size()
                && resize.send(now).await.is_err()
            {
                return;
            }
        }
    }
}

/// The terminal's (columns, rows), if stdout is one.
fn terminal_size() -> Option<(u16, u16)> {
    #[cfg(unix)]
    {
        let size = rustix::termios::tcgetwinsize(std::io::stdout()).ok()?;
        (size.ws_col > 0 && size.ws_row > 0).then_some((size.ws_col, size.ws_row))
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// Resolves with the signal's name when ozctl is asked to stop (SIGTERM, SIGHUP; in raw mode
/// Ctrl-C is a byte for the pod, not SIGINT), so the terminal is restored before exiting.
async fn terminated() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(mut term), Ok(mut hup), Ok(mut int)) => tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = hup.recv() => "SIGHUP",
                _ = int.recv() => "SIGINT",
            },
            _ => std::future::pending().await,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        "Ctrl-C"
    }
}

/// The terminal on stdin in raw mode (each key straight to the pod, no echo, no line
/// editing); its earlier mode is restored when this is dropped.
pub struct RawTerminal {
    #[cfg(unix)]
    saved: rustix::termios::Termios,
}

impl RawTerminal {
    /// Puts stdin's terminal in raw mode.
    pub fn enter() -> Result<RawTerminal, CliError> {
        #[cfg(unix)]
        {
            use rustix::termios::{OptionalActions, tcgetattr, tcsetattr};
            let fail = |e: rustix::io::Errno| {
                CliError::Exec(format!("cannot put the terminal in raw mode: {e}"))
            };
            let saved = tcgetattr(std::io::stdin()).map_err(fail)?;
            let mut raw = saved.clone();
            raw.make_raw();
            tcsetattr(std::io::stdin(), OptionalActions::Now, &raw).map_err(fail)?;
            Ok(RawTerminal { saved })
        }
        #[cfg(not(unix))]
        {
            Ok(RawTerminal {})
        }
    }
}

impl Drop for RawTerminal {
    fn drop(&mut self) {
        #[cfg(unix)]
        {
            use rustix::termios::{OptionalActions, tcsetattr};
            let _ = tcsetattr(std::io::stdin(), OptionalActions::Now, &self.saved);
        }
    }
}

#[cfg(test)]
mod tests {
    use kube::{Resource, core::Request};

    use super::*;

    #[test]
    fn a_brokered_exec_goes_to_ozs_sessions_api_with_the_usual_query() {
        let url = BrokeredPod::url_path(&(), Some("team"));
        let params = attach_params(Some("app"), true);
        let request = Request::new(url)
            .exec("web-0", vec!["/bin/sh", "-l"], &params)
            .unwrap();
        assert_eq!(
            request.uri(),
            "/apis/sessions.wizardofoz.co/v1alpha1/namespaces/team/pods/web-0/exec?&stdin=true&stdout=true&tty=true&container=app&command=%2Fbin%2Fsh&command=-l"
        );
        let plain = Request::new(BrokeredPod::url_path(&(), Some("team")))
            .exec("web-0", vec!["ls"], &attach_params(None, false))
            .unwrap();
        assert_eq!(
            plain.uri(),
            "/apis/sessions.wizardofoz.co/v1alpha1/namespaces/team/pods/web-0/exec?&stdin=true&stdout=true&stderr=true&command=ls"
        );
    }

    #[test]
    fn oz_closing_the_session_is_told_apart_from_the_commands_exit() {
        let closed = Status {
            status: Some("Failure".into()),
            reason: Some("Forbidden".into()),
            message: Some("oz closed the session: your access expired".into()),
            ..Default::default()
        };
        assert_eq!(
            ending(Some(&closed)),
            Ok(Ending::ClosedByOz(
                "oz closed the session: your access expired".into()
            ))
        );
        let success = Status {
            status: Some("Success".into()),
            ..Default::default()
        };
        assert_eq!(ending(Some(&success)), Ok(Ending::Exited(0)));
        let exited = crate::fixtures::exited_with(7);
        assert_eq!(ending(Some(&exited)), Ok(Ending::Exited(7)));
        assert!(ending(None).is_err());
    }
}
