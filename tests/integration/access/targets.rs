//! Exec grants on every workload kind a template may target, end to end: the real controllers
//! make the workload's pods, kwok runs them, oz grants one of them, and alice's own `kubectl
//! exec` runs there and nowhere else. (Deployments: `streams.rs`.)

use oz_api::ExecAccessRequest;
use oz_testenv::workloads::{self, Workload, WorkloadSpec};

use crate::{
    access::streams::{StreamsFixture, assert_exec_forbidden, assert_hello, hello},
    support::fixture::Fixture,
};

/// Template `app-exec` on `workload` (of `api_version`), alice's request through it becomes
/// Ready for one of its real pods, her exec there prints that pod's greeting, and her exec into
/// its other pod or into another workload's pod is refused.
async fn alice_execs_into_one_pod_of(f: &Fixture, api_version: &str, workload: Workload) {
    let other = workloads::deployment(&f.admin, &f.ns, WorkloadSpec::new("other", 1))
        .await
        .unwrap();
    f.template(
        "Exec",
        "app-exec",
        api_version,
        workload.kind,
        &workload.name,
    )
    .await;
    let ready = f
        .granted::<ExecAccessRequest>("alice-app", "app-exec", "alice", "10m")
        .await;
    let pod = ready.status.unwrap().pod_name.unwrap();
    let names = workload.pod_names();
    assert!(
        names.contains(&pod),
        "{pod} is one of {} {}'s pods {names:?}",
        workload.kind,
        workload.name
    );

    assert_hello(&hello(f, "alice", &pod).await, &pod);
    let sibling = names.iter().find(|p| **p != pod).expect("two pods");
    assert_exec_forbidden(&hello(f, "alice", sibling).await, "alice", sibling, &f.ns);
    let elsewhere = &other.pod_names()[0];
    assert_exec_forbidden(
        &hello(f, "alice", elsewhere).await,
        "alice",
        elsewhere,
        &f.ns,
    );
}

#[tokio::test]
async fn a_stateful_set_grant_lets_alice_exec_into_one_of_its_pods_only() {
    let f = Fixture::new("targets-sts").await;
    let db = workloads::stateful_set(&f.admin, &f.ns, WorkloadSpec::new("db", 2))
        .await
        .unwrap();
    alice_execs_into_one_pod_of(&f, "apps/v1", db).await;
}

#[tokio::test]
async fn a_daemon_set_grant_lets_alice_exec_into_one_of_its_pods_only() {
    let f = Fixture::new("targets-ds").await;
    // One pod per kwok node: two.
    let agent = workloads::daemon_set(&f.admin, &f.ns, WorkloadSpec::new("agent", 1))
        .await
        .unwrap();
    alice_execs_into_one_pod_of(&f, "apps/v1", agent).await;
}

#[tokio::test]
async fn an_argo_rollout_grant_lets_alice_exec_into_one_of_its_pods_only() {
    let f = Fixture::new("targets-rollout").await;
    let canary = workloads::rollout(&f.admin, &f.ns, WorkloadSpec::new("canary", 2))
        .await
        .unwrap();
    alice_execs_into_one_pod_of(&f, "argoproj.io/v1alpha1", canary).await;
}
