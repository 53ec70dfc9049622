//! oz's webhook server against the real control plane: the apiserver calls it over TLS.
//!
//! Each test runs its own server, with its Secrets in the test namespace, its configurations
//! named after that namespace, and every webhook scoped to it by namespaceSelector, so tests in
//! this binary never see each other's webhooks.

use std::{
    collections::BTreeMap,
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};

use k8s_openapi::api::{
    admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration},
    core::v1::Secret,
    events::v1::Event,
};
use kube::{
    Api, Client,
    api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams},
    client::ClientBuilder,
    config::Kubeconfig,
};
use oz_api::{ExecAccessRequest, ExecAccessRequestSpec, RequestPhase, Requester};
use oz_platform::{
    certs::{
        self,
        secrets::{CA_CRT, TLS_CRT, TLS_SECRET_TYPE},
    },
    registration::AUDIT_ENFORCED_WEBHOOK,
};
use oz_testenv::{
    pods::{create_ready_pod, test_pod_spec},
    workloads::{self, WorkloadSpec},
};
use oz_webhooks::{WebhookConfig, WebhookServer};
use serde_json::{Value, json};
use tower::util::MapRequestLayer;

use crate::support::{
    cluster::{env, install_crds},
    fixture::{Fixture, PreparedFixture},
    manifests::create_manifest,
    operator::WebhookOperator,
    polling::eventually,
    rbac::{grant, let_groups_request, rule, subject},
    requests::exec_template,
    users::exec,
    webhook_server::{only, scoped_config},
};

const WAIT: Duration = Duration::from_secs(30);

/// A test namespace with template `web` (allowedGroups devs), RBAC for alice and bob, and a
/// webhook server registered for it alone.
struct ServerFixture {
    ns: String,
    admin: Client,
    config: WebhookConfig,
    /// Bound before the server starts, so the configuration can name its port.
    listener: Option<std::net::TcpListener>,
    server: Option<WebhookServer>,
    /// Every request the server's client sent.
    requests: Requests,
}

impl ServerFixture {
    /// A namespace and a running server whose webhooks the apiserver already calls.
    async fn new(prefix: &str, audit_log_path: Option<PathBuf>) -> ServerFixture {
        let mut fixture = ServerFixture::prepare(prefix, audit_log_path).await;
        fixture.start().await;
        fixture
    }

    /// Everything but the server.
    async fn prepare(prefix: &str, audit_log_path: Option<PathBuf>) -> ServerFixture {
        let PreparedFixture { ns, admin, .. } = Fixture::builder(prefix).prepare().await;
        grant_users(&admin, &ns).await;
        create_manifest(
            &admin,
            &ns,
            "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessTemplate\nmetadata: {name: web}\n\
             spec:\n  accessConfig: {allowedGroups: [devs], defaultDuration: 1h, maxDuration: 2h}\n  \
             controllerTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n",
        )
        .await
        .unwrap();

        let (listener, mut config) = scoped_config(&ns);
        config.registration.audit_namespace_selector = Some(only(&ns));
        config.audit_log_path = audit_log_path;
        ServerFixture {
            ns,
            admin,
            config,
            listener: Some(listener),
            server: None,
            requests: Requests::default(),
        }
    }

    async fn start(&mut self) {
        let listener = self.listener.take().expect("started once");
        let client = self.requests.client().await;
        let server = WebhookServer::start_on(listener, client, self.config.clone())
            .await
            .unwrap();
        self.server = Some(server);
        self.wait_until_admission_is_live().await;
    }

    fn server(&self) -> &WebhookServer {
        self.server.as_ref().unwrap()
    }

    fn secrets(&self) -> Api<Secret> {
        Api::namespaced(self.admin.clone(), &self.ns)
    }

    async fn secret_text(&self, name: &str, key: &str) -> Option<String> {
        let secret = self.secrets().get_opt(name).await.unwrap()?;
        let value = secret.data?.get(key)?.0.clone();
        String::from_utf8(value).ok()
    }

    /// The caBundle of every webhook oz registered, as text.
    async fn ca_bundles(&self) -> Vec<String> {
        let registration = &self.config.registration;
        let mut bundles = Vec::new();
        let mutating: Api<MutatingWebhookConfiguration> = Api::all(self.admin.clone());
        for webhook in mutating
            .get(&registration.requests_name())
            .await
            .unwrap()
            .webhooks
            .unwrap_or_default()
        {
            bundles.push(webhook.client_config.ca_bundle.map(|b| b.0));
        }
        let validating: Api<ValidatingWebhookConfiguration> = Api::all(self.admin.clone());
        for name in registration.validating_names() {
            for webhook in validating
                .get(&name)
                .await
                .unwrap()
                .webhooks
                .unwrap_or_default()
            {
                bundles.push(webhook.client_config.ca_bundle.map(|b| b.0));
            }
        }
        bundles
            .into_iter()
            .map(|b| String::from_utf8(b.unwrap_or_default()).unwrap())
            .collect()
    }

    /// Waits until the apiserver calls both request webhooks: a dry-run create with a forged
    /// requester comes back stamped, and one naming a missing template is refused.
    async fn wait_until_admission_is_live(&self) {
        let alice =
            Api::<ExecAccessRequest>::namespaced(env().client_as("alice").await.unwrap(), &self.ns);
        let dry_run = PostParams {
            dry_run: true,
            ..Default::default()
        };
        eventually(WAIT, "oz's request webhooks to be called", || {
            let (alice, dry_run) = (alice.clone(), dry_run.clone());
            async move {
                let missing = alice
                    .create(&dry_run, &request("probe", "no-such-template", "mallory"))
                    .await;
                let refused = matches!(missing, Err(kube::Error::Api(ref s))
                    if s.message.contains("does not exist"));
                let stamped = alice
                    .create(&dry_run, &request("probe", "web", "mallory"))
                    .await
                    .ok()?;
                (refused && requester_of(&stamped).username == "alice").then_some(())
            }
        })
        .await;
    }

    async fn stop(&mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown(Duration::from_secs(1)).await.unwrap();
        }
    }

    /// Stops the server and removes its configurations.
    async fn cleanup(mut self) {
        self.stop().await;
        let registration = &self.config.registration;
        let mutating: Api<MutatingWebhookConfiguration> = Api::all(self.admin.clone());
        mutating
            .delete(&registration.requests_name(), &DeleteParams::default())
            .await
            .unwrap();
        let validating: Api<ValidatingWebhookConfiguration> = Api::all(self.admin.clone());
        for name in registration.validating_names() {
            validating
                .delete(&name, &DeleteParams::default())
                .await
                .unwrap();
        }
    }
}

/// Every request a client sent, in order, as method and path: what shows a reconciler's passes
/// (each of the leader's starts by reading the CA Secret) and that a follower only reads.
#[derive(Clone, Default)]
struct Requests(Arc<Mutex<Vec<(http::Method, String)>>>);

impl Requests {
    /// An admin client whose requests are recorded here.
    async fn client(&self) -> Client {
        let kubeconfig = Kubeconfig::read_from(env().admin_kubeconfig()).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        let log = self.0.clone();
        let record = MapRequestLayer::new(move |request: http::Request<kube::client::Body>| {
            let sent = (request.method().clone(), request.uri().path().to_string());
            log.lock().unwrap().push(sent);
            request
        });
        ClientBuilder::try_from(config)
            .unwrap()
            .with_layer(&record)
            .build()
    }

    /// How many have been sent so far.
    fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }

    /// Those sent after the first `from`.
    fn since(&self, from: usize) -> Vec<(http::Method, String)> {
        self.0.lock().unwrap()[from..].to_vec()
    }

    /// Whether one sent after the first `from` reads the Secret `name` (a watch has no name in
    /// its path).
    fn read_secret_since(&self, from: usize, name: &str) -> bool {
        let path = format!("/secrets/{name}");
        self.since(from)
            .iter()
            .any(|(method, p)| method == http::Method::GET && p.ends_with(&path))
    }
}

/// An ExecAccessRequest that claims to come from `forged_requester`.
fn request(name: &str, template: &str, forged_requester: &str) -> ExecAccessRequest {
    ExecAccessRequest::new(
        name,
        ExecAccessRequestSpec {
            start_at: None,
            cluster: None,
            forwarded: None,
            reason: None,
            ticket: None,
            template_name: template.into(),
            target_pod: None,
            duration: None,
            requester: Some(Requester {
                username: forged_requester.into(),
                uid: None,
                groups: vec!["system:masters".into()],
            }),
        },
    )
}

fn requester_of(request: &ExecAccessRequest) -> Requester {
    request.spec.requester.clone().expect("a stamped requester")
}

/// alice and bob may create and change requests, exec into pods, and read them.
async fn grant_users(admin: &Client, ns: &str) {
    let rules = vec![
        rule(
            &[oz_api::GROUP],
            &["execaccessrequests", "podaccessrequests"],
            &["create", "get", "list", "update", "patch", "delete"],
        ),
        rule(&[""], &["pods"], &["get", "list"]),
        rule(&[""], &["pods/exec"], &["create", "get"]),
    ];
    grant(
        admin,
        ns,
        "users",
        rules,
        vec![subject("Group", "devs"), subject("Group", "qa")],
    )
    .await;
}

/// A client that trusts only `ca_bundle` and talks to the webhook server itself: its TLS
/// handshake succeeds only if the served certificate chains to that CA.
async fn healthz_trusting(
    address: std::net::SocketAddr,
    ca_bundle: &str,
) -> Result<String, String> {
    let mut config = kube::Config::new(format!("https://{address}").parse().unwrap());
    config.root_cert = Some(certs::certificates_der(ca_bundle).unwrap());
    config.default_retry = false;
    config.connect_timeout = Some(Duration::from_secs(5));
    let client = Client::try_from(config).map_err(|e| e.to_string())?;
    let request = http::Request::get("/healthz").body(Vec::new()).unwrap();
    client
        .request_text(request)
        .await
        .map_err(|e| e.to_string())
}

#[tokio::test]
async fn startup_stores_the_certificates_and_registers_trusting_their_ca() {
    let fixture = ServerFixture::new("whstart", None).await;
    let names = &fixture.config.secrets;

    for name in [&names.ca, &names.serving] {
        let secret = fixture.secrets().get(name).await.unwrap();
        assert_eq!(secret.type_.as_deref(), Some(TLS_SECRET_TYPE), "{name}");
        let data = secret.data.unwrap();
        for key in ["tls.crt", "tls.key", "ca.crt"] {
            assert!(data.contains_key(key), "{name} lacks {key}");
        }
    }
    let ca_bundle = fixture.secret_text(&names.ca, CA_CRT).await.unwrap();
    let bundles = fixture.ca_bundles().await;
    assert_eq!(
        bundles.len(),
        6,
        "mutating (requests, approvals), validating (request CREATE/UPDATE and DELETE, \
         approvals) and audit webhooks"
    );
    assert!(bundles.iter().all(|b| *b == ca_bundle), "{bundles:?}");

    // What is served is the stored certificate, and it chains to the published CA.
    let served = fixture.secret_text(&names.serving, TLS_CRT).await.unwrap();
    assert_eq!(
        fixture.server().served_certificate().as_ref(),
        certs::certificates_der(&served).unwrap()[0].as_slice()
    );
    assert_eq!(
        healthz_trusting(fixture.server().local_addr(), &ca_bundle).await,
        Ok("ok".into())
    );

    // The apiserver's calls succeed over TLS: a real create goes through both request webhooks.
    let alice =
        Api::<ExecAccessRequest>::namespaced(env().client_as("alice").await.unwrap(), &fixture.ns);
    alice
        .create(&PostParams::default(), &request("first", "web", "alice"))
        .await
        .unwrap();

    // Settled: the reconciler's own writes do not wake it into writing again. What it writes
    // (the configurations, the serving Secret; the CA Secret is compared by the data below)
    // keeps its resourceVersion through a pass woken by a change that needs no write: a label
    // on the CA Secret. Each leader pass starts by reading the CA Secret once, and passes run
    // one at a time: once a pass has started after label 2, the pass seen starting after
    // label 1 is over, and it began after `before`.
    let versions = || async {
        let mutating: Api<MutatingWebhookConfiguration> = Api::all(fixture.admin.clone());
        let validating: Api<ValidatingWebhookConfiguration> = Api::all(fixture.admin.clone());
        let registration = &fixture.config.registration;
        let mut versions = vec![
            mutating
                .get(&registration.requests_name())
                .await
                .unwrap()
                .metadata
                .resource_version,
        ];
        for name in registration.validating_names() {
            versions.push(
                validating
                    .get(&name)
                    .await
                    .unwrap()
                    .metadata
                    .resource_version,
            );
        }
        versions.push(
            fixture
                .secrets()
                .get(&names.serving)
                .await
                .unwrap()
                .metadata
                .resource_version,
        );
        versions
    };
    let before = versions().await;
    let ca_before = fixture.secret_text(&names.ca, TLS_CRT).await.unwrap();
    let mut labelled = None;
    for mark in ["1", "2"] {
        // Counted before the change: the pass it wakes may start before the patch returns.
        let from = fixture.requests.count();
        let label = json!({"metadata": {"labels": {"oz-test/wake": mark}}});
        let patched = fixture
            .secrets()
            .patch(&names.ca, &PatchParams::default(), &Patch::Merge(&label))
            .await
            .unwrap();
        eventually(
            WAIT,
            &format!("a reconciler pass after label {mark}"),
            || {
                let seen = fixture.requests.read_secret_since(from, &names.ca);
                async move { seen.then_some(()) }
            },
        )
        .await;
        labelled = patched.metadata.resource_version;
    }
    assert_eq!(versions().await, before, "the reconciler wrote again");
    let ca = fixture.secrets().get(&names.ca).await.unwrap();
    assert_eq!(
        ca.metadata.resource_version, labelled,
        "the CA was rewritten"
    );
    assert_eq!(
        fixture.secret_text(&names.ca, TLS_CRT).await.unwrap(),
        ca_before
    );
    fixture.cleanup().await;
}

#[tokio::test]
async fn stored_certificates_are_reused_while_valid_and_renewed_in_their_window() {
    let mut fixture = ServerFixture::prepare("whrenew", None).await;
    let names = fixture.config.secrets.clone();
    let settings = fixture.config.certs;
    let now = certs::OffsetDateTime::now_utc();
    // A CA with years left, and a serving certificate 10 days from expiry: inside the
    // default 30-day renewal window.
    let ca = certs::generate_ca(&settings, now).unwrap();
    let names_served = fixture.config.registration.endpoint.serving_names();
    let expiring =
        certs::issue_serving_cert(&ca, &names_served, Duration::from_secs(10 * 86_400), now)
            .unwrap();
    for (name, pair) in [(&names.ca, &ca), (&names.serving, &expiring)] {
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..Default::default()
            },
            type_: Some(TLS_SECRET_TYPE.into()),
            string_data: Some(BTreeMap::from([
                ("tls.crt".to_string(), pair.cert.clone()),
                ("tls.key".to_string(), pair.key.clone()),
                ("ca.crt".to_string(), ca.cert.clone()),
            ])),
            ..Default::default()
        };
        fixture
            .secrets()
            .create(&PostParams::default(), &secret)
            .await
            .unwrap();
    }

    fixture.start().await;

    assert_eq!(
        fixture.secret_text(&names.ca, TLS_CRT).await.unwrap(),
        ca.cert,
        "a valid CA is kept"
    );
    let renewed = certs::PemPair {
        cert: fixture.secret_text(&names.serving, TLS_CRT).await.unwrap(),
        key: fixture
            .secret_text(&names.serving, "tls.key")
            .await
            .unwrap(),
    };
    assert_ne!(
        renewed.cert, expiring.cert,
        "a certificate due for renewal is replaced"
    );
    let info = certs::check_serving(&renewed, &ca.cert, &names_served, &settings, now).unwrap();
    assert!(
        info.not_after > now + Duration::from_secs(300 * 86_400),
        "{info:?}"
    );
    assert_eq!(
        fixture.server().served_certificate().as_ref(),
        certs::certificates_der(&renewed.cert).unwrap()[0].as_slice()
    );
    fixture.cleanup().await;
}

#[tokio::test]
async fn a_follower_serves_the_leaders_certificate_and_takes_over_writing() {
    let mut fixture = ServerFixture::new("whfollow", None).await;
    let names = fixture.config.secrets.clone();
    let (leading, leader) = tokio::sync::watch::channel(false);
    let mut follower_config = fixture.config.clone();
    follower_config.leader = Some(leader);
    let follower_requests = Requests::default();
    let follower = WebhookServer::start_on(
        std::net::TcpListener::bind("127.0.0.1:0").unwrap(),
        follower_requests.client().await,
        follower_config,
    )
    .await
    .unwrap();
    assert_eq!(
        follower.served_certificate(),
        fixture.server().served_certificate()
    );

    // The leader rotates; the follower reloads what the leader stored.
    let old = follower.served_certificate();
    fixture
        .secrets()
        .delete(&names.ca, &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        WAIT,
        "the follower to serve the leader's new certificate",
        || {
            let (fixture, follower, old) = (&fixture, &follower, &old);
            async move {
                let leaders = fixture.server().served_certificate();
                (leaders != *old && follower.served_certificate() == leaders).then_some(())
            }
        },
    )
    .await;

    // The leader goes away. A serving certificate due for renewal (10 days left, inside the
    // 30-day window) is stored: a leader would renew it, the follower serves it as it is, and
    // that it serves it shows its pass over the change ran.
    fixture.stop().await;
    let ca = certs::PemPair {
        cert: fixture.secret_text(&names.ca, TLS_CRT).await.unwrap(),
        key: fixture.secret_text(&names.ca, "tls.key").await.unwrap(),
    };
    let due = certs::issue_serving_cert(
        &ca,
        &fixture.config.registration.endpoint.serving_names(),
        Duration::from_secs(10 * 86_400),
        certs::OffsetDateTime::now_utc(),
    )
    .unwrap();
    let stored = fixture
        .secrets()
        .patch(
            &names.serving,
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"tls.crt": due.cert, "tls.key": due.key}})),
        )
        .await
        .unwrap();
    let due_der = certs::certificates_der(&due.cert).unwrap().remove(0);
    eventually(
        WAIT,
        "the follower to serve the certificate it read",
        || {
            let served = follower.served_certificate();
            let due_der = &due_der;
            async move { (served.as_ref() == due_der.as_slice()).then_some(()) }
        },
    )
    .await;
    assert_eq!(
        fixture
            .secrets()
            .get(&names.serving)
            .await
            .unwrap()
            .metadata
            .resource_version,
        stored.metadata.resource_version,
        "a follower never writes"
    );
    let writes: Vec<_> = follower_requests
        .since(0)
        .into_iter()
        .filter(|(method, _)| method != http::Method::GET)
        .collect();
    assert_eq!(writes, [], "a follower only reads");

    // Elected, it renews the certificate and serves the renewal.
    leading.send(true).unwrap();
    eventually(
        WAIT,
        "the new leader to renew the serving certificate",
        || {
            let (fixture, follower, names, due) = (&fixture, &follower, &names, &due);
            async move {
                let serving = fixture.secret_text(&names.serving, TLS_CRT).await?;
                let renewed = certs::certificates_der(&serving).ok()?.remove(0);
                (serving != due.cert
                    && follower.served_certificate().as_ref() == renewed.as_slice())
                .then_some(())
            }
        },
    )
    .await;
    follower.shutdown(Duration::from_secs(1)).await.unwrap();
    fixture.cleanup().await;
}

#[tokio::test]
async fn a_deleted_ca_is_replaced_and_served_without_a_restart() {
    let fixture = ServerFixture::new("whrotate", None).await;
    let names = fixture.config.secrets.clone();
    let address = fixture.server().local_addr();
    let old_ca = fixture.secret_text(&names.ca, TLS_CRT).await.unwrap();
    let old_serving = fixture.secret_text(&names.serving, TLS_CRT).await.unwrap();
    // The next certificate's expiry must differ from this one's to show the exported expiry
    // follows it: X.509 times are in whole seconds, so let the second this one was issued in pass.
    let old_pair = certs::PemPair {
        cert: old_serving.clone(),
        key: fixture
            .secret_text(&names.serving, "tls.key")
            .await
            .unwrap(),
    };
    let issued = certs::inspect(&old_pair).unwrap().not_after - fixture.config.certs.cert_validity;
    eventually(
        WAIT,
        "the second the certificate was issued in to pass",
        || async {
            (certs::OffsetDateTime::now_utc().unix_timestamp() > issued.unix_timestamp())
                .then_some(())
        },
    )
    .await;

    fixture
        .secrets()
        .delete(&names.ca, &DeleteParams::default())
        .await
        .unwrap();

    // A new CA, a new serving certificate from it, published and served.
    let new_bundle = eventually(WAIT, "a new CA to be published and served", || {
        let fixture = &fixture;
        let (names, old_ca, old_serving) = (&names, &old_ca, &old_serving);
        async move {
            let ca = fixture.secret_text(&names.ca, TLS_CRT).await?;
            let bundle = fixture.secret_text(&names.ca, CA_CRT).await?;
            let serving = fixture.secret_text(&names.serving, TLS_CRT).await?;
            let served = fixture.server().served_certificate();
            let fresh = ca != *old_ca && serving != *old_serving;
            let published = fixture.ca_bundles().await.iter().all(|b| *b == bundle);
            let serving_it =
                served.as_ref() == certs::certificates_der(&serving).ok()?[0].as_slice();
            // oz_webhook_certificate_expiry_timestamp_seconds follows the certificate served.
            let pair = certs::PemPair {
                cert: serving,
                key: fixture.secret_text(&names.serving, "tls.key").await?,
            };
            let expiry_exported = fixture.config.metrics.server.certificate_expiry.get()
                == certs::inspect(&pair).ok()?.not_after.unix_timestamp();
            (fresh && published && serving_it && expiry_exported).then_some(bundle)
        }
    })
    .await;
    assert!(
        !new_bundle.contains(old_ca.trim()),
        "a deleted CA is no longer trusted"
    );

    // Over the wire, on the same listener: the new CA verifies the server, the old one no longer.
    assert_eq!(fixture.server().local_addr(), address);
    assert_eq!(
        healthz_trusting(address, &new_bundle).await,
        Ok("ok".into())
    );
    assert!(healthz_trusting(address, &old_ca).await.is_err());

    // And the apiserver, trusting the new bundle, keeps admitting through the same server.
    let alice =
        Api::<ExecAccessRequest>::namespaced(env().client_as("alice").await.unwrap(), &fixture.ns);
    let created = eventually(WAIT, "admission to work after rotation", || {
        let alice = alice.clone();
        async move {
            alice
                .create(
                    &PostParams::default(),
                    &request("after-rotation", "web", "mallory"),
                )
                .await
                .ok()
        }
    })
    .await;
    assert_eq!(requester_of(&created).username, "alice");

    // A corrupted serving certificate is reissued from the same CA.
    let ca_now = fixture.secret_text(&names.ca, TLS_CRT).await.unwrap();
    let serving_now = fixture.secret_text(&names.serving, TLS_CRT).await.unwrap();
    fixture
        .secrets()
        .patch(
            &names.serving,
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"tls.crt": "-----BEGIN CERTIFICATE-----\ngarbage\n-----END CERTIFICATE-----\n"}})),
        )
        .await
        .unwrap();
    eventually(WAIT, "the corrupted certificate to be reissued", || {
        let fixture = &fixture;
        let (names, serving_now) = (&names, &serving_now);
        async move {
            let serving = fixture.secret_text(&names.serving, TLS_CRT).await?;
            (certs::certificates_der(&serving).is_ok() && serving != *serving_now).then_some(())
        }
    })
    .await;
    assert_eq!(
        fixture.secret_text(&names.ca, TLS_CRT).await.unwrap(),
        ca_now,
        "the CA stays"
    );
    fixture.cleanup().await;
}

#[tokio::test]
async fn requests_are_stamped_checked_and_immutable() {
    let fixture = ServerFixture::new("whreq", None).await;
    let alice =
        Api::<ExecAccessRequest>::namespaced(env().client_as("alice").await.unwrap(), &fixture.ns);
    let bob =
        Api::<ExecAccessRequest>::namespaced(env().client_as("bob").await.unwrap(), &fixture.ns);

    // Once the cache knows the template, the mutating webhook can name it as the owner.
    eventually(WAIT, "the lookup cache to list", || {
        let ready = fixture.server().lookup_cache_ready();
        async move { ready.then_some(()) }
    })
    .await;
    // alice forges an admin requester; the stored request names alice.
    alice
        .create(&PostParams::default(), &request("alices", "web", "admin"))
        .await
        .unwrap();
    let stored = Api::<ExecAccessRequest>::namespaced(fixture.admin.clone(), &fixture.ns)
        .get("alices")
        .await
        .unwrap();
    let requester = requester_of(&stored);
    assert_eq!(requester.username, "alice");
    assert!(
        requester.groups.contains(&"devs".to_string()),
        "{requester:?}"
    );
    assert!(!requester.groups.contains(&"system:masters".to_string()));
    // Its template owns it from its creation (no controller runs here): the controller need
    // not write the reference. Not blocking: alice may not update the template's finalizers.
    let template =
        Api::<oz_api::ExecAccessTemplate>::namespaced(fixture.admin.clone(), &fixture.ns)
            .get("web")
            .await
            .unwrap();
    let owner = stored.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(
        owner
            .iter()
            .map(|o| (
                o.kind.as_str(),
                o.name.as_str(),
                o.uid.as_str(),
                o.controller,
                o.block_owner_deletion
            ))
            .collect::<Vec<_>>(),
        [(
            "ExecAccessTemplate",
            "web",
            template.metadata.uid.as_deref().unwrap(),
            Some(true),
            None
        )]
    );

    // bob is not in devs: refused at create, with the reason.
    let refusal = bob
        .create(&PostParams::default(), &request("bobs", "web", "bob"))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = refusal else {
        panic!("{refusal}")
    };
    assert_eq!(status.code, 403, "{status:?}");
    assert!(
        status
            .message
            // This control plane's apiserver presents no client certificate: an unverified
            // caller is not told the template's allowedGroups.
            .contains("does not exist or does not admit bob"),
        "{status:?}"
    );

    // A request cannot be changed after creation, requester included. The CRD's own rule
    // answers first (422); the validating webhook holds the same line (403) behind it.
    for change in [
        json!({"spec": {"duration": "2h"}}),
        json!({"spec": {"targetPod": "web-0"}}),
        json!({"spec": {"requester": {"username": "carol", "groups": ["devs"]}}}),
    ] {
        let refused = alice
            .patch("alices", &PatchParams::default(), &Patch::Merge(&change))
            .await;
        assert!(
            matches!(refused, Err(kube::Error::Api(ref s)) if s.code == 403 || s.code == 422),
            "{change}: {refused:?}"
        );
    }
    let unchanged = alice.get("alices").await.unwrap();
    assert_eq!(unchanged.spec, stored.spec);

    // Metadata changes pass, as the controller's ownerReferences and finalizers must.
    alice
        .patch(
            "alices",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"team": "a"}}})),
        )
        .await
        .unwrap();

    // bob may delete requests (RBAC) but not revoke alice's access (the webhook); alice may.
    let refused = bob.delete("alices", &Default::default()).await.unwrap_err();
    assert!(
        matches!(refused, kube::Error::Api(ref s) if s.code == 403 && s.message.contains("only the requester (alice)")),
        "{refused}"
    );
    alice.delete("alices", &Default::default()).await.unwrap();
    fixture.cleanup().await;
}

#[tokio::test]
async fn an_exec_is_audited_with_its_grant_and_never_blocked() {
    let audit_path = crate::support::operator::audit_log_path("oz-webhooks-audit");
    let mut fixture = ServerFixture::new("whaudit", Some(audit_path.clone())).await;
    let ns = fixture.ns.clone();
    // alice's own request, made Ready for the pod the way the controller would.
    target_pod_and_alices_request(&fixture.admin, &ns).await;
    make_alices_request_ready(&fixture.admin, &ns).await;

    let read_records = || audit_records(&audit_path);
    // The audit webhook's registration takes a moment to reach the apiserver.
    let outcome = eventually(WAIT, "alice's exec to be audited", || {
        let ns = ns.clone();
        async move {
            let outcome = exec("alice", &ns, "target", &["cat", "/etc/hostname"]).await;
            (!read_records().is_empty()).then_some(outcome)
        }
    })
    .await;
    // Audited, never blocked: the command ran (kwok runs it on this machine).
    assert!(outcome.success(), "{outcome:?}");

    let records = read_records();
    assert_eq!(records.len(), 1, "one record per exec: {records:?}");
    let record = &records[0];
    assert_eq!(record["event"], "PodExec");
    assert_eq!(record["user"], "alice");
    assert!(
        record["groups"]
            .as_array()
            .unwrap()
            .contains(&json!("devs"))
    );
    assert_eq!(record["namespace"], ns.as_str());
    assert_eq!(record["pod"], "target");
    assert_eq!(record["operation"], "CONNECT");
    assert_eq!(record["subresource"], "exec");
    assert_eq!(record["command"], json!(["cat", "/etc/hostname"]));
    assert_eq!(record["allowed"], true);
    assert_eq!(
        record["grant"],
        json!({"kind": "ExecAccessRequest", "name": "alices", "template": "web"})
    );

    // An Event on the pod, in Oz's words.
    let events: Api<Event> = Api::namespaced(fixture.admin.clone(), &ns);
    let note = eventually(WAIT, "the PodExec Event", || {
        let events = events.clone();
        async move {
            events
                .list(&Default::default())
                .await
                .ok()?
                .items
                .into_iter()
                .find(|e| {
                    e.reason.as_deref() == Some("PodExec")
                        && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("target")
                })
                .and_then(|e| e.note)
        }
    })
    .await;
    assert!(
        note.starts_with("CONNECT/exec operation on Pod target (container: ")
            && note.contains("by alice (interactive: false)")
            && note.ends_with(oz_webhooks::admission::events::UNVERIFIED_NOTE),
        "{note}"
    );

    // With the server gone, exec still works: the audit webhook is skipped.
    fixture.stop().await;
    let outcome = exec("alice", &ns, "target", &["sh", "-c", "echo still here"]).await;
    assert!(
        outcome.success() && outcome.stdout == "still here\n",
        "{outcome:?}"
    );
    assert_eq!(read_records().len(), 1);

    fixture.cleanup().await;
    let _ = std::fs::remove_file(&audit_path);
}

#[tokio::test]
async fn an_exec_right_after_its_request_becomes_ready_is_attributed_with_the_cache_in_use() {
    let audit_path = crate::support::operator::audit_log_path("oz-webhooks-cache");
    // Scoped to the test namespace, as with --watch-namespaces (the other tests watch all).
    let mut fixture = ServerFixture::prepare("whcache", Some(audit_path.clone())).await;
    fixture.config.watch_namespaces = vec![fixture.ns.clone()];
    fixture.start().await;
    let ns = fixture.ns.clone();
    eventually(WAIT, "the lookup cache to list", || {
        let ready = fixture.server().lookup_cache_ready();
        async move { ready.then_some(()) }
    })
    .await;
    target_pod_and_alices_request(&fixture.admin, &ns).await;

    let read_records = || audit_records(&audit_path);
    // Before the request is Ready: recorded without a grant (once the apiserver calls the
    // audit webhook, which takes a moment after registration).
    eventually(WAIT, "alice's first exec to be audited", || {
        let ns = ns.clone();
        async move {
            exec("alice", &ns, "target", &["id"]).await;
            (!read_records().is_empty()).then_some(())
        }
    })
    .await;
    assert_eq!(read_records()[0]["grant"], Value::Null);

    // Ready, the way the controller makes it, and the exec straight after: the cache may not
    // have seen the change yet, the record names the grant all the same.
    make_alices_request_ready(&fixture.admin, &ns).await;
    let outcome = exec("alice", &ns, "target", &["cat", "/etc/hostname"]).await;
    assert!(outcome.success(), "{outcome:?}");
    let records = read_records();
    assert_eq!(records.len(), 2, "one record per exec: {records:?}");
    assert_eq!(
        records[1]["grant"],
        json!({"kind": "ExecAccessRequest", "name": "alices", "template": "web"})
    );
    assert!(fixture.server().lookup_cache_ready());

    fixture.cleanup().await;
    let _ = std::fs::remove_file(&audit_path);
}

/// The records written to the audit log so far (not its checkpoints).
fn audit_records(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|entry| entry["type"] == "record")
        .collect()
}

/// A running pod `target`, and alice's request `alices` through template `web` (not Ready
/// yet).
async fn target_pod_and_alices_request(admin: &Client, ns: &str) {
    create_ready_pod(
        admin,
        ns,
        "target",
        &ObjectMeta::default(),
        None,
        test_pod_spec(),
    )
    .await
    .unwrap();
    let alice = env().client_as("alice").await.unwrap();
    Api::<ExecAccessRequest>::namespaced(alice.clone(), ns)
        .create(&PostParams::default(), &request("alices", "web", "alice"))
        .await
        .unwrap();
}

/// Marks alice's request `alices` Ready for pod `target`, the way the controller would.
async fn make_alices_request_ready(admin: &Client, ns: &str) {
    set_alices_status(
        admin,
        ns,
        json!({
            "phase": "Ready", "podName": "target", "ready": true,
            "expiresAt": "2099-01-01T00:00:00Z",
        }),
    )
    .await;
}

/// Merges `status` into the status of alice's request `alices`, as a controller would.
pub(crate) async fn set_alices_status(admin: &Client, ns: &str, status: Value) {
    Api::<ExecAccessRequest>::namespaced(admin.clone(), ns)
        .patch_status(
            "alices",
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await
        .unwrap();
}

/// `--audit-enforce-namespaces`, through the real apiserver and a real oz-manager: in an
/// enforced namespace an exec needs a grant even from a user whose own RBAC allows it, and
/// with oz down it is refused (the enforced namespaces' webhook fails closed), while in a
/// namespace that is only audited exec keeps working.
#[tokio::test]
async fn an_enforced_namespace_denies_exec_without_a_grant_and_fails_closed_while_oz_is_down() {
    install_crds().await;
    let admin = env().admin().await.unwrap();
    let ns = env().namespace("whenforce").await.unwrap();
    let open = env().namespace("whenforce-open").await.unwrap();
    let web = workloads::deployment(&admin, &ns, WorkloadSpec::new("web", 2))
        .await
        .unwrap();
    create_manifest(&admin, &ns, &exec_template("web-exec", "web"))
        .await
        .unwrap();
    create_ready_pod(
        &admin,
        &open,
        "target",
        &ObjectMeta::default(),
        None,
        test_pod_spec(),
    )
    .await
    .unwrap();
    // devs may exec into every pod of both namespaces by RBAC of their own: what stops them in
    // the enforced one is oz alone.
    for namespace in [&ns, &open] {
        let rules = vec![
            rule(&[""], &["pods"], &["get", "list"]),
            rule(&[""], &["pods/exec"], &["create", "get"]),
        ];
        grant(
            &admin,
            namespace,
            "standing-exec",
            rules,
            vec![subject("Group", "devs")],
        )
        .await;
    }
    let_groups_request(&admin, &ns, &["devs"]).await;
    let mut oz = WebhookOperator::start(
        &ns,
        &[
            &format!("--watch-namespaces={open}"),
            &format!("--audit-enforce-namespaces={ns}"),
        ],
    );
    oz.wait_until_admitting("alice", "web-exec").await;
    let log = oz.operator.log.display().to_string();
    let denied = |pod: &str| {
        format!(
            "admission webhook \"{AUDIT_ENFORCED_WEBHOOK}\" denied the request: alice has no \
             active access request for pod {ns}/{pod}"
        )
    };

    // No grant: refused, by oz, saying why (the registration takes a moment to reach the
    // apiserver; until then the command, `true`, just runs).
    let pods = web.pod_names();
    let refused = eventually(WAIT * 3, &format!("oz to deny alice (log: {log})"), || {
        let (ns, pod, denied) = (&ns, &pods[0], denied(&pods[0]));
        async move {
            let outcome = exec("alice", ns, pod, &["true"]).await;
            outcome.stderr.contains(&denied).then_some(outcome)
        }
    })
    .await;
    assert!(!refused.success(), "{refused:?}");

    // Only audited elsewhere: alice's exec without a grant runs, and oz records it.
    let outcome = exec("alice", &open, "target", &["sh", "-c", "echo open"]).await;
    assert!(
        outcome.success() && outcome.stdout == "open\n",
        "{outcome:?}"
    );
    let events: Api<Event> = Api::namespaced(admin.clone(), &open);
    eventually(WAIT, "the PodExec Event in the audited namespace", || {
        let events = events.clone();
        async move {
            let events = events.list(&Default::default()).await.ok()?.items;
            events
                .iter()
                .any(|e| {
                    e.reason.as_deref() == Some("PodExec")
                        && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("target")
                })
                .then_some(())
        }
    })
    .await;

    // A grant lets alice into its pod, and into that pod only.
    let alice = Api::<ExecAccessRequest>::namespaced(env().client_as("alice").await.unwrap(), &ns);
    let mut request = request("alices", "web-exec", "alice");
    request.spec.requester = None;
    alice
        .create(&PostParams::default(), &request)
        .await
        .unwrap();
    let granted = eventually(
        WAIT * 3,
        &format!("alices to be Ready (log: {log})"),
        || {
            let alice = alice.clone();
            async move {
                let status = alice.get("alices").await.ok()?.status?;
                (status.phase == Some(RequestPhase::Ready)).then_some(status.pod_name?)
            }
        },
    )
    .await;
    let other = pods.iter().find(|p| **p != granted).unwrap();
    let outcome = exec("alice", &ns, &granted, &["sh", "-c", "echo granted"]).await;
    assert!(
        outcome.success() && outcome.stdout == "granted\n",
        "{outcome:?}"
    );
    let outcome = exec("alice", &ns, other, &["true"]).await;
    assert!(
        !outcome.success() && outcome.stderr.contains(&denied(other)),
        "{outcome:?}"
    );

    // oz goes down. Its grant's Role outlives it, alice's own RBAC too, yet the apiserver
    // refuses her exec in the enforced namespace: it cannot ask oz, and may not skip it.
    oz.operator.kill();
    let outcome = exec("alice", &ns, &granted, &["true"]).await;
    assert!(!outcome.success(), "{outcome:?}");
    assert!(
        outcome.stderr.contains(&format!(
            "failed calling webhook \"{AUDIT_ENFORCED_WEBHOOK}\""
        )),
        "{outcome:?}"
    );
    // Elsewhere the audit webhook is skipped: exec works.
    let outcome = exec("alice", &open, "target", &["sh", "-c", "echo still open"]).await;
    assert!(
        outcome.success() && outcome.stdout == "still open\n",
        "{outcome:?}"
    );
    oz.remove_configurations().await;
}

/// In oz-manager, the handlers' request cache lists the requests only after the request
/// controllers have (their LIST arms the expiry timers at a restart, and the two LISTs of every
/// request at once shared the apiserver), and then does list: the handlers do not go on
/// reading requests from the apiserver.
#[tokio::test]
async fn oz_managers_webhooks_list_the_requests_after_its_controllers_do() {
    install_crds().await;
    let ns = env().namespace("wh-order").await.unwrap();
    let oz = WebhookOperator::start(&ns, &[]);
    let log = oz.operator.log.display().to_string();
    let text = eventually(
        WAIT,
        &format!("both controllers and the handlers' cache to list both kinds (log: {log})"),
        || {
            let text = oz.operator.log_text();
            let count = |needle: &str| text.lines().filter(|l| l.contains(needle)).count();
            let all_in = count("the handlers' request cache is listing") == 2
                && count("expiry timers armed from the first list") == 2;
            async move { all_in.then_some(text) }
        },
    )
    .await;
    let position = |needle: &str, kind: &str| {
        text.lines()
            .position(|l| l.contains(needle) && l.contains(&format!("kind={kind}")))
            .unwrap_or_else(|| panic!("no {needle:?} for {kind} (log: {log})"))
    };
    let armed = "expiry timers armed from the first list";
    let listing = "the handlers' request cache is listing";
    let controllers_listed =
        position(armed, "ExecAccessRequest").max(position(armed, "PodAccessRequest"));
    for kind in ["ExecAccessRequest", "PodAccessRequest"] {
        assert!(
            position(listing, kind) > controllers_listed,
            "the handlers' {kind} cache listed before the controllers' requests were in (log: {log})"
        );
    }
}
