//! Only the apiserver writes audit records: with `--webhook-client-ca-file` naming
//! the CA of the client certificate the test apiserver presents to webhooks (hack/testenv's
//! `--webhook-client-cert`), oz answers the apiserver's real calls and refuses, counts and
//! records nowhere a forged AdmissionReview posted straight to its port, with no certificate or
//! one from another CA. Without the flag every record says `"caller": "unverified"`.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use k8s_openapi::api::{core::v1::Secret, events::v1::Event};
use kube::{Api, Client, api::ListParams};
use oz_api::ExecAccessRequest;
use oz_testenv::workloads::{self, WorkloadSpec};
use serde_json::{Value, json};

use crate::support::{
    cluster::{env, install_crds},
    operator::{Operator, WebhookOperator, http_get, metric_value},
    polling::eventually,
    rbac::{grant, let_groups_request, rule, subject},
    users::exec,
};

/// How long oz, the apiserver and kwok may take to get somewhere on a busy 2-core machine.
const WAIT: Duration = Duration::from_secs(90);

/// What the test apiserver's webhook client certificate says it is.
const APISERVER_CN: &str = "kube-apiserver-webhook-client";

/// A namespace with oz-manager's controllers and webhooks, auditing to a file of its own, its
/// metrics on a port of their own, and `extra` flags.
struct Audited {
    ns: String,
    admin: Client,
    oz: WebhookOperator,
    audit_log: PathBuf,
    metrics: u16,
}

impl Audited {
    async fn start(prefix: &str, extra: &[&str]) -> Audited {
        install_crds().await;
        let ns = env().namespace(prefix).await.unwrap();
        let admin = env().admin().await.unwrap();
        let audit_log =
            Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("callers-audit-{ns}.jsonl"));
        let _ = std::fs::remove_file(&audit_log);
        let audit = format!("--audit-log-path={}", audit_log.display());
        let oz = WebhookOperator::start_from(
            Operator::builder(&ns).metrics().args(&[&audit]).args(extra),
        );
        let metrics = oz.operator.metrics_port();
        Audited {
            ns,
            admin,
            oz,
            audit_log,
            metrics,
        }
    }

    /// Starts it verifying callers against the test apiserver's webhook client CA.
    async fn verifying(prefix: &str, extra: &[&str]) -> Audited {
        let ca = format!(
            "--webhook-client-ca-file={}",
            env().webhook_client_ca().unwrap().display()
        );
        let mut args = vec![ca.as_str()];
        args.extend(extra);
        Self::start(prefix, &args).await
    }

    /// The records in the audit file so far (a line still being written is not one yet).
    fn records(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.audit_log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|entry| entry.get("event").is_some())
            .collect()
    }

    /// `oz_webhook_refused_callers_total{reason}` now (0 before the first refusal).
    async fn refused(&self, reason: &str) -> f64 {
        let text = http_get(&format!("http://127.0.0.1:{}/metrics", self.metrics)).await;
        let sample = format!("oz_webhook_refused_callers_total{{reason=\"{reason}\"}}");
        metric_value(&text, &sample).unwrap_or(0.0)
    }

    /// The audit Events published in the namespace.
    async fn event_notes(&self) -> Vec<String> {
        Api::<Event>::namespaced(self.admin.clone(), &self.ns)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|e| e.note)
            .collect()
    }

    /// A client of oz's webhook port, trusting the CA oz stored, presenting `identity`
    /// (certificate and key files) if given.
    async fn webhook_client(&self, identity: Option<(&Path, &Path)>) -> Client {
        let secrets: Api<Secret> = Api::namespaced(self.admin.clone(), &self.ns);
        let ca = eventually(WAIT, "oz's webhook CA Secret", || async {
            let secret = secrets.get_opt("oz-webhook-ca").await.ok()??;
            Some(secret.data?.get("ca.crt")?.0.clone())
        })
        .await;
        let url = format!("https://127.0.0.1:{}", self.oz.port)
            .parse()
            .unwrap();
        let mut config = kube::Config::new(url);
        config.root_cert =
            Some(oz_platform::certs::certificates_der(&String::from_utf8(ca).unwrap()).unwrap());
        config.default_retry = false;
        config.read_timeout = Some(Duration::from_secs(30));
        if let Some((cert, key)) = identity {
            config.auth_info.client_certificate = Some(cert.display().to_string());
            config.auth_info.client_key = Some(key.display().to_string());
        }
        Client::try_from(config).unwrap()
    }
}

/// POSTs `review` to oz's audit path with `client`: the HTTP status and body, or why the
/// connection failed.
async fn post_review(client: &Client, review: &Value) -> Result<(u16, String), String> {
    post_review_to(client, "/audit", review).await
}

/// [`post_review`] to `path`.
async fn post_review_to(
    client: &Client,
    path: &str,
    review: &Value,
) -> Result<(u16, String), String> {
    let request = http::Request::post(path)
        .header("content-type", "application/json")
        .body(kube::client::Body::from(review.to_string().into_bytes()))
        .unwrap();
    let response = client.send(request).await.map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let body = response.into_body().collect_bytes().await.unwrap();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

/// A well-formed AdmissionReview of "bob exec'd into `pod`", in container `container` (which
/// tells the reviews of one test apart).
fn bob_execs(ns: &str, pod: &str, container: &str, uid: &str) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "PodExecOptions"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": "exec",
            "requestKind": {"group": "", "version": "v1", "kind": "PodExecOptions"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "requestSubResource": "exec",
            "name": pod,
            "namespace": ns,
            "operation": "CONNECT",
            "userInfo": {"username": "bob", "groups": ["qa", "system:authenticated"]},
            "object": {
                "apiVersion": "v1", "kind": "PodExecOptions", "container": container,
                "command": ["cat", "/etc/secrets/payments"], "stdout": true,
            },
            "oldObject": null,
            "dryRun": false,
            "options": null,
        }
    })
}

/// A client certificate and key for CN `kube-apiserver-webhook-client` from a CA that is not
/// the apiserver's, written under the test's temp dir.
fn certificate_from_another_ca(ns: &str) -> (PathBuf, PathBuf) {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
        KeyPair, KeyUsagePurpose,
    };
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "oz-testenv-webhook-client-ca");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let mut leaf = CertificateParams::new(Vec::<String>::new()).unwrap();
    leaf.distinguished_name
        .push(DnType::CommonName, APISERVER_CN);
    leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let cert = leaf.signed_by(&key, &issuer).unwrap();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let (cert_path, key_path) = (
        dir.join(format!("callers-{ns}-other-ca.crt")),
        dir.join(format!("callers-{ns}-other-ca.key")),
    );
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    (cert_path, key_path)
}

/// Lets alice exec into the pods of `ns` by RBAC alone: the audit webhook records every exec,
/// granted by oz or not.
async fn let_alice_exec(admin: &Client, ns: &str) {
    let rules = vec![
        rule(&[""], &["pods"], &["get", "list"]),
        rule(&[""], &["pods/exec"], &["create", "get"]),
    ];
    grant(
        admin,
        ns,
        "alice-exec",
        rules,
        vec![subject("User", "alice")],
    )
    .await;
}

/// alice's real `kubectl exec` into a pod of `ns`, through the apiserver and its audit
/// webhook, repeated until oz has recorded one (its webhook is registered a moment after it
/// starts): that record.
async fn alices_recorded_exec(a: &Audited) -> Value {
    let web = workloads::deployment(&a.admin, &a.ns, WorkloadSpec::new("web", 1))
        .await
        .unwrap();
    let pod = web.pod_names().remove(0);
    let_alice_exec(&a.admin, &a.ns).await;
    eventually(
        WAIT,
        &format!(
            "alice's exec to be audited (log: {})",
            a.oz.operator.log.display()
        ),
        || async {
            let output = exec("alice", &a.ns, &pod, &["echo", "audited"]).await;
            assert!(output.success(), "{output:?}");
            a.records().into_iter().find(|r| r["user"] == "alice")
        },
    )
    .await
}

#[tokio::test]
async fn the_apiservers_real_exec_is_recorded_as_the_apiservers() {
    let a = Audited::verifying("callers-real", &[]).await;
    let record = alices_recorded_exec(&a).await;
    assert_eq!(record["event"], "PodExec", "{record}");
    assert_eq!(record["caller"], "apiserver", "{record}");
    assert_eq!(record["callerName"], APISERVER_CN, "{record}");
    assert_eq!(a.refused("no_certificate").await, 0.0);
    assert_eq!(a.refused("untrusted_certificate").await, 0.0);
    a.oz.remove_configurations().await;
}

#[tokio::test]
async fn a_forged_exec_is_refused_and_recorded_nowhere_unless_the_apiserver_sends_it() {
    let a = Audited::verifying("callers-refused", &[]).await;
    // A real pod, so that a forged record would also become an Event on it.
    workloads::stateful_set(&a.admin, &a.ns, WorkloadSpec::new("payments", 1))
        .await
        .unwrap();
    oz_up(&a).await;

    // Without a client certificate: the handshake completes, the call is refused.
    let anonymous = a.webhook_client(None).await;
    let forged = bob_execs(&a.ns, "payments-0", "forged-no-certificate", "forged-1");
    let (status, body) = post_review(&anonymous, &forged)
        .await
        .expect("a caller without a certificate completes the handshake");
    assert!(status == 401 || status == 403, "{status} {body}");
    assert_eq!(a.refused("no_certificate").await, 1.0);

    // With a certificate from another CA, even one naming the apiserver: no handshake.
    let (cert, key) = certificate_from_another_ca(&a.ns);
    let impostor = a.webhook_client(Some((&cert, &key))).await;
    let forged = bob_execs(&a.ns, "payments-0", "forged-other-ca", "forged-2");
    let outcome = post_review(&impostor, &forged).await;
    assert!(outcome.is_err(), "{outcome:?}");
    assert_eq!(a.refused("untrusted_certificate").await, 1.0);

    // The same review with the apiserver's own certificate is answered and recorded, so the
    // two above were refused for their caller, not their content. Its record and Event come
    // after theirs would have: once they are there, theirs would be too.
    let apiserver = a
        .webhook_client(Some((
            env().webhook_client_cert().unwrap(),
            env().webhook_client_key().unwrap(),
        )))
        .await;
    let sent = bob_execs(&a.ns, "payments-0", "as-apiserver", "apiserver-1");
    let (status, body) = post_review(&apiserver, &sent).await.unwrap();
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
    let record = eventually(WAIT, "the apiserver's review to be recorded", || async {
        a.records()
            .into_iter()
            .find(|r| r["container"] == "as-apiserver")
    })
    .await;
    assert_eq!(record["caller"], "apiserver", "{record}");
    assert_eq!(record["user"], "bob", "{record}");
    eventually(WAIT, "the apiserver's review's Event", || async {
        let notes = a.event_notes().await;
        notes
            .iter()
            .any(|n| n.contains("container: as-apiserver"))
            .then_some(())
    })
    .await;

    let records = a.records();
    assert_eq!(records.len(), 1, "only the apiserver's review: {records:?}");
    let forged = ["forged-no-certificate", "forged-other-ca"];
    let forged_events: Vec<String> = (a.event_notes().await.into_iter())
        .filter(|n| forged.iter().any(|f| n.contains(f)))
        .collect();
    assert!(forged_events.is_empty(), "{forged_events:?}");
    let log = a.oz.operator.log_text();
    assert!(
        !forged.iter().any(|f| log.contains(f)),
        "a forged review reached oz's log: {}",
        a.oz.operator.log.display()
    );
    assert_eq!(a.refused("no_certificate").await, 1.0);
    assert_eq!(a.refused("untrusted_certificate").await, 1.0);
    a.oz.remove_configurations().await;
}

/// Waits until oz serves its webhooks: the Secret with its CA exists and a call with the
/// apiserver's certificate is answered.
async fn oz_up(a: &Audited) {
    let apiserver = a
        .webhook_client(Some((
            env().webhook_client_cert().unwrap(),
            env().webhook_client_key().unwrap(),
        )))
        .await;
    eventually(WAIT, "oz's webhook server to answer", || async {
        let request = http::Request::get("/healthz")
            .body(kube::client::Body::empty())
            .unwrap();
        let answered = apiserver.send(request).await.ok()?;
        (answered.status().as_u16() == 200).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_name_not_allowed_refuses_even_the_apiserver_and_request_webhooks_fail_closed() {
    let a = Audited::verifying("callers-names", &["--webhook-client-names=other-name"]).await;
    let_groups_request(&a.admin, &a.ns, &["devs"]).await;
    let alice: Api<ExecAccessRequest> =
        Api::namespaced(env().client_as("alice").await.unwrap(), &a.ns);
    let request: ExecAccessRequest = serde_json::from_value(json!({
        "apiVersion": "crds.wizardofoz.co/v1alpha1",
        "kind": "ExecAccessRequest",
        "metadata": {"name": "alice-web"},
        "spec": {"templateName": "web-exec", "duration": "10m"},
    }))
    .unwrap();
    let dry_run = kube::api::PostParams {
        dry_run: true,
        ..Default::default()
    };
    // Until oz registers its webhooks, a create passes without them; then the apiserver calls
    // oz, oz refuses it for its name, and the webhook's failurePolicy Fail refuses the create.
    // RBAC's refusal while alice's new RoleBinding is not yet in the authorizer's cache is
    // not the refusal looked for: asked again.
    let refusal = eventually(
        WAIT,
        &format!(
            "a request create to be refused (log: {})",
            a.oz.operator.log.display()
        ),
        || async {
            match alice.create(&dry_run, &request).await {
                Err(kube::Error::Api(status)) if !status.message.contains("cannot create") => {
                    Some(status.message)
                }
                _ => None,
            }
        },
    )
    .await;
    assert!(refusal.contains("failed calling webhook"), "{refusal}");
    assert!(a.refused("name_not_allowed").await >= 1.0);
    assert_eq!(a.refused("no_certificate").await, 0.0);
    assert_eq!(a.refused("untrusted_certificate").await, 0.0);
    a.oz.remove_configurations().await;
}

#[tokio::test]
async fn without_caller_verification_the_record_says_unverified() {
    let a = Audited::start("callers-off", &[]).await;
    let record = alices_recorded_exec(&a).await;
    assert_eq!(record["caller"], "unverified", "{record}");
    assert!(record.get("callerName").is_none(), "{record}");
    a.oz.remove_configurations().await;
}

/// What a pod that reaches the webhook port learns and leaves behind without caller
/// verification: its forged exec Event says it came from an unverified caller, and a forged
/// request for a template gets the same refusal whether the template exists or not. oz warns
/// at start-up that callers are not verified.
#[tokio::test]
async fn without_caller_verification_forged_reviews_say_so_and_reveal_no_templates() {
    let a = Audited::start("callers-forged", &[]).await;
    crate::support::manifests::create_manifest(
        &a.admin,
        &a.ns,
        &crate::support::requests::exec_template("web-exec", "web"),
    )
    .await
    .unwrap();
    let client = a.webhook_client(None).await;

    // An exec into a pod that does not exist: accepted (oz cannot tell), and said to be
    // unverified in the Event anyone reading the namespace sees.
    let forged = bob_execs(&a.ns, "no-such-pod", "forged", "forged-1");
    let (status, body) = post_review(&client, &forged).await.unwrap();
    assert_eq!(status, 200, "{body}");
    let note = eventually(WAIT, "the forged exec's Event", || async {
        a.event_notes()
            .await
            .into_iter()
            .find(|n| n.contains("no-such-pod"))
    })
    .await;
    assert!(
        note.ends_with(oz_webhooks::admission::events::UNVERIFIED_NOTE),
        "{note}"
    );

    // Forged request creates for bob (in qa): a template that exists but admits devs only,
    // and one that does not exist, get the same answer, naming no allowedGroups.
    let create = |template: &str| {
        json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": format!("forged-{template}"),
                "kind": {"group": "crds.wizardofoz.co", "version": "v1alpha1", "kind": "ExecAccessRequest"},
                "resource": {"group": "crds.wizardofoz.co", "version": "v1alpha1", "resource": "execaccessrequests"},
                "name": "probe",
                "namespace": a.ns,
                "operation": "CREATE",
                "userInfo": {"username": "bob", "groups": ["qa", "system:authenticated"]},
                "object": {
                    "apiVersion": "crds.wizardofoz.co/v1alpha1", "kind": "ExecAccessRequest",
                    "metadata": {"name": "probe", "namespace": a.ns},
                    "spec": {"templateName": template, "requester": {"username": "bob", "groups": ["qa", "system:authenticated"]}},
                },
                "dryRun": false,
            }
        })
    };
    let mut answers = Vec::new();
    for template in ["web-exec", "no-such-template"] {
        let (status, body) = post_review_to(&client, "/validate-requests", &create(template))
            .await
            .unwrap();
        assert_eq!(status, 200, "{body}");
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["response"]["allowed"], false, "{body}");
        let message = body["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            !message.contains("devs"),
            "the allowedGroups leaked: {message}"
        );
        answers.push(message.replace(template, "TEMPLATE"));
    }
    assert_eq!(
        answers[0], answers[1],
        "the answers tell the templates apart"
    );
    assert!(
        a.oz.operator
            .log_text()
            .contains("webhook callers are not verified"),
        "no start-up warning"
    );
    a.oz.remove_configurations().await;
}

/// A forged AccessApproval CREATE review: `user` decides on request `request`, which makes oz
/// read the apiserver to answer.
fn forged_decision(ns: &str, uid: &str, user: &str, request: &str) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "crds.wizardofoz.co", "version": "v1alpha1", "kind": "AccessApproval"},
            "resource": {"group": "crds.wizardofoz.co", "version": "v1alpha1", "resource": "accessapprovals"},
            "name": uid,
            "namespace": ns,
            "operation": "CREATE",
            "userInfo": {"username": user, "groups": ["qa", "system:authenticated"]},
            "object": {
                "apiVersion": "crds.wizardofoz.co/v1alpha1", "kind": "AccessApproval",
                "metadata": {"name": uid, "namespace": ns},
                "spec": {
                    "requestRef": {"kind": "ExecAccessRequest", "name": request},
                    "decision": "Approve",
                },
            },
            "dryRun": false,
        }
    })
}

/// Each approval review costs oz reads of the apiserver. Without caller verification, a flood
/// of forged ones is answered only while a small shared budget lasts, refused after that
/// before any read, and decisions through the apiserver are answered again once it refills.
#[tokio::test]
async fn without_caller_verification_forged_approval_reviews_cost_oz_a_bounded_number_of_reads() {
    use oz_webhooks::admission::approvals::UNVERIFIED_BUDGET_SPENT;

    let a = Audited::start("callers-approvals", &[]).await;
    let client = a.webhook_client(None).await;
    let posted = 120;
    let started = std::time::Instant::now();
    let mut answered = 0;
    for i in 0..posted {
        let review = forged_decision(&a.ns, &format!("forged-{i}"), "bob", "no-such-request");
        let (status, body) = post_review_to(&client, "/mutate-approvals", &review)
            .await
            .unwrap();
        assert_eq!(status, 200, "{body}");
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["response"]["allowed"], false, "{body}");
        let message = body["response"]["status"]["message"].as_str().unwrap();
        if !message.contains(UNVERIFIED_BUDGET_SPENT) {
            assert!(message.contains("does not exist"), "{message}");
            answered += 1;
        }
    }
    // The budget: 20 at once, 5 a second after that.
    let allowed = 20.0 + 5.0 * started.elapsed().as_secs_f64() + 1.0;
    assert!(
        answered > 0 && f64::from(answered) <= allowed,
        "{answered} of {posted} forged reviews read the apiserver in {:?} (budget {allowed:.0})",
        started.elapsed()
    );

    // A decision through the apiserver is answered again once the budget refills: the admin's
    // dry run on a request that does not exist is refused for that, not for the budget.
    let approvals: Api<oz_api::AccessApproval> = Api::namespaced(a.admin.clone(), &a.ns);
    let decision: oz_api::AccessApproval = serde_json::from_value(
        forged_decision(&a.ns, "real", "admin", "no-such-request")["request"]["object"].clone(),
    )
    .unwrap();
    eventually(
        WAIT,
        "a decision through the apiserver to be answered",
        || {
            let (approvals, decision) = (approvals.clone(), decision.clone());
            async move {
                let dry_run = kube::api::PostParams {
                    dry_run: true,
                    ..Default::default()
                };
                match approvals.create(&dry_run, &decision).await {
                    Err(kube::Error::Api(status)) if status.message.contains("does not exist") => {
                        Some(())
                    }
                    _ => None,
                }
            }
        },
    )
    .await;
    a.oz.remove_configurations().await;
}
