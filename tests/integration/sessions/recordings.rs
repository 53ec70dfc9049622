//! Session recordings in real stores: a directory, and a real S3 server (gofakes3 on
//! 127.0.0.1, see `oz_testenv::s3`). What a session wrote reads back byte for byte; a
//! recording whose writer died mid-session is readable up to its last flush; the recordings
//! route answers as the aggregated API must. No control plane is needed: the apiserver's part
//! (proxying `ozctl replay`) is tested end to end with the broker.

use std::{
    io::{BufRead, BufReader},
    process::{Command, Stdio},
    time::Duration,
};

use axum::{body::Body, http::Request};
use chrono::Utc;
use oz_api::{AccessKind, SessionEndReason, SessionStream};
use oz_sessions::{
    GrantRef, SessionInfo, new_session_id,
    recording::{self, FLUSH_EVERY, Recordings},
};
use oz_testenv::s3::S3Server;
use serde_json::Value;
use tower::ServiceExt;

/// Generous: two busy cores are shared by every test.
const WAIT: Duration = Duration::from_secs(60);

fn info(namespace: &str) -> SessionInfo {
    let now = Utc::now();
    SessionInfo {
        id: new_session_id(now),
        namespace: namespace.into(),
        grant: GrantRef {
            kind: AccessKind::Exec,
            name: "alice-x7k2p".into(),
            uid: "6d1f7a2e-0000-4000-8000-000000000001".into(),
            template: "web".into(),
        },
        user: "alice".into(),
        groups: vec!["devs".into(), "system:authenticated".into()],
        stream: SessionStream::Exec,
        pod: "web-0".into(),
        container: Some("app".into()),
        command: vec!["sh".into()],
        tty: true,
        started_at: now,
        replica: "oz-test".into(),
    }
}

/// The header and the events of an asciicast file.
fn parse(file: &[u8]) -> (Value, Vec<(f64, String, String)>) {
    let text = std::str::from_utf8(file).expect("a recording is UTF-8");
    let mut lines = text.lines();
    let header: Value = serde_json::from_str(lines.next().expect("a header")).expect("JSON");
    let events = lines
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line:?}: {e}")))
        .collect();
    (header, events)
}

fn joined(events: &[(f64, String, String)], code: &str) -> String {
    events
        .iter()
        .filter(|(_, c, _)| c == code)
        .map(|(_, _, data)| data.as_str())
        .collect()
}

/// Waits until `id`'s recording has at least `min` bytes (flushed parts, or the whole file).
async fn read_when(recordings: &Recordings, namespace: &str, id: &str, min: usize) -> Vec<u8> {
    tokio::time::timeout(WAIT, async {
        loop {
            if let Some(file) = recordings
                .read(namespace, id)
                .await
                .expect("the store answers")
                && file.len() >= min
            {
                return file;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{namespace}/{id} was not flushed within {WAIT:?}"))
}

/// Frames as a pod's stream cuts them: a 3-byte character split over three frames, a 4-byte
/// one over two, escapes and control bytes, a long burst.
fn output_frames() -> Vec<Vec<u8>> {
    let snowman = "☃".as_bytes();
    let crab = "🦀".as_bytes();
    vec![
        b"$ ls\r\n".to_vec(),
        [b"caf\xc3".as_slice()].concat(),
        [b"\xa9 ".as_slice(), &snowman[..1]].concat(),
        snowman[1..2].to_vec(),
        [
            &snowman[2..],
            b" \x1b[1;32mok\x1b[0m\t\"q\"\\ ".as_slice(),
            &crab[..2],
        ]
        .concat(),
        [&crab[2..], b"\r\n".as_slice()].concat(),
        "x".repeat(100_000).into_bytes(),
        b"\r\n$ exit\r\n".to_vec(),
    ]
}

async fn a_session_reads_back_exactly(recordings: &Recordings, record_input: bool) {
    let info = info("team-a");
    let mut recording = recordings.start(&info, record_input, Some((132, 43)));
    let frames = output_frames();
    recording.input(b"ls\r").await;
    for frame in &frames {
        recording.output(frame);
    }
    recording.resize(100, 30).await;
    recording.input("exit\r".as_bytes()).await;
    let key = recording.key().to_owned();
    recording.finish(Utc::now(), SessionEndReason::Exited).await;
    assert_eq!(key, format!("team-a/{}.cast", info.id));

    let file = recordings
        .read("team-a", &info.id)
        .await
        .unwrap()
        .expect("the finished recording");
    let (header, events) = parse(&file);
    let written: Vec<u8> = frames.concat();
    let output = joined(&events, "o");
    let differ = output
        .bytes()
        .zip(&written)
        .position(|(a, b)| a != *b)
        .unwrap_or(output.len().min(written.len()));
    assert!(
        output.as_bytes() == &written[..],
        "the output events are not the bytes the session wrote: they differ from byte {differ} \
         ({} bytes read, {} written): read {:?}, written {:?}",
        output.len(),
        written.len(),
        String::from_utf8_lossy(&output.as_bytes()[differ..(differ + 16).min(output.len())]),
        String::from_utf8_lossy(&written[differ..(differ + 16).min(written.len())]),
    );
    assert_eq!(
        joined(&events, "i"),
        if record_input { "ls\rexit\r" } else { "" },
        "recordInput: {record_input}"
    );
    assert_eq!(joined(&events, "r"), "100x30");
    assert_eq!(
        events.last().map(|(_, c, d)| (c.as_str(), d.as_str())),
        Some(("m", "end: exited"))
    );
    assert!(
        events.windows(2).all(|w| w[0].0 <= w[1].0),
        "event times go backwards"
    );
    assert_eq!(header["version"], 2);
    assert_eq!(
        (header["width"].as_u64(), header["height"].as_u64()),
        (Some(132), Some(43))
    );
    assert_eq!(header["title"], "team-a/web-0 sh");
    assert_eq!(header["oz"]["session"], info.id.as_str());
    assert_eq!(header["oz"]["user"], "alice");
    assert_eq!(header["oz"]["grant"]["name"], "alice-x7k2p");
    assert_eq!(header["oz"]["recordInput"], record_input);
    assert_eq!(header["oz"]["endReason"], "exited");
    assert_eq!(recordings.errors(), 0, "storage errors");
}

#[tokio::test]
async fn recordings_read_back_exactly_what_the_session_wrote_in_a_directory() {
    let dir = std::env::temp_dir().join(format!("oz-recordings-{}", new_session_id(Utc::now())));
    let recordings = Recordings::open(&format!("file://{}", dir.display())).unwrap();
    a_session_reads_back_exactly(&recordings, true).await;
    a_session_reads_back_exactly(&recordings, false).await;
    // Only the finished files are left, no parts.
    let left: Vec<_> = std::fs::read_dir(dir.join("team-a"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(left.iter().all(|name| name.ends_with(".cast")), "{left:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn recordings_read_back_exactly_what_the_session_wrote_in_s3() {
    let s3 = S3Server::start("oz-recordings").unwrap();
    let recordings = Recordings::open(&s3.url("cluster-1/recordings")).unwrap();
    assert_eq!(
        recordings.location(),
        "s3://oz-recordings/cluster-1/recordings"
    );
    a_session_reads_back_exactly(&recordings, true).await;
    a_session_reads_back_exactly(&recordings, false).await;
}

#[tokio::test]
async fn a_recording_dropped_without_finish_is_readable_up_to_its_last_flush() {
    let s3 = S3Server::start("oz-recordings").unwrap();
    let recordings = Recordings::open(&s3.url("crash")).unwrap();
    let info = info("team-b");
    let mut recording = recordings.start(&info, true, None);
    recording.output(b"before the crash\r\n");
    // Dropped as a panicking broker task would drop it: what was queued is still written.
    drop(recording);
    let file = read_when(&recordings, "team-b", &info.id, 1).await;
    let (header, events) = parse(&file);
    assert_eq!(header["oz"]["session"], info.id.as_str());
    assert!(header["oz"].get("endReason").is_none(), "{header}");
    assert_eq!(joined(&events, "o"), "before the crash\r\n");
    assert!(
        events.iter().all(|(_, c, _)| c != "m"),
        "no end marker: {events:?}"
    );
}

/// Run by the test below as a child process, which it kills: writes a recording, waits until
/// it is flushed, says so on stdout, then keeps writing until killed.
#[tokio::test]
#[ignore = "a child process of a_recording_whose_process_is_killed_is_readable_up_to_its_last_flush"]
async fn recording_child_killed_mid_session() {
    let (Ok(url), Ok(id)) = (
        std::env::var("OZ_RECORDING_CHILD_URL"),
        std::env::var("OZ_RECORDING_CHILD_ID"),
    ) else {
        return;
    };
    let recordings = Recordings::open(&url).unwrap();
    let mut info = info("team-c");
    info.id = id;
    let mut recording = recordings.start(&info, false, None);
    recording.output(b"flushed before the kill\r\n");
    read_when(&recordings, "team-c", &info.id, 1).await;
    // Wait for the part holding the output, not just the header.
    tokio::time::timeout(WAIT, async {
        loop {
            let file = recordings.read("team-c", &info.id).await.unwrap().unwrap();
            if String::from_utf8_lossy(&file).contains("flushed before the kill") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("flushed");
    // libtest has printed "test NAME ... " on this line.
    println!("FLUSHED");
    loop {
        // Less than a flush's worth after the last one is lost with the process.
        recording.output(b"unflushed\r\n");
        tokio::time::sleep(FLUSH_EVERY * 10).await;
    }
}

#[tokio::test]
async fn a_recording_whose_process_is_killed_is_readable_up_to_its_last_flush() {
    let s3 = S3Server::start("oz-recordings").unwrap();
    let url = s3.url("killed");
    let id = new_session_id(Utc::now());
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "sessions::recordings::recording_child_killed_mid_session",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("OZ_RECORDING_CHILD_URL", &url)
        .env("OZ_RECORDING_CHILD_ID", &id)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let flushed = tokio::task::spawn_blocking(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .any(|line| line.ends_with("FLUSHED"))
    });
    let flushed = tokio::time::timeout(WAIT, flushed).await;
    // SIGKILL: nothing in the child gets to flush or finish.
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        matches!(flushed, Ok(Ok(true))),
        "the child never said its recording was flushed"
    );

    let recordings = Recordings::open(&url).unwrap();
    let file = recordings
        .read("team-c", &id)
        .await
        .unwrap()
        .expect("the killed session's parts");
    let (header, events) = parse(&file);
    assert_eq!(header["oz"]["session"], id.as_str());
    assert!(
        joined(&events, "o").starts_with("flushed before the kill\r\n"),
        "{events:?}"
    );
    assert!(
        events.iter().all(|(_, c, _)| c != "m"),
        "no end marker: {events:?}"
    );
}

async fn get(router: &axum::Router, path: &str) -> (u16, Option<String>, Vec<u8>) {
    let response = router
        .clone()
        .oneshot(Request::get(path).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned());
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap()
        .to_vec();
    (status, content_type, body)
}

#[tokio::test]
async fn the_recordings_route_serves_a_recording_and_refuses_bad_or_unknown_ids() {
    let s3 = S3Server::start("oz-recordings").unwrap();
    let recordings = Recordings::open(&s3.url("route")).unwrap();
    let router = recording::router(recordings.clone());

    let finished = info("team-d");
    let mut recording = recordings.start(&finished, true, None);
    recording.output(b"hello\r\n");
    recording
        .finish(Utc::now(), SessionEndReason::Revoked)
        .await;
    let (status, content_type, body) = get(
        &router,
        &format!("/namespaces/team-d/recordings/{}", finished.id),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(content_type.as_deref(), Some("application/x-asciicast"));
    assert_eq!(
        Some(body),
        recordings.read("team-d", &finished.id).await.unwrap()
    );

    // A session still running (or whose replica died) is served from its parts.
    let mut running_info = info("team-d");
    running_info.id = new_session_id(Utc::now());
    let mut running = recordings.start(&running_info, true, None);
    running.output(b"still running\r\n");
    let parts = read_when(&recordings, "team-d", &running_info.id, 1).await;
    let (status, _, body) = get(
        &router,
        &format!("/namespaces/team-d/recordings/{}", running_info.id),
    )
    .await;
    assert_eq!(status, 200);
    assert!(body.starts_with(&parts[..parts.iter().position(|b| *b == b'\n').unwrap()]));
    drop(running);

    for bad in [
        "not-an-id",
        "20261123-081500-ABCDEFGH",
        "20261123-081500-abcdefgh.cast",
    ] {
        let (status, _, body) = get(&router, &format!("/namespaces/team-d/recordings/{bad}")).await;
        assert_eq!(status, 400, "{bad}");
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            (body["kind"].as_str(), body["reason"].as_str()),
            (Some("Status"), Some("BadRequest"))
        );
    }
    let (status, _, _) = get(
        &router,
        &format!("/namespaces/..%2F..%2Fx/recordings/{}", finished.id),
    )
    .await;
    assert_eq!(status, 400, "a namespace that is not a name");

    // Unknown: in another namespace, and an id never recorded.
    for path in [
        format!("/namespaces/team-e/recordings/{}", finished.id),
        "/namespaces/team-d/recordings/20200101-000000-00000000".to_owned(),
    ] {
        let (status, content_type, body) = get(&router, &path).await;
        assert_eq!(status, 404, "{path}");
        assert_eq!(content_type.as_deref(), Some("application/json"));
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["kind"], "Status");
        assert_eq!(body["reason"], "NotFound");
        assert_eq!(body["code"], 404);
        assert!(
            body["message"].as_str().unwrap().contains("not found"),
            "{body}"
        );
    }
}
