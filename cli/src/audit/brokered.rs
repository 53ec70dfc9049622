//! Whose a brokered stream is. When a template's sessions are Brokered, oz itself opens the
//! exec (or attach) into the pod, so the audit webhook records oz's own user, marked
//! `brokered`, with no grant; the broker writes a `session-start` record naming the user and
//! the grant. [`attribute`] joins the two, so a review reads the stream as the session's user's
//! under their grant (and `--user alice` finds it), while the record still shows it was oz's.

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use oz_audit::CheckedRecord;
use serde_json::{Value, json};

/// The key [`attribute`] adds to a brokered stream's record: `{user, grant, session}` of the
/// session it was opened for.
pub const ON_BEHALF_OF: &str = "onBehalfOf";

/// How far apart a session's start and its stream's admission may be: the broker writes the
/// start once the stream is open, within the same second on any cluster oz runs well on.
const WINDOW: SignedDuration = SignedDuration::from_secs(10);

fn text<'a>(record: &'a CheckedRecord, key: &str) -> &'a str {
    record.record.get(key).and_then(Value::as_str).unwrap_or("")
}

fn time(record: &CheckedRecord) -> Option<Timestamp> {
    text(record, "time").parse().ok()
}

/// Whether `record` is oz's own stream for a session: brokered, and not the broker's own
/// session record.
pub fn is_stream(record: &CheckedRecord) -> bool {
    record.record.get("brokered").and_then(Value::as_bool) == Some(true)
        && record.record.get("session").is_none_or(Value::is_null)
}

/// Adds [`ON_BEHALF_OF`] to each brokered stream's record whose `session-start` is among
/// `records`: the same namespace, pod and command, the nearest in time within 10 s, each
/// start given to one stream. The files of every replica can be given at once: a stream's
/// admission and its session may be recorded by different replicas.
pub fn attribute(records: &mut [CheckedRecord]) {
    let starts: Vec<usize> = (0..records.len())
        .filter(|&i| text(&records[i], "event") == "session-start")
        .collect();
    let mut taken = vec![false; starts.len()];
    for i in 0..records.len() {
        if !is_stream(&records[i]) {
            continue;
        }
        let stream = &records[i];
        let Some(at) = time(stream) else { continue };
        let nearest = starts
            .iter()
            .enumerate()
            .filter(|&(n, _)| !taken[n])
            .filter_map(|(n, &j)| {
                let start = &records[j];
                let same = ["namespace", "pod"]
                    .iter()
                    .all(|key| text(start, key) == text(stream, key))
                    && start.record.get("command") == stream.record.get("command");
                let apart = time(start)?.duration_since(at).abs();
                (same && apart <= WINDOW).then_some((apart, n, j))
            })
            .min();
        if let Some((_, n, j)) = nearest {
            taken[n] = true;
            let start = &records[j].record;
            let on_behalf_of = json!({
                "user": start.get("user"),
                "grant": start.get("grant"),
                "session": start.get("session").and_then(|s| s.get("id")),
            });
            records[i].record.insert(ON_BEHALF_OF.into(), on_behalf_of);
        }
    }
}

/// The session's user a brokered stream was opened for, once [`attribute`]d.
pub fn session_user(record: &CheckedRecord) -> Option<&str> {
    record.record.get(ON_BEHALF_OF)?.get("user")?.as_str()
}

/// The session's grant, once [`attribute`]d.
pub fn session_grant(record: &CheckedRecord) -> Option<&Value> {
    record
        .record
        .get(ON_BEHALF_OF)?
        .get("grant")
        .filter(|g| !g.is_null())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(seq: u64, fields: Value) -> CheckedRecord {
        CheckedRecord {
            file: "audit.jsonl".into(),
            line: seq,
            seq,
            verified: true,
            record: fields.as_object().unwrap().clone(),
        }
    }

    fn stream(seq: u64, time: &str, pod: &str) -> CheckedRecord {
        record(
            seq,
            json!({"time": time, "event": "PodExec", "user": "system:serviceaccount:oz-system:oz-manager",
                   "namespace": "shop", "pod": pod, "command": ["sh"], "brokered": true, "grant": null}),
        )
    }

    fn start(seq: u64, time: &str, user: &str, pod: &str) -> CheckedRecord {
        record(
            seq,
            json!({"time": time, "event": "session-start", "user": user, "namespace": "shop",
                   "pod": pod, "command": ["sh"], "brokered": true,
                   "grant": {"kind": "ExecAccessRequest", "name": format!("{user}-web"), "template": "web"},
                   "session": {"id": format!("s-{user}"), "replica": "oz-0"}}),
        )
    }

    #[test]
    fn each_stream_is_the_nearest_session_starts_on_the_same_pod_and_command() {
        let mut records = vec![
            stream(1, "2026-11-21T09:00:00.100Z", "web-0"),
            start(2, "2026-11-21T09:00:00.300Z", "alice", "web-0"),
            stream(3, "2026-11-21T09:00:01.000Z", "web-0"),
            start(4, "2026-11-21T09:00:01.050Z", "carol", "web-0"),
            // Another pod, and one too far apart: nobody's.
            stream(5, "2026-11-21T09:00:02Z", "web-1"),
            stream(6, "2026-11-21T09:05:00Z", "web-0"),
            start(7, "2026-11-21T09:00:02Z", "dave", "web-9"),
        ];
        attribute(&mut records);
        let users: Vec<Option<&str>> = records.iter().map(session_user).collect();
        assert_eq!(
            users,
            [Some("alice"), None, Some("carol"), None, None, None, None]
        );
        assert_eq!(
            session_grant(&records[2]).unwrap()["name"],
            "carol-web",
            "{:?}",
            records[2].record
        );
        assert_eq!(records[0].record[ON_BEHALF_OF]["session"], "s-alice");
        // The record keeps oz's own user: who opened the stream is not rewritten.
        assert_eq!(
            records[0].record["user"],
            "system:serviceaccount:oz-system:oz-manager"
        );
    }
}
