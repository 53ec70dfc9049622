//! Streams into pods, driven the way a user drives them: `kubectl exec`, `attach` and
//! `port-forward` run as processes (usually [`ControlPlane::kubectl`](crate::ControlPlane::kubectl)
//! as some user), either to completion ([`run`]) or as a long-running [`Session`] whose stdin a
//! test writes, whose stdout it reads line by line, and whose end it notices and timestamps.
//!
//! Every process started here is killed when its value is dropped, so a failing test leaves no
//! kubectl behind. A command exec'd into a pod is a local process of the control plane's kwok
//! node; killing kubectl does not end it, deleting the pod does.

use std::{
    fmt,
    io::{BufRead, BufReader, Read, Write},
    path::PathBuf,
    process::{Child, ChildStdin, ExitStatus, Stdio},
    sync::{Arc, Mutex},
    time::Duration,
};

use k8s_openapi::jiff::Timestamp;
use tokio::sync::mpsc;

use crate::{Error, Result};

/// How long a one-shot kubectl command may take on a busy machine before it is killed.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// What a finished command said.
#[derive(Debug, Clone)]
pub struct Output {
    /// How it exited.
    pub status: ExitStatus,
    /// Everything it wrote to stdout.
    pub stdout: String,
    /// Everything it wrote to stderr.
    pub stderr: String,
}

impl Output {
    /// Whether it exited 0.
    pub fn success(&self) -> bool {
        self.status.success()
    }

    /// Whether the apiserver refused it with 403: kubectl prints `Error from server
    /// (Forbidden): ...`.
    pub fn forbidden(&self) -> bool {
        self.stderr.contains("Error from server (Forbidden)")
    }
}

impl fmt::Display for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.status, self.stdout, self.stderr
        )
    }
}

/// Runs `command` to completion with stdin closed and returns what it said; kills it and
/// fails if it takes longer than `timeout`.
pub async fn run(command: std::process::Command, timeout: Duration) -> Result<Output> {
    let mut session = Session::start(command, Stdio::null())?;
    let mut stdout = String::new();
    let deadline = tokio::time::Instant::now() + timeout;
    let ended = loop {
        match tokio::time::timeout_at(deadline, session.stdout.recv()).await {
            Ok(Some(Chunk::Line(line))) => {
                stdout.push_str(&line);
                stdout.push('\n');
            }
            Ok(Some(Chunk::End(at))) => break at,
            Ok(None) => break Timestamp::now(),
            Err(_) => {
                return Err(Error::Timeout(format!(
                    "{} did not finish within {timeout:?}; stdout so far: {stdout:?}; stderr: {}",
                    session.program.display(),
                    session.stderr()
                )));
            }
        }
    };
    session.ended = Some(ended);
    let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
    let end = session.ended(remaining).await?;
    Ok(Output {
        status: end.status,
        stdout,
        stderr: end.stderr,
    })
}

/// What arrives on a session's stdout.
enum Chunk {
    Line(String),
    /// Stdout closed, at this time: the stream is over.
    End(Timestamp),
}

/// How a session ended.
#[derive(Debug, Clone)]
pub struct Ended {
    /// When its stdout closed, as seen by the thread reading it (to the millisecond).
    pub at: Timestamp,
    /// How the process exited.
    pub status: ExitStatus,
    /// What it wrote to stderr.
    pub stderr: String,
}

/// A long-running command (such as `kubectl exec -i POD -- cat`) with its stdin open and its
/// stdout read line by line as it arrives. The process is killed when the session is dropped.
///
/// Plain threads read the pipes (the crate's tokio has no io-util), and hand stdout over a
/// channel, so the async methods never block the runtime.
pub struct Session {
    program: PathBuf,
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: mpsc::UnboundedReceiver<Chunk>,
    stderr: Arc<Mutex<String>>,
    ended: Option<Timestamp>,
}

impl Session {
    /// Starts `command` with stdin, stdout and stderr piped.
    pub fn spawn(command: std::process::Command) -> Result<Session> {
        Self::start(command, Stdio::piped())
    }

    fn start(mut command: std::process::Command, stdin: Stdio) -> Result<Session> {
        let program = program_of(&command);
        let mut child = command
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| Error::Io {
                path: program.clone(),
                source,
            })?;
        let stdin = child.stdin.take();
        let (send, stdout) = mpsc::unbounded_channel();
        let lines = BufReader::new(child.stdout.take().expect("stdout is piped")).lines();
        std::thread::spawn(move || {
            for line in lines {
                let Ok(line) = line else { break };
                if send.send(Chunk::Line(line)).is_err() {
                    return;
                }
            }
            let _ = send.send(Chunk::End(Timestamp::now()));
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut errors = child.stderr.take().expect("stderr is piped");
        let collected = stderr.clone();
        std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            while let Ok(n) = errors.read(&mut buffer) {
                if n == 0 {
                    break;
                }
                collected
                    .lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buffer[..n]));
            }
        });
        Ok(Session {
            program,
            child,
            stdin,
            stdout,
            stderr,
            ended: None,
        })
    }

    /// What the process has written to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Reads stdout until a line containing `text` arrives, and returns that line. Fails if the
    /// stream ends first, or after `timeout`; the error carries what stderr said.
    pub async fn wait_for_line(&mut self, text: &str, timeout: Duration) -> Result<String> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut seen = Vec::new();
        loop {
            if let Some(at) = self.ended {
                return Err(Error::Timeout(format!(
                    "{}: the stream ended at {at} before a line containing {text:?}; lines: {seen:?}; stderr: {}",
                    self.program.display(),
                    self.stderr()
                )));
            }
            match tokio::time::timeout_at(deadline, self.stdout.recv()).await {
                Ok(Some(Chunk::Line(line))) if line.contains(text) => return Ok(line),
                Ok(Some(Chunk::Line(line))) => seen.push(line),
                Ok(Some(Chunk::End(at))) => self.ended = Some(at),
                Ok(None) => self.ended = Some(Timestamp::now()),
                Err(_) => {
                    return Err(Error::Timeout(format!(
                        "{}: no line containing {text:?} within {timeout:?}; lines: {seen:?}; stderr: {}",
                        self.program.display(),
                        self.stderr()
                    )));
                }
            }
        }
    }

    /// Writes `line` and a newline to the process's stdin (a pipe: this does not block for
    /// lines this short).
    pub fn send_line(&mut self, line: &str) -> Result<()> {
        let broken = || std::io::Error::new(std::io::ErrorKind::BrokenPipe, "stdin is closed");
        let written = match self.stdin.as_mut() {
            Some(stdin) => stdin
                .write_all(format!("{line}\n").as_bytes())
                .and_then(|()| stdin.flush()),
            None => Err(broken()),
        };
        written.map_err(|source| Error::Io {
            path: self.program.clone(),
            source,
        })
    }

    /// Writes `line` and waits up to `timeout` for the same line to come back on stdout, as
    /// it does from `cat`: the round trip proves the stream still carries data both ways.
    pub async fn echo(&mut self, line: &str, timeout: Duration) -> Result<()> {
        self.send_line(line)?;
        let back = self.wait_for_line(line, timeout).await?;
        if back == line {
            Ok(())
        } else {
            Err(Error::Timeout(format!("sent {line:?}, got back {back:?}")))
        }
    }

    /// Whether the stream is still open: stdout has not closed, as far as has been read, and
    /// the process runs.
    pub fn is_open(&mut self) -> bool {
        while let Ok(chunk) = self.stdout.try_recv() {
            if let Chunk::End(at) = chunk {
                self.ended = Some(at);
            }
        }
        self.ended.is_none() && matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits up to `timeout` for the stream to end (stdout closes and the process exits),
    /// discarding any output still to be read; says when stdout closed and how it exited.
    pub async fn ended(&mut self, timeout: Duration) -> Result<Ended> {
        let deadline = tokio::time::Instant::now() + timeout;
        let still_open = |program: &PathBuf| {
            Error::Timeout(format!(
                "{}: the stream was still open after {timeout:?}",
                program.display()
            ))
        };
        while self.ended.is_none() {
            match tokio::time::timeout_at(deadline, self.stdout.recv()).await {
                Ok(Some(Chunk::Line(_))) => {}
                Ok(Some(Chunk::End(at))) => self.ended = Some(at),
                Ok(None) => self.ended = Some(Timestamp::now()),
                Err(_) => return Err(still_open(&self.program)),
            }
        }
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Ok(None) => return Err(still_open(&self.program)),
                Err(source) => {
                    return Err(Error::Io {
                        path: self.program.clone(),
                        source,
                    });
                }
            }
        };
        // The stderr thread finishes right after the process exits.
        tokio::time::sleep(Duration::from_millis(50)).await;
        Ok(Ended {
            at: self.ended.expect("set above"),
            status,
            stderr: self.stderr(),
        })
    }

    /// Kills the process (what dropping the session does) and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `kubectl port-forward POD :PORT` running, with the local port it chose.
pub struct PortForward {
    /// The kubectl process; killing it stops the forwarding.
    pub session: Session,
    /// The local port that reaches the pod's port.
    pub local_port: u16,
}

impl PortForward {
    /// Starts `command` (a `kubectl port-forward ... :PORT`) and waits up to `timeout` for it
    /// to print `Forwarding from 127.0.0.1:LOCAL -> PORT`.
    pub async fn start(command: std::process::Command, timeout: Duration) -> Result<PortForward> {
        let mut session = Session::spawn(command)?;
        let line = session
            .wait_for_line("Forwarding from 127.0.0.1:", timeout)
            .await?;
        let local_port = line
            .split("127.0.0.1:")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|port| port.parse().ok())
            .ok_or_else(|| Error::Timeout(format!("no local port in {line:?}")))?;
        Ok(PortForward {
            session,
            local_port,
        })
    }

    /// Connects to the local port, sends `line`, and returns the lines the pod's end sent
    /// back until the echo of `line` arrived (the control plane's pods answer a port-forward
    /// with a greeting line, then echo what they receive). Gives up after `timeout`.
    pub async fn exchange(&self, line: &str, timeout: Duration) -> Result<Vec<String>> {
        let address = format!("127.0.0.1:{}", self.local_port);
        let (to, text) = (address.clone(), line.to_string());
        // Blocking sockets on a thread of their own, with the timeout as their deadline.
        let talk = tokio::task::spawn_blocking(move || {
            let mut stream = std::net::TcpStream::connect(&to)?;
            stream.set_read_timeout(Some(timeout))?;
            stream.write_all(format!("{text}\n").as_bytes())?;
            let mut received = Vec::new();
            for got in BufReader::new(stream).lines() {
                let got = got?;
                let done = got == text;
                received.push(got);
                if done {
                    return Ok(received);
                }
            }
            Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("the connection closed after {received:?}"),
            ))
        });
        match talk.await.expect("the port-forward thread does not panic") {
            Ok(received) => Ok(received),
            Err(source) => Err(Error::Io {
                path: address.into(),
                source,
            }),
        }
    }
}

/// The command line, for messages: the program's file name and its arguments.
fn program_of(command: &std::process::Command) -> PathBuf {
    let program = std::path::Path::new(command.get_program());
    let mut line = program
        .file_name()
        .unwrap_or(program.as_os_str())
        .to_os_string();
    for arg in command.get_args() {
        line.push(" ");
        line.push(arg);
    }
    PathBuf::from(line)
}
