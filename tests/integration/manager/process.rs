//! oz-manager as a process: leader election and failover, namespace scoping, losing and
//! regaining RBAC in a namespace without a restart, what its log looks like in a file, and its
//! process's memory settings.

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
use oz::install::{InstallOptions, watched_namespace_rules};
use oz_api::{ExecAccessRequest, RequestPhase};
use oz_testenv::workloads::{self, WorkloadSpec};

use crate::support::{
    cluster::{env, install_crds},
    manifests::create_manifest,
    operator::eventually_or_show,
    operator::{Operator, http_get, metric_value},
    polling::{eventually, wait_until_gone},
    rbac::{grant, role_binding, subject},
    timing::strict_timing,
    users::can_exec,
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

/// Waits until the replica whose identity ends with `suffix` (`-<pid>`) holds the Lease.
async fn holds_lease_within(admin: &Client, ns: &str, suffix: &str, timeout: Duration) {
    eventually(
        timeout,
        &format!("the replica *{suffix} to hold the Lease"),
        || async {
            lease_holder(admin, ns)
                .await
                .filter(|h| h.ends_with(suffix))
        },
    )
    .await;
}

#[tokio::test]
async fn a_follower_takes_over_and_a_grant_still_expires_on_time() {
    let (ns, admin) = namespace_with_template("failover").await;
    let _timing = strict_timing().await;
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

    let ready = granted(&admin, &ns, "alice-web", "12s").await;
    let status = ready.status.unwrap();
    let (pod, expires_at) = (status.pod_name.unwrap(), status.expires_at.unwrap().0);

    // The leader dies without releasing the Lease; the follower takes over within its duration.
    leader.kill();
    let killed = Instant::now();
    holds_lease_within(
        &admin,
        &ns,
        &follower_identity_suffix,
        Duration::from_secs(10),
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
    // Both exist before oz starts, so an operator watching too widely would find both in its
    // first LIST and reconcile them together.
    create_manifest(&admin, &ignored, &request("elsewhere", "5m"))
        .await
        .unwrap();
    create_manifest(&admin, &watched, &request("here", "5m"))
        .await
        .unwrap();
    let _operator = Operator::builder(&watched).metrics().start();
    let metrics = _operator.metrics_port();
    wait_for_phase(
        &admin,
        &watched,
        "here",
        RequestPhase::Ready,
        Duration::from_secs(15),
    )
    .await;
    // The positive marker: every reconcile begun has ended (the first LIST's included).
    wait_until_idle(metrics, "ExecAccessRequest").await;
    assert_eq!(
        phase_of(&admin, &ignored, "elsewhere").await,
        None,
        "a request in an unwatched namespace is untouched"
    );
}

#[tokio::test]
async fn text_logs_written_to_a_file_carry_no_colour_codes() {
    let (ns, _) = namespace_with_template("plain-log").await;
    // stderr is a file here, as in a container; the flag is the default, named to be sure.
    let operator = Operator::start(&ns, &["--log-format=text"]);
    let line = eventually(
        Duration::from_secs(15),
        "oz to log its first list's timers",
        || async {
            let log = operator.log_text();
            let line = log
                .lines()
                .find(|l| l.contains("expiry timers armed from the first list"))?;
            Some(line.to_owned())
        },
    )
    .await;
    assert!(
        line.contains("timers=0"),
        "fields read as key=value: {line:?}"
    );
    let log = operator.log_text();
    assert!(
        !log.contains('\u{1b}'),
        "no escape codes in the log:\n{log}"
    );
}

/// oz-manager turns transparent huge pages off for itself (src/manager/memory.rs): with
/// them its heap of small cache entries was held 2 MiB at a time, mostly empty.
#[tokio::test]
async fn oz_manager_runs_without_transparent_huge_pages() {
    install_crds().await;
    let ns = env().namespace("no-thp").await.unwrap();
    let operator = Operator::start(&ns, &[]);
    let status = format!("/proc/{}/status", operator.pid());
    eventually(
        Duration::from_secs(15),
        "oz-manager's /proc status to read THP_enabled: 0",
        || async {
            let status = std::fs::read_to_string(&status).ok()?;
            status
                .lines()
                .any(|l| l.split_whitespace().eq(["THP_enabled:", "0"]))
                .then_some(())
        },
    )
    .await;
}

/// Waits until oz's request controller of `kind` has finished every reconcile it began, and
/// has begun at least one.
async fn wait_until_idle(metrics: u16, kind: &str) {
    let started = format!("oz_reconciles_total{{controller=\"request\",kind=\"{kind}\"}}");
    let ended =
        format!("oz_reconcile_duration_seconds_count{{controller=\"request\",kind=\"{kind}\"}}");
    eventually(
        Duration::from_secs(20),
        "the request controller to be idle",
        || async {
            let text = http_get(&format!("http://127.0.0.1:{metrics}/metrics")).await;
            let (started, ended) = (metric_value(&text, &started)?, metric_value(&text, &ended)?);
            (started > 0.0 && started == ended).then_some(())
        },
    )
    .await;
}

/// What the install grants oz in a watched namespace (the same rules `oz-manager manifests`
/// writes), which the test takes away and gives back.
fn operator_rules(ns: &str) -> Vec<PolicyRule> {
    let options = InstallOptions {
        watch_namespaces: vec![ns.to_string()],
        ..InstallOptions::default()
    };
    watched_namespace_rules(&options)
        .into_iter()
        .map(|r| r.rule)
        .collect()
}

#[tokio::test]
async fn losing_rbac_in_a_namespace_is_reported_and_recovers_without_a_restart() {
    let (ns, admin) = namespace_with_template("rbacloss").await;
    let operator_subjects = || vec![subject("User", "oz-operator")];
    grant(
        &admin,
        &ns,
        "oz-manager",
        operator_rules(&ns),
        operator_subjects(),
    )
    .await;
    let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), &ns);

    let mut operator = Operator::builder(&ns)
        .kubeconfig(env().kubeconfig_of("oz-operator").unwrap())
        .health()
        .metrics()
        .start();
    let (health, metrics) = (operator.health_port(), operator.metrics_port());
    create_manifest(&admin, &ns, &request("before", "5m"))
        .await
        .unwrap();
    // A grant that expires while oz has no access: it cannot be revoked until access returns.
    let expiring = create_manifest(&admin, &ns, &request("expiring", "20s"))
        .await
        .unwrap();
    let expiring_grant = format!("expiring-{}", &expiring.metadata.uid.unwrap()[..8]);
    wait_for_phase(
        &admin,
        &ns,
        "before",
        RequestPhase::Ready,
        Duration::from_secs(15),
    )
    .await;
    let expires_at = wait_for_phase(
        &admin,
        &ns,
        "expiring",
        RequestPhase::Ready,
        Duration::from_secs(15),
    )
    .await
    .status
    .unwrap()
    .expires_at
    .unwrap()
    .0;

    // Access is taken away: the operator stays up, reports it, and processes nothing.
    bindings
        .delete("oz-manager", &DeleteParams::default())
        .await
        .unwrap();
    assert!(
        Timestamp::now() < expires_at,
        "the test needs oz to lose its access before the grant expires"
    );
    let readiness = eventually(
        Duration::from_secs(15),
        "the readiness detail to name the namespace",
        || async {
            let text = http_get(&format!("http://127.0.0.1:{health}/readyz")).await;
            (text.contains(&format!("namespace {ns}: forbidden"))).then_some(text)
        },
    )
    .await;
    assert!(
        readiness.starts_with("HTTP/1.1 200") || readiness.starts_with("HTTP/1.0 200"),
        "still ready: {readiness}"
    );
    let exported = http_get(&format!("http://127.0.0.1:{metrics}/metrics")).await;
    assert!(
        exported.contains(&format!(
            "oz_namespace_access_denied{{namespace=\"{ns}\"}} 1"
        )),
        "{exported}"
    );
    let refusals = |log: &str| {
        log.lines()
            .filter(|l| l.contains("ExecAccessRequest") && l.contains("forbidden"))
            .count()
    };
    let refused_before = refusals(&operator.log_text());
    create_manifest(&admin, &ns, &request("during", "5m"))
        .await
        .unwrap();
    // The positive marker: oz tried again (to watch, or to reconcile) after the request was
    // created, and was refused.
    eventually(
        Duration::from_secs(20),
        "oz to be refused again after the request was created",
        || async { (refusals(&operator.log_text()) >= refused_before + 2).then_some(()) },
    )
    .await;
    assert_eq!(
        phase_of(&admin, &ns, "during").await,
        None,
        "nothing is processed without access"
    );
    assert!(operator_alive(&mut operator), "no crash loop");
    let log = operator.log_text();
    assert_eq!(
        log.matches("oz cannot work in this namespace").count(),
        1,
        "logged once:\n{log}"
    );

    // The grant expires meanwhile: its timer fires and is refused.
    eventually(
        Duration::from_secs(40),
        "the expiry timer to try to revoke and be refused",
        || async {
            operator
                .log_text()
                .contains("revoking an expired grant failed; retrying")
                .then_some(())
        },
    )
    .await;
    assert!(
        bindings.get_opt(&expiring_grant).await.unwrap().is_some(),
        "without its RBAC oz cannot revoke (the overdue case this test measures)"
    );

    // Access returns: the overdue grant is revoked at once, and the request is processed
    // without a restart.
    let _timing = strict_timing().await;
    bindings
        .create(
            &PostParams::default(),
            &role_binding("oz-manager", operator_subjects()),
        )
        .await
        .unwrap();
    let back = Instant::now();
    wait_until_gone(
        &bindings,
        &expiring_grant,
        Duration::from_secs(20),
        "the overdue grant to be revoked",
    )
    .await;
    let revoked_after = back.elapsed();
    eprintln!(
        "an overdue grant was revoked {:.3}s after oz's RBAC came back ({:.1}s past its expiresAt)",
        revoked_after.as_secs_f64(),
        Timestamp::now().duration_since(expires_at).as_secs_f64()
    );
    assert!(
        revoked_after < Duration::from_secs(5),
        "revoked {revoked_after:?} after the RBAC came back"
    );
    wait_for_phase(
        &admin,
        &ns,
        "expiring",
        RequestPhase::Expired,
        Duration::from_secs(20),
    )
    .await;
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
        let text = http_get(&format!("http://127.0.0.1:{metrics}/metrics")).await;
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

/// Two replicas electing a leader with a `lease`-second Lease in `ns`: (leader, follower).
async fn leader_and_follower(admin: &Client, ns: &str, lease: u64) -> (Operator, Operator) {
    let args = [
        "--leader-elect".to_string(),
        format!("--leader-elect-lease-duration={lease}"),
        format!("--namespace={ns}"),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let first = Operator::start(ns, &args);
    let second = Operator::start(ns, &args);
    let holder = eventually(Duration::from_secs(15), "a leader", || {
        lease_holder(admin, ns)
    })
    .await;
    if holder.ends_with(&format!("-{}", first.pid())) {
        (first, second)
    } else {
        assert!(
            holder.ends_with(&format!("-{}", second.pid())),
            "the holder {holder} is one of the two"
        );
        (second, first)
    }
}

/// Creates request `name` for `duration` and waits until it is Ready.
async fn granted(admin: &Client, ns: &str, name: &str, duration: &str) -> ExecAccessRequest {
    create_manifest(admin, ns, &request(name, duration))
        .await
        .unwrap();
    wait_for_phase(
        admin,
        ns,
        name,
        RequestPhase::Ready,
        Duration::from_secs(15),
    )
    .await
}

/// Creates a 5-minute request `name` and waits until it is Ready and `operator`'s log shows
/// that this replica reconciled it.
async fn granted_by(admin: &Client, ns: &str, name: &str, operator: &Operator) {
    granted(admin, ns, name, "5m").await;
    eventually_or_show(
        Duration::from_secs(10),
        &format!("{} to log its reconcile of {name}", operator.pid()),
        &[operator],
        || async { reconciled(operator, ns, name).then_some(()) },
    )
    .await;
}

/// Whether `operator` logged that it reconciled request `name` in `ns` (oz's debug line
/// "request reconciled", which names both).
fn reconciled(operator: &Operator, ns: &str, name: &str) -> bool {
    let (namespace, subject) = (format!("namespace={ns} "), format!("name={name} "));
    operator
        .log_text()
        .lines()
        .any(|l| l.contains("request reconciled") && l.contains(&namespace) && l.contains(&subject))
}

#[tokio::test]
async fn a_leader_stopped_gracefully_hands_over_at_once_not_after_its_lease() {
    let (ns, admin) = namespace_with_template("handover").await;
    // A long Lease: a follower that waited for it to expire would take 30 s.
    let (mut leader, follower) = leader_and_follower(&admin, &ns, 30).await;
    let follower_suffix = format!("-{}", follower.pid());
    granted(&admin, &ns, "before", "5m").await;

    let _timing = strict_timing().await;
    leader.terminate();
    let stopped = Instant::now();
    holds_lease_within(&admin, &ns, &follower_suffix, Duration::from_secs(45)).await;
    let handover = stopped.elapsed();
    eprintln!(
        "graceful handover: the follower held the Lease {:.3}s after the leader's SIGTERM (lease 30 s)",
        handover.as_secs_f64()
    );
    assert!(
        handover < Duration::from_secs(5),
        "the follower took over {handover:?} after SIGTERM, with a 30 s lease"
    );
    eventually(Duration::from_secs(15), "the old leader to exit", || {
        let exited = leader.exited();
        async move { exited.then_some(()) }
    })
    .await;
    assert!(
        leader.log_text().contains("released the Lease"),
        "{}",
        leader.log_text()
    );

    // The new leader works.
    granted(&admin, &ns, "after", "5m").await;
}

/// An admin hands oz's Lease in `ns` to `holder`, freshly renewed, as if it had taken it.
async fn hand_lease_to(admin: &Client, ns: &str, holder: &str) {
    let leases: Api<Lease> = Api::namespaced(admin.clone(), ns);
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(Timestamp::now());
    leases
        .patch(
            "oz-manager",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({
                "spec": {"holderIdentity": holder, "acquireTime": now, "renewTime": now}
            })),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn a_leader_that_loses_its_lease_stops_reconciling() {
    let (ns, admin) = namespace_with_template("stolen").await;
    let (leader, follower) = leader_and_follower(&admin, &ns, 30).await;
    let holder = lease_holder(&admin, &ns).await.unwrap();
    let follower_identity = format!(
        "{}-{}",
        holder.strip_suffix(&format!("-{}", leader.pid())).unwrap(),
        follower.pid()
    );
    granted_by(&admin, &ns, "before", &leader).await;

    // An admin hands the Lease to the other replica while the leader keeps running.
    hand_lease_to(&admin, &ns, &follower_identity).await;
    // The positive markers: the old leader says its controllers stopped; the new one leads.
    eventually_or_show(
        Duration::from_secs(15),
        "the old leader to stop its controllers",
        &[&leader, &follower],
        || async {
            leader
                .log_text()
                .contains("lost the leadership: controllers stopped")
                .then_some(())
        },
    )
    .await;
    eventually_or_show(
        Duration::from_secs(15),
        "the new leader to lead",
        &[&leader, &follower],
        || async {
            follower
                .log_text()
                .contains("leading: starting the controllers")
                .then_some(())
        },
    )
    .await;

    granted_by(&admin, &ns, "meanwhile", &follower).await;
    assert!(
        !reconciled(&leader, &ns, "meanwhile"),
        "the replica that lost the Lease reconciled a request created afterwards:\n{}",
        leader.log_text()
    );
    assert_eq!(
        lease_holder(&admin, &ns).await.as_deref(),
        Some(follower_identity.as_str()),
        "the old leader did not take the Lease back"
    );
}

#[tokio::test]
async fn a_leader_that_loses_its_lease_and_takes_it_back_runs_its_controllers_again() {
    let (ns, admin) = namespace_with_template("regained").await;
    let args = [
        "--leader-elect".to_string(),
        "--leader-elect-lease-duration=3".to_string(),
        format!("--namespace={ns}"),
    ];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let operator = Operator::start(&ns, &args);
    granted_by(&admin, &ns, "before", &operator).await;

    // Another holder takes the Lease and never renews it: oz steps down, waits the 3 s lease
    // out, and takes it back, in the same process.
    hand_lease_to(&admin, &ns, "intruder").await;
    eventually_or_show(
        Duration::from_secs(15),
        "oz to stop its controllers",
        &[&operator],
        || async {
            operator
                .log_text()
                .contains("lost the leadership: controllers stopped")
                .then_some(())
        },
    )
    .await;
    eventually_or_show(
        Duration::from_secs(30),
        "oz to lead again",
        &[&operator],
        || async {
            (operator
                .log_text()
                .matches("leading: starting the controllers")
                .count()
                >= 2)
                .then_some(())
        },
    )
    .await;

    // Its controllers run again: a request created now is granted, by this replica.
    granted_by(&admin, &ns, "after", &operator).await;
}

/// [`operator_rules`] without `list` on podaccessrequests and rolebindings: the Pod request
/// controller's first LIST never comes, and the Exec request controller's grant cache is never
/// filled, as with a missing CRD or a narrowed install.
fn operator_rules_that_never_list(ns: &str) -> Vec<PolicyRule> {
    let mut rules: Vec<PolicyRule> = operator_rules(ns)
        .into_iter()
        .filter_map(|mut rule| {
            let resources = rule.resources.get_or_insert_with(Vec::new);
            resources.retain(|r| r != "podaccessrequests");
            if resources.iter().any(|r| r == "rolebindings") {
                rule.verbs.retain(|v| v != "list" && v != "watch");
            }
            (!resources.is_empty()).then_some(rule)
        })
        .collect();
    let lease_verbs = ["get", "list", "watch", "create", "update", "patch"];
    rules.push(crate::support::rbac::rule(
        &["coordination.k8s.io"],
        &["leases"],
        &lease_verbs,
    ));
    rules
}

/// A controller that is stopped before its caches are filled has no reconcile to finish: it
/// stops at once, on a lost Lease and on SIGTERM. kube's graceful stop waits for the first
/// LIST (and a reconcile waits for the caches) while the stop itself has cut the watches that
/// would bring them, so such a replica used to lead on, and never exit, until killed; in a
/// busy suite, a Lease taken right after the controllers started caught it.
#[tokio::test]
async fn controllers_whose_caches_never_fill_stop_at_once_on_a_lost_lease_and_on_sigterm() {
    let (ns, admin) = namespace_with_template("unlisted").await;
    grant(
        &admin,
        &ns,
        "oz-manager",
        operator_rules_that_never_list(&ns),
        vec![subject("User", "oz-operator")],
    )
    .await;
    let mut operator = Operator::start_with_kubeconfig(
        &ns,
        env().kubeconfig_of("oz-operator").unwrap(),
        &[
            "--leader-elect",
            "--leader-elect-lease-duration=3",
            &format!("--namespace={ns}"),
        ],
    );
    let log_says = |text: &'static str, times: usize| {
        let operator = &operator;
        move || async move { (operator.log_text().matches(text).count() >= times).then_some(()) }
    };
    eventually_or_show(
        Duration::from_secs(15),
        "oz to lead and list its ExecAccessRequests",
        &[&operator],
        log_says(
            "expiry timers armed from the first list kind=ExecAccessRequest",
            1,
        ),
    )
    .await;
    // A request the Exec controller takes up, and waits on the grant cache for.
    create_manifest(&admin, &ns, &request("waiting", "5m"))
        .await
        .unwrap();
    eventually_or_show(
        Duration::from_secs(15),
        "a reconcile to wait for the grant cache",
        &[&operator],
        log_says(
            "waiting for the caches' first lists to reconcile kind=ExecAccessRequest",
            1,
        ),
    )
    .await;

    hand_lease_to(&admin, &ns, "intruder").await;
    eventually_or_show(
        Duration::from_secs(15),
        "oz to stop its controllers",
        &[&operator],
        log_says("lost the leadership: controllers stopped", 1),
    )
    .await;
    eventually_or_show(
        Duration::from_secs(30),
        "oz to lead again",
        &[&operator],
        log_says("leading: starting the controllers", 2),
    )
    .await;

    operator.terminate();
    let deadline = Instant::now() + Duration::from_secs(15);
    while !operator.exited() {
        assert!(
            Instant::now() < deadline,
            "oz did not exit within 15 s of SIGTERM{}",
            operator.log_tail(60)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        operator.log_text().contains("released the Lease"),
        "{}",
        operator.log_tail(30)
    );
}

fn sum_of(exposition: &str, metric: &str) -> f64 {
    exposition
        .lines()
        .filter(|l| l.starts_with(&format!("{metric}{{")))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test]
async fn deleting_a_namespace_with_live_grants_leaves_no_timers_grants_or_error_loops() {
    let (doomed, admin) = namespace_with_template("nsgone").await;
    let (survivor, _) = namespace_with_template("nskept").await;
    let operator = Operator::builder(&doomed)
        .metrics()
        .args(&[&format!("--watch-namespaces={survivor}")])
        .start();
    let metrics = operator.metrics_port();
    let url = format!("http://127.0.0.1:{metrics}/metrics");
    let timers = r#"oz_expiry_timers{kind="ExecAccessRequest"}"#;
    let grants = r#"oz_active_grants{kind="ExecAccessRequest"}"#;
    let gauge_becomes = |sample: &'static str, value: f64| {
        let url = url.clone();
        async move {
            eventually(
                Duration::from_secs(30),
                &format!("{sample} to be {value}"),
                || async {
                    let text = http_get(&url).await;
                    (!text.is_empty() && metric_value(&text, sample).unwrap_or(0.0) == value)
                        .then_some(())
                },
            )
            .await
        }
    };
    gauge_becomes(timers, 0.0).await;

    for name in ["one", "two"] {
        granted(&admin, &doomed, name, "1h").await;
    }
    gauge_becomes(timers, 2.0).await;
    gauge_becomes(grants, 2.0).await;

    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(admin.clone());
    namespaces
        .delete(&doomed, &DeleteParams::default())
        .await
        .unwrap();
    wait_until_gone(
        &namespaces,
        &doomed,
        Duration::from_secs(60),
        "the namespace to be gone",
    )
    .await;
    // No timer left waiting an hour for grants that no longer exist; no grant counted.
    gauge_becomes(timers, 0.0).await;
    gauge_becomes(grants, 0.0).await;

    // No error loop: a grant made and expired in the other namespace (seconds of oz at work,
    // the positive marker) adds no failed reconcile.
    let errors = sum_of(&http_get(&url).await, "oz_reconcile_errors_total");
    create_manifest(&admin, &survivor, &request("short", "3s"))
        .await
        .unwrap();
    wait_for_phase(
        &admin,
        &survivor,
        "short",
        RequestPhase::Expired,
        Duration::from_secs(20),
    )
    .await;
    assert_eq!(
        sum_of(&http_get(&url).await, "oz_reconcile_errors_total"),
        errors,
        "reconciles still failing after the namespace went (log: {})",
        operator.log.display()
    );
    gauge_becomes(timers, 0.0).await;
    gauge_becomes(grants, 0.0).await;
    // And no warning or error said again and again.
    let log = operator.log_text();
    let mut said: std::collections::HashMap<String, usize> = Default::default();
    for line in log
        .lines()
        .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
    {
        // Without the timestamp that starts each line.
        let what = line.split_once(' ').map_or(line, |(_, rest)| rest);
        *said.entry(what.to_string()).or_default() += 1;
    }
    let repeated: Vec<_> = said.iter().filter(|(_, n)| **n > 2).collect();
    assert!(repeated.is_empty(), "repeated in the log: {repeated:#?}");
}
