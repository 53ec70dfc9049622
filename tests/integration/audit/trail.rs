//! The tamper-evident audit file, written by a real oz-manager for execs the real
//! apiserver sends through oz's audit webhook, and checked with `oz_audit::verify` against the
//! public key oz published in the ConfigMap `oz-audit`: across restarts and rotations, after
//! a SIGKILL under load, and while the file cannot be written.
//!
//! Each test has a namespace of its own with one pod (kwok runs `kubectl exec` for real), an
//! oz-manager running only its webhooks for that namespace, and a directory for the file.

use std::{
    path::{Path, PathBuf},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::{
    core::v1::{ConfigMap, Secret},
    events::v1::Event,
};
use kube::{Api, Client};
use oz_audit::{Body, Entry, ProblemKind, PublicKey, Report, Signer};
use oz_testenv::{
    exec::{self, RUN_TIMEOUT},
    workloads::{self, WorkloadSpec},
};
use serde_json::Value;

use crate::support::{
    cluster::{env, install_crds, kubectl_quietly},
    operator::{Operator, delete_webhook_configurations, http_get, metric_value},
    polling::eventually,
};

/// How long oz, the apiserver and kwok may take to get somewhere on a busy 2-core machine.
const WAIT: Duration = Duration::from_secs(60);

/// A namespace with one pod, and an oz-manager auditing execs into it to a file.
struct Trail {
    ns: String,
    admin: Client,
    pod: String,
    dir: PathBuf,
    path: PathBuf,
    metrics: u16,
    operator: Operator,
}

impl Trail {
    /// oz's webhooks (no controllers) for a new namespace, auditing to `<dir>/audit.jsonl`,
    /// with `extra` flags.
    async fn start(prefix: &str, extra: &[&str]) -> Trail {
        install_crds().await;
        let ns = env().namespace(prefix).await.unwrap();
        let admin = env().admin().await.unwrap();
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("audit-trail-{ns}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("audit.jsonl");
        let audit = format!("--audit-log-path={}", path.display());
        let operator = Operator::builder(&ns)
            .webhooks(&format!("oz-{ns}"))
            .metrics()
            .args(&["--controllers=webhooks", &audit, "--log-format=json"])
            .args(extra)
            .start();
        let metrics = operator.metrics_port();
        let web = workloads::deployment(&admin, &ns, WorkloadSpec::new("web", 1))
            .await
            .unwrap();
        let pod = web.pod_names()[0].clone();
        Trail {
            ns,
            admin,
            pod,
            dir,
            path,
            metrics,
            operator,
        }
    }

    /// Runs `echo <marker>` in the pod with the admin's kubectl until the audit file has its
    /// record (the audit webhook is registered a moment after oz starts), and returns the
    /// record's seq.
    async fn exec(&self, marker: &str) -> u64 {
        eventually(
            WAIT,
            &format!("the exec {marker:?} to be audited"),
            || async {
                let mut kubectl = env().kubectl(None).unwrap();
                kubectl.args([
                    "--namespace",
                    &self.ns,
                    "exec",
                    &self.pod,
                    "--",
                    "echo",
                    marker,
                ]);
                let output = exec::run(kubectl, RUN_TIMEOUT).await.unwrap();
                assert_eq!(output.stdout, format!("{marker}\n"), "{output}");
                self.record_seq(marker)
            },
        )
        .await
    }

    /// The seq of the record (in any of the files) whose command ends in `marker`.
    fn record_seq(&self, marker: &str) -> Option<u64> {
        self.files().iter().find_map(|file| {
            std::fs::read_to_string(file)
                .ok()?
                .lines()
                .filter_map(|line| serde_json::from_str::<Value>(line).ok())
                .find(|entry| {
                    entry["type"] == "record"
                        && entry["command"].as_array().and_then(|c| c.last())
                            == Some(&Value::from(marker))
                })
                .and_then(|entry| entry["seq"].as_u64())
        })
    }

    /// The audit file and its rotated files, in no particular order (verify orders them).
    fn files(&self) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        entries
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| {
                p.is_file()
                    && p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("audit.jsonl"))
            })
            .collect()
    }

    /// The public key oz published, read as a security team would: from the ConfigMap
    /// `oz-audit`, the key its `current` names.
    async fn published_key(&self) -> PublicKey {
        let configmaps: Api<ConfigMap> = Api::namespaced(self.admin.clone(), &self.ns);
        let configmap = eventually(WAIT, "the ConfigMap oz-audit", || async {
            configmaps.get_opt("oz-audit").await.ok().flatten()
        })
        .await;
        let data = configmap.data.unwrap();
        let current = &data["current"];
        PublicKey::from_spki_pem(&data[&format!("{current}.pub")]).unwrap()
    }

    async fn verify(&self) -> Report {
        let key = self.published_key().await;
        oz_audit::verify(&self.files(), &[key]).unwrap()
    }

    /// SIGTERM, and waits until oz has exited (its shutdown checkpoint written).
    async fn stop(&mut self) {
        self.operator.terminate();
        let deadline = std::time::Instant::now() + WAIT;
        while !self.operator.exited() {
            assert!(
                std::time::Instant::now() < deadline,
                "oz did not exit within {WAIT:?} of SIGTERM (log: {})",
                self.operator.log.display()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The lines of the current audit file.
    fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.path)
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect()
    }

    async fn metric(&self, sample: &str) -> Option<f64> {
        metric_value(
            &http_get(&format!("http://127.0.0.1:{}/metrics", self.metrics)).await,
            sample,
        )
    }
}

impl Drop for Trail {
    /// Stops oz, removes its webhook configurations, and deletes the namespace (blocking
    /// kubectl calls: no runtime is needed, even while a failed test unwinds).
    fn drop(&mut self) {
        self.operator.kill();
        delete_webhook_configurations(&format!("oz-{}", self.ns));
        kubectl_quietly(&["delete", "namespace", &self.ns, "--wait=false"]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn entry(line: &str) -> Entry {
    Entry::parse(line.as_bytes()).unwrap_or_else(|e| panic!("{e}: {line}"))
}

#[tokio::test]
async fn records_of_real_execs_verify_across_a_restart_and_a_rotation_with_the_published_key() {
    // Records of about 600 bytes: a rotation every few of them.
    let mut t = Trail::start(
        "audit-chain",
        &[
            "--audit-log-max-size=2Ki",
            "--audit-log-max-files=0",
            "--audit-checkpoint-interval=1h",
        ],
    )
    .await;
    let key = t.published_key().await;

    // The key Secret and the ConfigMap hold the two halves of one key, labelled as oz's.
    let secrets: Api<Secret> = Api::namespaced(t.admin.clone(), &t.ns);
    let secret = secrets.get("oz-audit-signing-key").await.unwrap();
    let pem = String::from_utf8(secret.data.unwrap()["ed25519.key"].0.clone()).unwrap();
    assert_eq!(Signer::from_pkcs8_pem(&pem).unwrap().public_key(), key);
    let configmaps: Api<ConfigMap> = Api::namespaced(t.admin.clone(), &t.ns);
    let configmap = configmaps.get("oz-audit").await.unwrap();
    assert_eq!(configmap.data.unwrap()["current"], key.key_id().to_string());
    for labels in [secret.metadata.labels, configmap.metadata.labels] {
        assert_eq!(
            labels.unwrap()["app.kubernetes.io/managed-by"],
            "oz-webhooks"
        );
    }

    let mut seqs = Vec::new();
    for n in 1..=3 {
        seqs.push(t.exec(&format!("before-restart-{n}")).await);
    }
    t.stop().await;
    let last = t.lines().pop().unwrap();
    assert!(
        matches!(entry(&last).body, Body::Checkpoint { .. }),
        "the shutdown checkpoint is the last line: {last}"
    );

    t.operator.restart();
    for n in 1..=4 {
        seqs.push(t.exec(&format!("after-restart-{n}")).await);
    }
    t.stop().await;

    let report = t.verify().await;
    assert!(report.is_intact(false), "{report}");
    assert!(report.files.len() >= 2, "rotated at 2Ki: {report}");
    assert_eq!(report.first_seq, Some(1), "{report}");
    assert_eq!(report.verified_records, report.records, "{report}");
    assert!(report.records >= 7, "{report}");
    assert!(seqs.is_sorted(), "{seqs:?}");
    assert_eq!(report.keys, [key.key_id().to_string()]);

    // Every rotated file ends with a checkpoint, and the next file's first entry chains to it.
    let (_, records) = oz_audit::verify_records(&t.files(), &[key]).unwrap();
    let markers: Vec<String> = records
        .iter()
        .filter_map(|r| {
            r.record["command"]
                .as_array()?
                .last()?
                .as_str()
                .map(String::from)
        })
        .filter(|m| m.contains("restart-"))
        .collect();
    let mut expected: Vec<String> = (1..=3).map(|n| format!("before-restart-{n}")).collect();
    expected.extend((1..=4).map(|n| format!("after-restart-{n}")));
    // An exec retried before the webhook was registered may be recorded once per attempt.
    let mut distinct = markers.clone();
    distinct.dedup();
    assert_eq!(distinct, expected, "{markers:?}");
}

/// Sends CONNECT pods/exec requests to the apiserver from `workers` tasks until stopped: each
/// goes through admission (oz's audit webhook) and is then refused for want of an upgrade,
/// so the load costs no processes. Returns how many were sent.
fn exec_load(
    client: Client,
    ns: &str,
    pod: &str,
    workers: usize,
) -> (Arc<AtomicBool>, Arc<AtomicU64>) {
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let uri =
        format!("/api/v1/namespaces/{ns}/pods/{pod}/exec?command=echo&command=load&stdout=true");
    for _ in 0..workers {
        let (client, stop, sent, uri) = (client.clone(), stop.clone(), sent.clone(), uri.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let request = http::Request::post(&uri).body(Vec::new()).unwrap();
                let _ = client.request_text(request).await;
                sent.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
    (stop, sent)
}

/// The number of complete lines of `path`.
fn complete_lines(path: &Path) -> usize {
    std::fs::read(path)
        .map(|b| b.iter().filter(|c| **c == b'\n').count())
        .unwrap_or(0)
}

#[tokio::test]
async fn a_sigkill_under_load_leaves_a_chain_that_verifies_and_a_restart_acknowledges_its_partial_line()
 {
    let mut t = Trail::start("audit-kill", &["--audit-checkpoint-interval=1s"]).await;
    t.exec("warm-up").await;
    let (stop, sent) = exec_load(t.admin.clone(), &t.ns, &t.pod, 8);
    let started = std::time::Instant::now();
    eventually(WAIT, "300 records under load", || async {
        (complete_lines(&t.path) >= 300).then_some(())
    })
    .await;
    // SIGKILL while the load goes on: no shutdown code runs.
    t.operator.kill();
    let elapsed = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let lines_at_kill = complete_lines(&t.path);
    eprintln!(
        "load: {} exec requests in {elapsed:?}, {lines_at_kill} lines in the audit file",
        sent.load(Ordering::Relaxed)
    );

    // The chain verifies up to the last complete entry; after it, at most one partial line.
    let report = t.verify().await;
    let others: Vec<_> = report
        .problems
        .iter()
        .filter(|p| !matches!(p.kind, ProblemKind::UnsignedTail | ProblemKind::Partial))
        .collect();
    assert!(others.is_empty(), "{report}");
    let partials: Vec<_> = report
        .problems
        .iter()
        .filter(|p| p.kind == ProblemKind::Partial)
        .collect();
    assert!(partials.len() <= 1, "{report}");
    let text = std::fs::read(&t.path).unwrap();
    let complete = text.last() == Some(&b'\n');
    if complete {
        // The kill did not tear a write (one write() a line: it rarely does). Tear one as it
        // would have: the first half of a line, no `\n`.
        eprintln!("the kill left no partial line; appending one");
        let last = t.lines().pop().unwrap();
        let mut torn = text.clone();
        torn.extend_from_slice(&last.as_bytes()[..last.len() / 2]);
        std::fs::write(&t.path, torn).unwrap();
    } else {
        eprintln!("the kill left a partial line");
    }
    let partial_line = complete_lines(&t.path) as u64 + 1;
    let report = t.verify().await;
    let partials: Vec<_> = report
        .problems
        .iter()
        .filter(|p| p.kind == ProblemKind::Partial)
        .collect();
    assert_eq!(partials.len(), 1, "{report}");
    assert_eq!(partials[0].line, partial_line, "{report}");
    assert!(!report.is_intact(true));

    // A restart closes the partial line and acknowledges it; the whole log verifies.
    t.operator.restart();
    let seq = t.exec("after-the-kill").await;
    t.stop().await;
    let lines = t.lines();
    let recovered = entry(&lines[partial_line as usize]);
    assert!(
        matches!(&recovered.body, Body::Recovered { partial_line: l, .. } if *l == partial_line),
        "{}",
        lines[partial_line as usize]
    );
    let report = t.verify().await;
    assert!(report.is_intact(false), "{report}");
    assert_eq!(report.recovered, 1, "{report}");
    assert!(report.last_seq.unwrap() > seq, "{report}");
}

#[tokio::test]
async fn a_record_the_file_cannot_take_is_in_the_log_counted_and_raises_an_event() {
    let mut t = Trail::start("audit-unwritable", &[]).await;
    t.exec("written").await;
    // The file is moved away and a directory put in its place.
    let moved = t.dir.join("moved.jsonl");
    std::fs::rename(&t.path, &moved).unwrap();
    std::fs::create_dir(&t.path).unwrap();

    // The next exec still works, and its record is in oz's JSON log, marked unwritten.
    let mut kubectl = env().kubectl(None).unwrap();
    kubectl.args([
        "--namespace",
        &t.ns,
        "exec",
        &t.pod,
        "--",
        "echo",
        "unwritten",
    ]);
    let output = exec::run(kubectl, RUN_TIMEOUT).await.unwrap();
    assert_eq!(output.stdout, "unwritten\n", "{output}");
    let logged = eventually(WAIT, "the unwritten record in oz's log", || async {
        t.operator.log_text().lines().find_map(|line| {
            let line: Value = serde_json::from_str(line).ok()?;
            let fields = &line["fields"];
            let record: Value = serde_json::from_str(fields["record"].as_str()?).ok()?;
            (line["target"] == "oz::audit"
                && fields["unwritten"] == true
                && record["command"][1] == "unwritten")
                .then_some(record)
        })
    })
    .await;
    assert_eq!(logged["pod"], t.pod.as_str());
    let counted = t
        .metric("oz_audit_records_unwritten_total")
        .await
        .unwrap_or(0.0);
    assert!(counted >= 1.0, "{counted}");

    // A Warning Event on the ConfigMap that holds the keys says so.
    let events: Api<Event> = Api::namespaced(t.admin.clone(), &t.ns);
    let event = eventually(WAIT, "the AuditFileUnwritable Event", || async {
        events
            .list(&Default::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| {
                e.reason.as_deref() == Some("AuditFileUnwritable")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("oz-audit")
            })
    })
    .await;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.regarding.unwrap().kind.as_deref(), Some("ConfigMap"));

    // Once the path is usable again, the chain goes on in a new file.
    std::fs::remove_dir(&t.path).unwrap();
    t.exec("written-again").await;
    t.stop().await;
    let key = t.published_key().await;
    let report = oz_audit::verify(&[moved, t.path.clone()], &[key]).unwrap();
    assert!(report.is_intact(false), "{report}");
}
