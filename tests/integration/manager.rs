//! oz-manager as a process: leader election and failover, namespace scoping, and losing and
//! regaining RBAC in a namespace without a restart.

use std::time::{Duration, Instant};

use k8s_openapi::{
    api::{
        coordination::v1::Lease,
        rbac::v1::{PolicyRule, RoleBinding},
    },
    jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::{DeleteParams, PostParams},
};
use oz_api::{ExecAccessRequest, RequestPhase};
use oz_testenv::workloads::{self, WorkloadSpec};

use crate::support::{
    Operator, can_exec, create_manifest, env, eventually, grant, install_crds, role_binding, rule,
    subject,
};

fn template(deployment: &str) -> String {
    format!(
        "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessTemplate\nmetadata: {{name: web-exec}}\nspec:\n  \
         accessConfig: {{allowedGroups: [devs]}}\n  controllerTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: {deployment}}}\n"
    )
}

fn request(name: &str, duration: &str) -> String {
    format!(
        "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: ExecAccessRequest\nmetadata: {{name: {name}}}\n\
         spec: {{templateName: web-exec, duration: {duration}, requester: {{username: alice, groups: [devs]}}}}\n"
    )
}

/// A namespace with Deployment web and template web-exec.
async fn namespace_with_template(prefix: &str) -> (String, Client) {
    install_crds().await;
    let ns = env().namespace(prefix).await.unwrap();
    let admin = env().admin().await.unwrap();
    workloads::deployment(&admin, &ns, WorkloadSpec::new("web", 1))
        .await
        .unwrap();
    create_manifest(&admin, &ns, &template("web"))
        .await
        .unwrap();
    (ns, admin)
}

async fn phase_of(admin: &Client, ns: &str, name: &str) -> Option<RequestPhase> {
    let requests: Api<ExecAccessRequest> = Api::namespaced(admin.clone(), ns);
    requests.get(name).await.ok()?.status?.phase
}

async fn wait_for_phase(
    admin: &Client,
    ns: &str,
    name: &str,
    phase: RequestPhase,
    timeout: Duration,
) -> ExecAccessRequest {
    eventually(timeout, &format!("{name} to become {phase:?}"), || async {
        let requests: Api<ExecAccessRequest> = Api::namespaced(admin.clone(), ns);
        let request = requests.get(name).await.ok()?;
        (request.status.as_ref()?.phase == Some(phase)).then_some(request)
    })
    .await
}

async fn lease_holder(admin: &Client, ns: &str) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(admin.clone(), ns);
    leases
        .get_opt("oz-manager")
        .await
        .ok()??
        .spec?
        .holder_identity
}

#[tokio::test]
async fn a_follower_takes_over_and_a_grant_still_expires_on_time() {
    let (ns, admin) = namespace_with_template("failover").await;
    let args = [
        "--leader-elect",
        "--leader-elect-lease-duration=3",
        &format!("--namespace={ns}"),
    ];
    let mut first = Operator::start(&ns, &args);
    let mut second = Operator::start(&ns, &args);

    let holder = eventually(Duration::from_secs(15), "a leader", || {
        lease_holder(&admin, &ns)
    })
    .await;
    let (leader, follower) = if holder.ends_with(&format!("-{}", first.pid())) {
        (&mut first, &mut second)
    } else {
        assert!(
            holder.ends_with(&format!("-{}", second.pid())),
            "the holder {holder} is one of the two"
        );
        (&mut second, &mut first)
    };
    let follower_identity_suffix = format!("-{}", follower.pid());

    create_manifest(&admin, &ns, &request("alice-web", "12s"))
        .await
        .unwrap();
    let ready = wait_for_phase(
        &admin,
        &ns,
        "alice-web",
        RequestPhase::Ready,
        Duration::from_secs(15),
    )
    .await;
    let status = ready.status.unwrap();
    let (pod, expires_at) = (status.pod_name.unwrap(), status.expires_at.unwrap().0);

    // The leader dies without releasing the Lease; the follower takes over within its duration.
    leader.kill();
    let killed = Instant::now();
    eventually(
        Duration::from_secs(10),
        "the follower to take the lease",
        || async {
            lease_holder(&admin, &ns)
                .await
                .filter(|h| h.ends_with(&follower_identity_suffix))
        },
    )
    .await;
    let takeover = killed.elapsed();
    assert!(
        takeover <= Duration::from_secs(5),
        "takeover took {takeover:?} with a 3 s lease"
    );
    assert!(
        Timestamp::now() < expires_at,
        "the test needs the grant to outlive the takeover"
    );
    assert!(can_exec("alice", &ns, &pod).await);

    let revoked = eventually(Duration::from_secs(20), "the grant to end", || {
        let (ns, pod) = (ns.clone(), pod.clone());
        async move { (!can_exec("alice", &ns, &pod).await).then(Timestamp::now) }
    })
    .await;
    let lag = revoked.duration_since(expires_at).as_secs_f64();
    assert!(
        lag < 1.0,
        "revoked {lag:.3}s after expiresAt, after a failover"
    );
}

#[tokio::test]
async fn requests_outside_the_watched_namespaces_are_ignored() {
    let (watched, admin) = namespace_with_template("scope-a").await;
    let (ignored, _) = namespace_with_template("scope-b").await;
    let _operator = Operator::start(&watched, &[]);
    create_manifest(&admin, &ignored, &request("elsewhere", "5m"))
        .await
        .unwrap();
    create_manifest(&admin, &watched, &request("here", "5m"))
        .await
        .unwrap();
    wait_for_phase(
        &admin,
        &watched,
        "here",
        RequestPhase::Ready,
        Duration::from_secs(15),
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        phase_of(&admin, &ignored, "elsewhere").await,
        None,
        "a request in an unwatched namespace is untouched"
    );
}

/// What oz-manager needs in a watched namespace (without webhooks or leader election).
fn operator_rules() -> Vec<PolicyRule> {
    let kinds = [
        "execaccesstemplates",
        "execaccessrequests",
        "podaccesstemplates",
        "podaccessrequests",
    ];
    let statuses = kinds.map(|k| format!("{k}/status"));
    vec![
        rule(
            &["crds.wizardofoz.co"],
            &kinds,
            &["get", "list", "watch", "patch", "delete"],
        ),
        rule(
            &["crds.wizardofoz.co"],
            &statuses.each_ref().map(String::as_str),
            &["patch"],
        ),
        rule(
            &["apps"],
            &["deployments", "statefulsets", "daemonsets"],
            &["get", "list", "watch"],
        ),
        rule(
            &[""],
            &["pods"],
            &["get", "list", "watch", "create", "delete"],
        ),
        rule(&[""], &["pods/exec", "pods/attach"], &["create", "get"]),
        rule(
            &["rbac.authorization.k8s.io"],
            &["roles", "rolebindings"],
            &["get", "list", "watch", "create", "patch", "delete"],
        ),
        rule(&["events.k8s.io"], &["events"], &["create", "patch"]),
    ]
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn get_text(url: &str) -> String {
    // A tiny HTTP/1.0 GET: the endpoints are plain HTTP on loopback.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = url.trim_start_matches("http://");
    let (host, path) = address.split_once('/').unwrap();
    let Ok(mut stream) = tokio::net::TcpStream::connect(host).await else {
        return String::new();
    };
    stream
        .write_all(format!("GET /{path} HTTP/1.0\r\nHost: {host}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut body = String::new();
    let _ = stream.read_to_string(&mut body).await;
    body
}

#[tokio::test]
async fn losing_rbac_in_a_namespace_is_reported_and_recovers_without_a_restart() {
    let (ns, admin) = namespace_with_template("rbacloss").await;
    let operator_subjects = || vec![subject("User", "oz-operator")];
    grant(
        &admin,
        &ns,
        "oz-manager",
        operator_rules(),
        operator_subjects(),
    )
    .await;
    let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), &ns);

    let (health, metrics) = (free_port(), free_port());
    let mut operator = Operator::start_with_kubeconfig(
        &ns,
        env().kubeconfig_of("oz-operator").unwrap(),
        &[
            &format!("--health-probe-bind-address=127.0.0.1:{health}"),
            &format!("--metrics-bind-address=127.0.0.1:{metrics}"),
        ],
    );
    create_manifest(&admin, &ns, &request("before", "5m"))
        .await
        .unwrap();
    wait_for_phase(
        &admin,
        &ns,
        "before",
        RequestPhase::Ready,
        Duration::from_secs(15),
    )
    .await;

    // Access is taken away: the operator stays up, reports it, and processes nothing.
    bindings
        .delete("oz-manager", &DeleteParams::default())
        .await
        .unwrap();
    let readiness = eventually(
        Duration::from_secs(15),
        "the readiness detail to name the namespace",
        || async {
            let text = get_text(&format!("http://127.0.0.1:{health}/readyz")).await;
            (text.contains(&format!("namespace {ns}: forbidden"))).then_some(text)
        },
    )
    .await;
    assert!(
        readiness.starts_with("HTTP/1.1 200") || readiness.starts_with("HTTP/1.0 200"),
        "still ready: {readiness}"
    );
    let exported = get_text(&format!("http://127.0.0.1:{metrics}/metrics")).await;
    assert!(
        exported.contains(&format!(
            "oz_namespace_access_denied{{namespace=\"{ns}\"}} 1"
        )),
        "{exported}"
    );
    create_manifest(&admin, &ns, &request("during", "5m"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        phase_of(&admin, &ns, "during").await,
        None,
        "nothing is processed without access"
    );
    assert!(operator_alive(&mut operator), "no crash loop");
    let log = std::fs::read_to_string(&operator.log).unwrap();
    assert_eq!(
        log.matches("oz cannot work in this namespace").count(),
        1,
        "logged once:\n{log}"
    );

    // Access returns: the request is processed without a restart.
    bindings
        .create(
            &PostParams::default(),
            &role_binding("oz-manager", operator_subjects()),
        )
        .await
        .unwrap();
    wait_for_phase(
        &admin,
        &ns,
        "during",
        RequestPhase::Ready,
        Duration::from_secs(20),
    )
    .await;
    assert!(operator_alive(&mut operator));
    eventually(Duration::from_secs(15), "the problem to clear", || async {
        let text = get_text(&format!("http://127.0.0.1:{metrics}/metrics")).await;
        text.contains(&format!(
            "oz_namespace_access_denied{{namespace=\"{ns}\"}} 0"
        ))
        .then_some(())
    })
    .await;
}

fn operator_alive(operator: &mut Operator) -> bool {
    operator.is_running()
}
