//! `ozctl exec REQUEST [-- COMMAND...]`: wait until the request is ready, then run a command
//! (the shell of its access instructions by default) in the granted pod. When it cannot, the
//! error says what to do next ([`super::exec_hints`]).
//!
//! A Brokered grant (`status.sessionMode: Brokered`) is used through oz's sessions API only
//! ([`super::brokered`]): its Role allows nothing else, so kubectl is never used.
//! For a Direct grant, with `kubectl` on PATH, ozctl hands over to `kubectl exec -i [-t]` with the same kubeconfig,
//! context and namespace, so the terminal works as usual. Without it, ozctl runs the command
//! itself over the API server's websocket, streaming stdin, stdout and stderr, but without a
//! terminal (no raw mode, no line editing): fine for commands, rough for interactive shells;
//! install kubectl for those.

use std::{
    ffi::{OsStr, OsString},
    io::IsTerminal,
    path::{Path, PathBuf},
    time::Duration,
};

use clap::Args;
use k8s_openapi::{api::core::v1::Pod, jiff::Timestamp};
use kube::{Api, api::AttachParams};
use oz_api::{AccessKind, RequestPhase, SessionMode, pod_mutation::DEFAULT_CONTAINER_ANNOTATION};

use super::{
    brokered,
    error::{CliError, chain},
    exec_hints, kind_arg,
    pod_output::{exit_code, pipe_output},
    progress::Progress,
    requests::{self, RequestView},
    session::{ClusterArgs, Session},
    timefmt, wait,
};

/// `ozctl exec`.
#[derive(Args, Debug)]
pub struct ExecArgs {
    /// The request whose pod to run in (either kind)
    pub request: String,
    /// Which kind, when both an exec and a pod request have this name
    #[arg(long, value_parser = kind_arg::parser())]
    pub kind: Option<AccessKind>,
    /// The container [default: the pod's default container]
    #[arg(short = 'c', long)]
    pub container: Option<String>,
    /// How long to wait for the request to be ready, such as 90s or 5m
    #[arg(long, default_value = "2m", value_parser = timefmt::parse_positive, value_name = "DURATION")]
    pub timeout: Duration,
    /// The command to run [default: the one in the access instructions, else /bin/sh]
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// Runs `ozctl exec`; returns the command's exit code.
pub async fn run(session: &Session, args: ExecArgs) -> Result<u8, CliError> {
    let view = match requests::find(session, &args.request, args.kind).await {
        Err(missing @ CliError::NoRequest { .. }) => {
            return Err(exec_hints::not_a_request(session, &args.request, missing).await);
        }
        found => found?,
    };
    let view = if wait::is_settled(view.phase()) {
        view
    } else {
        let mut progress = Progress::new(format!("Waiting for {}", view.name));
        let settled =
            wait::until_settled(session, view.kind, &view.name, args.timeout, &mut progress).await;
        progress.finish();
        match settled {
            Err(timed_out @ CliError::Timeout { .. }) => {
                let (kind, timeout) = (view.kind, args.timeout);
                let error =
                    exec_hints::still_waiting(session, kind, &view.name, timeout, timed_out);
                return Err(error.await);
            }
            settled => settled?,
        }
    };
    // Only an expired, revoked or denied request is asked for again.
    let again = match view.phase().is_some_and(RequestPhase::is_settled) {
        true => exec_hints::ask_again(session, &view).await,
        false => String::new(),
    };
    let pod = ready_pod(session, &view, again)?;
    let command = if args.command.is_empty() {
        default_command(view.status.access_message.as_deref())
    } else {
        args.command.clone()
    };
    let tty = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let kubectl = || find_program("kubectl", std::env::var_os("PATH").as_deref());
    match exec_path(view.status.session_mode, kubectl) {
        ExecPath::Brokered => {
            let container = container(session, &pod, args.container).await?;
            brokered::exec(session, &pod, container.as_deref(), command, tty).await
        }
        ExecPath::Kubectl(kubectl) => {
            let kubectl_args = kubectl_args(
                &session.cluster,
                &session.namespace,
                &pod,
                args.container.as_deref(),
                tty,
                &command,
            );
            run_kubectl(&kubectl, &kubectl_args)
        }
        ExecPath::Directly => {
            eprintln!(
                "note: kubectl is not on PATH, so ozctl runs the command itself, without a terminal; install kubectl for an interactive shell"
            );
            let container = container(session, &pod, args.container).await?;
            exec_directly(session, &pod, container.as_deref(), command).await
        }
    }
}

/// The container to run in when ozctl opens the stream itself (kubectl chooses its own): the
/// one named with `-c`, else the pod's default ([`default_container`]). When the pod cannot
/// be read, none is named and the apiserver decides.
async fn container(
    session: &Session,
    pod: &str,
    named: Option<String>,
) -> Result<Option<String>, CliError> {
    if named.is_some() {
        return Ok(named);
    }
    let Ok(found) = session.api::<Pod>().get(pod).await else {
        return Ok(None);
    };
    default_container(&found).map_err(CliError::Usage)
}

/// The container of `pod` to exec into when none is named: the one its
/// `kubectl.kubernetes.io/default-container` annotation names, if the pod has it (as kubectl
/// exec chooses); else its only container; else an error listing them. kubectl would take the
/// first container then; ozctl asks, as a shell in the wrong container of an access grant is
/// easy to miss. `None` for a pod without containers (one not read in full): the apiserver
/// decides.
pub fn default_container(pod: &Pod) -> Result<Option<String>, String> {
    let containers: Vec<&str> = pod
        .spec
        .iter()
        .flat_map(|spec| &spec.containers)
        .map(|c| c.name.as_str())
        .collect();
    let annotated = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DEFAULT_CONTAINER_ANNOTATION))
        .filter(|name| containers.contains(&name.as_str()));
    match (annotated, containers.as_slice()) {
        (Some(name), _) => Ok(Some(name.clone())),
        (None, []) => Ok(None),
        (None, [only]) => Ok(Some((*only).to_string())),
        (None, _) => Err(format!(
            "pod {} has containers {} and names no default (annotation {DEFAULT_CONTAINER_ANNOTATION}); say which with -c CONTAINER",
            pod.metadata.name.as_deref().unwrap_or("?"),
            containers.join(", ")
        )),
    }
}

/// How `ozctl exec` reaches the pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExecPath {
    /// Through oz's sessions API: the grant is Brokered.
    Brokered,
    /// kubectl exec, in ozctl's place: a Direct grant, with kubectl installed.
    Kubectl(PathBuf),
    /// ozctl's own websocket to core pods/exec: a Direct grant, without kubectl.
    Directly,
}

/// The path for a grant of `mode` (`status.sessionMode`); `kubectl` finds kubectl, and is
/// not asked for a Brokered grant (kubectl can only reach core pods/exec, which it refuses).
pub fn exec_path(mode: Option<SessionMode>, kubectl: impl FnOnce() -> Option<PathBuf>) -> ExecPath {
    match mode {
        Some(SessionMode::Brokered) => ExecPath::Brokered,
        Some(SessionMode::Direct) | None => kubectl().map_or(ExecPath::Directly, ExecPath::Kubectl),
    }
}

/// The granted pod of a settled request, or why there is none; `again` is the command that
/// asks for access again ([`exec_hints::ask_again`]).
fn ready_pod(session: &Session, view: &RequestView, again: String) -> Result<String, CliError> {
    let kind = view.kind.request_kind();
    match view.phase() {
        Some(RequestPhase::Ready) => view.status.pod_name.clone().ok_or_else(|| {
            CliError::Api(format!("{kind} {} is ready but names no pod", view.name))
        }),
        Some(RequestPhase::Expired) => Err(CliError::Expired {
            kind,
            name: view.name.clone(),
            when: view
                .expires_at()
                .map_or_else(|| "already".into(), |t| timefmt::ago(Timestamp::now(), t)),
            hint: again,
        }),
        Some(RequestPhase::Revoked) => Err(view
            .revoked_error(again)
            .unwrap_or_else(|| CliError::Api(format!("{kind} {} was revoked", view.name)))),
        Some(RequestPhase::Scheduled) => Err(CliError::Scheduled {
            kind,
            name: view.name.clone(),
            starts: view.starts_at().map_or_else(|| "?".into(), timefmt::local),
            hint: session.hint(&format!("exec {}", view.name)),
        }),
        Some(RequestPhase::Denied) => Err(CliError::Denied {
            kind,
            name: view.name.clone(),
            reason: format!("{}; to ask again: {again}", view.problem()),
        }),
        _ => Err(CliError::Failed {
            kind,
            name: view.name.clone(),
            reason: view.problem(),
            hint: format!(
                "kubectl describe {} {} -n {}",
                kind.to_lowercase(),
                view.name,
                session.namespace
            ),
        }),
    }
}

/// The command of the access instructions (what follows ` -- ` in
/// `kubectl exec -ti -n team web-0 -- /bin/sh`), else `/bin/sh`.
pub fn default_command(access_message: Option<&str>) -> Vec<String> {
    access_message
        .and_then(|message| message.split_once(" -- "))
        .map(|(_, command)| {
            command
                .split_whitespace()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|command| !command.is_empty())
        .unwrap_or_else(|| vec!["/bin/sh".into()])
}

/// `program` in the directories of `path` (a PATH value), if it is there and executable.
pub fn find_program(program: &str, path: Option<&OsStr>) -> Option<PathBuf> {
    std::env::split_paths(path?)
        .filter(|dir| !dir.as_os_str().is_empty())
        .flat_map(|dir| {
            let plain = dir.join(program);
            let windows = dir.join(format!("{program}.exe"));
            [plain, windows]
        })
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    let Ok(metadata) = path.metadata() else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        metadata.is_file() && metadata.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    {
        metadata.is_file()
    }
}

/// kubectl's arguments for the same cluster, namespace, pod and command.
pub fn kubectl_args(
    cluster: &ClusterArgs,
    namespace: &str,
    pod: &str,
    container: Option<&str>,
    tty: bool,
    command: &[String],
) -> Vec<OsString> {
    let mut args: Vec<OsString> = Vec::new();
    if let Some(kubeconfig) = &cluster.kubeconfig {
        args.push("--kubeconfig".into());
        args.push(kubeconfig.into());
    }
    if let Some(context) = &cluster.context {
        args.push("--context".into());
        args.push(context.into());
    }
    args.push("exec".into());
    args.push(if tty { "-it" } else { "-i" }.into());
    args.push("-n".into());
    args.push(namespace.into());
    args.push(pod.into());
    if let Some(container) = container {
        args.push("-c".into());
        args.push(container.into());
    }
    args.push("--".into());
    args.extend(command.iter().map(OsString::from));
    args
}

/// Runs kubectl in ozctl's place (on Unix, ozctl's process becomes kubectl's, so signals and
/// the terminal are kubectl's alone); returns its exit code where that is not possible.
fn run_kubectl(kubectl: &Path, args: &[OsString]) -> Result<u8, CliError> {
    let mut command = std::process::Command::new(kubectl);
    command.args(args);
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        let error = command.exec();
        Err(CliError::Exec(format!(
            "cannot run {}: {error}",
            kubectl.display()
        )))
    }
    #[cfg(not(unix))]
    {
        let status = command
            .status()
            .map_err(|e| CliError::Exec(format!("cannot run {}: {e}", kubectl.display())))?;
        Ok(status.code().map_or(1, |c| c.clamp(0, 255) as u8))
    }
}

/// Runs `command` in the pod over the API server's websocket, without a terminal.
async fn exec_directly(
    session: &Session,
    pod: &str,
    container: Option<&str>,
    command: Vec<String>,
) -> Result<u8, CliError> {
    let pods: Api<Pod> = session.api();
    let mut params = AttachParams::default()
        .stdin(true)
        .stdout(true)
        .stderr(true);
    if let Some(container) = container {
        params = params.container(container);
    }
    let mut attached = pods
        .exec(pod, command, &params)
        .await
        .map_err(|e| match e {
            kube::Error::Api(_) => session.error(e),
            other => CliError::Exec(format!("cannot exec into pod {pod}: {}", chain(&other))),
        })?;
    let (Some(mut to_pod), Some(from_pod), Some(errors), Some(status)) = (
        attached.stdin(),
        attached.stdout(),
        attached.stderr(),
        attached.take_status(),
    ) else {
        return Err(CliError::Exec(
            "the exec session has no stdin, stdout or stderr".into(),
        ));
    };
    // stdin is copied until the command ends; the copy is then left behind (a blocking read of
    // the terminal cannot be cancelled), and the runtime is shut down without waiting for it.
    tokio::spawn(async move {
        let _ = tokio::io::copy(&mut tokio::io::stdin(), &mut to_pod).await;
        let _ = tokio::io::AsyncWriteExt::shutdown(&mut to_pod).await;
    });
    let status = pipe_output(attached, from_pod, Some(errors), status)
        .await
        .map_err(CliError::Exec)?;
    exit_code(status.as_ref()).map_err(CliError::Exec)
}

#[cfg(test)]
mod tests {

    use super::*;

    #[test]
    fn the_default_command_comes_from_the_access_instructions() {
        assert_eq!(
            default_command(Some("kubectl exec -ti -n team web-0 -- /bin/bash -l")),
            ["/bin/bash", "-l"]
        );
        assert_eq!(default_command(Some("kubectl exec -ti web-0")), ["/bin/sh"]);
        assert_eq!(
            default_command(Some("kubectl exec -ti web-0 -- ")),
            ["/bin/sh"]
        );
        assert_eq!(default_command(None), ["/bin/sh"]);
    }

    fn pod(annotation: Option<&str>, containers: &[&str]) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "web-0",
                "annotations": annotation
                    .map(|a| serde_json::json!({"kubectl.kubernetes.io/default-container": a})),
            },
            "spec": {"containers": containers.iter().map(|c| serde_json::json!({"name": c}))
                .collect::<Vec<_>>()},
        }))
        .unwrap()
    }

    #[test]
    fn the_default_container_is_the_annotated_one_else_the_only_one() {
        // The annotation wins, wherever the container is.
        assert_eq!(
            default_container(&pod(Some("app"), &["sidecar", "app"])),
            Ok(Some("app".into()))
        );
        assert_eq!(
            default_container(&pod(None, &["app"])),
            Ok(Some("app".into()))
        );
        // Naming a container the pod does not have: as if it named none.
        assert_eq!(
            default_container(&pod(Some("gone"), &["app"])),
            Ok(Some("app".into()))
        );
        for unclear in [
            pod(None, &["sidecar", "app"]),
            pod(Some("gone"), &["sidecar", "app"]),
        ] {
            assert_eq!(
                default_container(&unclear),
                Err(
                    "pod web-0 has containers sidecar, app and names no default (annotation \
                     kubectl.kubernetes.io/default-container); say which with -c CONTAINER"
                        .into()
                )
            );
        }
        assert_eq!(default_container(&pod(Some("app"), &[])), Ok(None));
    }

    #[test]
    fn a_brokered_grant_goes_through_oz_even_with_kubectl_installed() {
        let kubectl = || Some(PathBuf::from("/usr/bin/kubectl"));
        assert_eq!(
            exec_path(Some(SessionMode::Brokered), kubectl),
            ExecPath::Brokered
        );
        assert_eq!(
            exec_path(None, kubectl),
            ExecPath::Kubectl("/usr/bin/kubectl".into())
        );
        assert_eq!(
            exec_path(Some(SessionMode::Direct), kubectl),
            ExecPath::Kubectl("/usr/bin/kubectl".into())
        );
        assert_eq!(exec_path(None, || None), ExecPath::Directly);
    }

    #[test]
    fn kubectl_gets_the_same_cluster_and_namespace() {
        let cluster = ClusterArgs {
            kubeconfig: Some("/home/a/kc".into()),
            context: Some("prod".into()),
            namespace: None,
        };
        let args = kubectl_args(&cluster, "team", "web-0", Some("app"), true, &["sh".into()]);
        assert_eq!(
            args,
            [
                "--kubeconfig",
                "/home/a/kc",
                "--context",
                "prod",
                "exec",
                "-it",
                "-n",
                "team",
                "web-0",
                "-c",
                "app",
                "--",
                "sh"
            ]
            .map(OsString::from)
        );
        let plain = kubectl_args(
            &ClusterArgs::default(),
            "team",
            "web-0",
            None,
            false,
            &["ls".into(), "-l".into()],
        );
        assert_eq!(
            plain,
            ["exec", "-i", "-n", "team", "web-0", "--", "ls", "-l"].map(OsString::from)
        );
    }

    #[test]
    fn programs_are_found_on_path() {
        let dir = std::env::temp_dir().join(format!("ozctl-path-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let kubectl = dir.join("kubectl");
        std::fs::write(&kubectl, "#!/bin/sh\n").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&kubectl, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let path = std::env::join_paths(["/nonexistent".as_ref(), dir.as_path()]).unwrap();
        assert_eq!(find_program("kubectl", Some(&path)), Some(kubectl));
        assert_eq!(find_program("no-such-program", Some(&path)), None);
        assert_eq!(find_program("kubectl", None), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
