//! Objects the unit tests of several commands start from.

use std::path::{Path, PathBuf};

use oz_api::{ExecAccessRequest, ExecAccessRequestSpec, ExecAccessTemplate, Requester};
use oz_audit::{AuditFile, PublicKey, Rotation, Signer};
use serde_json::json;

/// ExecAccessRequest `alice-x7k2p` through template `web`, with no status yet.
pub(crate) fn exec_request(requester: Option<Requester>) -> ExecAccessRequest {
    ExecAccessRequest::new(
        "alice-x7k2p",
        ExecAccessRequestSpec {
            start_at: None,
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

/// ExecAccessTemplate `web` in namespace `team`, for group `devs`: with `spokes`, a fleet hub's
/// template (`spec.clusters` set) whose `status.clusters` lists each spoke, synced (`None`) or
/// not with the hub's message; without, a plain one.
pub(crate) fn exec_template(spokes: Option<&[(&str, Option<&str>)]>) -> ExecAccessTemplate {
    let mut template = json!({
        "apiVersion": "crds.wizardofoz.co/v1alpha1", "kind": "ExecAccessTemplate",
        "metadata": {"name": "web", "namespace": "team"},
        "spec": {"accessConfig": {"allowedGroups": ["devs"]},
                 "controllerTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}},
        "status": {"ready": true},
    });
    if let Some(spokes) = spokes {
        template["spec"]["clusters"] = json!({"selector": {"matchLabels": {"env": "prod"}}});
        template["status"]["clusters"] = spokes
            .iter()
            .map(|(name, problem)| match problem {
                None => json!({"name": name, "synced": true}),
                Some(message) => json!({"name": name, "synced": false, "message": message}),
            })
            .collect();
    }
    serde_json::from_value(template).unwrap()
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

/// Fleet cluster `cluster`'s audit file, as [`audit_log`] writes it (in `dir/CLUSTER/`, signed
/// by a key of its own, no tail), and that key saved as `dir/CLUSTER.pub`.
pub(crate) fn cluster_audit_log(dir: &Path, cluster: &str) -> (PathBuf, PathBuf) {
    let own = dir.join(cluster);
    std::fs::create_dir(&own).unwrap();
    let (file, key) = audit_log(&own, 0);
    let key_file = dir.join(format!("{cluster}.pub"));
    std::fs::write(&key_file, key.to_spki_pem()).unwrap();
    (file, key_file)
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
