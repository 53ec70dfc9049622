//! The namespace most tests start from: oz's CRDs installed, a namespace of the test's own,
//! maybe Deployment `web`, the templates and RBAC the test asks for, and an oz-manager watching
//! it. A test module configures a [`FixtureBuilder`] and adds its own helpers in a trait of its
//! own, implemented for [`Fixture`].

use std::{
    collections::BTreeSet,
    sync::{Arc, Mutex},
};

use k8s_openapi::api::rbac::v1::{PolicyRule, Subject};
use kube::Client;
use oz_testenv::workloads::{self, Workload, WorkloadSpec};

use super::{
    cluster::{env, install_crds, kubectl_quietly},
    grant_audit::record_grants,
    manifests::create_manifest,
    operator::{Operator, OperatorBuilder, delete_webhook_configurations},
    rbac::{grant, let_everyone_request},
};

/// A test's namespace, as admin, with an oz-manager watching it (see [`FixtureBuilder`]).
pub struct Fixture {
    pub ns: String,
    pub admin: Client,
    web: Option<Workload>,
    pub operator: Operator,
    grants: Option<Arc<Mutex<BTreeSet<String>>>>,
    /// The name of the webhook configurations oz registered, removed on drop.
    webhooks: Option<String>,
    delete_namespace: bool,
}

impl Fixture {
    /// A fixture in a new namespace named after `prefix`.
    pub fn builder(prefix: &str) -> FixtureBuilder {
        FixtureBuilder {
            prefix: prefix.into(),
            web: None,
            steps: Vec::new(),
            args: Vec::new(),
            record_grants: false,
            metrics: false,
            webhooks: false,
            enforcing: false,
            delete_namespace: false,
        }
    }

    /// Deployment `web` ([`FixtureBuilder::web`]), its pods Running and Ready.
    pub fn web(&self) -> &Workload {
        self.web.as_ref().expect("built with FixtureBuilder::web")
    }

    /// Every oz-managed Role and RoleBinding seen in the namespace since before oz started, as
    /// `Role/<name>` ([`FixtureBuilder::record_grants`]).
    pub fn recorded_grants(&self) -> &Mutex<BTreeSet<String>> {
        self.grants
            .as_ref()
            .expect("built with FixtureBuilder::record_grants")
    }
}

impl Drop for Fixture {
    /// Stops oz and removes the webhook configurations it registered (cluster-scoped objects),
    /// and the namespace when asked ([`FixtureBuilder::delete_namespace_when_dropped`]).
    /// Blocking kubectl calls: no runtime is needed, even while a failed test unwinds.
    fn drop(&mut self) {
        self.operator.kill();
        if let Some(name) = &self.webhooks {
            delete_webhook_configurations(name);
        }
        if self.delete_namespace {
            kubectl_quietly(&["delete", "namespace", &self.ns, "--wait=false"]);
        }
    }
}

/// What goes into the namespace before oz starts, in the order asked.
enum Step {
    Manifest(String),
    Grant(String, Vec<PolicyRule>, Vec<Subject>),
    LetEveryoneRequest,
}

/// How a test's [`Fixture`] is made: each setter adds to what is created before oz-manager
/// starts, or to how it starts.
pub struct FixtureBuilder {
    prefix: String,
    web: Option<usize>,
    steps: Vec<Step>,
    record_grants: bool,
    args: Vec<String>,
    metrics: bool,
    webhooks: bool,
    enforcing: bool,
    delete_namespace: bool,
}

impl FixtureBuilder {
    /// Deployment `web` with `replicas` Ready pods, created first.
    pub fn web(mut self, replicas: usize) -> Self {
        self.web = Some(replicas);
        self
    }

    /// A manifest (a template, usually) created in the namespace as admin.
    pub fn manifest(mut self, yaml: impl Into<String>) -> Self {
        self.steps.push(Step::Manifest(yaml.into()));
        self
    }

    /// A Role `name` with `rules`, bound to `subjects` ([`grant`]).
    pub fn grant(mut self, name: &str, rules: Vec<PolicyRule>, subjects: Vec<Subject>) -> Self {
        self.steps.push(Step::Grant(name.into(), rules, subjects));
        self
    }

    /// What hack/demo/requesters.yaml grants every signed-in user ([`let_everyone_request`]).
    pub fn let_everyone_request(mut self) -> Self {
        self.steps.push(Step::LetEveryoneRequest);
        self
    }

    /// Records every grant object that appears, from a watch started before oz
    /// ([`Fixture::recorded_grants`]).
    pub fn record_grants(mut self) -> Self {
        self.record_grants = true;
        self
    }

    /// oz-manager's extra flags.
    pub fn operator_args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|a| a.to_string()));
        self
    }

    /// oz-manager's metrics on a free port ([`Operator::metrics_port`]).
    pub fn metrics(mut self) -> Self {
        self.metrics = true;
        self
    }

    /// oz-manager's webhooks too, registered as `oz-<namespace>` and scoped to it
    /// ([`OperatorBuilder::webhooks`]).
    pub fn webhooks(mut self) -> Self {
        self.webhooks = true;
        self
    }

    /// oz-manager enforces grants in the namespace (`--audit-enforce-namespaces`), with the
    /// default template admin groups; needs [`FixtureBuilder::webhooks`].
    pub fn enforcing(mut self) -> Self {
        self.enforcing = true;
        self
    }

    /// Deletes the namespace when the fixture is dropped, so its pods go and every command
    /// still exec'd into them is killed.
    pub fn delete_namespace_when_dropped(mut self) -> Self {
        self.delete_namespace = true;
        self
    }

    /// Everything but oz-manager, for a test that sets up more before it starts.
    pub async fn prepare(self) -> PreparedFixture {
        install_crds().await;
        let ns = env().namespace(&self.prefix).await.unwrap();
        let admin = env().admin().await.unwrap();
        let web = match self.web {
            Some(replicas) => Some(
                workloads::deployment(&admin, &ns, WorkloadSpec::new("web", replicas))
                    .await
                    .unwrap(),
            ),
            None => None,
        };
        for step in self.steps {
            match step {
                Step::Manifest(yaml) => {
                    create_manifest(&admin, &ns, &yaml).await.unwrap();
                }
                Step::Grant(name, rules, subjects) => {
                    grant(&admin, &ns, &name, rules, subjects).await;
                }
                Step::LetEveryoneRequest => let_everyone_request(&admin, &ns).await,
            }
        }
        let grants = match self.record_grants {
            true => Some(record_grants(&admin, &ns).await),
            false => None,
        };
        let mut operator = Operator::builder(&ns);
        let webhooks = self.webhooks.then(|| format!("oz-{ns}"));
        if let Some(name) = &webhooks {
            operator = operator.webhooks(name);
        }
        if self.metrics {
            operator = operator.metrics();
        }
        let mut args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        let enforce = format!("--audit-enforce-namespaces={ns}");
        if self.enforcing {
            args.push(&enforce);
        }
        PreparedFixture {
            ns,
            admin,
            web,
            grants,
            operator: operator.args(&args),
            webhooks,
            delete_namespace: self.delete_namespace,
        }
    }

    /// The fixture, oz-manager started.
    pub async fn start(self) -> Fixture {
        self.prepare().await.start()
    }
}

/// A [`Fixture`] before oz-manager starts ([`FixtureBuilder::prepare`]).
pub struct PreparedFixture {
    pub ns: String,
    pub admin: Client,
    web: Option<Workload>,
    grants: Option<Arc<Mutex<BTreeSet<String>>>>,
    operator: OperatorBuilder,
    webhooks: Option<String>,
    delete_namespace: bool,
}

impl PreparedFixture {
    /// Starts oz-manager.
    pub fn start(self) -> Fixture {
        Fixture {
            operator: self.operator.start(),
            ns: self.ns,
            admin: self.admin,
            web: self.web,
            grants: self.grants,
            webhooks: self.webhooks,
            delete_namespace: self.delete_namespace,
        }
    }
}
