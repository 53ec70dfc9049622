//! One line of the audit file: an [`Entry`], how it is written ([`Entry::encode`]) and read
//! back ([`Entry::parse`]), and what a checkpoint signs ([`checkpoint_message`]).

use base64::{Engine, engine::general_purpose::STANDARD};
use serde_json::{Map, Value};

use crate::{Error, Hash, PublicKey, Result, Signer};

/// The first line of every checkpoint's signed message: the format and its version.
pub const CHECKPOINT_CONTEXT: &str = "oz-audit-checkpoint/v1";

/// The keys every entry starts with; a record may not have them.
const RESERVED: [&str; 3] = ["seq", "prev", "type"];

/// One entry: its place in the chain and what it says.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// 1 for the first entry of a chain, +1 for each entry after it, of any type.
    pub seq: u64,
    /// The SHA-256 of the previous entry's line ([`Hash::GENESIS`] for seq 1).
    pub prev: Hash,
    /// What the entry is.
    pub body: Body,
}

/// What an entry says: its `type` and the keys that go with it.
#[derive(Clone, Debug, PartialEq)]
pub enum Body {
    /// `"type": "record"`: an audit record, its own keys after `seq`, `prev` and `type`.
    Record(Map<String, Value>),
    /// `"type": "checkpoint"`: a signature over `seq`, `prev`, `time` and `keyId`
    /// ([`checkpoint_message`]), so it vouches for every entry before it.
    Checkpoint {
        /// RFC 3339, UTC.
        time: String,
        /// The signing key's id.
        key_id: String,
        /// Standard base64 of the Ed25519 signature.
        signature: String,
    },
    /// `"type": "recovered"`: the line before it was left partial (the writer died or a write
    /// failed mid-line); this acknowledges it by line number and hash. The partial line is
    /// outside the chain: this entry's `prev` is the entry before it.
    Recovered {
        /// RFC 3339, UTC.
        time: String,
        /// The partial line's 1-based line number in this file.
        partial_line: u64,
        /// The SHA-256 of the partial line's bytes (without the `\n` the writer added).
        partial_sha256: String,
    },
}

/// The message a checkpoint's signature is over:
/// `"oz-audit-checkpoint/v1\n{seq}\n{prev}\n{time}\n{keyId}"`.
pub fn checkpoint_message(seq: u64, prev: &Hash, time: &str, key_id: &str) -> String {
    format!("{CHECKPOINT_CONTEXT}\n{seq}\n{prev}\n{time}\n{key_id}")
}

impl Entry {
    /// A record entry. Refused if the record has a key of its own named `seq`, `prev` or
    /// `type`.
    pub fn record(seq: u64, prev: Hash, record: Map<String, Value>) -> Result<Entry> {
        if let Some(key) = RESERVED.iter().find(|k| record.contains_key(**k)) {
            return Err(Error::Record(format!(
                "it has a key {key:?}, which every entry starts with"
            )));
        }
        Ok(Entry {
            seq,
            prev,
            body: Body::Record(record),
        })
    }

    /// A checkpoint at `seq` after the entry whose hash is `prev`, signed by `signer`.
    pub fn checkpoint(seq: u64, prev: Hash, time: String, signer: &Signer) -> Entry {
        let key_id = signer.key_id().to_string();
        let message = checkpoint_message(seq, &prev, &time, &key_id);
        let signature = STANDARD.encode(signer.sign(message.as_bytes()));
        Entry {
            seq,
            prev,
            body: Body::Checkpoint {
                time,
                key_id,
                signature,
            },
        }
    }

    /// The `type`: `record`, `checkpoint` or `recovered`.
    pub fn type_name(&self) -> &'static str {
        match self.body {
            Body::Record(_) => "record",
            Body::Checkpoint { .. } => "checkpoint",
            Body::Recovered { .. } => "recovered",
        }
    }

    /// The line, without its `\n`: a JSON object whose keys are `seq`, `prev`, `type`, then
    /// the body's.
    pub fn encode(&self) -> String {
        let mut line = format!(
            r#"{{"seq":{},"prev":"{}","type":"{}""#,
            self.seq,
            self.prev,
            self.type_name()
        );
        let mut field = |key: &str, value: &Value| {
            line.push(',');
            line.push_str(&Value::from(key).to_string());
            line.push(':');
            line.push_str(&value.to_string());
        };
        match &self.body {
            Body::Record(record) => {
                for (key, value) in record {
                    field(key, value);
                }
            }
            Body::Checkpoint {
                time,
                key_id,
                signature,
            } => {
                field("time", &Value::from(time.as_str()));
                field("keyId", &Value::from(key_id.as_str()));
                field("signature", &Value::from(signature.as_str()));
            }
            Body::Recovered {
                time,
                partial_line,
                partial_sha256,
            } => {
                field("time", &Value::from(time.as_str()));
                field("partialLine", &Value::from(*partial_line));
                field("partialSha256", &Value::from(partial_sha256.as_str()));
            }
        }
        line.push('}');
        line
    }

    /// Reads one line (without its `\n`), or says why it is not an entry.
    pub fn parse(line: &[u8]) -> Result<Entry, String> {
        let mut object: Map<String, Value> =
            serde_json::from_slice(line).map_err(|e| format!("not a JSON object: {e}"))?;
        let seq = object
            .remove("seq")
            .and_then(|s| s.as_u64())
            .ok_or("no \"seq\" number")?;
        let prev = object
            .remove("prev")
            .as_ref()
            .and_then(Value::as_str)
            .and_then(Hash::from_hex)
            .ok_or("no \"prev\" hash")?;
        let kind = match object.remove("type") {
            Some(Value::String(kind)) => kind,
            _ => return Err("no \"type\"".into()),
        };
        let text = |key: &str| match object.get(key) {
            Some(Value::String(text)) => Ok(text.clone()),
            _ => Err(format!("a {kind} without {key:?}")),
        };
        let body = match kind.as_str() {
            "record" => Body::Record(object),
            "checkpoint" => Body::Checkpoint {
                time: text("time")?,
                key_id: text("keyId")?,
                signature: text("signature")?,
            },
            "recovered" => Body::Recovered {
                time: text("time")?,
                partial_sha256: text("partialSha256")?,
                partial_line: object
                    .get("partialLine")
                    .and_then(Value::as_u64)
                    .ok_or("a recovered without \"partialLine\"")?,
            },
            other => return Err(format!("unknown type {other:?}")),
        };
        Ok(Entry { seq, prev, body })
    }

    /// For a checkpoint: whether its signature is `key`'s over its own seq, prev, time and
    /// keyId. `None` for other entries.
    pub fn signed_by(&self, key: &PublicKey) -> Option<bool> {
        let Body::Checkpoint {
            time,
            key_id,
            signature,
        } = &self.body
        else {
            return None;
        };
        let message = checkpoint_message(self.seq, &self.prev, time, key_id);
        Some(
            STANDARD
                .decode(signature)
                .is_ok_and(|signature| key.verifies(message.as_bytes(), &signature)),
        )
    }

    /// For a checkpoint: the key id it names.
    pub fn key_id(&self) -> Option<&str> {
        match &self.body {
            Body::Checkpoint { key_id, .. } => Some(key_id),
            _ => None,
        }
    }
}

/// The seq a line says it has, read from its start (`{"seq":N,`), for lines too damaged to
/// parse: a partial line usually still has it.
pub(crate) fn leading_seq(line: &[u8]) -> Option<u64> {
    let rest = line.strip_prefix(br#"{"seq":"#)?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || rest.get(digits) != Some(&b',') {
        return None;
    }
    std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::keys::tests::RFC8032_TEST1_PEM;

    /// The checkpoint at seq 42 after the line `x`, at 2026-11-21T10:00:00.000Z, signed with
    /// RFC 8032's test key 1: its line, byte for byte. Checked independently with OpenSSL 3:
    /// `openssl pkey -pubout` gives the same public key (whose SHA-256 starts 21fe31dfa154a261),
    /// and `openssl pkeyutl -sign -rawin` over the message gives the same signature.
    #[test]
    fn a_checkpoint_signs_exactly_the_specified_message() {
        let signer = Signer::from_pkcs8_pem(RFC8032_TEST1_PEM).unwrap();
        let prev = Hash::of(b"x");
        let time = "2026-11-21T10:00:00.000Z";
        let message = checkpoint_message(42, &prev, time, signer.key_id().as_str());
        assert_eq!(
            message,
            format!(
                "oz-audit-checkpoint/v1\n42\n{prev}\n2026-11-21T10:00:00.000Z\n{}",
                signer.key_id()
            )
        );
        let line = Entry::checkpoint(42, prev, time.into(), &signer).encode();
        assert_eq!(
            line,
            r#"{"seq":42,"prev":"2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881","type":"checkpoint","time":"2026-11-21T10:00:00.000Z","keyId":"21fe31dfa154a261","signature":"9koBg8rgf9wRtPAgQTli4X9PXFefVzoOu3AnEhZHDvoNcLeuYMbzlyQ6UOK2BgoyzH5DQpIErnE2MiS/9HXRCQ=="}"#
        );
        let entry = Entry::parse(line.as_bytes()).unwrap();
        assert_eq!(entry.signed_by(&signer.public_key()), Some(true));
        let other = Signer::generate().unwrap();
        assert_eq!(entry.signed_by(&other.public_key()), Some(false));
    }

    #[test]
    fn entries_read_back_as_written_with_seq_prev_and_type_first() {
        let record = json!({"user": "alice", "command": ["sh", "-c", "echo \"hi\"\n"], "n": 1});
        let entry =
            Entry::record(7, Hash::of(b"six"), record.as_object().unwrap().clone()).unwrap();
        let line = entry.encode();
        assert!(
            line.starts_with(&format!(
                r#"{{"seq":7,"prev":"{}","type":"record","#,
                Hash::of(b"six")
            )),
            "{line}"
        );
        assert!(!line.contains('\n'), "one line: {line}");
        assert_eq!(Entry::parse(line.as_bytes()).unwrap(), entry);

        let recovered = Entry {
            seq: 8,
            prev: Hash::of(line.as_bytes()),
            body: Body::Recovered {
                time: "2026-11-21T10:00:00.000Z".into(),
                partial_line: 3,
                partial_sha256: Hash::of(b"{\"seq\":8,").to_string(),
            },
        };
        let line = recovered.encode();
        assert!(line.contains(r#""type":"recovered","time":"2026-11-21T10:00:00.000Z","partialLine":3,"partialSha256":""#), "{line}");
        assert_eq!(Entry::parse(line.as_bytes()).unwrap(), recovered);
    }

    #[test]
    fn records_may_not_have_the_entry_keys_and_lines_that_are_not_entries_say_why() {
        for key in ["seq", "prev", "type"] {
            let record = json!({key: 1, "user": "alice"});
            assert!(Entry::record(1, Hash::GENESIS, record.as_object().unwrap().clone()).is_err());
        }
        for (line, why) in [
            (r#"{"seq":1,"prev""#, "not a JSON object"),
            (r#"{"prev":"00","type":"record"}"#, "seq"),
            (r#"{"seq":-1,"prev":"00","type":"record"}"#, "seq"),
            (r#"{"seq":1,"prev":"00","type":"record"}"#, "prev"),
            (
                &format!(r#"{{"seq":1,"prev":"{}","type":"note"}}"#, Hash::GENESIS),
                "unknown type",
            ),
            (
                &format!(
                    r#"{{"seq":1,"prev":"{}","type":"checkpoint","time":"t"}}"#,
                    Hash::GENESIS
                ),
                "keyId",
            ),
        ] {
            let error = Entry::parse(line.as_bytes()).unwrap_err();
            assert!(error.contains(why), "{line}: {error}");
        }
        assert_eq!(leading_seq(br#"{"seq":123,"pr"#), Some(123));
        assert_eq!(leading_seq(br#"{"seq":12"#), None);
        assert_eq!(leading_seq(br#"{"user":"x"}"#), None);
    }
}
