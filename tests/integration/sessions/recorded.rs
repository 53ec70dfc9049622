//! What a brokered session's recording keeps, with real websocket frames through oz's broker
//! (run in the test process, as in `broker.rs`) into a pod that kwok runs: a command
//! typed after a long line of control bytes is in the recorded input; recorded input and the
//! markers of what was not kept account for every byte sent, in order, with the SHA-256 of the
//! rest; and the session-end audit record carries the recording file's digest.

use futures::{SinkExt, StreamExt};
use oz_api::ExecAccessRequest;
use oz_sessions::recording::limits::RecordingLimits;
use serde_json::Value;
use tokio_tungstenite::tungstenite::Message;

use crate::{
    access::streams::{StreamsFixture, WAIT},
    sessions::broker::{Brokered, pod_of},
    support::polling::eventually,
};

/// A recording's events, (code, data).
fn events(file: &[u8]) -> Vec<(String, String)> {
    let text = std::str::from_utf8(file).expect("a recording is UTF-8");
    text.lines()
        .skip(1)
        .map(|line| {
            let event: Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
            (
                event[1].as_str().unwrap().to_owned(),
                event[2].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Every event of `code` joined.
fn joined(events: &[(String, String)], code: &str) -> String {
    events
        .iter()
        .filter(|(c, _)| c == code)
        .map(|(_, data)| data.as_str())
        .collect()
}

/// The markers saying what of `stream` was not recorded: (bytes, sha256, cause).
fn not_recorded(events: &[(String, String)], stream: &str) -> Vec<(u64, String, String)> {
    let middle = format!(" bytes of {stream} not recorded (sha256 ");
    events
        .iter()
        .filter(|(code, _)| code == "m")
        .filter_map(|(_, data)| {
            let (bytes, rest) = data.strip_prefix("oz: ")?.split_once(&middle)?;
            let (sha256, cause) = rest.split_once("): ")?;
            Some((bytes.parse().ok()?, sha256.to_owned(), cause.to_owned()))
        })
        .collect()
}

fn sha256(bytes: &[u8]) -> String {
    oz_audit::Hash::of(bytes).to_string()
}

impl Brokered {
    /// The finished recording of request `name`'s last session, once the session-end audit
    /// record (written after the file) names it; and that record.
    async fn finished_recording(&self, name: &str) -> (Vec<u8>, Value) {
        let (session, _) = self.ended_record(name).await;
        let id = session["id"].as_str().unwrap().to_owned();
        let record = eventually(WAIT, "the session-end audit record", || {
            let found = self
                .audit_records(oz_sessions::audit::SESSION_END)
                .into_iter()
                .find(|r| r["session"]["id"] == id.as_str());
            async move { found }
        })
        .await;
        let path = self.recordings.join(&self.f.ns).join(format!("{id}.cast"));
        (std::fs::read(&path).unwrap(), record)
    }
}

/// One stdin frame of 300 KB: a shell comment of 0x01 bytes (each escaped to six characters in
/// the recording), then the command. The shell runs it; the recording shows it was typed.
#[tokio::test]
async fn a_command_after_a_long_line_of_control_bytes_is_in_the_recorded_input() {
    let b = Brokered::new("rec-hidden").await;
    b.template("web-recorded", ", recordInput: true").await;
    let granted =
        b.f.granted::<ExecAccessRequest>("alice-web", "web-recorded", "alice", "30m")
            .await;
    let mut alice = b
        .exec("alice", &pod_of(&granted), &["sh"])
        .await
        .expect("alice's grant lets her in");
    let typed = format!("# {}\necho hidden\n", "\u{1}".repeat(300_000));
    alice.send(&typed).await;
    alice.until_stdout("hidden\n").await;
    alice.send("exit\n").await;
    alice.until_closed(WAIT).await;

    let (file, record) = b.finished_recording("alice-web").await;
    let events = events(&file);
    let input = joined(&events, "i");
    assert!(input.contains("\necho hidden\n"), "the command is recorded");
    assert_eq!(
        input,
        format!("{typed}exit\n"),
        "every byte typed, in order"
    );
    assert!(
        events.iter().filter(|(code, _)| code == "i").count() > 1,
        "in several events"
    );
    assert_eq!(not_recorded(&events, "input"), vec![]);
    // The session-end record vouches for the file as written.
    assert_eq!(record["session"]["recordingSha256"], sha256(&file));
    assert_eq!(record["session"]["recordingBytes"], file.len());
}

/// Frames of every kind and size the broker takes (the largest message, control bytes,
/// multibyte text), each of the largest six times its size once escaped, far more than the
/// recording's queue holds, and in all more than the session's cap: what is recorded and what
/// the markers count and digest add up to every byte sent, in order; the file stays under the
/// cap.
#[tokio::test]
async fn recorded_input_and_the_markers_account_for_every_byte_sent() {
    let cap = 16 << 20;
    let b = Brokered::with_limits(
        "rec-account",
        RecordingLimits {
            max_session_bytes: cap,
            max_total_bytes: None,
        },
    )
    .await;
    b.template("web-recorded", ", recordInput: true").await;
    let granted =
        b.f.granted::<ExecAccessRequest>("alice-web", "web-recorded", "alice", "30m")
            .await;
    let alice = b
        .exec("alice", &pod_of(&granted), &["cat"])
        .await
        .expect("alice's grant lets her in");
    let largest = oz_sessions::broker::MAX_CLIENT_MESSAGE_BYTES - 1;
    let frames: Vec<String> = (0..12)
        .map(|n| match n % 4 {
            0 => "\u{2}".repeat(largest),
            1 => "\u{1}".repeat(64 << 10),
            2 => "héllo ☃ wörld\n".repeat(5000),
            _ => format!("echo {n}\n"),
        })
        .collect();
    let sent: String = frames.concat();

    // Send and read the echo at once, so neither side waits on the other.
    let (mut tx, mut rx) = alice.socket.split();
    let sender = tokio::spawn(async move {
        for text in frames {
            let mut frame = vec![0u8];
            frame.extend_from_slice(text.as_bytes());
            tx.send(Message::Binary(frame.into())).await.unwrap();
        }
        tx
    });
    let mut echoed = 0;
    tokio::time::timeout(WAIT, async {
        while echoed < sent.len() {
            match rx.next().await {
                Some(Ok(Message::Binary(frame))) if frame.first() == Some(&1) => {
                    echoed += frame.len() - 1
                }
                Some(Ok(_)) => {}
                other => panic!("the stream ended after {echoed} bytes: {other:?}"),
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{echoed} of {} bytes echoed in {WAIT:?}", sent.len()));
    let mut tx = sender.await.unwrap();
    tx.send(Message::Close(None)).await.unwrap();

    let (file, record) = b.finished_recording("alice-web").await;
    assert!(
        file.len() as u64 <= cap,
        "{} bytes > the cap {cap}",
        file.len()
    );
    let events = events(&file);
    assert!(
        joined(&events, "m").contains("oz: capped: the recording reached its size limit"),
        "{:?}",
        joined(&events, "m")
    );
    let recorded = joined(&events, "i");
    let lost = not_recorded(&events, "input");
    assert_eq!(lost.len(), 1, "{lost:?}");
    let (bytes, digest, cause) = &lost[0];
    assert_eq!(cause, "the recording reached its size limit");
    assert!(sent.starts_with(&recorded), "recorded in order");
    assert_eq!(recorded.len() as u64 + bytes, sent.len() as u64);
    assert_eq!(digest, &sha256(&sent.as_bytes()[recorded.len()..]));
    assert_eq!(record["session"]["recordingSha256"], sha256(&file));
}
