//! `ozctl`, the engineers' CLI: ask for access through a template, wait until it is ready, use
//! it, end it, and look back at who had access. It follows Oz's ozctl (`create` checks the
//! template, creates the request, waits, and prints the access instructions) and adds `get`,
//! `revoke`, `history`, `exec`, `audit` (oz's audit files, checked and reviewed), and the
//! approvers' `approvals`, `approve` and `deny`.
//!
//! One file per command ([`create`], [`get`], [`revoke`], [`history`], [`exec`],
//! [`approvals`], [`decide`] (`approve` and `deny`), and
//! [`audit`]'s [`review`](audit::review) and [`verify`](audit::verify)); the rest
//! is shared: the cluster connection ([`session`]), who the user is ([`identity`]), both kinds
//! of request and template seen the same way ([`requests`], [`templates`], [`kind_arg`] for
//! `--kind`), waiting ([`wait`], [`progress`]) and output ([`output`], [`table`], [`csv`],
//! [`timefmt`]). The CRD types, the kind vocabulary and the rules (who a template admits, which
//! conditions fail) come from `oz-api`.
//!
//! Installed as `kubectl-oz`, it is the kubectl plugin `kubectl oz`, and says so in its help
//! and hints. Errors are one line on stderr, `error: ` and what to do; stdout holds only the
//! result, so `-o json` can be piped.
#![forbid(unsafe_code)]

pub mod approvals;
pub mod audit;
pub mod brokered;
pub mod create;
pub mod csv;
pub mod decide;
pub mod error;
pub mod exec;
pub mod exec_hints;
pub mod extend;
#[cfg(test)]
mod fixtures;
pub mod get;
pub mod history;
pub mod identity;
pub mod kind_arg;
pub mod locks;
pub mod names;
pub mod output;
pub mod pod_output;
pub mod progress;
pub mod replay;
pub mod requests;
pub mod revoke;
pub mod session;
pub mod sessions;
pub mod table;
pub mod templates;
pub mod terminal_text;
pub mod timefmt;
pub mod wait;

use std::{ffi::OsString, path::Path, process::ExitCode};

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

pub use error::CliError;
use session::{ClusterArgs, Session};

/// ozctl's command line.
#[derive(Parser, Debug)]
#[command(
    name = "ozctl",
    version,
    about = "Just-in-time access to Kubernetes pods through oz",
    long_about = "Just-in-time access to Kubernetes pods through oz: ask for access through a \
                  template, wait until it is ready, use it, end it early, and look back at who \
                  had access."
)]
pub struct Cli {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// ozctl's commands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Ask for access through a template and wait until it is ready
    Create(create::CreateArgs),
    /// List your current requests (everyone's with --all), or the templates to ask through
    #[command(visible_alias = "list")]
    Get(get::GetArgs),
    /// End a request's access now
    Revoke(revoke::RevokeArgs),
    /// Ask for more time on a Ready request, keeping its pod and open sessions
    Extend(extend::ExtendArgs),
    /// Lock access at once: revoke a user's, group's, namespace's or template's grants, close
    /// their sessions and refuse new requests (lock admins only)
    Lock(locks::LockArgs),
    /// Remove a lock (see `locks`)
    Unlock(locks::UnlockArgs),
    /// List the locks
    Locks(locks::LocksArgs),
    /// List the requests whose access has ended, for access reviews
    History(history::HistoryArgs),
    /// List the requests waiting for approval that you may decide
    Approvals(approvals::ApprovalsArgs),
    /// Approve a request waiting for approval
    Approve(decide::ApproveArgs),
    /// Deny a request waiting for approval (with --comment saying why)
    Deny(decide::DenyArgs),
    /// Run a command (a shell by default) in a request's pod, once it is ready
    Exec(exec::ExecArgs),
    /// List the brokered sessions of a request (of every request without one), newest first
    Sessions(sessions::SessionsArgs),
    /// List the records of oz's audit files, verified, for access reviews; `audit verify`
    /// checks the files
    Audit(audit::AuditArgs),
    /// Play a brokered session's recording (-n NAMESPACE), or save it with --output FILE
    Replay(replay::ReplayArgs),
}

/// How the user invoked ozctl, from `argv[0]`: `kubectl oz` for `kubectl-oz` (kubectl runs
/// plugin `kubectl-a-b_c` as `kubectl a b-c`), else `ozctl`.
pub fn program_name(argv0: Option<&std::ffi::OsStr>) -> String {
    let file = argv0
        .and_then(|a| Path::new(a).file_name())
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let file = file.strip_suffix(".exe").unwrap_or(&file);
    match file.strip_prefix("kubectl-") {
        Some(plugin) if !plugin.is_empty() => {
            format!("kubectl {}", plugin.replace('-', " ").replace('_', "-"))
        }
        _ => "ozctl".into(),
    }
}

/// The end of `--help`: examples, spelled the way the user runs ozctl, and the exit status.
pub fn help_footer(program: &str) -> String {
    format!(
        "Examples:
  {p} get templates -n team              # what you may ask for
  {p} create exec web -n team -D 30m     # ask, wait, get the access command
  {p} create exec db -n team --reason 'INC-42: stuck migration' --ticket INC-42
  {p} approvals -n team                  # requests waiting for your approval
  {p} approve alice-x7k2p -n team        # approve one (deny it with: deny NAME --comment WHY)
  {p} exec alice-x7k2p -n team           # a shell in the granted pod
  {p} sessions alice-x7k2p -n team       # its brokered sessions, newest first
  {p} extend alice-x7k2p -n team --by 30m  # more time, same pod and sessions
  {p} revoke alice-x7k2p -n team         # end it now
  {p} history -n team --all -o csv       # who had access, for a review
  {p} audit audit.jsonl* --since 24h     # what they did with it, from oz's audit files
  {p} audit verify audit.jsonl*          # check the files' hash chain and signatures
  {p} replay 20261123-081500-k3x9qa7m -n team  # play a brokered session's recording

Exit status: 0 when the command did what it says (for create: the request is Ready); 1 on any
other outcome, with one line on stderr saying why and what to do; 2 for a wrong command line.
exec exits with the status of the command it ran, or 3 when oz closed a brokered session (the
grant ended). audit verify exits 1 when the files are not intact, 2 when a file or key cannot be
read.",
        p = program
    )
}

/// ozctl's clap command, named `program` (`ozctl`, or `kubectl oz` as a plugin).
pub fn command(program: &str) -> clap::Command {
    Cli::command()
        .name(program.to_string())
        .bin_name(program.to_string())
        .after_help(help_footer(program))
}

/// Parses `args` (with `argv[0]`) as the command line of `program`; clap's own errors, `--help`
/// and `--version` (which names `commit`: see [`oz_api::build_info`]) exit the process as usual.
pub fn parse(program: &str, commit: Option<&str>, args: Vec<OsString>) -> Cli {
    let command = command(program).version(oz_api::build_info::version_text(commit));
    let matches = command.get_matches_from(args);
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

/// Runs one command.
pub async fn run(cli: Cli, program: &str) -> Result<u8, CliError> {
    let session = || Session::connect(&cli.cluster, program);
    match cli.command {
        Command::Create(args) => create::run(&session().await?, args).await.map(|()| 0),
        Command::Get(args) => get::run(&session().await?, args).await.map(|()| 0),
        Command::Revoke(args) => revoke::run(&session().await?, args).await.map(|()| 0),
        Command::Extend(args) => extend::run(&session().await?, args).await.map(|()| 0),
        Command::Lock(args) => locks::lock(&session().await?, args).await.map(|()| 0),
        Command::Unlock(args) => locks::unlock(&session().await?, args).await.map(|()| 0),
        Command::Locks(args) => locks::locks(&session().await?, args).await.map(|()| 0),
        Command::History(args) => history::run(&session().await?, args).await.map(|()| 0),
        Command::Approvals(args) => approvals::run(&session().await?, args).await.map(|()| 0),
        Command::Approve(args) => decide::approve(&session().await?, args).await.map(|()| 0),
        Command::Deny(args) => decide::deny(&session().await?, args).await.map(|()| 0),
        Command::Exec(args) => exec::run(&session().await?, args).await,
        Command::Sessions(args) => sessions::run(&session().await?, args).await.map(|()| 0),
        // The audit files are checked here; the cluster is asked only for the keys, if at all.
        Command::Audit(args) => audit::run(&cli.cluster, program, args).await,
        Command::Replay(args) => replay::run(&session().await?, args).await.map(|()| 0),
    }
}

/// ozctl's `main`: parse, run, print the error as one line, exit with its code. `commit` is the
/// one the binary was built from, for `--version`.
pub fn main(commit: Option<&str>) -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    let program = program_name(args.first().map(OsString::as_os_str));
    let cli = parse(&program, commit, args);
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(run(cli, &program));
    // `exec` may leave a read of stdin behind; nothing else is running.
    runtime.shutdown_background();
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("{}", error_line(&e));
            ExitCode::from(e.exit_code())
        }
    }
}

/// The line an error is shown as: `error: ` and the message, on one line, with what others
/// wrote in it (an apiserver or webhook message may quote a request) escaped.
pub fn error_line(error: &CliError) -> String {
    format!(
        "error: {}",
        terminal_text::printable_line(&error.to_string())
    )
}

#[cfg(test)]
mod tests {
    use std::{ffi::OsStr, path::PathBuf};

    use super::*;

    fn parse_ok(args: &[&str]) -> Cli {
        Cli::try_parse_from(args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    #[test]
    fn the_program_name_follows_argv0() {
        assert_eq!(program_name(Some(OsStr::new("ozctl"))), "ozctl");
        assert_eq!(
            program_name(Some(OsStr::new("/usr/local/bin/ozctl"))),
            "ozctl"
        );
        assert_eq!(
            program_name(Some(OsStr::new("/usr/local/bin/kubectl-oz"))),
            "kubectl oz"
        );
        assert_eq!(
            program_name(Some(OsStr::new("kubectl-oz.exe"))),
            "kubectl oz"
        );
        assert_eq!(
            program_name(Some(OsStr::new("kubectl-oz-ctl_x"))),
            "kubectl oz ctl-x"
        );
        assert_eq!(program_name(Some(OsStr::new("kubectl-"))), "ozctl");
        assert_eq!(program_name(None), "ozctl");
    }

    #[test]
    fn help_names_the_plugin() {
        let help = command("kubectl oz").render_help().to_string();
        assert!(
            help.contains("Usage: kubectl oz [OPTIONS] <COMMAND>"),
            "{help}"
        );
        assert!(
            help.contains("  kubectl oz revoke alice-x7k2p -n team"),
            "{help}"
        );
        assert!(!help.contains("ozctl"), "{help}");
    }

    #[test]
    fn create_takes_the_flags_of_the_issue_and_of_oz() {
        let cli = parse_ok(&[
            "ozctl",
            "create",
            "exec",
            "web",
            "--target-pod",
            "web-0",
            "--duration",
            "30m",
            "-n",
            "team",
            "--timeout",
            "90s",
            "-o",
            "json",
        ]);
        assert_eq!(cli.cluster.namespace.as_deref(), Some("team"));
        let Command::Create(create) = cli.command else {
            panic!()
        };
        let create::CreateKind::Exec(exec) = create.kind else {
            panic!()
        };
        assert_eq!(exec.target_pod.as_deref(), Some("web-0"));
        assert_eq!(exec.request.template, "web");
        assert_eq!(exec.request.duration.as_deref(), Some("30m"));
        assert_eq!(
            exec.request.wait.timeout,
            std::time::Duration::from_secs(90)
        );
        assert!(exec.request.wait.enabled());
        assert_eq!(exec.request.output, Some(output::ObjectFormat::Json));

        // Oz's spelling: kind names and short flags.
        let cli = parse_ok(&[
            "ozctl",
            "create",
            "PodAccessRequest",
            "dbg",
            "-D",
            "2h",
            "-N",
            "me",
        ]);
        let Command::Create(create) = cli.command else {
            panic!()
        };
        let create::CreateKind::Pod(pod) = create.kind else {
            panic!()
        };
        assert_eq!(pod.duration.as_deref(), Some("2h"));
        assert_eq!(pod.request_name.as_deref(), Some("me"));
        assert_eq!(pod.wait.timeout, std::time::Duration::from_secs(120));
    }

    #[test]
    fn fleet_cluster_names_the_spoke_of_either_kind_for_ozctl_and_kubectl_oz() {
        use kube::api::ObjectMeta;
        for program in ["ozctl", "kubectl oz"] {
            let parse = |args: &[&str]| {
                let matches = command(program)
                    .try_get_matches_from(args)
                    .unwrap_or_else(|e| panic!("{args:?}: {e}"));
                let Command::Create(create) = Cli::from_arg_matches(&matches).unwrap().command
                else {
                    panic!()
                };
                create.kind
            };
            let create::CreateKind::Exec(exec) =
                parse(&["x", "create", "exec", "web", "--fleet-cluster", "east"])
            else {
                panic!()
            };
            let sent = create::exec_request(ObjectMeta::default(), &exec.request, None);
            assert_eq!(sent.spec.cluster.as_deref(), Some("east"));
            let create::CreateKind::Pod(pod) =
                parse(&["x", "create", "pod", "scratch", "--fleet-cluster=west"])
            else {
                panic!()
            };
            let sent = create::pod_request(ObjectMeta::default(), &pod);
            assert_eq!(sent.spec.cluster.as_deref(), Some("west"));
            let create::CreateKind::Pod(pod) = parse(&["x", "create", "pod", "scratch"]) else {
                panic!()
            };
            assert_eq!(
                create::pod_request(ObjectMeta::default(), &pod)
                    .spec
                    .cluster,
                None
            );
            assert!(
                command(program)
                    .try_get_matches_from(["x", "create", "exec", "web", "--fleet-cluster", ""])
                    .is_err()
            );
        }
    }

    #[test]
    fn the_last_of_wait_and_no_wait_wins() {
        let wait = |args: &[&str]| {
            let mut all = vec!["ozctl", "create", "exec", "web"];
            all.extend(args);
            let Command::Create(create) = parse_ok(&all).command else {
                panic!()
            };
            let create::CreateKind::Exec(exec) = create.kind else {
                panic!()
            };
            exec.request.wait.enabled()
        };
        assert!(wait(&[]));
        assert!(!wait(&["--no-wait"]));
        assert!(wait(&["--no-wait", "--wait"]));
        assert!(!wait(&["--wait", "--no-wait"]));
    }

    #[test]
    fn cluster_flags_go_anywhere() {
        let cli = parse_ok(&[
            "ozctl",
            "--kubeconfig",
            "/tmp/kc",
            "get",
            "templates",
            "--context",
            "prod",
            "--namespace",
            "team",
        ]);
        assert_eq!(cli.cluster.kubeconfig, Some("/tmp/kc".into()));
        assert_eq!(cli.cluster.context.as_deref(), Some("prod"));
        assert_eq!(cli.cluster.namespace.as_deref(), Some("team"));
    }

    #[test]
    fn list_is_get_and_requests_are_the_default() {
        let Command::Get(get) = parse_ok(&["ozctl", "list", "--all"]).command else {
            panic!()
        };
        assert_eq!(get.resource, "requests");
        assert!(get.all);
        assert_eq!(get.output, get::ListFormat::Table);
        assert_eq!(get.fleet_cluster, None);

        let Command::Get(get) = parse_ok(&["ozctl", "get", "--fleet-cluster", "east"]).command
        else {
            panic!()
        };
        assert_eq!(get.fleet_cluster.as_deref(), Some("east"));
        // A request named is shown whatever its cluster.
        assert!(
            Cli::try_parse_from(["ozctl", "get", "req", "alice-x7k2p", "--fleet-cluster", "e"])
                .is_err()
        );
    }

    #[test]
    fn history_and_exec_arguments() {
        let Command::History(history) =
            parse_ok(&["ozctl", "history", "--since", "2d", "-o", "csv"]).command
        else {
            panic!()
        };
        assert_eq!(history.since, std::time::Duration::from_secs(2 * 86_400));
        assert_eq!(history.output, history::HistoryFormat::Csv);

        let Command::Exec(exec) =
            parse_ok(&["ozctl", "exec", "alice-x7k2p", "--", "ls", "-l", "/"]).command
        else {
            panic!()
        };
        assert_eq!(exec.request, "alice-x7k2p");
        assert_eq!(exec.command, ["ls", "-l", "/"]);

        let Command::Revoke(revoke) = parse_ok(&[
            "ozctl",
            "revoke",
            "alice-x7k2p",
            "--kind",
            "pod",
            "--no-wait",
        ])
        .command
        else {
            panic!()
        };
        assert_eq!(revoke.kind, Some(oz_api::AccessKind::Pod));
        assert!(!revoke.wait.enabled());
    }

    #[test]
    fn audit_reviews_files_and_audit_verify_checks_them() {
        let Command::Audit(audit) = parse_ok(&[
            "ozctl", "audit", "a.jsonl", "b.jsonl", "--since", "1h", "--user", "alice", "--pod",
            "web-0", "-n", "team", "-o", "json",
        ])
        .command
        else {
            panic!()
        };
        assert!(audit.command.is_none());
        let review = audit.review;
        let paths = |files: &[audit::trails::Labelled]| -> Vec<PathBuf> {
            files.iter().map(|f| f.path.clone()).collect()
        };
        assert_eq!(
            paths(&review.files),
            [PathBuf::from("a.jsonl"), "b.jsonl".into()]
        );
        assert!(review.files.iter().all(|f| f.cluster.is_none()));
        assert_eq!(review.fleet_cluster, None);
        assert_eq!(review.since, Some(std::time::Duration::from_secs(3600)));
        assert_eq!(review.user.as_deref(), Some("alice"));
        assert_eq!(review.pod.as_deref(), Some("web-0"));
        assert_eq!(review.output, output::TableFormat::Json);
        assert!(audit.keys.public_keys.is_empty());

        let cli = parse_ok(&[
            "ozctl",
            "audit",
            "verify",
            "audit.jsonl",
            "audit.jsonl.20261121T100000.000Z",
            "--public-key",
            "k1.pub",
            "--public-key",
            "k2.pub",
            "--allow-unsigned-tail",
            "--oz-namespace",
            "oz",
            "-o",
            "json",
        ]);
        let Command::Audit(audit::AuditArgs {
            command: Some(audit::AuditCommand::Verify(verify)),
            ..
        }) = cli.command
        else {
            panic!()
        };
        assert_eq!(verify.files.len(), 2);
        assert_eq!(
            paths(&verify.keys.public_keys),
            [PathBuf::from("k1.pub"), "k2.pub".into()]
        );
        assert_eq!(verify.keys.oz_namespace, "oz");
        assert!(verify.allow_unsigned_tail);
        assert_eq!(verify.output, audit::verify::VerifyFormat::Json);

        let Command::Audit(audit::AuditArgs {
            command: Some(audit::AuditCommand::Verify(verify)),
            ..
        }) = parse_ok(&["ozctl", "audit", "verify", "f"]).command
        else {
            panic!()
        };
        assert_eq!(verify.output, audit::verify::VerifyFormat::Text);
        assert!(!verify.allow_unsigned_tail);
        // Without OZ_NAMESPACE in the test's environment, oz's default namespace.
        if std::env::var_os("OZ_NAMESPACE").is_none() {
            assert_eq!(verify.keys.oz_namespace, "oz-system");
        }

        // A fleet's files and keys, each labelled with its cluster; ./ keeps a path a path.
        let Command::Audit(audit) = parse_ok(&[
            "ozctl",
            "audit",
            "b=audit-b.jsonl",
            "./c=x.jsonl",
            "--fleet-cluster",
            "b",
            "--public-key",
            "b=b.pub",
        ])
        .command
        else {
            panic!()
        };
        let labels = |files: &[audit::trails::Labelled]| -> Vec<(Option<String>, PathBuf)> {
            files
                .iter()
                .map(|f| (f.cluster.clone(), f.path.clone()))
                .collect()
        };
        assert_eq!(
            labels(&audit.review.files),
            [
                (Some("b".into()), "audit-b.jsonl".into()),
                (None, "./c=x.jsonl".into())
            ]
        );
        assert_eq!(audit.review.fleet_cluster.as_deref(), Some("b"));
        assert_eq!(
            labels(&audit.keys.public_keys),
            [(Some("b".into()), "b.pub".into())]
        );
        let Command::Audit(audit::AuditArgs {
            command: Some(audit::AuditCommand::Verify(verify)),
            ..
        }) = parse_ok(&[
            "ozctl",
            "audit",
            "verify",
            "c=c.jsonl",
            "--public-key",
            "c=c.pub",
        ])
        .command
        else {
            panic!()
        };
        assert_eq!(
            labels(&verify.files),
            [(Some("c".into()), "c.jsonl".into())]
        );
        assert_eq!(
            labels(&verify.keys.public_keys),
            [(Some("c".into()), "c.pub".into())]
        );

        for args in [
            &["ozctl", "audit", "b="][..],
            &["ozctl", "audit", "verify", "f", "--public-key", "b="],
            &["ozctl", "audit", "b=f", "--fleet-cluster", ""],
            &["ozctl", "audit", "verify", "b=f", "--fleet-cluster", "b"],
            &["ozctl", "audit"][..],
            &["ozctl", "audit", "verify"],
            &["ozctl", "audit", "verify", "f", "-o", "table"],
            &["ozctl", "audit", "f", "-o", "text"],
            &["ozctl", "audit", "f", "--since", "1w"],
        ] {
            assert!(Cli::try_parse_from(args).is_err(), "{args:?}");
        }
    }

    #[test]
    fn approvers_decide_with_approve_and_deny() {
        let Command::Create(create) = parse_ok(&[
            "ozctl",
            "create",
            "exec",
            "web",
            "--reason",
            "INC-42: db stuck",
            "--ticket",
            "INC-42",
        ])
        .command
        else {
            panic!()
        };
        let create::CreateKind::Exec(exec) = create.kind else {
            panic!()
        };
        assert_eq!(exec.request.reason.as_deref(), Some("INC-42: db stuck"));
        assert_eq!(exec.request.ticket.as_deref(), Some("INC-42"));

        let Command::Approvals(list) =
            parse_ok(&["ozctl", "approvals", "-A", "-o", "json"]).command
        else {
            panic!()
        };
        assert!(list.all_namespaces);
        assert_eq!(list.output, output::TableFormat::Json);

        let Command::Approve(approve) =
            parse_ok(&["ozctl", "approve", "alice-x7k2p", "--comment", "ok"]).command
        else {
            panic!()
        };
        assert_eq!(approve.decision.request, "alice-x7k2p");
        assert_eq!(approve.comment.as_deref(), Some("ok"));
        assert!(!approve.break_glass);
        assert_eq!(approve.decision.kind, None);

        let Command::Deny(deny) = parse_ok(&[
            "ozctl",
            "deny",
            "alice-x7k2p",
            "--kind",
            "pod",
            "--comment",
            "not now",
        ])
        .command
        else {
            panic!()
        };
        assert_eq!(deny.comment, "not now");
        assert_eq!(deny.decision.kind, Some(oz_api::AccessKind::Pod));

        for args in [
            // A deny says why; break-glass says why.
            &["ozctl", "deny", "alice-x7k2p"][..],
            &["ozctl", "approve", "alice-x7k2p", "--break-glass"],
            &["ozctl", "approve"],
            &["ozctl", "approvals", "-o", "yaml"],
        ] {
            assert!(Cli::try_parse_from(args).is_err(), "{args:?}");
        }
    }

    #[test]
    fn bad_values_are_refused_by_the_parser() {
        for args in [
            &["ozctl", "create", "exec", "web", "--timeout", "soon"][..],
            &["ozctl", "history", "--since", "1w"],
            &["ozctl", "get", "-o", "csv"],
            &["ozctl", "create", "exec"],
        ] {
            assert!(Cli::try_parse_from(args).is_err(), "{args:?}");
        }
    }

    #[test]
    fn the_error_line_is_one_line_without_escape_sequences() {
        let error = CliError::Api("denied: reason \"x\u{1b}[2J\"\nsecond line".into());
        assert_eq!(
            error_line(&error),
            "error: denied: reason \"x\\u{1b}[2J\" second line"
        );
    }

    #[test]
    fn the_command_line_is_well_formed() {
        command("ozctl").debug_assert();
    }
}
