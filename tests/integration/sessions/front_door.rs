//! oz's sessions API front door against a real apiserver's aggregation layer: discovery, the
//! front-proxy path (the user and groups the apiserver authenticated reach oz's routes), that
//! only the apiserver is answered, that the apiserver's RBAC refuses before oz is called, that
//! the group fails closed while oz is down, and that oz-manager registers the APIService
//! itself. Each test has a control plane of its own ([`SessionsPlane`]).

use std::{
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use axum::{Extension, Json, Router, extract::Path as UrlPath, routing::get};
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::Api;
use oz_sessions::{Identity, front_proxy};
use oz_testenv::{
    exec,
    pods::{create_ready_pod, test_pod_spec},
};
use serde_json::{Value, json};

use crate::{
    sessions::plane::{AVAILABLE, SessionsPlane, mint_ca, mint_leaf},
    support::{
        operator::{Operator, free_port},
        polling::eventually,
    },
};

/// A route in the place of the broker's exec: answers with the identity it was given, and
/// counts its calls.
fn whoami(calls: Arc<AtomicUsize>) -> Router {
    Router::new().route(
        "/namespaces/{namespace}/pods/{pod}/exec",
        get(
            move |UrlPath((namespace, pod)): UrlPath<(String, String)>,
                  Extension(identity): Extension<Identity>| async move {
                calls.fetch_add(1, Ordering::SeqCst);
                Json(json!({
                    "namespace": namespace,
                    "pod": pod,
                    "user": identity.user,
                    "groups": identity.groups,
                    "extra": identity.extra,
                }))
            },
        ),
    )
}

/// `curl` to oz's port directly, with a forged `X-Remote-User: admin` and, if given, a client
/// certificate and key: its HTTP status (`None`: no response, the handshake failed) and body.
async fn curl_directly(
    port: u16,
    path: &str,
    client: Option<(&Path, &Path)>,
) -> (Option<u16>, String) {
    let mut curl = std::process::Command::new("curl");
    curl.args([
        "-sS",
        "--insecure",
        "--max-time",
        "20",
        "-H",
        "X-Remote-User: admin",
    ])
    .args(["-H", "X-Remote-Group: system:masters"])
    .args(["-w", "\n%{http_code}"]);
    if let Some((cert, key)) = client {
        curl.arg("--cert").arg(cert).arg("--key").arg(key);
    }
    curl.arg(format!("https://127.0.0.1:{port}{path}"));
    let output = exec::run(curl, exec::RUN_TIMEOUT).await.unwrap();
    let stdout = output.stdout.trim_end();
    let (body, code) = stdout.rsplit_once('\n').unwrap_or(("", stdout));
    let code = code.trim().parse::<u16>().ok().filter(|c| *c != 0);
    (code, format!("{body}{}", output.stderr))
}

#[tokio::test]
async fn the_apiserver_proxies_alices_identity_to_oz_and_only_the_apiserver_is_answered() {
    let plane = SessionsPlane::start("sessions-door").await;
    let ns = plane.namespace.clone();
    let calls = Arc::new(AtomicUsize::new(0));
    let door = plane.front_door(whoami(calls.clone())).await;
    plane.wait_available().await;

    // Discovery through the apiserver, as alice (discovery is open to everyone authenticated).
    let discovery = plane
        .kubectl(
            Some("alice"),
            &["get", "--raw", "/apis/sessions.wizardofoz.co/v1alpha1"],
        )
        .await;
    assert!(discovery.success(), "{discovery}");
    let list: Value = serde_json::from_str(&discovery.stdout).unwrap();
    assert_eq!(list["kind"], "APIResourceList");
    let names: Vec<&str> = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["pods/exec", "pods/attach", "recordings"]);
    let resources = plane
        .kubectl(
            None,
            &["api-resources", "--api-group", "sessions.wizardofoz.co"],
        )
        .await;
    assert!(resources.success(), "{resources}");
    // kubectl lists no subresources.
    assert!(resources.stdout.contains("recordings"), "{resources}");
    assert!(
        resources.stdout.contains("sessions.wizardofoz.co/v1alpha1"),
        "{resources}"
    );

    // A route reached through the apiserver gets alice's identity and groups.
    plane
        .grant_sessions("alice", &["pods/exec"], &["get", "create"])
        .await;
    let path = format!("/apis/sessions.wizardofoz.co/v1alpha1/namespaces/{ns}/pods/web/exec");
    let answer = eventually(
        Duration::from_secs(30),
        "alice's RBAC to be in force",
        || async {
            let output = plane.kubectl(Some("alice"), &["get", "--raw", &path]).await;
            output.success().then_some(output)
        },
    )
    .await;
    let answer: Value = serde_json::from_str(&answer.stdout).unwrap();
    assert_eq!(answer["user"], "alice");
    assert_eq!(answer["pod"], "web");
    assert_eq!(answer["namespace"], ns.as_str());
    let groups: Vec<&str> = answer["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g.as_str().unwrap())
        .collect();
    assert!(
        groups.contains(&"devs") && groups.contains(&"system:authenticated"),
        "{groups:?}"
    );
    let seen = calls.load(Ordering::SeqCst);
    assert_eq!(seen, 1);

    // Bob, without RBAC on the group: the apiserver refuses, oz never sees the call.
    let bob = plane.kubectl(Some("bob"), &["get", "--raw", &path]).await;
    assert!(bob.forbidden(), "{bob}");
    assert_eq!(calls.load(Ordering::SeqCst), seen);

    // Directly to oz's port, with forged headers and no certificate: refused and counted.
    let port = door.server.local_addr().port();
    let before = door.refused(front_proxy::NO_CERTIFICATE);
    let (code, body) = curl_directly(port, &path, None).await;
    assert_eq!(code, Some(401), "{body}");
    assert!(body.contains("front-proxy client certificate"), "{body}");
    assert_eq!(door.refused(front_proxy::NO_CERTIFICATE), before + 1);
    // With a certificate named as the apiserver's but from another CA: no handshake.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(&ns);
    std::fs::create_dir_all(&dir).unwrap();
    let other = mint_leaf(&mint_ca("another CA"), &["front-proxy-client".into()], true);
    let (cert, key) = (dir.join("other.crt"), dir.join("other.key"));
    std::fs::write(&cert, &other.cert).unwrap();
    std::fs::write(&key, &other.key).unwrap();
    let (code, body) = curl_directly(port, &path, Some((&cert, &key))).await;
    assert_eq!(code, None, "{body}");
    assert_eq!(door.refused(front_proxy::UNTRUSTED_CERTIFICATE), 1);
    // With the apiserver's own front-proxy certificate: answered (the refusals were about the
    // certificate), and the headers are believed.
    let (front_cert, front_key, _) = plane.plane.front_proxy();
    let (code, body) = curl_directly(port, &path, Some((front_cert, front_key))).await;
    assert_eq!(code, Some(200), "{body}");
    assert!(body.contains(r#""user":"admin""#), "{body}");
    assert_eq!(calls.load(Ordering::SeqCst), seen + 1);

    // oz down: the group fails closed with a clear error, everything else works.
    door.server.shutdown(Duration::from_secs(1)).await.unwrap();
    let down = eventually(AVAILABLE, "the apiserver to find oz gone", || async {
        let output = plane.kubectl(Some("alice"), &["get", "--raw", &path]).await;
        (!output.success()).then_some(output)
    })
    .await;
    assert!(
        down.stderr.contains("ServiceUnavailable") || down.stderr.contains("503"),
        "{down}"
    );
    let pods = plane.kubectl(None, &["get", "pods", "-n", &ns]).await;
    assert!(pods.success(), "{pods}");
    create_ready_pod(
        &plane.admin,
        &ns,
        "web",
        &Default::default(),
        None,
        test_pod_spec(),
    )
    .await
    .unwrap();
    let exec = plane
        .kubectl(None, &["exec", "-n", &ns, "web", "--", "echo", "direct"])
        .await;
    assert!(exec.success() && exec.stdout.contains("direct"), "{exec}");
}

#[tokio::test]
async fn oz_manager_registers_the_api_service_and_serves_discovery_on_its_sessions_port() {
    let plane = SessionsPlane::start("sessions-manager").await;
    let ns = plane.namespace.clone();
    let sessions_port = free_port();
    let operator = Operator::builder(&ns)
        .kubeconfig(plane.plane.admin_kubeconfig())
        .webhooks(&ns)
        .args(&[
            "--controllers=webhooks,sessions",
            &format!("--webhook-ca-secret={ns}-ca"),
            &format!("--webhook-cert-secret={ns}-tls"),
            &format!("--sessions-port={sessions_port}"),
            &format!(
                "--sessions-service={ns}/{}",
                crate::sessions::plane::SERVICE
            ),
        ])
        .start();
    let api_services: Api<APIService> = Api::all(plane.admin.clone());
    eventually(
        AVAILABLE,
        &format!(
            "oz-manager to register the sessions APIService with its CA (log: {})",
            operator.log.display()
        ),
        || async {
            let spec = api_services
                .get(oz_api::SESSIONS_API_SERVICE)
                .await
                .ok()?
                .spec?;
            (spec.ca_bundle.is_some_and(|b| !b.0.is_empty())
                && spec.service?.port == Some(i32::from(sessions_port)))
            .then_some(())
        },
    )
    .await;
    plane.wait_available().await;
    let discovery = plane
        .kubectl(
            Some("alice"),
            &["get", "--raw", "/apis/sessions.wizardofoz.co/v1alpha1"],
        )
        .await;
    assert!(discovery.success(), "{discovery}");
    assert!(discovery.stdout.contains("PodExecOptions"), "{discovery}");

    // The session routes are guarded by the same front door.
    let (code, body) = curl_directly(
        sessions_port,
        &format!("/apis/sessions.wizardofoz.co/v1alpha1/namespaces/{ns}/pods/web/exec"),
        None,
    )
    .await;
    assert_eq!(code, Some(401), "{body}");
}
