//! Bad input: hostile and malformed objects (`fixtures/hostile/*.yaml`) created through the
//! real apiserver and oz's real webhooks, and malformed AdmissionReviews sent straight to the
//! admission handlers, in process and over TLS. Each gets a clear rejection or a safe outcome.
//!
//! A fixture starts with comment lines saying what it is and what must happen:
//!
//! ```yaml
//! # A duration of 2562048h, longer than Go's largest.     <- what it tries
//! # as: alice                    alice (devs), bob (qa) or admin; templates are always admin's
//! # expect: rejected             rejected | ready | pending | failed | expired | template-not-ready
//! # message: spec.duration       in the refusal, or in a condition of the outcome
//! # check: expires-after: 2h     more: requester: U, expires-after: D, expires-within: D,
//! #                              grant-pod-in: web, no-grant, no-pod, pod-spec: hostPID
//! ```
//!
//! then the objects, `---`-separated, created in order: a refusal of any is the outcome, else
//! the last one is the one judged. `$OTHER` (another
//! namespace), `$OTHERPOD` (a pod there), `$DBPOD` (a pod of another Deployment), `$BAREPOD` (a
//! pod with web's labels that nothing controls), `$ADOPTEDPOD` (one with web's labels that
//! another ReplicaSet controls) and `$PAD300K` (300 000 characters) are filled in.

use std::{collections::BTreeMap, path::PathBuf, sync::Arc, time::Duration};

use axum::body::Body;
use futures::future::join_all;
use k8s_openapi::api::{apps::v1::ReplicaSet, core::v1::Pod, rbac::v1::Role};
use kube::{
    Api, Client, ResourceExt,
    api::{DynamicObject, ListParams, ObjectMeta, PostParams},
};
use oz_api::duration::parse_go_duration;
use oz_audit::AuditLog;
use oz_testenv::{
    pods,
    workloads::{self, WorkloadSpec},
};
use oz_webhooks::admission::{
    self, AdmissionState, EnforceSettings, KubeLookup, requests::DeletePolicy,
};
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::support::{
    cluster::{env, install_crds},
    grant_audit::grant_problems,
    manifests::{create_manifest, parse_manifest},
    operator::WebhookOperator,
    polling::{SETTLE, eventually},
    rbac::let_groups_request,
    requests::exec_template,
};

const CORPUS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/integration/fixtures/hostile"
);

/// How many fixtures the corpus holds: a fixture lost (or added without counting it) fails.
const FIXTURES: usize = 62;

/// One file of the hostile corpus (`fixtures/hostile/`), parsed.
struct HostileFile {
    file: String,
    what: String,
    user: String,
    expect: String,
    message: Option<String>,
    checks: Vec<(String, String)>,
    documents: Vec<String>,
}

impl HostileFile {
    fn load(path: &std::path::Path, substitutions: &[(&str, String)]) -> HostileFile {
        let mut text = std::fs::read_to_string(path).unwrap();
        for (from, to) in substitutions {
            text = text.replace(from, to);
        }
        let mut fixture = HostileFile {
            file: path.file_name().unwrap().to_string_lossy().into_owned(),
            what: String::new(),
            user: "alice".into(),
            expect: String::new(),
            message: None,
            checks: Vec::new(),
            documents: Vec::new(),
        };
        let mut body = Vec::new();
        for line in text.lines() {
            match line.strip_prefix("# ") {
                Some(header) if body.is_empty() => match header.split_once(": ") {
                    Some(("as", user)) => fixture.user = user.into(),
                    Some(("expect", expect)) => fixture.expect = expect.into(),
                    Some(("message", message)) => fixture.message = Some(message.into()),
                    Some(("check", check)) => {
                        let (key, value) = check.split_once(": ").unwrap_or((check, ""));
                        fixture.checks.push((key.into(), value.into()));
                    }
                    _ => fixture.what.push_str(header),
                },
                _ => body.push(line),
            }
        }
        fixture.documents = body
            .join("\n")
            .split("\n---\n")
            .map(str::to_string)
            .collect();
        fixture
    }
}

/// The namespace the corpus runs in, and what its placeholders stand for.
struct Scene {
    ns: String,
    admin: Client,
    web_pods: Vec<String>,
    oz: WebhookOperator,
    substitutions: Vec<(&'static str, String)>,
}

async fn scene() -> Scene {
    install_crds().await;
    let admin = env().admin().await.unwrap();
    let ns = env().namespace("hostile").await.unwrap();
    let other = env().namespace("hostile-other").await.unwrap();
    let web = workloads::deployment(&admin, &ns, WorkloadSpec::new("web", 2))
        .await
        .unwrap();
    let db = workloads::deployment(&admin, &ns, WorkloadSpec::new("db", 1))
        .await
        .unwrap();
    let other_web = workloads::deployment(&admin, &other, WorkloadSpec::new("web", 1))
        .await
        .unwrap();
    create_manifest(&admin, &ns, &exec_template("web-exec", "web"))
        .await
        .unwrap();
    create_manifest(&admin, &other, &exec_template("elsewhere", "web"))
        .await
        .unwrap();
    // Two pods that match web's selector (app=web) but are not web's: one made by hand, and one
    // made by another ReplicaSet. Neither carries web's pod-template-hash, or web's own
    // ReplicaSet would adopt them, as it does in any cluster.
    let web_selector = BTreeMap::from([("app".to_string(), "web".to_string())]);
    let bare = ObjectMeta {
        labels: Some(web_selector.clone()),
        ..Default::default()
    };
    pods::create_ready_pod(&admin, &ns, "bare", &bare, None, pods::test_pod_spec())
        .await
        .unwrap();
    let impostor_labels = json!({"app": "web", "impostor": "true"});
    let impostor: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "impostor"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": impostor_labels},
            "template": {
                "metadata": {"labels": impostor_labels},
                "spec": serde_json::to_value(pods::test_pod_spec()).unwrap(),
            },
        },
    }))
    .unwrap();
    Api::<ReplicaSet>::namespaced(admin.clone(), &ns)
        .create(&PostParams::default(), &impostor)
        .await
        .unwrap();
    let adopted = eventually(Duration::from_secs(60), "the impostor's pod", || async {
        let pods = Api::<Pod>::namespaced(admin.clone(), &ns)
            .list(&ListParams::default().labels("impostor=true"))
            .await
            .ok()?;
        pods.items.first().map(|p| p.name_any())
    })
    .await;
    pods::wait_ready(&admin, &ns, &adopted).await.unwrap();
    let_groups_request(&admin, &ns, &["devs", "qa"]).await;
    let oz = WebhookOperator::start(&ns, &[]);
    oz.wait_until_admitting("alice", "web-exec").await;
    Scene {
        substitutions: vec![
            ("$OTHERPOD", other_web.pod_names()[0].clone()),
            ("$OTHER", other),
            ("$DBPOD", db.pod_names()[0].clone()),
            ("$BAREPOD", "bare".into()),
            ("$ADOPTEDPOD", adopted),
            ("$PAD300K", "x".repeat(300_000)),
        ],
        ns,
        admin,
        web_pods: web.pod_names(),
        oz,
    }
}

/// What happened to a fixture, for the table and the assertions.
#[derive(Debug)]
enum Outcome {
    Rejected(String),
    Created(Box<DynamicObject>),
}

async fn create(scene: &Scene, fixture: &HostileFile) -> Result<Outcome, String> {
    let user = if fixture.user == "admin" {
        scene.admin.clone()
    } else {
        env().client_as(&fixture.user).await.unwrap()
    };
    let last = fixture.documents.len() - 1;
    for (i, document) in fixture.documents.iter().enumerate() {
        let kind = parse_manifest(document).1.kind;
        let client = if kind.ends_with("Template") {
            &scene.admin
        } else {
            &user
        };
        // A refusal of any document is the outcome (a hostile template refuses its request).
        match create_manifest(client, &scene.ns, document).await {
            Ok(object) if i == last => return Ok(Outcome::Created(Box::new(object))),
            Ok(_) => {}
            Err(kube::Error::Api(status)) => return Ok(Outcome::Rejected(status.message)),
            Err(e) => return Err(format!("{}: document {i}: {e}", fixture.file)),
        }
    }
    Err(format!("{}: no documents", fixture.file))
}

fn api_of(scene: &Scene, object: &DynamicObject) -> Api<DynamicObject> {
    let (_, resource) = parse_manifest(&serde_json::to_string(object).unwrap());
    Api::namespaced_with(scene.admin.clone(), &scene.ns, &resource)
}

fn phase(object: &DynamicObject) -> Option<String> {
    object.data["status"]["phase"]
        .as_str()
        .map(str::to_lowercase)
}

fn condition_messages(object: &DynamicObject) -> Vec<String> {
    object.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["message"].as_str().map(str::to_string))
        .collect()
}

/// Polls `check` every 100 ms until it returns `Some`, or gives up after `timeout`.
async fn settle<T, F, Fut>(timeout: Duration, mut check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return Some(value);
        }
        if tokio::time::Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits for the outcome a created fixture expects, then checks it. Returns a line for the
/// summary table, or everything wrong with the outcome.
async fn judge(
    scene: &Scene,
    fixture: &HostileFile,
    object: DynamicObject,
) -> Result<String, String> {
    let api = api_of(scene, &object);
    let name = object.name_any();
    let expect = fixture.expect.as_str();
    let file = &fixture.file;
    let settled = settle(SETTLE, || {
        let (api, name) = (api.clone(), name.clone());
        async move {
            let object = api.get(&name).await.ok()?;
            let reached = match expect {
                "template-not-ready" => {
                    object.data["status"]["ready"] == json!(false)
                        && !condition_messages(&object).is_empty()
                }
                phase_wanted => phase(&object).as_deref() == Some(phase_wanted),
            };
            reached.then_some(object)
        }
    })
    .await;
    let Some(settled) = settled else {
        let now = api.get(&name).await.map(|o| o.data["status"].clone());
        return Err(format!(
            "{file}: {name} did not become {expect} within {SETTLE:?}; its status: {now:?} (log: {})",
            scene.oz.operator.log.display()
        ));
    };
    let mut wrong = Vec::new();
    let messages = condition_messages(&settled);
    if let Some(message) = &fixture.message
        && !messages.iter().any(|m| m.contains(message.as_str()))
    {
        wrong.push(format!(
            "{file}: no condition says {message:?}: {messages:?}"
        ));
    }
    let status = &settled.data["status"];
    let created = settled.metadata.creation_timestamp.clone().unwrap().0;
    let expires_after = || {
        let expires: Option<k8s_openapi::jiff::Timestamp> =
            status["expiresAt"].as_str().and_then(|t| t.parse().ok());
        expires.map(|e| e.duration_since(created).as_secs())
    };
    let seconds = |text: &str| parse_go_duration(text).ok().map(|d| d.num_seconds());
    let uid = settled.uid().unwrap();
    for (check, value) in &fixture.checks {
        match check.as_str() {
            "requester" => {
                let requester = &settled.data["spec"]["requester"]["username"];
                if *requester != json!(value) {
                    wrong.push(format!("{file}: requester {requester}, not {value}"));
                }
            }
            "expires-after" if expires_after() != seconds(value) => wrong.push(format!(
                "{file}: expires {:?} s after creation, not {value}",
                expires_after()
            )),
            "expires-within" if !matches!((expires_after(), seconds(value)), (Some(a), Some(b)) if a <= b) => {
                wrong.push(format!(
                    "{file}: expires {:?} s after creation, not within {value}",
                    expires_after()
                ))
            }
            "expires-after" | "expires-within" => {}
            "grant-pod-in" => {
                let pod = status["podName"].as_str().unwrap_or_default().to_string();
                if !scene.web_pods.contains(&pod) {
                    wrong.push(format!("{file}: granted {pod:?}, not a pod of web"));
                }
            }
            "no-grant" => {
                let roles: Api<Role> = Api::namespaced(scene.admin.clone(), &scene.ns);
                let owned = roles
                    .list(&ListParams::default())
                    .await
                    .unwrap()
                    .items
                    .into_iter()
                    .filter(|r| r.owner_references().iter().any(|o| o.uid == uid))
                    .count();
                if owned != 0 {
                    wrong.push(format!("{file}: {owned} Role(s) made"));
                }
            }
            "no-pod" | "pod-spec" => {
                let pods: Api<Pod> = Api::namespaced(scene.admin.clone(), &scene.ns);
                let owned: Vec<Pod> = pods
                    .list(&ListParams::default())
                    .await
                    .unwrap()
                    .items
                    .into_iter()
                    .filter(|p| p.owner_references().iter().any(|o| o.uid == uid))
                    .collect();
                if check == "no-pod" {
                    if !owned.is_empty() {
                        wrong.push(format!("{file}: an access pod was made"));
                    }
                } else {
                    let spec = owned
                        .first()
                        .map(|p| serde_json::to_value(p.spec.clone().unwrap()).unwrap());
                    match spec {
                        Some(spec) if spec[value.as_str()] == json!(true) => {}
                        other => wrong.push(format!("{file}: {value} not set in {other:?}")),
                    }
                }
            }
            other => wrong.push(format!("{file}: unknown check {other:?}")),
        }
    }
    if !wrong.is_empty() {
        return Err(wrong.join("\n"));
    }
    let said = messages
        .iter()
        .find(|m| {
            fixture
                .message
                .as_ref()
                .is_some_and(|want| m.contains(want.as_str()))
        })
        .cloned()
        .unwrap_or_default();
    Ok(format!("{expect}: {}", shorten(&said)))
}

fn shorten(text: &str) -> String {
    let one_line = text.replace('\n', " ");
    if one_line.chars().count() > 110 {
        format!("{}…", one_line.chars().take(110).collect::<String>())
    } else {
        one_line
    }
}

#[tokio::test]
async fn every_hostile_object_is_refused_or_made_harmless() {
    let scene = scene().await;
    let mut paths: Vec<PathBuf> = std::fs::read_dir(CORPUS)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    paths.sort();
    let fixtures: Vec<HostileFile> = paths
        .iter()
        .map(|p| HostileFile::load(p, &scene.substitutions))
        .collect();
    assert_eq!(
        fixtures.len(),
        FIXTURES,
        "{CORPUS} holds {} fixtures, not {FIXTURES}: one was lost, or added without counting it",
        fixtures.len()
    );

    // Create them all, then wait for every outcome together. Every failure is collected, so
    // that one does not hide the rest.
    let mut failures: Vec<String> = Vec::new();
    let mut created = Vec::new();
    let mut table: BTreeMap<String, String> = BTreeMap::new();
    for fixture in &fixtures {
        let file = &fixture.file;
        if fixture.expect.is_empty() {
            failures.push(format!("{file}: no `# expect:`"));
            continue;
        }
        let failure = match (create(&scene, fixture).await, fixture.expect.as_str()) {
            (Err(e), _) => e,
            (Ok(Outcome::Rejected(message)), "rejected") => match &fixture.message {
                Some(want) if !message.contains(want.as_str()) => {
                    format!("{file}: refused, but not saying {want:?}: {message}")
                }
                _ => {
                    table.insert(file.clone(), format!("rejected: {}", shorten(&message)));
                    continue;
                }
            },
            (Ok(Outcome::Rejected(message)), expect) => {
                format!("{file}: expected {expect}, but it was refused: {message}")
            }
            (Ok(Outcome::Created(object)), "rejected") => format!(
                "{file}: expected a refusal, but {} was created",
                object.name_any()
            ),
            (Ok(Outcome::Created(object)), _) => {
                created.push((fixture, object));
                continue;
            }
        };
        table.insert(file.clone(), format!("FAILED: {}", shorten(&failure)));
        failures.push(failure);
    }
    let judged = join_all(created.into_iter().map(|(fixture, object)| async {
        (fixture.file.clone(), judge(&scene, fixture, *object).await)
    }))
    .await;
    for (file, judged) in judged {
        match judged {
            Ok(line) => table.insert(file, line),
            Err(failure) => {
                failures.push(failure.clone());
                table.insert(file, format!("FAILED: {}", shorten(&failure)))
            }
        };
    }

    // Whatever happened, the grants in the namespace are exactly right.
    let problems = grant_problems(&scene.admin, &scene.ns).await;
    if !problems.is_empty() {
        failures.push(format!("the grants are wrong:\n{}", problems.join("\n")));
    }
    eprintln!("| fixture | what it tries | outcome |\n|---|---|---|");
    for fixture in &fixtures {
        eprintln!(
            "| {} | {} | {} |",
            fixture.file,
            fixture.what,
            table
                .get(&fixture.file)
                .map_or("FAILED", String::as_str)
                .replace('|', "\\|")
        );
    }
    scene.oz.remove_configurations().await;
    assert!(
        failures.is_empty(),
        "{} failures among the {FIXTURES} fixtures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

// === AdmissionReviews =========================================================================

/// What oz-manager logs for a body refused for its size (`BadReview::Body`).
fn limit_refusal() -> String {
    format!(
        "the AdmissionReview body could not be read within the {}-byte limit",
        admission::MAX_BODY_BYTES
    )
}

/// What a malformed review must get.
#[derive(Clone, Copy, Debug)]
enum Answer {
    /// HTTP 400, with this in the response's message.
    BadRequest(&'static str),
    /// HTTP 200, not allowed, with this in the message.
    Denied(&'static str),
    /// HTTP 200, allowed.
    Allowed,
    /// This HTTP status (a path or method the server does not serve).
    Status(u16),
}

/// A valid review of alice creating an ExecAccessRequest in `ns`.
fn review(ns: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "hostile-uid",
            "kind": {"group": "crds.wizardofoz.co", "version": "v1alpha1", "kind": "ExecAccessRequest"},
            "resource": {"group": "crds.wizardofoz.co", "version": "v1alpha1", "resource": "execaccessrequests"},
            "name": "req",
            "namespace": ns,
            "operation": "CREATE",
            "userInfo": {"username": "alice", "groups": ["devs", "system:authenticated"]},
            "object": {
                "apiVersion": "crds.wizardofoz.co/v1alpha1",
                "kind": "ExecAccessRequest",
                "metadata": {"name": "req", "namespace": ns},
                "spec": spec,
            },
            "dryRun": false,
        }
    })
}

/// The malformed reviews: (name, method, path, body, answer).
fn review_corpus(ns: &str) -> Vec<(String, &'static str, &'static str, Vec<u8>, Answer)> {
    const MUTATE: &str = "/mutate-requests";
    const VALIDATE: &str = "/validate-requests";
    const AUDIT: &str = "/audit";
    let valid = review(ns, json!({"templateName": "web-exec"})).to_string();
    let mut corpus: Vec<(String, &str, &str, Vec<u8>, Answer)> = Vec::new();
    let mut add = |name: &str, path: &'static str, body: Vec<u8>, answer: Answer| {
        corpus.push((name.to_string(), "POST", path, body, answer));
    };
    for path in [MUTATE, VALIDATE, AUDIT] {
        add(
            "empty body",
            path,
            Vec::new(),
            Answer::BadRequest("not a valid AdmissionReview"),
        );
        add(
            "null",
            path,
            b"null".to_vec(),
            Answer::BadRequest("not a valid AdmissionReview"),
        );
        for percent in [1, 25, 50, 75, 99] {
            let cut = valid.len() * percent / 100;
            add(
                &format!("truncated at {percent}%"),
                path,
                valid.as_bytes()[..cut].to_vec(),
                Answer::BadRequest("not a valid AdmissionReview"),
            );
        }
        add(
            "10 MB of garbage",
            path,
            vec![b'x'; 10 << 20],
            Answer::BadRequest("limit"),
        );
        let mut huge = review(ns, json!({"templateName": "web-exec"}));
        huge["request"]["object"]["metadata"]["annotations"] = json!({"pad": "x".repeat(10 << 20)});
        add(
            "10 MB review",
            path,
            huge.to_string().into_bytes(),
            Answer::BadRequest("limit"),
        );
        add(
            "nested 100 000 deep",
            path,
            "[".repeat(100_000).into_bytes(),
            Answer::BadRequest("not a valid AdmissionReview"),
        );
        add(
            "invalid UTF-8",
            path,
            [valid.as_bytes(), &[0xff, 0xfe, 0xfd]].concat(),
            Answer::BadRequest("not a valid AdmissionReview"),
        );
        let mut wrong_kind = review(ns, json!({"templateName": "web-exec"}));
        wrong_kind["kind"] = json!("ConversionReview");
        add(
            "a ConversionReview",
            path,
            wrong_kind.to_string().into_bytes(),
            Answer::BadRequest("unsupported review"),
        );
        let mut old = review(ns, json!({"templateName": "web-exec"}));
        old["apiVersion"] = json!("admission.k8s.io/v1beta1");
        add(
            "v1beta1",
            path,
            old.to_string().into_bytes(),
            Answer::BadRequest("only admission.k8s.io/v1"),
        );
        add(
            "no request",
            path,
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"})
                .to_string()
                .into_bytes(),
            Answer::BadRequest("no request"),
        );
        let mut operation = review(ns, json!({"templateName": "web-exec"}));
        operation["request"]["operation"] = json!("EXPLODE");
        add(
            "an unknown operation",
            path,
            operation.to_string().into_bytes(),
            Answer::BadRequest("not a valid AdmissionReview"),
        );
        let mut object = review(ns, json!({"templateName": "web-exec"}));
        object["request"]["object"] = json!("not an object");
        add(
            "an object that is a string",
            path,
            object.to_string().into_bytes(),
            Answer::BadRequest("not a valid AdmissionReview"),
        );
    }
    for path in [MUTATE, VALIDATE] {
        let mut secret = review(ns, json!({}));
        secret["request"]["kind"] = json!({"group": "", "version": "v1", "kind": "Secret"});
        add(
            "a Secret",
            path,
            secret.to_string().into_bytes(),
            Answer::Denied("only admit"),
        );
        let mut anonymous = review(ns, json!({"templateName": "web-exec"}));
        anonymous["request"]["userInfo"] = json!({"username": ""});
        add(
            "no user name",
            path,
            anonymous.to_string().into_bytes(),
            Answer::Denied("no authenticated user name"),
        );
    }
    add(
        "a template path traversal",
        VALIDATE,
        review(ns, json!({"templateName": "../../kube-system/execaccesstemplates/x", "requester": {"username": "alice", "groups": ["devs", "system:authenticated"]}})).to_string().into_bytes(),
        Answer::Denied("spec.templateName"),
    );
    add(
        "a duration that is a number",
        VALIDATE,
        review(ns, json!({"templateName": "web-exec", "duration": 3600, "requester": {"username": "alice", "groups": ["devs", "system:authenticated"]}})).to_string().into_bytes(),
        Answer::Denied("spec"),
    );
    add(
        "a forged requester",
        VALIDATE,
        review(ns, json!({"templateName": "web-exec", "requester": {"username": "admin", "groups": ["system:masters"]}})).to_string().into_bytes(),
        Answer::Denied("spec.requester: must be the user creating the request"),
    );
    add(
        "a valid review",
        MUTATE,
        valid.clone().into_bytes(),
        Answer::Allowed,
    );
    corpus.push((
        "an unknown path".into(),
        "POST",
        "/admin",
        valid.clone().into_bytes(),
        Answer::Status(404),
    ));
    corpus.push((
        "GET on a webhook".into(),
        "GET",
        MUTATE,
        Vec::new(),
        Answer::Status(405),
    ));
    corpus
}

/// Checks one answer: `status` and the response body.
fn check_answer(name: &str, path: &str, answer: Answer, status: u16, body: &[u8]) {
    let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let message = body["response"]["status"]["message"]
        .as_str()
        .unwrap_or_default();
    let allowed = body["response"]["allowed"].as_bool();
    let what = format!("{name} at {path}: {status} {body}");
    let what = shorten(&what);
    match answer {
        Answer::BadRequest(want) => {
            assert_eq!(status, 400, "{what}");
            assert_eq!(allowed, Some(false), "{what}");
            assert!(message.contains(want), "{what}");
        }
        Answer::Denied(want) => {
            assert_eq!(status, 200, "{what}");
            assert_eq!(allowed, Some(false), "{what}");
            assert_eq!(body["response"]["uid"], "hostile-uid", "{what}");
            assert!(message.contains(want), "{what}");
        }
        Answer::Allowed => {
            assert_eq!(status, 200, "{what}");
            assert_eq!(allowed, Some(true), "{what}");
        }
        Answer::Status(code) => assert_eq!(status, code, "{what}"),
    }
}

#[tokio::test]
async fn malformed_admission_reviews_get_a_reason_in_process_and_over_tls() {
    install_crds().await;
    let admin = env().admin().await.unwrap();
    let ns = env().namespace("hostile-reviews").await.unwrap();
    create_manifest(&admin, &ns, &exec_template("web-exec", "web"))
        .await
        .unwrap();
    let corpus = review_corpus(&ns);

    // 1. In process, with the real lookup against the cluster.
    let router = admission::router(Arc::new(AdmissionState {
        places: Default::default(),
        locks: Default::default(),
        lookup: Arc::new(KubeLookup::new(admin.clone())),
        audit_log: AuditLog::log_only(),
        events: None,
        enforce: EnforceSettings::default(),
        deletes: DeletePolicy::new(["system:masters".to_string()], "oz-system"),
        unverified_reads: admission::approvals::UnverifiedReads::default(),
        fleet_hub_user: None,
        fleet_names: Default::default(),
    }));
    for (name, method, path, body, answer) in &corpus {
        let request = http::Request::builder()
            .method(*method)
            .uri(*path)
            .header("content-type", "application/json")
            .body(Body::from(body.clone()))
            .unwrap();
        let response = router.clone().oneshot(request).await.unwrap();
        let status = response.status().as_u16();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        check_answer(name, path, *answer, status, &bytes);
    }
    // A body whose transfer breaks off half way.
    let broken = futures::stream::iter(vec![
        Ok::<_, std::io::Error>(axum::body::Bytes::from_static(
            b"{\"apiVersion\": \"admission.k8s.io/v1\", ",
        )),
        Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "the client went away",
        )),
    ]);
    let response = router
        .clone()
        .oneshot(
            http::Request::post("/validate-requests")
                .body(Body::from_stream(broken))
                .unwrap(),
        )
        .await
        .unwrap();
    let status = response.status().as_u16();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    check_answer(
        "a broken transfer",
        "/validate-requests",
        Answer::BadRequest("could not be read"),
        status,
        &bytes,
    );

    // 2. Over TLS, to a real oz-manager, trusting the CA it stored.
    let_groups_request(&admin, &ns, &["devs"]).await;
    let mut oz = WebhookOperator::start(&ns, &[]);
    oz.wait_until_admitting("alice", "web-exec").await;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(admin.clone(), &ns);
    let ca = secrets.get("oz-webhook-ca").await.unwrap().data.unwrap()["ca.crt"]
        .0
        .clone();
    let mut config = kube::Config::new(format!("https://127.0.0.1:{}", oz.port).parse().unwrap());
    config.root_cert =
        Some(oz_platform::certs::certificates_der(&String::from_utf8(ca).unwrap()).unwrap());
    config.default_retry = false;
    config.read_timeout = Some(Duration::from_secs(30));
    let client = Client::try_from(config).unwrap();
    // How many bodies oz-manager has refused for their size, by its log.
    let limit_refusals = || {
        std::fs::read_to_string(&oz.operator.log)
            .unwrap_or_default()
            .matches(&limit_refusal())
            .count()
    };
    let (mut answered, mut cut_off) = (0, 0);
    for (name, method, path, body, answer) in &corpus {
        let request = http::Request::builder()
            .method(*method)
            .uri(*path)
            .header("content-type", "application/json")
            .body(kube::client::Body::from(body.clone()))
            .unwrap();
        let refusals_before = limit_refusals();
        let response = match client.send(request).await {
            Ok(response) => response,
            // The server answers an oversized body as soon as it passes the limit and stops
            // reading, so a client still uploading may see the connection close before the
            // answer. That counts only if oz refused the body for its size: its log says so.
            Err(e) if matches!(answer, Answer::BadRequest("limit")) => {
                let refused = settle(Duration::from_secs(30), || async {
                    (limit_refusals() > refusals_before).then_some(())
                })
                .await;
                assert!(
                    refused.is_some(),
                    "{name} at {path}: the connection failed ({e}), and oz logged no refusal \
                     saying {:?} (log: {})",
                    limit_refusal(),
                    oz.operator.log.display()
                );
                eprintln!("{name} at {path}: cut off by the server ({e}), which logged why");
                cut_off += 1;
                continue;
            }
            Err(e) => panic!("{name} at {path}: {e}"),
        };
        if matches!(answer, Answer::BadRequest("limit")) {
            answered += 1;
            // The body's unread rest is still on the connection: the answer must say it
            // closes, or the client's pool sends the next review on it, to fail there.
            assert_eq!(
                response
                    .headers()
                    .get("connection")
                    .and_then(|v| v.to_str().ok()),
                Some("close"),
                "{name} at {path}"
            );
        }
        let status = response.status().as_u16();
        let bytes = response.into_body().collect_bytes().await.unwrap();
        check_answer(name, path, *answer, status, &bytes);
    }
    // Still serving, and still admitting, after all of it.
    assert!(oz.operator.is_running());
    let healthz = client
        .send(
            http::Request::get("/healthz")
                .body(kube::client::Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(healthz.status().as_u16(), 200);
    oz.wait_until_admitting("alice", "web-exec").await;
    eprintln!(
        "{} malformed reviews, in process and over TLS; over TLS, {answered} over the limit \
         answered, {cut_off} cut off",
        corpus.len() + 1
    );
    oz.remove_configurations().await;
}
