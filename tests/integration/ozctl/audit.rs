//! `ozctl audit verify` and `ozctl audit` end to end: the real ozctl binary on the audit file a
//! real oz-manager (verifying that its caller is the apiserver) wrote from alice's real
//! `kubectl exec`, with the keys oz published in its ConfigMap `oz-audit`, read by bob holding
//! nothing but the Role `docs/audit.md` gives security teams. And the record's JSON Schema in
//! `docs/audit.md`, checked against the record type and against the records oz wrote.

use std::{path::Path, process::Output, time::Duration};

use kube::{
    Api,
    core::{
        DynamicObject,
        admission::{AdmissionRequest, AdmissionReview},
    },
};
use oz_api::{ExecAccessRequest, RequestPhase};
use oz_audit::AuditRecord;
use oz_platform::callers::Caller;
use oz_testenv::{
    exec::{self, RUN_TIMEOUT},
    workloads::{self, WorkloadSpec},
};
use oz_webhooks::admission::audit::{PodAction, describe};
use serde_json::{Map, Value, json};

use crate::support::{
    admission::{create_once_admitted, written_request},
    cluster::{env, install_crds},
    manifests::create_manifest,
    operator::{Operator, delete_webhook_configurations},
    ozctl::ozctl_bin,
    polling::eventually,
    rbac::{grant, rule, subject},
};

const WAIT: Duration = Duration::from_secs(60);

const TEMPLATE: &str = "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessTemplate\n\
    metadata: {name: web-exec}\nspec:\n  \
    accessConfig: {allowedGroups: [devs], defaultDuration: 1h, maxDuration: 2h}\n  \
    controllerTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n";

/// The record's JSON Schema: the ```json block under "## The record" in docs/audit.md.
fn record_schema() -> Value {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/audit.md"))
        .expect("docs/audit.md");
    let section = doc
        .split_once("\n## The record\n")
        .expect("docs/audit.md has a section \"The record\"")
        .1;
    let block = section
        .split_once("```json\n")
        .and_then(|(_, rest)| rest.split_once("\n```"))
        .expect("its JSON Schema in a ```json block")
        .0;
    serde_json::from_str(block).expect("the schema is JSON")
}

/// What is wrong with `value` by `schema`, for the parts of JSON Schema the record's uses:
/// `type` (a name or a list), `enum`, `oneOf`, `items`, `required` and `properties` (every key
/// of an object must be one; a new record field must be documented).
fn schema_errors(schema: &Value, value: &Value, at: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        errors.push(format!("{at}: {value} is not one of {allowed:?}"));
    }
    if let Some(types) = schema.get("type") {
        let types: Vec<&str> = match types {
            Value::String(one) => vec![one.as_str()],
            many => many
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect(),
        };
        let actual = match value {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        };
        let integer_as_number = actual == "integer" && types.contains(&"number");
        if !(types.contains(&actual) || integer_as_number) {
            errors.push(format!("{at}: a {actual}, not {types:?}"));
        }
    }
    if let Some(choices) = schema.get("oneOf").and_then(Value::as_array) {
        let matching = choices
            .iter()
            .filter(|choice| schema_errors(choice, value, at).is_empty())
            .count();
        if matching != 1 {
            errors.push(format!("{at}: {value} matches {matching} of oneOf"));
        }
    }
    if let (Some(items), Some(array)) = (schema.get("items"), value.as_array()) {
        for (index, item) in array.iter().enumerate() {
            errors.extend(schema_errors(items, item, &format!("{at}[{index}]")));
        }
    }
    if let (Some(properties), Some(object)) = (
        schema.get("properties").and_then(Value::as_object),
        value.as_object(),
    ) {
        for required in schema["required"].as_array().into_iter().flatten() {
            let key = required.as_str().unwrap();
            if !object.contains_key(key) {
                errors.push(format!("{at}: required {key:?} is missing"));
            }
        }
        for (key, item) in object {
            match properties.get(key) {
                Some(property) => {
                    errors.extend(schema_errors(property, item, &format!("{at}.{key}")))
                }
                None => errors.push(format!("{at}: {key:?} is not in the schema")),
            }
        }
    }
    errors
}

/// A record with every field the schema documents.
fn every_field() -> Value {
    json!({
        "time": "2026-11-21T10:00:00.123Z", "event": "PodDebug", "requestUid": "u-1",
        "user": "alice", "uid": "1001", "groups": ["devs", "system:authenticated"],
        "namespace": "team", "pod": "web-0", "operation": "UPDATE",
        "subresource": "ephemeralcontainers", "container": "debugger", "command": ["sh", "-c", "id"],
        "tty": true, "stdin": true, "ports": [8080], "image": "busybox",
        "grant": {"kind": "ExecAccessRequest", "name": "alice-x7k2p", "template": "web-exec"},
        "grantError": "timed out", "dryRun": false, "allowed": false, "deniedBecause": "no grant",
        "caller": "apiserver", "callerName": "kube-apiserver-webhook-client",
        "brokered": true,
        "session": {"id": "20261121-100000-k3x9qa7m", "recording": "team/20261121-100000-k3x9qa7m.cast",
                    "endReason": "exited", "recordingSha256": "ab".repeat(32), "recordingBytes": 1234,
                    "replica": "oz-0"},
    })
}

/// The schema in docs/audit.md is the record type's: a record with every documented field
/// reads into `AuditRecord` and writes back unchanged (no documented field is missing from
/// the type, no field of the type is undocumented), and the record oz makes from a real
/// AdmissionReview, its optional fields empty, has every required one.
#[test]
fn the_record_schema_in_docs_audit_md_is_the_record_types() {
    let schema = record_schema();
    let full = every_field();
    assert_eq!(
        schema_errors(&schema, &full, "record"),
        Vec::<String>::new()
    );
    let documented: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
    let sample: Vec<&String> = full.as_object().unwrap().keys().collect();
    assert_eq!(
        sample, documented,
        "every_field() has every documented field"
    );

    let record: AuditRecord = serde_json::from_value(full.clone())
        .unwrap_or_else(|e| panic!("a record with every documented field is an AuditRecord: {e}"));
    let written = serde_json::to_value(&record).unwrap();
    let keys = |v: &Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
    let lost: Vec<String> = keys(&full)
        .into_iter()
        .filter(|k| !keys(&written).contains(k))
        .collect();
    let undocumented: Vec<String> = keys(&written)
        .into_iter()
        .filter(|k| !keys(&full).contains(k))
        .collect();
    assert!(
        lost.is_empty() && undocumented.is_empty(),
        "documented but not fields of AuditRecord: {lost:?}; fields of AuditRecord not documented: {undocumented:?}"
    );
    assert_eq!(
        written, full,
        "AuditRecord writes back the documented values"
    );

    let review: AdmissionReview<DynamicObject> = serde_json::from_value(json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "u-2",
            "kind": {"group": "", "version": "v1", "kind": "PodExecOptions"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": "exec",
            "requestKind": {"group": "", "version": "v1", "kind": "PodExecOptions"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "requestSubResource": "exec",
            "name": "web-0", "namespace": "team", "operation": "CONNECT",
            "userInfo": {"username": "alice", "groups": ["devs"]},
            "object": {"apiVersion": "v1", "kind": "PodExecOptions", "command": ["ls"], "stdout": true},
            "dryRun": false,
        },
    }))
    .unwrap();
    let request: AdmissionRequest<DynamicObject> = review.try_into().unwrap();
    let minimal =
        serde_json::to_value(describe(&request, PodAction::Exec, &Caller::Unverified)).unwrap();
    assert_eq!(
        schema_errors(&schema, &minimal, "record"),
        Vec::<String>::new(),
        "{minimal}"
    );
}

/// The entries of an audit file (the lines that are JSON), with their 1-based line numbers.
fn entries(path: &Path) -> Vec<(u64, Value)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .enumerate()
        .filter_map(|(i, line)| Some((i as u64 + 1, serde_json::from_str(line).ok()?)))
        .collect()
}

/// Runs ozctl as `user` (its own kubeconfig) with `args`.
async fn ozctl(user: &str, args: &[&str]) -> Output {
    tokio::process::Command::new(ozctl_bin())
        .args(args)
        .env("KUBECONFIG", env().kubeconfig_of(user).unwrap())
        .env_remove("OZ_NAMESPACE")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap()
}

fn said(output: &Output) -> String {
    format!(
        "{}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// alice's exec, recorded by oz in its audit file and signed at shutdown, verifies with the key
/// oz published (read by bob with only the documented reader Role); copies with a field of a
/// record edited, a line deleted, two lines swapped, the last line cut mid-way, or the last
/// checkpoint re-signed with another key each fail, naming the line and seq; and `ozctl audit
/// --user alice` lists her execs as verified.
#[tokio::test]
async fn ozctl_verifies_the_file_oz_wrote_names_each_tampering_and_lists_alices_exec() {
    install_crds().await;
    let admin = env().admin().await.unwrap();
    let ns = env().namespace("ozctl-audit").await.unwrap();
    workloads::deployment(&admin, &ns, WorkloadSpec::new("web", 1))
        .await
        .unwrap();
    create_manifest(&admin, &ns, TEMPLATE).await.unwrap();
    grant(
        &admin,
        &ns,
        "alice-requests",
        vec![
            rule(&[oz_api::GROUP], &["execaccessrequests"], &["create"]),
            rule(&[""], &["pods"], &["get", "list"]),
        ],
        vec![subject("User", "alice")],
    )
    .await;
    // The reader Role of docs/audit.md, for bob: the keys and nothing else.
    grant(
        &admin,
        &ns,
        "oz-audit-reader",
        vec![k8s_openapi::api::rbac::v1::PolicyRule {
            api_groups: Some(vec!["".into()]),
            resources: Some(vec!["configmaps".into()]),
            resource_names: Some(vec!["oz-audit".into()]),
            verbs: vec!["get".into()],
            non_resource_urls: None,
        }],
        vec![subject("User", "bob")],
    )
    .await;

    let log = crate::support::operator::audit_log_path("ozctl-audit-review");
    let mut operator = Operator::builder(&ns)
        .webhooks(&format!("oz-{ns}"))
        .args(&[
            &format!("--audit-log-path={}", log.display()),
            // Only the apiserver may call: its records say so, with its certificate's name.
            &format!(
                "--webhook-client-ca-file={}",
                env().webhook_client_ca().unwrap().display()
            ),
        ])
        .start();
    let oz_log = operator.log.display().to_string();

    // alice asks herself (the webhook records her as the requester), once oz's webhooks answer.
    let alice: Api<ExecAccessRequest> =
        Api::namespaced(env().client_as("alice").await.unwrap(), &ns);
    let request = written_request("alice-web", "web-exec");
    create_once_admitted(&alice, &request, "alice", &operator.log).await;
    let requests: Api<ExecAccessRequest> = Api::namespaced(admin.clone(), &ns);
    let pod = eventually(
        WAIT,
        &format!("alice-web to be Ready (log: {oz_log})"),
        || async {
            let status = requests.get("alice-web").await.ok()?.status?;
            (status.phase == Some(RequestPhase::Ready))
                .then_some(status.pod_name)
                .flatten()
        },
    )
    .await;

    // Her exec, until the audit webhook (registered a moment after the others) records it.
    let alices_exec = |entry: &Value| {
        entry["type"] == "record" && entry["user"] == "alice" && entry["event"] == "PodExec"
    };
    eventually(
        WAIT,
        &format!("alice's exec to be recorded (log: {oz_log})"),
        || async {
            let mut kubectl = env().kubectl(Some("alice")).unwrap();
            kubectl.args(["--namespace", &ns, "exec", &pod, "-c", "app", "--"]);
            kubectl.args(["sh", "-c", "echo audited"]);
            let output = exec::run(kubectl, RUN_TIMEOUT).await.unwrap();
            assert!(output.success(), "{output}");
            entries(&log).into_iter().find(|(_, e)| alices_exec(e))
        },
    )
    .await;

    // Two more, so that a line can be taken from the middle of the chain (the first line of a
    // file cannot be told from one rotated away).
    for word in ["second", "third"] {
        let mut kubectl = env().kubectl(Some("alice")).unwrap();
        kubectl.args(["--namespace", &ns, "exec", &pod, "-c", "app", "--"]);
        kubectl.args(["sh", "-c", &format!("echo {word}")]);
        let output = exec::run(kubectl, RUN_TIMEOUT).await.unwrap();
        assert!(output.success(), "{output}");
    }
    eventually(
        WAIT,
        &format!("alice's three execs to be recorded (log: {oz_log})"),
        || async {
            (entries(&log).iter().filter(|(_, e)| alices_exec(e)).count() >= 3).then_some(())
        },
    )
    .await;

    // SIGTERM: oz signs what it wrote before it exits.
    let terminated = std::process::Command::new("kill")
        .args(["-TERM", &operator.pid().to_string()])
        .status()
        .unwrap();
    assert!(terminated.success());
    eventually(WAIT, &format!("oz-manager to exit (log: {oz_log})"), || {
        let running = operator.is_running();
        async move { (!running).then_some(()) }
    })
    .await;
    let written = entries(&log);
    assert_eq!(
        written.last().map(|(_, e)| e["type"].clone()),
        Some(json!("checkpoint")),
        "the last entry is the shutdown checkpoint: {written:#?}"
    );
    let (line, record) = written
        .iter()
        .find(|(_, e)| alices_exec(e))
        .unwrap()
        .clone();
    let seq = record["seq"].as_u64().unwrap();
    // Every record oz wrote is as docs/audit.md describes it, callerName included.
    assert_eq!(record["caller"], "apiserver", "{record}");
    assert!(record["callerName"].is_string(), "{record}");
    let schema = record_schema();
    for (line, entry) in written.iter().filter(|(_, e)| e["type"] == "record") {
        let mut fields: Map<String, Value> = entry.as_object().unwrap().clone();
        for key in ["seq", "prev", "type"] {
            fields.remove(key);
        }
        let errors = schema_errors(&schema, &Value::Object(fields), &format!("line {line}"));
        assert!(errors.is_empty(), "{errors:?}");
    }

    let file = log.display().to_string();
    let oz_namespace = format!("--oz-namespace={ns}");
    let verified = ozctl("bob", &["audit", "verify", &file, &oz_namespace]).await;
    let text = String::from_utf8_lossy(&verified.stdout).into_owned();
    assert_eq!(verified.status.code(), Some(0), "{}", said(&verified));
    let records = written
        .iter()
        .filter(|(_, e)| e["type"] == "record")
        .count();
    assert!(
        text.contains(&format!("records:      {records}, {records} verified")),
        "{text}"
    );
    assert!(text.ends_with("\nintact\n"), "{text}");

    // A copy with one field of alice's record edited: that record is named, nothing else.
    let copy = log.with_extension("edited.jsonl");
    let original = std::fs::read_to_string(&log).unwrap();
    let edited: Vec<String> = original
        .lines()
        .enumerate()
        .map(|(i, l)| {
            if i as u64 + 1 == line {
                l.replacen("echo audited", "echo nothing", 1)
            } else {
                l.to_string()
            }
        })
        .collect();
    assert_ne!(
        edited.join("\n") + "\n",
        original,
        "the record names the command"
    );
    std::fs::write(&copy, edited.join("\n") + "\n").unwrap();
    let copy_name = copy.display().to_string();
    let failed = ozctl("bob", &["audit", "verify", &copy_name, &oz_namespace]).await;
    let text = String::from_utf8_lossy(&failed.stdout).into_owned();
    assert_eq!(failed.status.code(), Some(1), "{}", said(&failed));
    let problems: Vec<&str> = text.lines().filter(|l| l.starts_with(&copy_name)).collect();
    assert_eq!(
        problems.len(),
        1,
        "exactly the edited record is named:\n{text}"
    );
    assert!(
        problems[0].starts_with(&format!("{copy_name}:{line} (seq {seq}): edited: ")),
        "{text}"
    );

    // Every other way of tampering with the file is named at the line it happened, in a copy
    // each: a line deleted, two lines swapped, the last line cut mid-way, the last checkpoint
    // re-signed with a key of the forger's own.
    let lines: Vec<&str> = original.lines().collect();
    let last = lines.len() as u64;
    let (middle, second) = written
        .iter()
        .find(|(_, e)| alices_exec(e) && e["command"][2] == "echo second")
        .map(|(line, e)| (*line, e["seq"].as_u64().unwrap()))
        .unwrap();
    let at = (middle - 1) as usize;
    let mut deleted = lines.clone();
    deleted.remove(at);
    let mut swapped = lines.clone();
    swapped.swap(at, at + 1);
    let mut truncated = lines.join("\n");
    truncated.truncate(truncated.len() - lines[lines.len() - 1].len() / 2);
    let checkpoint = oz_audit::Entry::parse(lines[lines.len() - 1].as_bytes()).unwrap();
    let oz_audit::Body::Checkpoint { time, .. } = &checkpoint.body else {
        panic!(
            "the last line is the shutdown checkpoint: {}",
            lines[lines.len() - 1]
        );
    };
    let forger = oz_audit::Signer::generate().unwrap();
    let forged =
        oz_audit::Entry::checkpoint(checkpoint.seq, checkpoint.prev, time.clone(), &forger)
            .encode();
    let mut resigned = lines.clone();
    *resigned.last_mut().unwrap() = &forged;
    for (what, text, expected) in [
        (
            "deleted",
            deleted.join("\n") + "\n",
            format!("(seq {second}): removed"),
        ),
        (
            "swapped",
            swapped.join("\n") + "\n",
            format!(":{middle} (seq {}): reordered", second + 1),
        ),
        (
            "truncated",
            truncated,
            format!(":{last} (seq {}): partial", checkpoint.seq),
        ),
        (
            "resigned",
            resigned.join("\n") + "\n",
            format!(":{last} (seq {}): unknown key", checkpoint.seq),
        ),
    ] {
        let tampered = log.with_extension(format!("{what}.jsonl"));
        std::fs::write(&tampered, text).unwrap();
        let name = tampered.display().to_string();
        let failed = ozctl("bob", &["audit", "verify", &name, &oz_namespace]).await;
        let report = String::from_utf8_lossy(&failed.stdout).into_owned();
        let _ = std::fs::remove_file(&tampered);
        assert_eq!(failed.status.code(), Some(1), "{what}: {}", said(&failed));
        assert!(
            report
                .lines()
                .any(|l| l.starts_with(&name) && l[name.len()..].contains(&expected)),
            "{what}: a problem at {name}...{expected} in:\n{report}"
        );
    }

    // The access review: alice's exec, verified, from the file oz wrote.
    let review = ozctl(
        "bob",
        &["audit", &file, "--user", "alice", "-n", &ns, &oz_namespace],
    )
    .await;
    assert_eq!(review.status.code(), Some(0), "{}", said(&review));
    let table = String::from_utf8_lossy(&review.stdout).into_owned();
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| {
            l.split("   ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect()
        })
        .collect();
    assert_eq!(
        rows[0],
        [
            "TIME", "USER", "EVENT", "POD", "COMMAND", "GRANT", "CALLER", "VERIFIED"
        ]
    );
    let pod_cell = format!("{ns}/{pod}");
    let row = rows
        .iter()
        .find(|row| row.get(4) == Some(&"sh -c 'echo audited'"))
        .unwrap_or_else(|| panic!("alice's exec in:\n{table}"));
    assert_eq!(
        row[1..],
        [
            "alice",
            "exec",
            pod_cell.as_str(),
            "sh -c 'echo audited'",
            "exec/alice-web",
            "apiserver",
            "yes"
        ],
        "{table}"
    );
    assert!(
        rows[1..].iter().all(|row| row[1] == "alice"),
        "--user alice: {table}"
    );
    let nobody = ozctl("bob", &["audit", &file, "--user", "bob", &oz_namespace]).await;
    assert_eq!(nobody.status.code(), Some(0), "{}", said(&nobody));
    assert!(nobody.stdout.is_empty(), "{}", said(&nobody));
    assert!(
        String::from_utf8_lossy(&nobody.stderr).contains("No records match"),
        "{}",
        said(&nobody)
    );

    drop(operator);
    delete_webhook_configurations(&format!("oz-{ns}"));
    let _ = std::fs::remove_file(&log);
    let _ = std::fs::remove_file(&copy);
}
