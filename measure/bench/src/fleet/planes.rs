//! One fleet for the benchmark: a hub and its spokes, each a control plane of its own running
//! the release oz-manager under test, set up as docs/fleet.md says: oz's spoke install
//! (`oz-manager manifests --fleet-spoke`) and a token of the hub's ServiceAccount on every
//! spoke, read on the hub by the secretreader plugin through a ClusterProfile
//! ([`oz_testenv::fleet`]).
//!
//! Every control plane logs its API calls (namespace [`NAMESPACE`] and cluster-scoped ones) to
//! an audit log, from which the hub's calls per grant are counted. On the hub, the fleet template
//! [`FLEET_TEMPLATE`] covers every spoke and needs no approval, so what is measured is the
//! forwarding; on each spoke, Deployment [`WORKLOAD`] has one ready pod and template
//! [`WORKLOAD`] of its own, through which alice asks on the spoke itself.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use futures::future::try_join_all;
use kube::{
    Api, Client,
    api::{Patch, PatchParams},
};
use oz_api::ExecAccessTemplate;
use oz_testenv::{
    ControlPlane, ControlPlaneOptions,
    fleet::{self, Profile},
    workloads::{self, WorkloadSpec},
};
use serde_json::json;

use crate::{
    Result, audit, cluster, harness,
    http_client::{self, HttpClient},
    operator::{OZ_NAMESPACE, OzManager, Parts},
    poll,
};

/// Where the benchmark's requests and the fleet template live, on the hub and on every spoke.
pub const NAMESPACE: &str = "bench-fleet";
/// The hub's namespace of ClusterProfiles and token Secrets (`--fleet-namespace`).
const FLEET_NAMESPACE: &str = "oz-fleet";
/// The hub's fleet template: every spoke, group devs, no approval.
pub const FLEET_TEMPLATE: &str = "fleet-web";
/// The spokes' Deployment, and their own template for it.
pub const WORKLOAD: &str = "web";
/// The label the hub's ClusterProfiles carry and the fleet template selects.
const SPOKE_LABEL: (&str, &str) = ("oz-bench/spoke", "yes");
/// The ServiceAccount `oz-manager manifests --fleet-spoke` installs for the hub.
const HUB_ACCOUNT: &str = "oz-fleet-hub";
/// A hub token outlives any run.
const TOKEN_LIFETIME: Duration = Duration::from_secs(24 * 3600);

/// The user the hub's credential authenticates as on every spoke.
pub fn hub_user() -> String {
    format!("system:serviceaccount:{OZ_NAMESPACE}:{HUB_ACCOUNT}")
}

/// One cluster of the fleet.
pub struct Member {
    pub name: String,
    /// Declared first, so it is dropped (killed) before the control plane stops.
    pub oz: OzManager,
    pub admin: Client,
    /// alice, in group devs: she asks for access.
    pub alice: Client,
    pub audit_log: PathBuf,
    /// Kept so the control plane runs as long as the fleet does.
    pub _plane: ControlPlane,
}

/// A running fleet; everything stops when it is dropped.
pub struct Fleet {
    pub hub: Member,
    pub spokes: Vec<Member>,
}

/// A control plane that has started, before oz-manager runs on it.
struct Started {
    name: String,
    plane: ControlPlane,
    admin: Client,
    alice: Client,
    audit_log: PathBuf,
}

impl Fleet {
    /// Starts a hub and `spokes` spokes (`spoke-1`…), runs `oz_manager` on each (logs under
    /// `log_dir`), and returns once the hub's fleet template is on every spoke.
    pub async fn start(oz_manager: &Path, spokes: usize, log_dir: &Path) -> Result<Fleet> {
        let names: Vec<String> = (1..=spokes).map(|i| format!("spoke-{i}")).collect();
        // Side by side: each mostly waits for its apiserver. The hub needs no nodes, and of the
        // controllers only the garbage collector and the namespace controller.
        let hub = start_plane(
            "hub",
            log_dir,
            ControlPlaneOptions::default()
                .nodes(0)
                .controllers(&["gc", "namespace"]),
        );
        let planes = try_join_all(
            names
                .iter()
                .map(|name| start_plane(name, log_dir, ControlPlaneOptions::default().nodes(1))),
        );
        let (hub, planes) = tokio::try_join!(hub, planes)?;

        let provider_file = prepare_hub(&hub).await?;
        try_join_all(planes.iter().map(|spoke| prepare_spoke(oz_manager, spoke))).await?;
        for spoke in &planes {
            register(&hub, spoke).await?;
        }

        let http = http_client::client(None)?;
        let hub_user_flag = format!("--fleet-hub-user={}", hub_user());
        let mut members = Vec::with_capacity(planes.len());
        for spoke in planes {
            let args = [hub_user_flag.clone()];
            members.push(run_oz(oz_manager, spoke, log_dir, &args, &http).await?);
        }
        let hub_args = [
            "--fleet-hub".to_string(),
            format!("--fleet-namespace={FLEET_NAMESPACE}"),
            format!("--fleet-provider-file={}", provider_file.display()),
        ];
        let hub = run_oz(oz_manager, hub, log_dir, &hub_args, &http).await?;
        let fleet = Fleet {
            hub,
            spokes: members,
        };
        fleet.put_fleet_template().await?;
        Ok(fleet)
    }

    /// Creates the fleet template on the hub and waits until its status says it is synced on
    /// every spoke.
    async fn put_fleet_template(&self) -> Result<()> {
        let template: ExecAccessTemplate = serde_json::from_value(json!({
            "apiVersion": "crds.wizardofoz.co/v1alpha1",
            "kind": "ExecAccessTemplate",
            "metadata": {"name": FLEET_TEMPLATE, "namespace": NAMESPACE},
            "spec": {
                "clusters": {"selector": {"matchLabels": {SPOKE_LABEL.0: SPOKE_LABEL.1}}},
                "accessConfig": {"allowedGroups": ["devs"], "defaultDuration": "1h", "maxDuration": "2h"},
                "controllerTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": WORKLOAD},
            },
        }))?;
        let templates = Api::<ExecAccessTemplate>::namespaced(self.hub.admin.clone(), NAMESPACE);
        templates
            .patch(
                FLEET_TEMPLATE,
                &PatchParams::apply(cluster::FIELD_MANAGER),
                &Patch::Apply(&template),
            )
            .await?;
        const WAIT: Duration = Duration::from_secs(120);
        let spokes = self.spokes.len();
        let synced = poll(WAIT, || async {
            let template = templates.get(FLEET_TEMPLATE).await.ok()?;
            let clusters = template.status?.clusters;
            (clusters.iter().filter(|c| c.synced).count() == spokes).then_some(())
        })
        .await;
        synced.ok_or_else(|| {
            format!(
                "the fleet template was not synced on all {spokes} spokes within {WAIT:?}; hub log {}",
                self.hub.oz.log.display()
            )
            .into()
        })
    }
}

/// Starts one control plane whose apiserver writes an audit log under `log_dir/<name>`.
async fn start_plane(name: &str, log_dir: &Path, options: ControlPlaneOptions) -> Result<Started> {
    let (flags, audit_log) = audit::turn_on(&log_dir.join(name), &[NAMESPACE.into()])?;
    let options = options.apiserver_args(&flags.each_ref().map(String::as_str));
    let plane = tokio::task::spawn_blocking(|| ControlPlane::start(options)).await??;
    let admin = plane.admin().await?;
    let alice = plane.client_as(cluster::REQUESTER).await?;
    cluster::install_crds(&admin).await?;
    cluster::let_devs_request(&admin).await?;
    for namespace in [OZ_NAMESPACE, NAMESPACE] {
        cluster::create_namespace(&admin, namespace).await?;
    }
    Ok(Started {
        name: name.into(),
        plane,
        admin,
        alice,
        audit_log,
    })
}

/// The ClusterProfile CRD and the fleet namespace on the hub; returns the provider file.
async fn prepare_hub(hub: &Started) -> Result<PathBuf> {
    let crd = fleet::read_cluster_profile_crd()?;
    oz_testenv::apply_crds(&hub.admin, &[crd], cluster::FIELD_MANAGER).await?;
    cluster::create_namespace(&hub.admin, FLEET_NAMESPACE).await?;
    Ok(fleet::write_provider_file(&hub.plane, FLEET_NAMESPACE)?)
}

/// The spoke's Deployment and own template, and oz's spoke install for the hub.
async fn prepare_spoke(oz_manager: &Path, spoke: &Started) -> Result<()> {
    workloads::deployment(&spoke.admin, NAMESPACE, WorkloadSpec::new(WORKLOAD, 1)).await?;
    cluster::template(&spoke.admin, NAMESPACE, WORKLOAD).await?;
    let install = Command::new(oz_manager)
        .args(["manifests", "--fleet-spoke", "--namespace", OZ_NAMESPACE])
        .output()?;
    if !install.status.success() {
        return Err(format!(
            "oz-manager manifests --fleet-spoke: {}",
            String::from_utf8_lossy(&install.stderr)
        )
        .into());
    }
    let yaml = String::from_utf8(install.stdout)?;
    fleet::apply_yaml(&spoke.admin, &yaml, cluster::FIELD_MANAGER).await?;
    Ok(())
}

/// A token of the hub's account on `spoke`, in the hub's Secret, and the spoke's ClusterProfile.
async fn register(hub: &Started, spoke: &Started) -> Result<()> {
    let (_, token) =
        fleet::new_token(&spoke.admin, OZ_NAMESPACE, HUB_ACCOUNT, TOKEN_LIFETIME).await?;
    let manager = cluster::FIELD_MANAGER;
    fleet::put_hub_token(&hub.admin, FLEET_NAMESPACE, &spoke.name, &token, manager).await?;
    let profile = Profile {
        name: &spoke.name,
        labels: &[SPOKE_LABEL],
        spoke: &spoke.plane,
        cluster_manager: manager,
    };
    fleet::register(&hub.admin, FLEET_NAMESPACE, &profile, manager).await?;
    Ok(())
}

/// Runs oz-manager (with its webhooks) on `started`, with `args`, and waits until its
/// apiserver calls them.
async fn run_oz(
    oz_manager: &Path,
    started: Started,
    log_dir: &Path,
    args: &[String],
    http: &HttpClient,
) -> Result<Member> {
    let mut oz = OzManager::start(
        oz_manager,
        started.plane.admin_kubeconfig(),
        &log_dir.join(&started.name),
        Parts::WithWebhooks,
        false,
        args,
    )?;
    harness::wait_until_admitting(&mut oz, http, &started.admin, &started.alice).await?;
    Ok(Member {
        name: started.name,
        oz,
        admin: started.admin,
        alice: started.alice,
        audit_log: started.audit_log,
        _plane: started.plane,
    })
}
