//! Objects the unit tests of several commands start from.

use std::path::{Path, PathBuf};

use oz_api::{ExecAccessRequest, ExecAccessRequestSpec, Requester};
use oz_audit::{AuditFile, PublicKey, Rotation, Signer};
use serde_json::json;

/// ExecAccessRequest `alice-x7k2p` through template `web`, with no status yet.
pub(crate) fn exec_request(requester: Option<Requester>) -> ExecAccessRequest {
    ExecAccessRequest::new(
        "alice-x7k2p",
        ExecAccessRequestSpec {
            cluster: None,
            forwarded: None,
            reason: None,
            ticket: None,
            template_name: "web".into(),
            target_pod: None,
            duration: None,
            requester,
        },
    )
}

/// An audit file `audit.jsonl` in `dir`, written by oz's own writer: three exec records
/// (alice, bob, alice into team/web-0) signed by a checkpoint, then `tail` records by carol
/// after it; and the public key that signed it.
pub(crate) fn audit_log(dir: &Path, tail: usize) -> (PathBuf, PublicKey) {
    let path = dir.join("audit.jsonl");
    let signer = Signer::generate().unwrap();
    let key = signer.public_key();
    let mut file = AuditFile::open(&path, signer, Rotation::default()).unwrap();
    let record = |user: &str| {
        json!({"time": "2026-11-21T10:00:00Z", "event": "PodExec", "user": user,
               "namespace": "team", "pod": "web-0", "command": ["ls"]})
        .as_object()
        .unwrap()
        .clone()
    };
    for user in ["alice", "bob", "alice"] {
        file.append(record(user)).unwrap();
    }
    file.checkpoint().unwrap();
    for _ in 0..tail {
        file.append(record("carol")).unwrap();
    }
    (path, key)
}

/// The Status the apiserver ends an exec with when the command exited with `code` (not 0).
pub(crate) fn exited_with(code: u8) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Status {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Status, StatusCause, StatusDetails};
    Status {
        status: Some("Failure".into()),
        reason: Some("NonZeroExitCode".into()),
        message: Some("command terminated with non-zero exit code".into()),
        details: Some(StatusDetails {
            causes: Some(vec![StatusCause {
                reason: Some("ExitCode".into()),
                message: Some(code.to_string()),
                field: None,
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}
