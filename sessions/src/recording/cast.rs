//! The asciicast v2 format, pure: the header line made from a [`SessionInfo`], and one line per
//! event. Terminal bytes become JSON strings, so a UTF-8 character split across two frames is
//! carried into the next event instead of being replaced.

use chrono::{DateTime, Utc};
use oz_api::SessionEndReason;
use serde::Serialize;
use serde_json::Value;

use crate::SessionInfo;

/// The terminal size a recording says when the client sent none.
pub const DEFAULT_SIZE: (u16, u16) = (80, 24);

/// The header line (with its newline): asciicast's keys, and oz's under `"oz"`. `end` adds
/// `endedAt` and `endReason` (the finished file's header).
pub fn header_line(
    info: &SessionInfo,
    record_input: bool,
    size: Option<(u16, u16)>,
    end: Option<(DateTime<Utc>, SessionEndReason)>,
) -> String {
    let (width, height) = size.unwrap_or(DEFAULT_SIZE);
    let mut title = format!("{}/{}", info.namespace, info.pod);
    if !info.command.is_empty() {
        title.push(' ');
        title.push_str(&info.command.join(" "));
    }
    let micros = |t: DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let header = Header {
        version: 2,
        width,
        height,
        timestamp: info.started_at.timestamp(),
        title,
        env: Env {
            term: if info.tty { "xterm-256color" } else { "dumb" },
        },
        oz: OzKeys {
            session: &info.id,
            user: &info.user,
            groups: &info.groups,
            namespace: &info.namespace,
            pod: &info.pod,
            container: info.container.as_deref(),
            command: &info.command,
            stream: info.stream.subresource(),
            grant: GrantKeys {
                kind: info.grant.kind.request_kind(),
                name: &info.grant.name,
                uid: &info.grant.uid,
            },
            template: &info.grant.template,
            tty: info.tty,
            replica: &info.replica,
            record_input,
            started_at: micros(info.started_at),
            ended_at: end.map(|(t, _)| micros(t)),
            end_reason: end.map(|(_, reason)| reason.label()),
        },
    };
    let mut line = serde_json::to_string(&header).expect("a header serializes");
    line.push('\n');
    line
}

/// asciicast v2's header, in its order, and oz's keys under `"oz"` (players ignore them).
#[derive(Serialize)]
struct Header<'a> {
    version: u8,
    width: u16,
    height: u16,
    timestamp: i64,
    title: String,
    env: Env,
    oz: OzKeys<'a>,
}

#[derive(Serialize)]
struct Env {
    #[serde(rename = "TERM")]
    term: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OzKeys<'a> {
    session: &'a str,
    user: &'a str,
    groups: &'a [String],
    namespace: &'a str,
    pod: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    container: Option<&'a str>,
    command: &'a [String],
    stream: &'static str,
    grant: GrantKeys<'a>,
    template: &'a str,
    tty: bool,
    replica: &'a str,
    record_input: bool,
    started_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    ended_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    end_reason: Option<&'static str>,
}

#[derive(Serialize)]
struct GrantKeys<'a> {
    kind: &'static str,
    name: &'a str,
    uid: &'a str,
}
/// One event line: `[t, "code", "data"]` and a newline, `t` in seconds with microseconds, as
/// asciinema writes it.
pub fn event_line(t: f64, code: &str, data: &str) -> String {
    format!("[{t:.6}, {}, {}]\n", Value::from(code), Value::from(data))
}

/// The most bytes of a frame one event carries. Control bytes escape to six characters
/// (`\u0001`) and invalid bytes become U+FFFD (three), so a line is at most about six times
/// this: input of any size becomes several events of bounded lines instead of one line too long
/// to queue.
pub const MAX_EVENT_TEXT_BYTES: usize = 4 * 1024;

/// The `"m"` marker saying what was not recorded: `oz: N bytes of <stream> not recorded
/// (sha256 <hex>): <cause>`. The digest lets a reader check the missing bytes against another
/// copy of them (a client's log, the pod's).
pub fn unrecorded_marker(t: f64, stream: &str, bytes: u64, sha256: &str, cause: &str) -> String {
    event_line(
        t,
        "m",
        &format!("oz: {bytes} bytes of {stream} not recorded (sha256 {sha256}): {cause}"),
    )
}

/// The `"m"` marker that ends a recording: `end: <reason label>`.
pub fn end_marker(t: f64, reason: SessionEndReason) -> String {
    event_line(t, "m", &format!("end: {}", reason.label()))
}

/// Turns a byte stream cut into frames into text, carrying an incomplete UTF-8 character at
/// the end of a frame into the next one. Invalid bytes become U+FFFD, as a terminal shows them.
#[derive(Debug, Default)]
pub struct Utf8Carry {
    tail: Vec<u8>,
}

impl Utf8Carry {
    /// The text of `frame` after what was carried; `None` when it is all carried (nothing to
    /// write yet).
    pub fn push(&mut self, frame: &[u8]) -> Option<String> {
        let carried = std::mem::take(&mut self.tail);
        let joined;
        let bytes = if carried.is_empty() {
            frame
        } else {
            joined = [&carried[..], frame].concat();
            &joined[..]
        };
        let mut text = String::with_capacity(bytes.len());
        let mut rest = bytes;
        loop {
            match std::str::from_utf8(rest) {
                Ok(valid) => {
                    text.push_str(valid);
                    break;
                }
                Err(error) => {
                    let (valid, after) = rest.split_at(error.valid_up_to());
                    text.push_str(std::str::from_utf8(valid).expect("checked valid"));
                    match error.error_len() {
                        Some(bad) => {
                            text.push(char::REPLACEMENT_CHARACTER);
                            rest = &after[bad..];
                        }
                        None => {
                            // An incomplete character at the end: wait for its other bytes.
                            self.tail = after.to_vec();
                            break;
                        }
                    }
                }
            }
        }
        (!text.is_empty()).then_some(text)
    }

    /// What is still carried, lossily (the stream ended inside a character).
    pub fn flush(&mut self) -> Option<String> {
        let tail = std::mem::take(&mut self.tail);
        (!tail.is_empty()).then(|| String::from_utf8_lossy(&tail).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GrantRef;
    use oz_api::AccessKind;

    fn info() -> SessionInfo {
        SessionInfo {
            id: "20261123-081500-k3x9qa7m".into(),
            namespace: "team".into(),
            grant: GrantRef {
                kind: AccessKind::Exec,
                name: "alice-x7k2p".into(),
                uid: "u-1".into(),
                template: "web".into(),
            },
            user: "alice".into(),
            groups: vec!["devs".into()],
            stream: oz_api::SessionStream::Exec,
            pod: "web-0".into(),
            container: Some("app".into()),
            command: vec!["sh".into(), "-c".into(), "ls".into()],
            tty: true,
            started_at: DateTime::parse_from_rfc3339("2026-11-23T08:15:00Z")
                .unwrap()
                .with_timezone(&Utc),
            replica: "oz-0".into(),
        }
    }

    #[test]
    fn header_has_asciicast_keys_and_oz_keys() {
        let line = header_line(&info(), false, Some((120, 40)), None);
        assert_eq!(
            line,
            concat!(
                r#"{"version":2,"width":120,"height":40,"timestamp":1795421700,"#,
                r#""title":"team/web-0 sh -c ls","env":{"TERM":"xterm-256color"},"#,
                r#""oz":{"session":"20261123-081500-k3x9qa7m","user":"alice","groups":["devs"],"#,
                r#""namespace":"team","pod":"web-0","container":"app","command":["sh","-c","ls"],"#,
                r#""stream":"exec","grant":{"kind":"ExecAccessRequest","name":"alice-x7k2p","uid":"u-1"},"#,
                r#""template":"web","tty":true,"replica":"oz-0","recordInput":false,"#,
                r#""startedAt":"2026-11-23T08:15:00.000000Z"}}"#,
                "\n"
            )
        );
        let ended = header_line(
            &info(),
            true,
            None,
            Some((
                info().started_at + chrono::Duration::seconds(5),
                SessionEndReason::Expired,
            )),
        );
        let value: Value = serde_json::from_str(&ended).unwrap();
        assert_eq!(value["width"], 80);
        assert_eq!(value["oz"]["endReason"], "expired");
        assert_eq!(value["oz"]["endedAt"], "2026-11-23T08:15:05.000000Z");
        assert_eq!(value["oz"]["recordInput"], true);
    }

    #[test]
    fn events_are_asciinema_lines_with_json_escapes() {
        assert_eq!(
            event_line(1.5, "o", "a\"b\u{1b}[0m\r\n"),
            "[1.500000, \"o\", \"a\\\"b\\u001b[0m\\r\\n\"]\n"
        );
        assert_eq!(
            event_line(0.0, "r", "100x30"),
            "[0.000000, \"r\", \"100x30\"]\n"
        );
        assert_eq!(
            end_marker(2.25, SessionEndReason::TemplateDeleted),
            "[2.250000, \"m\", \"end: template_deleted\"]\n"
        );
    }

    #[test]
    fn the_worst_case_line_stays_near_six_times_the_event_limit() {
        let control = vec![1u8; MAX_EVENT_TEXT_BYTES];
        let text = Utf8Carry::default().push(&control).unwrap();
        assert!(event_line(1e6, "i", &text).len() <= 6 * MAX_EVENT_TEXT_BYTES + 64);
    }

    #[test]
    fn a_character_split_across_frames_is_carried_whole() {
        let snowman = "☃".as_bytes(); // 3 bytes
        let mut carry = Utf8Carry::default();
        assert_eq!(carry.push(&[b'a', snowman[0]]).as_deref(), Some("a"));
        assert_eq!(carry.push(&snowman[1..2]), None);
        assert_eq!(carry.push(&[snowman[2], b'b']).as_deref(), Some("☃b"));
        // Invalid bytes are replaced, not carried.
        assert_eq!(carry.push(&[0xff, b'c']).as_deref(), Some("\u{fffd}c"));
        // A stream that ends inside a character keeps what it has.
        assert_eq!(carry.push(&snowman[..2]), None);
        assert_eq!(carry.flush().as_deref(), Some("\u{fffd}"));
        assert_eq!(carry.flush(), None);
    }
}
