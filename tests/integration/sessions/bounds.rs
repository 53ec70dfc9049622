//! Brokered sessions within bounds, every part real (oz-manager as the install runs it, its
//! sessions API behind the apiserver's aggregation layer, kwok pods; see
//! `end_to_end.rs`): oz-manager's peak memory while clients send the largest
//! messages the broker takes, and a session that writes far more than its recording may
//! hold, whose recording stays under the cap and is vouched for by its audit record.

use futures::{SinkExt, StreamExt};
use oz_api::{AccessRequest, SessionEndReason};
use oz_sessions::broker::MAX_CLIENT_MESSAGE_BYTES;
use tokio_tungstenite::tungstenite::Message;

use crate::{
    sessions::end_to_end::{Installed, Shell, WAIT, audit_records},
    support::operator::free_port,
};

/// oz-manager's peak memory may grow this much over what it holds idle.
const PEAK_OVER_IDLE_KIB: u64 = 32 << 10;

/// A field of `/proc/<pid>/status`, in KiB (`VmHWM`: the peak resident set; `VmRSS`: now).
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|value| value.trim().strip_suffix(" kB")?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// Starts `pid`'s peak resident set over from what it holds now (Linux's `clear_refs` 5), so
/// that a peak from its start-up does not hide one from the load.
fn reset_peak(pid: u32) {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap();
}

/// Several clients at once, each sending the largest messages the broker takes (control bytes,
/// escaped six times over in the recording, which records input) to `cat` and reading the
/// echo: oz-manager's peak resident set stays within 32 MiB of what it held idle.
#[tokio::test]
async fn oz_managers_peak_memory_stays_bounded_while_clients_send_the_largest_messages() {
    const CLIENTS: usize = 4;
    const MESSAGES: usize = 4;
    let installed = Installed::start("sessions-rss").await;
    let port = free_port();
    let replica = installed.replica(port, port);
    installed.sessions.wait_available().await;
    let ready = installed
        .granted("alice-web", "web-exec", "30m", &replica)
        .await;
    let pod = ready.request_status().unwrap().pod_name.clone().unwrap();
    let alice = installed.sessions.plane.client_as("alice").await.unwrap();
    let path = format!(
        "/apis/{}/{}/namespaces/{}/pods/{pod}/exec?command=cat&stdin=true&stdout=true&stderr=true",
        oz_api::SESSIONS_GROUP,
        oz_api::SESSIONS_VERSION,
        installed.ns
    );
    let mut sockets = Vec::new();
    for _ in 0..CLIENTS {
        let request = http::Request::get(&path).body(Vec::new()).unwrap();
        let mut socket = alice
            .connect(request)
            .await
            .expect("alice's grant lets her in through the apiserver")
            .into_stream();
        // Each session works before the load starts.
        socket
            .send(Message::Binary(b"\x00ready\n".to_vec().into()))
            .await
            .unwrap();
        while !matches!(socket.next().await, Some(Ok(Message::Binary(f))) if f.starts_with(b"\x01ready"))
        {
        }
        sockets.push(socket);
    }

    let pid = replica.operator.pid();
    reset_peak(pid);
    let idle = status_kib(pid, "VmHWM");
    let mut message = vec![1u8; MAX_CLIENT_MESSAGE_BYTES];
    message[0] = 0; // stdin
    let sent = MESSAGES * (MAX_CLIENT_MESSAGE_BYTES - 1);
    let clients = sockets.into_iter().map(|socket| {
        let message = message.clone();
        tokio::spawn(async move {
            let (mut tx, mut rx) = socket.split();
            let sender = tokio::spawn(async move {
                for _ in 0..MESSAGES {
                    tx.send(Message::Binary(message.clone().into()))
                        .await
                        .unwrap();
                }
                tx
            });
            let mut echoed = 0;
            while echoed < sent {
                match rx.next().await {
                    Some(Ok(Message::Binary(frame))) if frame.first() == Some(&1) => {
                        echoed += frame.len() - 1
                    }
                    Some(Ok(_)) => {}
                    other => panic!("the session ended after {echoed} bytes: {other:?}"),
                }
            }
            let mut tx = sender.await.unwrap();
            let _ = tx.send(Message::Close(None)).await;
        })
    });
    tokio::time::timeout(WAIT, futures::future::try_join_all(clients))
        .await
        .unwrap_or_else(|_| panic!("the echoes did not all come back within {WAIT:?}"))
        .unwrap();
    let peak = status_kib(pid, "VmHWM");
    eprintln!(
        "oz-manager's resident set: idle {idle} KiB, peak {peak} KiB (+{} KiB) while {CLIENTS} \
         clients each sent {MESSAGES} messages of {MAX_CLIENT_MESSAGE_BYTES} bytes",
        peak.saturating_sub(idle)
    );
    assert!(
        peak < idle + PEAK_OVER_IDLE_KIB,
        "peak {peak} KiB is more than 32 MiB over idle {idle} KiB"
    );
}

/// A session writing 8 MB of output with oz-manager's --session-recording-max-size at 256Ki:
/// its recording stays under the cap, says it was capped, and counts and digests the rest;
/// its session-end audit record carries the file's SHA-256, which `ozctl audit verify
/// --recordings` checks, and a recording changed afterwards fails the check.
#[tokio::test]
async fn a_session_writing_past_its_cap_leaves_a_capped_recording_its_audit_record_vouches_for() {
    const CAP: u64 = 256 << 10;
    let installed = Installed::start("sessions-cap").await;
    let port = free_port();
    let replica = installed.replica_with(
        port,
        port,
        &[("--session-recording-max-size", Some("256Ki".into()))],
    );
    installed.sessions.wait_available().await;
    installed
        .granted("alice-web", "web-exec", "30m", &replica)
        .await;
    let mut shell = Shell::open(&installed, "alice-web");
    shell
        .type_line("head -c 8000000 /dev/zero | tr '\\0' x; echo; echo written-$((6*7))")
        .await;
    shell.wait_for("written-42\n").await;
    shell.type_line("exit").await;
    let ended = shell.ended(WAIT).await;
    assert_eq!(ended.code, Some(0), "{}", ended.stderr);

    let session = installed.ended_session("alice-web", &["sh"]).await;
    assert_eq!(session.end_reason, Some(SessionEndReason::Exited));
    let path = installed
        .recordings
        .join(&installed.ns)
        .join(format!("{}.cast", session.id));
    let file = std::fs::read(&path).unwrap();
    assert!(
        file.len() as u64 <= CAP,
        "{} bytes > the cap {CAP}",
        file.len()
    );
    let text = String::from_utf8(file.clone()).unwrap();
    let events: Vec<(String, String)> = text
        .lines()
        .skip(1)
        .map(|line| serde_json::from_str::<(f64, String, String)>(line).unwrap())
        .map(|(_, code, data)| (code, data))
        .collect();
    let markers: Vec<&str> = events
        .iter()
        .filter(|(code, _)| code == "m")
        .map(|(_, data)| data.as_str())
        .collect();
    assert!(
        markers.iter().any(|m| m.starts_with("oz: capped: ")),
        "{markers:?}"
    );
    // What she saw is what was recorded, then what the marker counts and digests.
    let recorded: String = events
        .iter()
        .filter(|(code, _)| code == "o")
        .map(|(_, data)| data.as_str())
        .collect();
    assert!(ended.stdout.starts_with(&recorded));
    let rest = &ended.stdout.as_bytes()[recorded.len()..];
    let expected = format!(
        "oz: {} bytes of output not recorded (sha256 {}): the recording reached its size limit",
        rest.len(),
        oz_audit::Hash::of(rest)
    );
    assert!(
        markers.contains(&expected.as_str()),
        "{expected} in {markers:?}"
    );

    // The session-end record vouches for the file.
    let end = audit_records(&replica.audit_log, oz_sessions::audit::SESSION_END)
        .into_iter()
        .find(|r| r["session"]["id"] == session.id.as_str())
        .expect("a session-end record");
    assert_eq!(
        end["session"]["recordingSha256"],
        oz_audit::Hash::of(&file).to_string()
    );
    assert_eq!(end["session"]["recordingBytes"], file.len());

    let audit = replica.audit_log.display().to_string();
    let verify = |recordings: String| {
        let args = [
            "audit",
            "verify",
            "--oz-namespace",
            &installed.operator_ns,
            "--allow-unsigned-tail",
            "--recordings",
            &recordings,
            &audit,
        ]
        .map(String::from);
        let installed = &installed;
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            installed.ozctl(None, &args).await
        }
    };
    let verified = verify(installed.recordings.display().to_string()).await;
    assert!(verified.success(), "{verified}");
    assert!(
        verified
            .stdout
            .contains("recordings:   1 named by session-end records: 1 match, 0 differ"),
        "{verified}"
    );

    // One character changed in a copy of the recording: the check fails and says where.
    let tampered = installed.dir.join("tampered");
    std::fs::create_dir_all(tampered.join(&installed.ns)).unwrap();
    let edited = text.replacen("written-42", "written-43", 1);
    let edited = if edited == text {
        text.replacen("xxxx", "xxxy", 1)
    } else {
        edited
    };
    assert_ne!(edited, text);
    std::fs::write(
        tampered
            .join(&installed.ns)
            .join(format!("{}.cast", session.id)),
        edited,
    )
    .unwrap();
    let refused = verify(tampered.display().to_string()).await;
    assert!(!refused.success(), "{refused}");
    assert!(
        refused.stdout.lines().any(|line| line.contains(&format!(
            "recording {}/{}.cast: DIFFERS: ",
            installed.ns, session.id
        ))),
        "{refused}"
    );
    assert!(refused.stdout.contains("NOT INTACT"), "{refused}");
}
