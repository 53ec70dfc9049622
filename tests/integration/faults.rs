//! Faults injected into a running oz: its process killed mid-burst, down while grants expire,
//! the apiserver restarted under load, the leader killed mid-burst, its webhook certificates
//! deleted or corrupted under admission traffic, and its webhook server gone.
//!
//! Each test asserts the two properties that matter: nothing is lost (every request ends in a
//! settled phase with exactly its own Role and RoleBinding, or none), and nothing is granted
//! beyond its window (revocation within 1 s of the expiry, or of oz or the apiserver being back
//! when it was down at the expiry). Waiting for things to settle is generous; those two
//! properties are strict. `docs/reliability.md` lists the outcomes.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use k8s_openapi::{
    api::{coordination::v1::Lease, core::v1::Secret},
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    jiff::Timestamp,
};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};
use oz_api::{ExecAccessRequest, RequestPhase};
use oz_testenv::{
    ControlPlane, ControlPlaneOptions, exec,
    workloads::{self, WorkloadSpec},
};
use serde_json::json;

use crate::{
    grants::{
        RevocationClock, SETTLE, WebhookOperator, create_requests, exec_requests, exec_template,
        grant_name, grant_problems, let_groups_request, wait_until_all_in,
    },
    support::{Operator, create_manifest, env, eventually, exec, install_crds, may_exec},
};

/// The strict bound: access ends within this of its expiry, or of oz or the apiserver coming
/// back when it was down at the expiry.
const REVOCATION_BOUND: Duration = Duration::from_secs(1);

/// The bursts below load a 2-core machine for seconds; the revocation measurements do not
/// overlap them, so that what they measure is oz, and not this test binary's own load.
static QUIET: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A small, seedable generator for the kill times, so a failing run can be replayed
/// (`OZ_FAULT_SEED`).
struct Rng(u64);

impl Rng {
    fn seeded(test: &str) -> Self {
        let seed = std::env::var("OZ_FAULT_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_nanos() as u64
            });
        eprintln!("{test}: OZ_FAULT_SEED={seed}");
        Self(seed | 1)
    }

    /// A duration in `[low, high)` milliseconds.
    fn millis(&mut self, low: u64, high: u64) -> Duration {
        // xorshift64
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        Duration::from_millis(low + self.0 % (high - low))
    }
}

/// A namespace with Deployment `web` (`replicas` ready pods) and ExecAccessTemplate `web-exec`.
async fn namespace_with_web(prefix: &str, replicas: usize) -> (String, Client, Vec<String>) {
    install_crds().await;
    let ns = env().namespace(prefix).await.unwrap();
    let admin = env().admin().await.unwrap();
    let web = workloads::deployment(&admin, &ns, WorkloadSpec::new("web", replicas))
        .await
        .unwrap();
    create_manifest(&admin, &ns, &exec_template("web-exec", "web"))
        .await
        .unwrap();
    (ns, admin, web.pod_names())
}

/// `count` requests `r000`, `r001`, ...: every fifth from bob (not in devs, so Denied), the
/// others from alice.
fn burst(count: usize, duration: &str) -> Vec<(String, &'static str, String)> {
    (0..count)
        .map(|i| {
            let user = if i % 5 == 4 { "bob" } else { "alice" };
            (format!("r{i:03}"), user, duration.to_string())
        })
        .collect()
}

/// Asserts the burst settled: every alice request Ready on one of `pods`, every bob request
/// Denied, and the grants exactly right.
async fn assert_burst_settled(admin: &Client, ns: &str, count: usize, pods: &[String], log: &str) {
    let settled = wait_until_all_in(
        admin,
        ns,
        count,
        &[RequestPhase::Ready, RequestPhase::Denied],
        &format!("all {count} requests to be Ready or Denied (log: {log})"),
    )
    .await;
    for (name, request) in &settled {
        let status = request.status.as_ref().unwrap();
        let alice = request.spec.requester.as_ref().unwrap().username == "alice";
        if alice {
            assert_eq!(status.phase, Some(RequestPhase::Ready), "{name}");
            let pod = status.pod_name.clone().unwrap_or_default();
            assert!(
                pods.contains(&pod),
                "{name} was granted {pod:?}, not a web pod"
            );
        } else {
            assert_eq!(status.phase, Some(RequestPhase::Denied), "{name}");
        }
    }
    let problems = grant_problems(admin, ns).await;
    assert!(
        problems.is_empty(),
        "{} problems with the grants (log: {log}):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[tokio::test]
async fn sigkill_during_a_burst_of_200_requests_loses_and_duplicates_nothing() {
    let _quiet = QUIET.lock().await;
    let (ns, admin, pods) = namespace_with_web("fault-kill", 3).await;
    let mut rng = Rng::seeded("sigkill_during_a_burst");
    let operator = Arc::new(tokio::sync::Mutex::new(Operator::start(&ns, &[])));
    let creating = create_requests(&admin, &ns, "web-exec", burst(200, "30m"), 8);
    let kills = AtomicUsize::new(0);
    let started = Instant::now();
    let creating = async {
        creating.await;
        eprintln!(
            "200 requests created after {:.2}s",
            started.elapsed().as_secs_f64()
        );
    };
    let killing = async {
        // Kill points spread over the creation and the reconciles that follow it.
        for _ in 0..6 {
            tokio::time::sleep(rng.millis(150, 900)).await;
            let mut operator = operator.lock().await;
            operator.kill();
            kills.fetch_add(1, Ordering::SeqCst);
            let killed_at = started.elapsed();
            let down = rng.millis(0, 400);
            tokio::time::sleep(down).await;
            operator.restart();
            eprintln!(
                "SIGKILL at {:.2}s, restarted {}ms later",
                killed_at.as_secs_f64(),
                down.as_millis()
            );
        }
    };
    tokio::join!(creating, killing);
    let log = operator.lock().await.log.display().to_string();
    assert_eq!(kills.load(Ordering::SeqCst), 6);
    assert_burst_settled(&admin, &ns, 200, &pods, &log).await;
}

/// At start-up every request is reconciled once, and the reconcile queue is shared: a grant
/// expiring a moment after the start would wait behind all of them. Its revocation must not:
/// each grant has a timer of its own, armed from the watch cache before the first reconcile.
/// One reconcile at a time (`--max-concurrent-reconciles=1`) and 300 other grants make the
/// queue seconds long; the canaries expire 2 s after the restart.
#[tokio::test]
async fn grants_expiring_behind_a_long_start_up_queue_are_revoked_on_time() {
    let (ns, admin, _pods) = namespace_with_web("fault-queue", 2).await;
    let mut operator = Operator::start(&ns, &["--max-concurrent-reconciles=1"]);
    let others: Vec<_> = (0..300)
        .map(|i| (format!("l{i:03}"), "alice", "1h".to_string()))
        .collect();
    create_requests(&admin, &ns, "web-exec", others, 10).await;
    wait_until_all_in(&admin, &ns, 300, &[RequestPhase::Ready], "300 long grants").await;
    let quiet = QUIET.lock().await;
    let canaries: Vec<_> = (0..10)
        .map(|i| (format!("c{i:02}"), "alice", "8s".to_string()))
        .collect();
    create_requests(&admin, &ns, "web-exec", canaries, 10).await;
    let ready = wait_until_all_in(&admin, &ns, 310, &[RequestPhase::Ready], "the canaries").await;
    let canaries: Vec<&ExecAccessRequest> = ready
        .values()
        .filter(|r| r.name_any().starts_with('c'))
        .collect();
    let first_expiry = canaries
        .iter()
        .map(|r| r.status.as_ref().unwrap().expires_at.clone().unwrap().0)
        .min()
        .unwrap();
    let until_restart = first_expiry.duration_since(Timestamp::now()).as_secs_f64() - 2.0;
    assert!(
        until_restart > 0.0,
        "the canaries became Ready too late to test anything"
    );
    tokio::time::sleep(Duration::from_secs_f64(until_restart)).await;

    let names: Vec<String> = canaries.iter().map(|r| grant_name(r)).collect();
    let clock = RevocationClock::start(&admin, &ns, names.clone());
    operator.restart();
    let gone = eventually(SETTLE, "every canary to be revoked", || async {
        let gone = clock.gone();
        (gone.len() == names.len()).then_some(gone)
    })
    .await;
    // What users read agrees with their access: the timers mark the canaries Expired too,
    // without waiting for the reconcile queue to reach them.
    let last_revoked = gone.values().max().copied().unwrap();
    let statuses_late = loop {
        let all = exec_requests(&admin, &ns).await;
        let expired = all
            .values()
            .filter(|r| r.name_any().starts_with('c'))
            .filter(|r| r.status.as_ref().and_then(|s| s.phase) == Some(RequestPhase::Expired))
            .count();
        let since = Timestamp::now().duration_since(last_revoked).as_secs_f64();
        if expired == canaries.len() {
            break None;
        }
        if since > REVOCATION_BOUND.as_secs_f64() {
            break Some(canaries.len() - expired);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    drop(quiet);
    assert_eq!(
        statuses_late,
        None,
        "canaries still not Expired a second after their access ended (log: {})",
        operator.log.display()
    );
    let mut worst = 0.0f64;
    for canary in &canaries {
        let expires_at = canary
            .status
            .as_ref()
            .unwrap()
            .expires_at
            .clone()
            .unwrap()
            .0;
        let lateness = gone[&grant_name(canary)]
            .duration_since(expires_at)
            .as_secs_f64();
        worst = worst.max(lateness);
    }
    // Without the terminal colours the log is written with.
    let log = std::fs::read_to_string(&operator.log)
        .unwrap()
        .split('\x1b')
        .map(|part| part.split_once('m').map_or(part, |(_, rest)| rest))
        .collect::<String>();
    eprintln!("canaries behind a start-up queue of 310: worst lateness {worst:.3}s");
    assert!(
        worst < REVOCATION_BOUND.as_secs_f64(),
        "a canary was revoked {worst:.3}s after its expiry (log: {})",
        operator.log.display()
    );
    assert!(
        log.lines()
            .any(|line| line.contains("expiry timers armed from the cache")
                && line.contains("timers=310")),
        "the restarted oz did not arm the 310 timers from its cache (log: {})",
        operator.log.display()
    );
}

#[tokio::test]
async fn fifty_grants_overdue_while_oz_is_down_are_revoked_within_a_second_of_its_restart() {
    let (ns, admin, pods) = namespace_with_web("fault-overdue", 2).await;
    let quiet = QUIET.lock().await;
    let mut operator = Operator::start(&ns, &[]);
    let alice = env().client_as("alice").await.unwrap();
    let requests: Vec<_> = (0..50)
        .map(|i| (format!("o{i:02}"), "alice", "12s".to_string()))
        .collect();
    create_requests(&admin, &ns, "web-exec", requests, 10).await;
    let ready = wait_until_all_in(
        &admin,
        &ns,
        50,
        &[RequestPhase::Ready],
        &format!("50 Ready grants (log: {})", operator.log.display()),
    )
    .await;
    operator.kill();
    let last_expiry = ready
        .values()
        .map(|r| r.status.as_ref().unwrap().expires_at.clone().unwrap().0)
        .max()
        .unwrap();
    assert!(
        Timestamp::now() < last_expiry,
        "the grants must outlive the kill"
    );

    // Down at every expiry: nothing revokes, the grants are overdue.
    let wait = last_expiry.duration_since(Timestamp::now()).as_secs_f64() + 1.0;
    tokio::time::sleep(Duration::from_secs_f64(wait.max(0.0))).await;
    let overdue = ready.values().next().unwrap();
    let pod = overdue.status.as_ref().unwrap().pod_name.clone().unwrap();
    assert!(
        may_exec(&alice, &ns, &pod).await,
        "with oz down, nothing revokes (the overdue case)"
    );

    let names: Vec<String> = ready.values().map(grant_name).collect();
    let clock = RevocationClock::start(&admin, &ns, names.clone());
    tokio::time::sleep(Duration::from_millis(200)).await;
    let restarted = Timestamp::now();
    operator.restart();
    let gone = eventually(SETTLE, "every overdue grant to be revoked", || async {
        let gone = clock.gone();
        (gone.len() == names.len()).then_some(gone)
    })
    .await;
    let mut lags: Vec<f64> = gone
        .values()
        .map(|t| t.duration_since(restarted).as_secs_f64())
        .collect();
    lags.sort_by(f64::total_cmp);
    eprintln!(
        "overdue revocation after restart: first {:.3}s, median {:.3}s, last {:.3}s",
        lags[0],
        lags[lags.len() / 2],
        lags[lags.len() - 1]
    );
    assert!(
        lags[lags.len() - 1] < REVOCATION_BOUND.as_secs_f64(),
        "the last of 50 overdue grants was revoked {:.3}s after oz restarted (log: {})",
        lags[lags.len() - 1],
        operator.log.display()
    );
    drop(quiet);

    wait_until_all_in(&admin, &ns, 50, &[RequestPhase::Expired], "all Expired").await;
    for pod in &pods {
        assert!(
            !may_exec(&alice, &ns, pod).await,
            "alice kept access to {pod}"
        );
    }
    assert_eq!(grant_problems(&admin, &ns).await, Vec::<String>::new());
}

/// Installs oz's CRDs into a control plane of a test's own and waits until they are served.
async fn install_crds_into(admin: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    for crd in oz_api::all_crds() {
        crds.patch(
            &crd.name_any(),
            &PatchParams::apply("oz-tests").force(),
            &Patch::Apply(&crd),
        )
        .await
        .unwrap();
    }
    let requests: Api<ExecAccessRequest> = Api::all(admin.clone());
    eventually(SETTLE, "oz's CRDs to be served", || async {
        requests.list(&Default::default()).await.ok().map(drop)
    })
    .await;
}

#[tokio::test]
async fn an_apiserver_restart_under_load_revokes_every_grant_within_a_second_of_it_being_back() {
    // A control plane of this test's own: stopping the shared one would break every other test.
    let plane = tokio::task::spawn_blocking(|| {
        ControlPlane::start(
            ControlPlaneOptions::empty()
                .user("alice", &["devs"])
                .controllers(&["all"])
                .nodes(1)
                .restartable(),
        )
        .unwrap()
    })
    .await
    .unwrap();
    let plane = Arc::new(plane);
    let admin = plane.admin().await.unwrap();
    install_crds_into(&admin).await;
    let ns = plane.namespace("fault-apiserver").await.unwrap();
    workloads::deployment(&admin, &ns, WorkloadSpec::new("web", 2))
        .await
        .unwrap();
    create_manifest(&admin, &ns, &exec_template("web-exec", "web"))
        .await
        .unwrap();
    let operator = Operator::start_with_kubeconfig(&ns, plane.admin_kubeconfig(), &[]);

    // 30 grants whose expiries are spread over the next 5 to 16.6 s: some end before the
    // outage, most during it, some after.
    let quiet = QUIET.lock().await;
    let created = Instant::now();
    let requests: Vec<_> = (0..30)
        .map(|i| (format!("g{i:02}"), "alice", format!("{}ms", 5000 + i * 400)))
        .collect();
    create_requests(&admin, &ns, "web-exec", requests, 10).await;
    let granted = wait_until_all_in(
        &admin,
        &ns,
        30,
        &[RequestPhase::Ready, RequestPhase::Expired],
        &format!("30 grants (log: {})", operator.log.display()),
    )
    .await;
    let expiries: Vec<(String, Timestamp)> = granted
        .values()
        .map(|r| {
            (
                grant_name(r),
                r.status.as_ref().unwrap().expires_at.clone().unwrap().0,
            )
        })
        .collect();
    let clock = RevocationClock::start(&admin, &ns, expiries.iter().map(|e| e.0.clone()).collect());

    // Down from 5.5 s to about 9 s (plus its start-up time), under the reconciles and watches.
    tokio::time::sleep(Duration::from_millis(5500).saturating_sub(created.elapsed())).await;
    // From the moment it is asked to stop, nothing can be revoked until it is back.
    let down = Timestamp::now();
    let stopping = plane.clone();
    tokio::task::spawn_blocking(move || stopping.stop())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let starting = plane.clone();
    tokio::task::spawn_blocking(move || starting.start_again().unwrap())
        .await
        .unwrap();
    let back = Timestamp::now();
    eprintln!(
        "apiserver down for {:.1}s",
        back.duration_since(down).as_secs_f64()
    );

    let gone = eventually(SETTLE, "every grant to be revoked", || async {
        let gone = clock.gone();
        (gone.len() == expiries.len()).then_some(gone)
    })
    .await;
    let mut worst = (String::new(), f64::MIN);
    let mut during = 0;
    for (name, expires_at) in &expiries {
        // What a grant may not outlive: its expiry; or the apiserver's return, if the outage
        // began before the grant's revocation window (its expiry plus the bound) was over.
        let window_cut =
            down.duration_since(*expires_at).as_secs_f64() < REVOCATION_BOUND.as_secs_f64();
        let due = if window_cut && *expires_at < back {
            during += 1;
            back
        } else {
            *expires_at
        };
        let late = gone[name].duration_since(due).as_secs_f64();
        eprintln!(
            "{name}: expires {:+.3}s, gone {:+.3}s, late {late:.3}s",
            expires_at.duration_since(down).as_secs_f64(),
            gone[name].duration_since(down).as_secs_f64()
        );
        if late > worst.1 {
            worst = (name.clone(), late);
        }
    }
    eprintln!(
        "{during} of 30 grants expired while the apiserver was down (or a second before); worst lateness {:.3}s ({})",
        worst.1, worst.0
    );
    drop(quiet);
    assert!(during > 0, "the outage must cover some expiries");
    assert!(
        worst.1 < REVOCATION_BOUND.as_secs_f64(),
        "{} outlived its window by {:.3}s (log: {})",
        worst.0,
        worst.1,
        operator.log.display()
    );

    // The watches resumed: a request created now is granted without a restart of oz.
    create_manifest(
        &admin,
        &ns,
        &crate::grants::exec_request("after", "web-exec", "alice", "1h"),
    )
    .await
    .unwrap();
    let requests: Api<ExecAccessRequest> = Api::namespaced(admin.clone(), &ns);
    eventually(
        Duration::from_secs(20),
        &format!(
            "a request made after the restart to be Ready (log: {})",
            operator.log.display()
        ),
        || async {
            let request = requests.get("after").await.ok()?;
            (request.status?.phase == Some(RequestPhase::Ready)).then_some(())
        },
    )
    .await;
    wait_until_all_in(
        &admin,
        &ns,
        31,
        &[RequestPhase::Expired, RequestPhase::Ready],
        "the others to be Expired",
    )
    .await;
    assert_eq!(grant_problems(&admin, &ns).await, Vec::<String>::new());
    drop(operator);
}

async fn lease_holder(admin: &Client, ns: &str) -> Option<String> {
    Api::<Lease>::namespaced(admin.clone(), ns)
        .get_opt("oz-manager")
        .await
        .ok()??
        .spec?
        .holder_identity
}

#[tokio::test]
async fn killing_the_leader_mid_burst_loses_and_duplicates_nothing() {
    let _quiet = QUIET.lock().await;
    let (ns, admin, pods) = namespace_with_web("fault-leader", 3).await;
    let args = [
        "--leader-elect",
        "--leader-elect-lease-duration=3",
        &format!("--namespace={ns}"),
    ];
    let mut first = Operator::start(&ns, &args);
    let mut second = Operator::start(&ns, &args);
    let holder = eventually(SETTLE, "a leader", || lease_holder(&admin, &ns)).await;
    let (leader, follower) = if holder.ends_with(&format!("-{}", first.pid())) {
        (&mut first, &mut second)
    } else {
        (&mut second, &mut first)
    };
    let follower_suffix = format!("-{}", follower.pid());

    let creating = create_requests(&admin, &ns, "web-exec", burst(100, "30m"), 8);
    let killing = async {
        tokio::time::sleep(Duration::from_millis(700)).await;
        leader.kill();
    };
    tokio::join!(creating, killing);
    eventually(SETTLE, "the follower to lead", || async {
        lease_holder(&admin, &ns)
            .await
            .filter(|h| h.ends_with(&follower_suffix))
    })
    .await;
    let log = follower.log.display().to_string();
    assert_burst_settled(&admin, &ns, 100, &pods, &log).await;
}

/// What one admission attempt by alice came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Admission {
    /// Created (dry run), with alice stamped as the requester.
    Stamped,
    /// Refused: the webhooks could not be called, or refused it.
    Refused,
    /// Created without alice stamped in: a fail-open, which must never happen.
    Unstamped,
}

async fn try_admission(alice: &Api<ExecAccessRequest>) -> Admission {
    let request: ExecAccessRequest = serde_json::from_value(json!({
        "apiVersion": "crds.wizardofoz.co/v1alpha1",
        "kind": "ExecAccessRequest",
        "metadata": {"name": "traffic"},
        "spec": {"templateName": "web-exec", "requester": {"username": "mallory", "groups": ["system:masters"]}},
    }))
    .unwrap();
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    match tokio::time::timeout(Duration::from_secs(15), alice.create(&dry_run, &request)).await {
        Ok(Ok(created)) => match created.spec.requester {
            Some(requester) if requester.username == "alice" => Admission::Stamped,
            _ => Admission::Unstamped,
        },
        _ => Admission::Refused,
    }
}

#[tokio::test]
async fn deleted_or_garbage_webhook_certificates_recover_under_traffic_without_a_restart() {
    let (ns, admin, _) = namespace_with_web("fault-certs", 1).await;
    let_groups_request(&admin, &ns, &["devs"]).await;
    let mut oz = WebhookOperator::start(&ns, &[]);
    oz.wait_until_admitting("alice", "web-exec").await;
    let pid = oz.operator.pid();
    let alice = Api::<ExecAccessRequest>::namespaced(env().client_as("alice").await.unwrap(), &ns);

    // Admission traffic all along: a dry-run create every 25 ms.
    let outcomes: Arc<Mutex<Vec<(Instant, Admission)>>> = Arc::default();
    let traffic = tokio::spawn({
        let (alice, outcomes) = (alice.clone(), outcomes.clone());
        async move {
            loop {
                let outcome = try_admission(&alice).await;
                outcomes.lock().unwrap().push((Instant::now(), outcome));
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        }
    });
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), &ns);
    let ca_of = || async {
        secrets
            .get_opt("oz-webhook-ca")
            .await
            .ok()
            .flatten()
            .and_then(|s| s.data?.get("tls.crt").map(|b| b.0.clone()))
    };
    // Recovered: a new, parseable CA is stored, and the last three attempts were admitted.
    let recovered = |since: Instant, old_ca: Option<Vec<u8>>| {
        let outcomes = outcomes.clone();
        async move {
            let ca = ca_of().await?;
            let fresh = Some(&ca) != old_ca.as_ref()
                && String::from_utf8_lossy(&ca).contains("BEGIN CERTIFICATE")
                && oz_webhooks::certs::certificates_der(&String::from_utf8_lossy(&ca)).is_ok();
            let outcomes = outcomes.lock().unwrap();
            let recent: Vec<Admission> = outcomes
                .iter()
                .filter(|(t, _)| *t > since)
                .map(|(_, o)| *o)
                .collect();
            (fresh
                && recent.len() >= 3
                && recent[recent.len() - 3..]
                    .iter()
                    .all(|o| *o == Admission::Stamped))
            .then(|| since.elapsed())
        }
    };

    // 1. Both Secrets deleted.
    let before = ca_of().await;
    let deleted = Instant::now();
    for name in oz.secrets() {
        secrets
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
    let after_delete = eventually(SETTLE, "admission to recover from deleted Secrets", || {
        recovered(deleted, before.clone())
    })
    .await;

    // 2. Both overwritten with garbage that looks like PEM.
    let garbage = json!({"stringData": {
        "tls.crt": "-----BEGIN CERTIFICATE-----\nZ2FyYmFnZQ==\n-----END CERTIFICATE-----\n",
        "tls.key": "-----BEGIN PRIVATE KEY-----\nZ2FyYmFnZQ==\n-----END PRIVATE KEY-----\n",
        "ca.crt": "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n",
    }});
    let garbled = Instant::now();
    for name in oz.secrets() {
        secrets
            .patch(name, &PatchParams::default(), &Patch::Merge(&garbage))
            .await
            .unwrap();
    }
    let after_garbage = eventually(SETTLE, "admission to recover from garbage Secrets", || {
        recovered(garbled, None)
    })
    .await;
    // And it stays recovered.
    let settled = Instant::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    traffic.abort();
    let since_settled: Vec<Admission> = outcomes
        .lock()
        .unwrap()
        .iter()
        .filter(|(t, _)| *t > settled)
        .map(|(_, o)| *o)
        .collect();
    assert!(
        since_settled.len() > 10 && since_settled.iter().all(|o| *o == Admission::Stamped),
        "after recovery every admission succeeds: {since_settled:?}"
    );

    let outcomes = outcomes.lock().unwrap().clone();
    let count = |kind| outcomes.iter().filter(|(_, o)| *o == kind).count();
    eprintln!(
        "admission under certificate faults: {} attempts, {} stamped, {} refused; recovered {:.1}s after deletion, {:.1}s after garbage",
        outcomes.len(),
        count(Admission::Stamped),
        count(Admission::Refused),
        after_delete.as_secs_f64(),
        after_garbage.as_secs_f64()
    );
    assert_eq!(count(Admission::Unstamped), 0, "admission failed open");
    assert!(oz.operator.is_running(), "oz-manager must survive this");
    assert_eq!(oz.operator.pid(), pid, "recovered without a restart");
    oz.remove_configurations().await;
}

#[tokio::test]
async fn with_the_webhook_server_down_creation_fails_closed_and_exec_keeps_working() {
    let (ns, admin, _) = namespace_with_web("fault-nowebhook", 1).await;
    let_groups_request(&admin, &ns, &["devs"]).await;
    let mut oz = WebhookOperator::start(&ns, &[]);
    oz.wait_until_admitting("alice", "web-exec").await;
    let alice_client = env().client_as("alice").await.unwrap();
    let alice = Api::<ExecAccessRequest>::namespaced(alice_client.clone(), &ns);
    let request = |name: &str| -> ExecAccessRequest {
        serde_json::from_value(json!({
            "apiVersion": "crds.wizardofoz.co/v1alpha1",
            "kind": "ExecAccessRequest",
            "metadata": {"name": name},
            "spec": {"templateName": "web-exec"},
        }))
        .unwrap()
    };
    alice
        .create(&PostParams::default(), &request("before"))
        .await
        .unwrap();
    let pod = eventually(SETTLE, "alice's grant", || async {
        let status = alice.get("before").await.ok()?.status?;
        (status.phase == Some(RequestPhase::Ready))
            .then_some(status.pod_name)
            .flatten()
    })
    .await;
    let ran =
        |outcome: &exec::Output| outcome.success() && outcome.stdout == format!("ran in {pod}\n");
    let command = ["sh", "-c", "echo ran in $POD_NAME"];
    let outcome = exec("alice", &ns, &pod, &command).await;
    assert!(ran(&outcome), "{outcome:?}");

    // The webhook server dies with oz-manager; its configurations stay registered.
    oz.operator.kill();
    for (who, client) in [("alice", alice_client.clone()), ("admin", admin.clone())] {
        let api = Api::<ExecAccessRequest>::namespaced(client, &ns);
        let error = api
            .create(&PostParams::default(), &request(&format!("by-{who}")))
            .await
            .expect_err("with oz's webhooks down, no request may be created");
        let kube::Error::Api(status) = error else {
            panic!("{who}: {error}");
        };
        assert_eq!(status.code, 500, "{status:?}");
        assert!(
            status
                .message
                .contains("failed calling webhook \"requester.oz.wizardofoz.co\"")
                // Why varies with the state of the apiserver's connection to the dead server:
                // connection refused, EOF, broken pipe. Where it went does not.
                && status.message.contains(&format!(
                    "failed to call webhook: Post \"https://127.0.0.1:{}/mutate-requests",
                    oz.port
                )),
            "{who}: the refusal names oz's webhook and why: {}",
            status.message
        );
    }
    assert_eq!(
        exec_requests(&admin, &ns).await.len(),
        1,
        "nothing was created"
    );

    // Exec keeps working: the audit webhook fails open (failurePolicy Ignore).
    for _ in 0..3 {
        let outcome = exec("alice", &ns, &pod, &command).await;
        assert!(ran(&outcome), "{outcome:?}");
    }
    // Revoking by deleting the request works too: the webhook guarding deletes fails open.
    alice
        .delete("before", &DeleteParams::default())
        .await
        .unwrap();
    eventually(SETTLE, "the deleted request's grant to go", || async {
        (!may_exec(&alice_client, &ns, &pod).await).then_some(())
    })
    .await;
    let outcome = exec("alice", &ns, &pod, &command).await;
    assert!(!outcome.success() && outcome.forbidden(), "{outcome:?}");

    // And admission comes back with oz-manager.
    oz.operator.restart();
    oz.wait_until_admitting("alice", "web-exec").await;
    oz.remove_configurations().await;
}
