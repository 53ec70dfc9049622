//! The recorder against a real directory, its clock driven by hand.

use super::*;
use crate::GrantRef;
use oz_api::{AccessKind, SessionStream};
use tokio::time::advance;

use super::unrecorded::hex;

/// A store in a new temporary directory, which lives as long as the returned guard.
fn in_a_directory() -> (tempfile::TempDir, Recordings) {
    let dir = tempfile::tempdir().unwrap();
    let recordings = Recordings::open(dir.path().to_str().unwrap()).unwrap();
    (dir, recordings)
}

fn info(id: &str) -> SessionInfo {
    SessionInfo {
        id: id.into(),
        namespace: "team".into(),
        grant: GrantRef {
            kind: AccessKind::Pod,
            name: "bob-1".into(),
            uid: "u-2".into(),
            template: "debug".into(),
        },
        user: "bob".into(),
        groups: vec!["qa".into()],
        stream: SessionStream::Attach,
        pod: "debug-bob".into(),
        container: None,
        command: vec![],
        tty: true,
        started_at: DateTime::parse_from_rfc3339("2026-11-23T08:15:00Z")
            .unwrap()
            .with_timezone(&Utc),
        replica: "oz-1".into(),
    }
}

/// A small session, its clock driven by hand: returns the finished file's events.
async fn session(record_input: bool) -> (String, String) {
    let (dir, recordings) = in_a_directory();
    let id = "20261123-081500-abcd1234";
    let mut recording = recordings.start(&info(id), record_input, Some((100, 30)));
    assert_eq!(recording.key(), format!("team/{id}.cast"));
    advance(Duration::from_millis(250)).await;
    recording.input(b"ls\r").await;
    recording.output("ls\r\nhé".as_bytes().split_last().unwrap().1);
    advance(Duration::from_millis(250)).await;
    recording.output(&"é".as_bytes()[1..]);
    recording.output(b"\r\n$ ");
    recording.resize(120, 40).await;
    advance(Duration::from_secs(2)).await;
    recording
        .finish(
            info(id).started_at + chrono::Duration::seconds(3),
            SessionEndReason::Expired,
        )
        .await;
    let file = String::from_utf8(recordings.read("team", id).await.unwrap().unwrap()).unwrap();
    let (header, events) = file.split_once('\n').unwrap();
    // The parts are gone once the whole file is written.
    assert!(
        std::fs::read_dir(dir.path().join("team"))
            .unwrap()
            .all(|e| e.unwrap().path().is_file())
    );
    (header.to_owned(), events.to_owned())
}

#[tokio::test(start_paused = true)]
async fn a_finished_session_is_exactly_its_events_with_the_end_marker() {
    let (header, events) = session(false).await;
    assert_eq!(
        events,
        concat!(
            "[0.250000, \"o\", \"ls\\r\\nh\"]\n",
            "[0.500000, \"o\", \"é\"]\n",
            "[0.500000, \"o\", \"\\r\\n$ \"]\n",
            "[0.500000, \"r\", \"120x40\"]\n",
            "[2.500000, \"m\", \"end: expired\"]\n",
        )
    );
    let header: serde_json::Value = serde_json::from_str(&header).unwrap();
    assert_eq!(
        (header["width"].as_u64(), header["height"].as_u64()),
        (Some(100), Some(30))
    );
    assert_eq!(header["oz"]["endReason"], "expired");
    assert_eq!(header["oz"]["endedAt"], "2026-11-23T08:15:03.000000Z");
    assert_eq!(header["oz"]["recordInput"], false);
    assert_eq!(header["title"], "team/debug-bob");
}

#[tokio::test(start_paused = true)]
async fn input_is_recorded_only_when_asked() {
    let (_, events) = session(true).await;
    assert!(
        events.starts_with("[0.250000, \"i\", \"ls\\r\"]\n[0.250000, \"o\""),
        "{events}"
    );
}

/// The events of a cast file: (code, data).
fn events(file: &[u8]) -> Vec<(String, String)> {
    let text = std::str::from_utf8(file).unwrap();
    text.lines()
        .skip(1)
        .map(|line| {
            let (_, code, data): (f64, String, String) = serde_json::from_str(line).unwrap();
            (code, data)
        })
        .collect()
}

fn joined(events: &[(String, String)], code: &str) -> String {
    events
        .iter()
        .filter(|(c, _)| c == code)
        .map(|(_, d)| d.as_str())
        .collect()
}

/// The (bytes, sha256, cause) of each marker about `stream` not recorded.
fn unrecorded(events: &[(String, String)], stream: &str) -> Vec<(u64, String, String)> {
    let prefix = format!(" bytes of {stream} not recorded (sha256 ");
    events
        .iter()
        .filter(|(c, _)| c == "m")
        .filter_map(|(_, data)| {
            let rest = data.strip_prefix("oz: ")?;
            let (bytes, rest) = rest.split_once(&prefix)?;
            let (sha, cause) = rest.split_once("): ")?;
            Some((bytes.parse().ok()?, sha.to_owned(), cause.to_owned()))
        })
        .collect()
}

fn sha256(bytes: &[u8]) -> String {
    hex(ring::digest::digest(&ring::digest::SHA256, bytes).as_ref())
}

#[tokio::test(start_paused = true)]
async fn input_larger_than_the_queue_is_held_and_recorded_whole_in_pieces() {
    let (_dir, recordings) = in_a_directory();
    let id = "20261123-081500-in000000";
    let mut recording = recordings.start(&info(id), true, None);
    // Escaped six times over, 3 MiB of control bytes is ~18 MiB of lines: far more than
    // the queue holds, so recording it must wait for the writer, piece by piece.
    let sent = format!("{}\necho hidden\n", "\u{1}".repeat(3 << 20));
    recording.input(sent.as_bytes()).await;
    let digest = recording
        .finish(info(id).started_at, SessionEndReason::Exited)
        .await
        .expect("finished in time");
    let file = recordings.read("team", id).await.unwrap().unwrap();
    assert_eq!(digest.sha256, sha256(&file));
    assert_eq!(digest.bytes, file.len() as u64);
    let events = events(&file);
    assert_eq!(joined(&events, "i"), sent, "every byte typed is recorded");
    assert!(events.iter().filter(|(c, _)| c == "i").count() > 1);
    let longest = std::str::from_utf8(&file)
        .unwrap()
        .lines()
        .map(str::len)
        .max();
    assert!(
        longest.unwrap() < 7 * cast::MAX_EVENT_TEXT_BYTES,
        "{longest:?}"
    );
    assert_eq!(recordings.errors(), 0);
}

#[tokio::test(start_paused = true)]
async fn output_that_finds_the_queue_full_is_counted_and_digested_with_its_cause() {
    let (_dir, recordings) = in_a_directory();
    let id = "20261123-081500-zzzz0000";
    let mut recording = recordings.start(&info(id), false, None);
    recording.output(b"before");
    // Nothing drains the queue while this task does not yield: past the bound, output is
    // counted instead of queued.
    let mut sent = String::from("before");
    for n in 0..40u8 {
        let chunk = String::from(char::from(b'a' + n % 26)).repeat(64 * 1024);
        recording.output(chunk.as_bytes());
        sent.push_str(&chunk);
    }
    assert!(recordings.errors() > 0, "nothing was dropped");
    advance(Duration::from_secs(2)).await;
    recording.output(b"after");
    sent.push_str("after");
    recording
        .finish(info(id).started_at, SessionEndReason::Exited)
        .await
        .unwrap();
    let file = recordings.read("team", id).await.unwrap().unwrap();
    let events = events(&file);
    let recorded = joined(&events, "o");
    let lost = unrecorded(&events, "output");
    assert_eq!(lost.len(), 1, "{lost:?}");
    let (bytes, sha, cause) = &lost[0];
    assert_eq!(cause, "the recordings store was too slow");
    // What is recorded and what is digested add up to what was sent, in order: the
    // recorded text is a prefix and a suffix of it, the lost text what lies between.
    assert_eq!(recorded.len() as u64 + bytes, sent.len() as u64);
    let kept_before = sent
        .char_indices()
        .zip(recorded.chars())
        .take_while(|((_, a), b)| a == b)
        .count();
    let missing = &sent[kept_before..kept_before + *bytes as usize];
    assert_eq!(sha, &sha256(missing.as_bytes()));
    assert!(recorded.ends_with("after"));
}

#[tokio::test(start_paused = true)]
async fn a_capped_recording_stays_under_its_cap_and_accounts_for_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let cap = 256 * 1024;
    let recordings = Recordings::open(dir.path().to_str().unwrap())
        .unwrap()
        .with_limits(RecordingLimits {
            max_session_bytes: cap,
            max_total_bytes: None,
        });
    let id = "20261123-081500-cap00000";
    let mut recording = recordings.start(&info(id), true, None);
    let (mut typed, mut printed) = (String::new(), String::new());
    for n in 0..64 {
        let line = format!("{n:04} {}\n", "z".repeat(16 * 1024));
        recording.input(line.as_bytes()).await;
        recording.output(line.as_bytes());
        typed.push_str(&line);
        printed.push_str(&line);
        // Let the writer keep up, so that no output is dropped for a slow store.
        advance(Duration::from_millis(1100)).await;
    }
    let digest = recording
        .finish(info(id).started_at, SessionEndReason::Exited)
        .await
        .unwrap();
    let file = recordings.read("team", id).await.unwrap().unwrap();
    assert!(file.len() as u64 <= cap, "{} > {cap}", file.len());
    assert_eq!(digest.bytes, file.len() as u64);
    let events = events(&file);
    let markers = joined(&events, "m");
    assert!(
        markers.contains("oz: capped: the recording reached its size limit"),
        "{markers}"
    );
    for (stream, code, sent) in [("input", "i", &typed), ("output", "o", &printed)] {
        let recorded = joined(&events, code);
        let lost = unrecorded(&events, stream);
        assert_eq!(lost.len(), 1, "{stream}: {lost:?}");
        let (bytes, sha, cause) = &lost[0];
        assert_eq!(cause, "the recording reached its size limit");
        assert!(sent.starts_with(&recorded), "{stream}");
        assert_eq!(*bytes, (sent.len() - recorded.len()) as u64, "{stream}");
        assert_eq!(sha, &sha256(&sent.as_bytes()[recorded.len()..]), "{stream}");
    }
    assert!(events.last().unwrap().1.starts_with("end: "));
}

#[tokio::test(start_paused = true)]
async fn the_total_cap_caps_new_recordings_once_the_store_is_full() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("earlier.cast"), vec![b'x'; 100_000]).unwrap();
    let recordings = Recordings::open(dir.path().to_str().unwrap())
        .unwrap()
        .with_limits(RecordingLimits {
            max_session_bytes: 1 << 20,
            max_total_bytes: Some(110_000),
        });
    assert_eq!(recordings.used_bytes(), 100_000);
    let id = "20261123-081500-total000";
    let mut recording = recordings.start(&info(id), false, None);
    recording.output("y".repeat(20_000).as_bytes());
    recording
        .finish(info(id).started_at, SessionEndReason::Exited)
        .await
        .unwrap();
    let file = recordings.read("team", id).await.unwrap().unwrap();
    let events = events(&file);
    assert!(
        joined(&events, "m").contains("oz: capped: the recordings store reached its size limit"),
        "{events:?}"
    );
    // Recorded until the store was full, then counted: together, all of it.
    let lost = unrecorded(&events, "output");
    assert_eq!(lost.len(), 1, "{lost:?}");
    assert_eq!(lost[0].2, "the recordings store reached its size limit");
    assert_eq!(joined(&events, "o").len() as u64 + lost[0].0, 20_000);
    assert!(recordings.used_bytes() <= 110_000 + limits::RESERVED_BYTES);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_recording_keeps_what_was_flushed() {
    let (_dir, recordings) = in_a_directory();
    let id = "20261123-081500-drop0000";
    let mut recording = recordings.start(&info(id), false, None);
    recording.output(b"before");
    // Less than the queue holds, so that none of it is dropped for a slow store.
    recording.output(&vec![b'x'; MAX_BUFFERED_BYTES / 2]);
    drop(recording);
    let mut file = None;
    // Ten flushes' worth of the paused clock, then fail rather than wait forever.
    for _ in 0..100 {
        if let Some(read) = recordings.read("team", id).await.unwrap()
            && read.len() > MAX_BUFFERED_BYTES / 2
        {
            file = Some(String::from_utf8(read).unwrap());
            break;
        }
        advance(Duration::from_millis(100)).await;
    }
    let file = file.expect("what was flushed is readable");
    assert!(file.contains("\"before\""));
    assert!(
        !file.contains("end:"),
        "a crashed recording has no end marker"
    );
}
