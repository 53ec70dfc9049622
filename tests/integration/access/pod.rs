//! Pod access end to end: a real oz-manager process builds private access pods, which run on
//! the control plane's kwok nodes.

use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::{
    api::{
        core::v1::{Container, EnvVar, HTTPGetAction, Pod, PodSpec, Probe, ResourceRequirements},
        rbac::v1::{Role, RoleBinding},
    },
    apimachinery::pkg::{api::resource::Quantity, util::intstr::IntOrString},
    jiff::Timestamp,
};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams, PostParams},
};
use oz_api::{PodAccessRequest, RequestPhase, condition_type};
use oz_testenv::{
    pods,
    workloads::{self, WorkloadSpec},
};
use serde_json::json;

use crate::support::{
    fixture::Fixture,
    manifests::create_manifest,
    polling::eventually,
    timing::strict_timing,
    users::{can, can_exec},
};

const OZ_EXAMPLES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/integration/fixtures/oz-examples"
);

/// The pod tests' workloads and requests.
trait PodFixture {
    async fn new(prefix: &str) -> Fixture;

    /// Oz's examples/deployment.yaml, plus probes so their removal shows.
    async fn oz_example_deployment(&self);

    fn requests(&self) -> Api<PodAccessRequest>;

    async fn request(&self, name: &str, template: &str, spec_extra: &str) -> PodAccessRequest;

    async fn wait_until(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&PodAccessRequest) -> bool,
    ) -> PodAccessRequest;

    async fn wait_for(&self, name: &str, phase: RequestPhase) -> PodAccessRequest;

    async fn pod(&self, name: &str) -> Option<Pod>;
}

impl PodFixture for Fixture {
    async fn new(prefix: &str) -> Fixture {
        Fixture::builder(prefix).start().await
    }

    async fn oz_example_deployment(&self) {
        let probe = Probe {
            http_get: Some(HTTPGetAction {
                path: Some("/".into()),
                port: IntOrString::Int(80),
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut spec = WorkloadSpec::new("example", 2);
        spec.extra_labels = BTreeMap::from([("oz-examples".into(), "example".into())]);
        spec.pod_spec = PodSpec {
            termination_grace_period_seconds: Some(0),
            containers: vec![Container {
                name: "nginx".into(),
                image: Some("nginx:latest".into()),
                env: Some(vec![env_var("FOO", "foo"), env_var("FOOBAR", "foobar")]),
                resources: Some(ResourceRequirements {
                    limits: Some(BTreeMap::from([
                        ("cpu".into(), Quantity("1".into())),
                        ("memory".into(), Quantity("128Mi".into())),
                    ])),
                    ..Default::default()
                }),
                liveness_probe: Some(probe.clone()),
                readiness_probe: Some(probe),
                ..Default::default()
            }],
            ..Default::default()
        };
        workloads::deployment(&self.admin, &self.ns, spec)
            .await
            .unwrap();
    }

    fn requests(&self) -> Api<PodAccessRequest> {
        Api::namespaced(self.admin.clone(), &self.ns)
    }

    async fn request(&self, name: &str, template: &str, spec_extra: &str) -> PodAccessRequest {
        let yaml = format!(
            "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: PodAccessRequest\nmetadata: {{name: {name}}}\n\
             spec:\n  templateName: {template}\n  requester: {{username: alice, groups: [devs]}}\n{spec_extra}"
        );
        create_manifest(&self.admin, &self.ns, &yaml).await.unwrap();
        self.requests().get(name).await.unwrap()
    }

    async fn wait_until(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&PodAccessRequest) -> bool,
    ) -> PodAccessRequest {
        let requests = self.requests();
        let check = &check;
        eventually(
            Duration::from_secs(20),
            &format!("{name}: {what} (log: {})", self.operator.log.display()),
            || {
                let requests = requests.clone();
                async move { requests.get(name).await.ok().filter(check) }
            },
        )
        .await
    }

    async fn wait_for(&self, name: &str, phase: RequestPhase) -> PodAccessRequest {
        self.wait_until(name, &format!("phase {phase:?}"), |r| {
            r.status.as_ref().and_then(|s| s.phase) == Some(phase)
        })
        .await
    }

    async fn pod(&self, name: &str) -> Option<Pod> {
        Api::<Pod>::namespaced(self.admin.clone(), &self.ns)
            .get_opt(name)
            .await
            .unwrap()
    }
}

fn env_var(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        value_from: None,
    }
}

fn grant_name(request: &PodAccessRequest) -> String {
    format!("{}-{}", request.name_any(), &request.uid().unwrap()[..8])
}

fn condition_message(request: &PodAccessRequest, type_: &str) -> String {
    let status = request.status.as_ref().unwrap();
    status
        .conditions
        .iter()
        .find(|c| c.type_() == type_)
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn oz_scenario_10_builds_the_mutated_pod_and_waits_for_it_to_be_ready() {
    let f = Fixture::new("pod-oz10").await;
    f.oz_example_deployment().await;
    let template =
        std::fs::read_to_string(format!("{OZ_EXAMPLES}/pod_access_template.yaml")).unwrap();
    // Oz's example, plus a scheduler no one runs, so the access pod waits unbound until this
    // test binds it: the request's Pending state can be seen before the pod runs.
    let template = template.replace(
        "        value: dennis\n",
        "        value: dennis\n      - {op: add, path: /spec/schedulerName, value: oz-test-held}\n",
    );
    assert!(template.contains("oz-test-held"));
    create_manifest(&f.admin, &f.ns, &template).await.unwrap();
    let request = f
        .request(
            "deployment-example",
            "deployment-example",
            "  duration: 5m\n",
        )
        .await;
    let name = grant_name(&request);

    // The pod exists but does not run: the request is not ready either.
    let pending = f
        .wait_until("deployment-example", "the access pod to be created", |r| {
            r.status.as_ref().is_some_and(|s| s.pod_name.is_some())
        })
        .await;
    assert_eq!(
        pending.status.as_ref().unwrap().pod_name.as_deref(),
        Some(name.as_str())
    );
    assert_eq!(
        pending.status.as_ref().unwrap().phase,
        Some(RequestPhase::Pending)
    );
    assert!(!pending.status.as_ref().unwrap().ready);

    let pod = f.pod(&name).await.expect("the access pod");
    assert_eq!(pod.owner_references()[0].uid, request.uid().unwrap());
    assert_eq!(pod.owner_references()[0].controller, Some(true));
    let labels = pod.labels();
    assert!(
        !labels.contains_key("oz-examples") && !labels.contains_key("app"),
        "no workload labels: {labels:?}"
    );
    assert_eq!(
        labels.get("oz.wizardofoz.co/request").map(String::as_str),
        Some("deployment-example")
    );
    let selected = Api::<Pod>::namespaced(f.admin.clone(), &f.ns)
        .list(&ListParams::default().labels("oz-examples=example"))
        .await
        .unwrap();
    assert!(
        selected.items.iter().all(|p| p.name_any() != name),
        "the workload's selector must not find the access pod"
    );

    let container = &pod.spec.as_ref().unwrap().containers[0];
    assert_eq!(container.name, "dennis");
    assert_eq!(
        container.command.as_deref(),
        Some(&["/bin/sleep".to_string(), "999999".to_string()][..])
    );
    assert!(
        container.args.as_ref().is_none_or(|a| a.is_empty()),
        "{:?}",
        container.args
    );
    let env: Vec<(String, String)> = container
        .env
        .clone()
        .unwrap()
        .into_iter()
        .map(|e| (e.name, e.value.unwrap_or_default()))
        .collect();
    assert_eq!(
        env,
        [
            ("FOO".into(), "foo".into()),
            ("FOOBAR".into(), "foobar".into()),
            ("FOO".into(), "bar".into())
        ]
    );
    let resources = container.resources.clone().unwrap();
    let requests = resources.requests.unwrap();
    assert_eq!(
        (requests["memory"].0.as_str(), requests["cpu"].0.as_str()),
        ("42Mi", "100m")
    );
    // The Deployment's limits are gone (resources replaces the block); the template's caps
    // (maxCpu 1, maxMemory 1Gi, maxStorage 1Gi) fill the missing limits.
    let limits = resources.limits.unwrap();
    assert_eq!(
        (
            limits["cpu"].0.as_str(),
            limits["memory"].0.as_str(),
            limits["ephemeral-storage"].0.as_str()
        ),
        ("1", "1Gi", "1Gi")
    );
    assert!(
        container.liveness_probe.is_none()
            && container.readiness_probe.is_none()
            && container.startup_probe.is_none()
    );

    // Bound to a node, as a scheduler would: the node runs it, the pod becomes ready, and so
    // does the request.
    let binding = json!({
        "apiVersion": "v1", "kind": "Binding",
        "metadata": {"name": name},
        "target": {"apiVersion": "v1", "kind": "Node", "name": crate::support::cluster::env().ready.nodes[0]},
    });
    Api::<Pod>::namespaced(f.admin.clone(), &f.ns)
        .create_subresource::<_, serde_json::Value>(
            "binding",
            &name,
            &PostParams::default(),
            &binding,
        )
        .await
        .unwrap();
    pods::wait_ready(&f.admin, &f.ns, &name).await.unwrap();
    let ready = f.wait_for("deployment-example", RequestPhase::Ready).await;
    let status = ready.status.as_ref().unwrap();
    assert!(status.ready);
    assert_eq!(
        status.access_message.as_deref(),
        Some(format!("/usr/bin/kubectl exec -ti -n {} {name} -- /bin/bash", f.ns).as_str())
    );
    assert_eq!(
        condition_message(&ready, condition_type::ACCESS_RESOURCES_CREATED),
        format!("Success. Pod {name}, Role {name}, RoleBinding {name} created")
    );
    assert!(can_exec("alice", &f.ns, &name).await);
    assert!(can("alice", "create", "pods", Some("attach"), &f.ns, &name).await);
    let workload_pod = workloads_pod_name(&f).await;
    assert!(
        !can_exec("alice", &f.ns, &workload_pod).await,
        "only the access pod"
    );
    assert!(!can_exec("bob", &f.ns, &name).await);
}

async fn workloads_pod_name(f: &Fixture) -> String {
    Api::<Pod>::namespaced(f.admin.clone(), &f.ns)
        .list(&ListParams::default().labels("oz-examples=example"))
        .await
        .unwrap()
        .items[0]
        .name_any()
}

#[tokio::test]
async fn a_pod_spec_only_template_works() {
    let f = Fixture::new("pod-podspec").await;
    let template =
        std::fs::read_to_string(format!("{OZ_EXAMPLES}/custom_pod_access_template.yaml")).unwrap();
    let template = template.replace(
        "allowedGroups:\n      - admins",
        "allowedGroups:\n      - devs",
    );
    create_manifest(&f.admin, &f.ns, &template).await.unwrap();
    let request = f.request("custom", "custom-example", "").await;
    let name = grant_name(&request);
    f.wait_until("custom", "the access pod", |r| {
        r.status.as_ref().is_some_and(|s| s.pod_name.is_some())
    })
    .await;
    let pod = f.pod(&name).await.unwrap();
    assert_eq!(
        pod.spec.unwrap().containers[0].command.as_deref(),
        Some(&["/bin/sleep".to_string(), "infinity".to_string()][..])
    );
    pods::wait_ready(&f.admin, &f.ns, &name).await.unwrap();
    f.wait_for("custom", RequestPhase::Ready).await;
    assert!(can_exec("alice", &f.ns, &name).await);
}

#[tokio::test]
async fn a_mutation_above_the_cpu_cap_is_refused_with_a_clear_message() {
    let f = Fixture::new("pod-caps").await;
    f.oz_example_deployment().await;
    let template = "apiVersion: crds.wizardofoz.co/v1alpha1\nkind: PodAccessTemplate\nmetadata: {name: greedy}\nspec:\n  \
        accessConfig: {allowedGroups: [devs]}\n  controllerTargetRef: {apiVersion: apps/v1, kind: Deployment, name: example}\n  \
        controllerTargetMutationConfig:\n    resources: {requests: {cpu: \"2\"}, limits: {cpu: \"2\"}}\n  maxCpu: 500m\n";
    create_manifest(&f.admin, &f.ns, template).await.unwrap();
    let request = f.request("greedy", "greedy", "").await;
    let failed = f.wait_for("greedy", RequestPhase::Failed).await;
    let message = condition_message(&failed, condition_type::ACCESS_RESOURCES_CREATED);
    assert!(
        message.contains("requests.cpu 2 is above spec.maxCpu 500m"),
        "{message}"
    );
    assert!(
        message.contains("\"nginx\""),
        "names the container: {message}"
    );
    assert!(
        f.pod(&grant_name(&request)).await.is_none(),
        "no pod over the cap is created"
    );
}

#[tokio::test]
async fn a_pod_deleted_mid_grant_is_recreated_and_a_failed_pod_is_reported() {
    let f = Fixture::new("pod-heal").await;
    f.oz_example_deployment().await;
    let template =
        std::fs::read_to_string(format!("{OZ_EXAMPLES}/pod_access_template.yaml")).unwrap();
    create_manifest(&f.admin, &f.ns, &template).await.unwrap();
    let request = f.request("heal", "deployment-example", "").await;
    let name = grant_name(&request);
    f.wait_until("heal", "the access pod", |r| {
        r.status.as_ref().is_some_and(|s| s.pod_name.is_some())
    })
    .await;
    pods::wait_ready(&f.admin, &f.ns, &name).await.unwrap();
    f.wait_for("heal", RequestPhase::Ready).await;
    let first_uid = f.pod(&name).await.unwrap().uid();

    let pods_api: Api<Pod> = Api::namespaced(f.admin.clone(), &f.ns);
    pods_api
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    let recreated = eventually(
        Duration::from_secs(15),
        "the access pod to be recreated",
        || async { f.pod(&name).await.filter(|p| p.uid() != first_uid) },
    )
    .await;
    assert_eq!(recreated.name_any(), name, "same name, as in Oz");
    pods::wait_ready(&f.admin, &f.ns, &name).await.unwrap();
    f.wait_for("heal", RequestPhase::Ready).await;

    // A status test: the pod's container failing is written by hand, as its kubelet would.
    pods::mark_failed(&f.admin, &f.ns, &name).await.unwrap();
    let failed = f.wait_for("heal", RequestPhase::Failed).await;
    let message = condition_message(&failed, condition_type::ACCESS_RESOURCES_CREATED);
    assert!(message.contains("failed"), "{message}");
}

#[tokio::test]
async fn at_expiry_the_pod_role_and_binding_are_gone_within_a_second() {
    let f = Fixture::new("pod-expiry").await;
    f.oz_example_deployment().await;
    let template =
        std::fs::read_to_string(format!("{OZ_EXAMPLES}/pod_access_template.yaml")).unwrap();
    create_manifest(&f.admin, &f.ns, &template).await.unwrap();
    // From before the grant is made until its end is measured: never under a burst.
    let _timing = strict_timing().await;
    let request = f
        .request("short", "deployment-example", "  duration: 4s\n")
        .await;
    let name = grant_name(&request);
    f.wait_until("short", "the access pod", |r| {
        r.status.as_ref().is_some_and(|s| s.pod_name.is_some())
    })
    .await;
    pods::wait_ready(&f.admin, &f.ns, &name).await.unwrap();
    let ready = f.wait_for("short", RequestPhase::Ready).await;
    let expires_at = ready.status.unwrap().expires_at.unwrap().0;
    assert!(can_exec("alice", &f.ns, &name).await);

    let roles: Api<Role> = Api::namespaced(f.admin.clone(), &f.ns);
    let bindings: Api<RoleBinding> = Api::namespaced(f.admin.clone(), &f.ns);
    let gone_at = eventually(
        Duration::from_secs(15),
        "the pod, Role and RoleBinding to be deleted",
        || async {
            let gone = f.pod(&name).await.is_none()
                && roles.get_opt(&name).await.unwrap().is_none()
                && bindings.get_opt(&name).await.unwrap().is_none();
            gone.then(Timestamp::now)
        },
    )
    .await;
    let lag = gone_at.duration_since(expires_at).as_secs_f64();
    assert!(lag < 1.0, "the access outlived expiresAt by {lag:.3}s");
    assert!(!can_exec("alice", &f.ns, &name).await);
    f.wait_for("short", RequestPhase::Expired).await;
}
