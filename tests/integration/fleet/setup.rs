//! A fleet with oz running on it: the [`Fleet`] of control planes, oz-manager on each spoke
//! (webhooks on, taking the hub's credential as `--fleet-hub-user`) and on the hub
//! (`--fleet-hub`), a namespace [`NS`] everywhere and a Deployment `web` on every spoke.

use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::api::core::v1::Namespace;
use kube::{
    Api, Client,
    api::{ObjectMeta, PostParams},
};
use oz_api::{ExecAccessRequest, ExecAccessTemplate, RequestPhase};
use oz_testenv::workloads::{self, Workload, WorkloadSpec};

use crate::support::{
    admission::wait_until_admitting,
    fleet::{Fleet, FleetUsers},
    manifests::create_manifest,
    operator::{Operator, audit_log_path, eventually_or_show},
    users::may_exec,
};

/// The namespace the tests work in, on the hub and on every spoke.
pub const NS: &str = "shop";

/// How long the hub and a spoke may take to agree, on a loaded 2-core machine.
pub const SETTLES: Duration = Duration::from_secs(90);

/// A fleet with oz on every cluster.
pub struct OzFleet {
    /// The control planes.
    pub fleet: Fleet,
    /// oz on the hub.
    pub hub: Operator,
    /// oz on each spoke, by name.
    pub spokes: BTreeMap<String, Operator>,
    /// Deployment `web` on each spoke, by name.
    pub web: BTreeMap<String, Workload>,
    /// Each spoke's audit file, by name.
    pub audit: BTreeMap<String, std::path::PathBuf>,
}

impl OzFleet {
    /// A hub and `spokes`, each registered with its labels, with oz running everywhere.
    pub async fn start(spokes: &[(&str, &[(&str, &str)])]) -> OzFleet {
        OzFleet::start_with(spokes, FleetUsers::default(), &[]).await
    }

    /// [`OzFleet::start`], with `users` on the control planes as well, and each spoke's oz
    /// given its extra flags in `spoke_args` (by spoke name).
    pub async fn start_with(
        spokes: &[(&str, &[(&str, &str)])],
        users: FleetUsers,
        spoke_args: &[(&str, &[&str])],
    ) -> OzFleet {
        let names: Vec<&str> = spokes.iter().map(|(name, _)| *name).collect();
        let fleet = Fleet::start_unregistered_with(&names, users).await;
        for (name, labels) in spokes {
            fleet.register(name, labels).await;
        }
        let hub_admin = fleet.hub().admin().await.unwrap();
        create_namespace(&hub_admin).await;
        let_everyone_ask_and_decide(&hub_admin).await;
        let mut web = BTreeMap::new();
        let mut operators = BTreeMap::new();
        let mut audit = BTreeMap::new();
        for name in &names {
            let plane = fleet.spoke(name);
            let admin = plane.admin().await.unwrap();
            create_namespace(&admin).await;
            let deployment = workloads::deployment(&admin, NS, WorkloadSpec::new("web", 1))
                .await
                .unwrap();
            web.insert(name.to_string(), deployment);
            let hub_user = format!("--fleet-hub-user={}", fleet.hub_user_on_spokes());
            let audit_file = audit_log_path(&format!("fleet-{name}-audit"));
            let audit_flag = format!("--audit-log-path={}", audit_file.display());
            audit.insert(name.to_string(), audit_file);
            let extra = spoke_args
                .iter()
                .filter(|(spoke, _)| spoke == name)
                .flat_map(|(_, args)| args.iter().copied());
            let callers = verified_callers(plane);
            let args: Vec<&str> = [hub_user.as_str(), &callers, &audit_flag]
                .into_iter()
                .chain(extra)
                .collect();
            let operator = Operator::builder(NS)
                .kubeconfig(plane.admin_kubeconfig())
                .webhooks("oz")
                .args(&args)
                .start();
            operators.insert(name.to_string(), operator);
        }
        let provider = format!("--fleet-provider-file={}", fleet.provider_file().display());
        let namespace = format!("--fleet-namespace={}", fleet.fleet_namespace());
        let hub = Operator::builder(NS)
            .kubeconfig(fleet.hub().admin_kubeconfig())
            .cluster_wide()
            .webhooks("oz")
            .args(&[
                "--fleet-hub",
                &provider,
                &namespace,
                &verified_callers(fleet.hub()),
            ])
            .start();
        OzFleet {
            fleet,
            hub,
            spokes: operators,
            web,
            audit,
        }
    }

    /// A client of `user` on the hub.
    pub async fn on_hub(&self, user: &str) -> Client {
        self.fleet.hub().client_as(user).await.unwrap()
    }

    /// A client of `user` on spoke `name`.
    pub async fn on_spoke(&self, name: &str, user: &str) -> Client {
        self.fleet.spoke(name).client_as(user).await.unwrap()
    }

    /// The admin of spoke `name`.
    pub async fn spoke_admin(&self, name: &str) -> Client {
        self.fleet.spoke(name).admin().await.unwrap()
    }

    /// The pod of `web` on spoke `name`.
    pub fn web_pod(&self, name: &str) -> String {
        self.web[name].pod_names()[0].clone()
    }

    /// Every oz of the fleet, for a timeout's panic to show their last log lines.
    pub fn operators(&self) -> Vec<&Operator> {
        std::iter::once(&self.hub)
            .chain(self.spokes.values())
            .collect()
    }

    /// Waits until the hub's webhooks stamp `user`'s requests through `template`.
    pub async fn wait_until_hub_admits(&self, user: &str, template: &str) {
        let api = Api::<ExecAccessRequest>::namespaced(self.on_hub(user).await, NS);
        wait_until_admitting(&api, user, template, SETTLES, &self.hub.log).await;
    }

    /// Waits until the hub's ExecAccessTemplate `name` says it is on exactly `clusters`.
    pub async fn wait_until_synced(&self, name: &str, clusters: &[&str]) {
        let api =
            Api::<ExecAccessTemplate>::namespaced(self.fleet.hub().admin().await.unwrap(), NS);
        let what = format!("template {name} to be on {clusters:?}");
        eventually_or_show(SETTLES, &what, &self.operators(), || async {
            let template = api.get(name).await.ok()?;
            let synced: Vec<String> = template
                .status?
                .clusters
                .iter()
                .filter(|c| c.synced)
                .map(|c| c.name.clone())
                .collect();
            (synced == clusters).then_some(())
        })
        .await;
    }

    /// Waits until `user` (as `client`, on a spoke) may no longer exec into `pod` there.
    pub async fn wait_until_exec_refused(&self, client: &Client, pod: &str) {
        eventually_or_show(
            SETTLES,
            "the exec on the spoke to be revoked",
            &self.operators(),
            || {
                let (client, pod) = (client.clone(), pod.to_string());
                async move { (!may_exec(&client, NS, &pod).await).then_some(()) }
            },
        )
        .await;
    }

    /// Waits until the hub's request `name` is in `phase`, and returns it.
    pub async fn wait_for_hub_phase(&self, name: &str, phase: RequestPhase) -> ExecAccessRequest {
        let api = Api::<ExecAccessRequest>::namespaced(self.fleet.hub().admin().await.unwrap(), NS);
        let what = format!("hub request {name} to be {phase:?}");
        eventually_or_show(SETTLES, &what, &self.operators(), || async {
            let request = api.get(name).await.ok()?;
            (request.status.as_ref()?.phase == Some(phase)).then_some(request)
        })
        .await
    }
}

/// oz's webhooks answer only `plane`'s apiserver (its webhook client certificate).
fn verified_callers(plane: &oz_testenv::ControlPlane) -> String {
    format!(
        "--webhook-client-ca-file={}",
        plane.webhook_client_ca().unwrap().display()
    )
}

/// On the hub, every user may ask for access and decide on requests in [`NS`] (oz's approval
/// rules still say whose decision counts).
async fn let_everyone_ask_and_decide(admin: &Client) {
    let role = "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: oz-users}\n\
                rules: [{apiGroups: [crds.wizardofoz.co], resources: [execaccessrequests, podaccessrequests, \
                accessapprovals, execaccesstemplates, podaccesstemplates], verbs: [get, list, watch, create, delete]}]\n";
    let binding = "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: oz-users}\n\
                   roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: oz-users}\n\
                   subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: 'system:authenticated'}]\n";
    for manifest in [role, binding] {
        create_manifest(admin, NS, manifest).await.unwrap();
    }
}

async fn create_namespace(admin: &Client) {
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(NS.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
}
