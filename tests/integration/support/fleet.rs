//! A fleet of control planes: a hub that lists its spokes as ClusterProfiles (sig-multicluster's
//! inventory) and reaches each through the secretreader credential plugin, as a hub oz does.
//!
//! Each spoke carries oz's hub credential (`oz::install::fleet::hub_credential_objects`): the
//! ServiceAccount `oz-system/oz-fleet-hub` and its ClusterRole. Its token lives on the hub in
//! Secret `<fleet namespace>/<spoke>`, where the plugin reads it, and the ClusterProfile of the
//! same name names the spoke's server and CA under the access provider `secretreader`.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::Mutex,
    time::Duration,
};

use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::{
    Api, Client,
    api::{DeleteParams, ObjectMeta, PostParams},
};
use oz::install::fleet::{HUB_CREDENTIAL_NAME, hub_credential_objects, hub_user};
use oz_testenv::{
    ControlPlane, ControlPlaneOptions,
    fleet::{self, Profile},
};

use super::cluster::{apply_crds, install_crds_into};

/// Where oz lives on each spoke, and so where the hub's ServiceAccount is.
pub const SPOKE_NAMESPACE: &str = "oz-system";
/// The hub's namespace for ClusterProfiles and the plugin's Secrets. Fixed: each fleet has a
/// hub of its own.
pub const FLEET_NAMESPACE: &str = "oz-fleet";
/// What the hub's ClusterProfiles name as their cluster manager.
pub const CLUSTER_MANAGER: &str = "oz-tests";

const FIELD_MANAGER: &str = "oz-fleet-tests";
/// A spoke token outlives any test; tests end it by deleting the Secret it is bound to.
const TOKEN_LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);

/// Users a fleet's control planes have besides the shared ones, for tests where the hub and a
/// spoke name people differently.
#[derive(Clone, Debug, Default)]
pub struct FleetUsers {
    hub: Vec<(String, Vec<String>)>,
    spokes: BTreeMap<String, Vec<(String, Vec<String>)>>,
}

impl FleetUsers {
    /// A user of the hub, `name` in `groups`.
    pub fn on_hub(mut self, name: &str, groups: &[&str]) -> Self {
        self.hub.push(user(name, groups));
        self
    }

    /// A user of spoke `spoke`, `name` in `groups`.
    pub fn on_spoke(mut self, spoke: &str, name: &str, groups: &[&str]) -> Self {
        let users = self.spokes.entry(spoke.to_string()).or_default();
        users.push(user(name, groups));
        self
    }
}

fn user(name: &str, groups: &[&str]) -> (String, Vec<String>) {
    (name.into(), groups.iter().map(|g| g.to_string()).collect())
}

/// Adds `users` to `options`.
fn with_users(
    options: ControlPlaneOptions,
    users: &[(String, Vec<String>)],
) -> ControlPlaneOptions {
    users.iter().fold(options, |options, (name, groups)| {
        let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
        options.user(name, &groups)
    })
}

/// A hub control plane and its spokes, each a control plane of its own; all stop when this is
/// dropped (each [`ControlPlane`] stops itself and removes its work dir, which holds the provider
/// file too).
pub struct Fleet {
    hub: ControlPlane,
    spokes: BTreeMap<String, Spoke>,
    provider_file: PathBuf,
}

impl Fleet {
    /// Starts a hub and one spoke per name, and registers every spoke on the hub without labels.
    pub async fn start(spokes: &[&str]) -> Fleet {
        let fleet = Fleet::start_unregistered(spokes).await;
        for spoke in spokes {
            fleet.register(spoke, &[]).await;
        }
        fleet
    }

    /// Starts a hub (the shared control plane's users and dave in leads, no nodes) with oz's CRDs, the
    /// ClusterProfile CRD and [`FLEET_NAMESPACE`], and one spoke per name (the shared control
    /// plane's setup: users, nodes, webhook client certificate) with oz's CRDs and the hub's
    /// credential and a token of it. No spoke is on the hub yet ([`Fleet::register`]).
    pub async fn start_unregistered(spokes: &[&str]) -> Fleet {
        Fleet::start_unregistered_with(spokes, FleetUsers::default()).await
    }

    /// [`Fleet::start_unregistered`], with `users` on the hub and spokes as well.
    pub async fn start_unregistered_with(spokes: &[&str], users: FleetUsers) -> Fleet {
        // Started side by side: each waits mostly for its apiserver's start-up.
        // dave, in leads, approves on the hub.
        let hub = start_plane(with_users(
            ControlPlaneOptions::default()
                .nodes(0)
                .user("dave", &["leads"]),
            &users.hub,
        ));
        let planes = futures::future::join_all(spokes.iter().map(|name| {
            let extra = users
                .spokes
                .get(*name)
                .map(Vec::as_slice)
                .unwrap_or_default();
            start_plane(with_users(ControlPlaneOptions::default(), extra))
        }));
        let (hub, planes) = tokio::join!(hub, planes);

        let hub_admin = hub.admin().await.unwrap();
        install_crds_into(&hub_admin).await;
        apply_crds(&hub_admin, vec![fleet::read_cluster_profile_crd().unwrap()]).await;
        create_namespace(&hub_admin, FLEET_NAMESPACE).await;
        let provider_file = fleet::write_provider_file(&hub, FLEET_NAMESPACE).unwrap();

        let prepared = futures::future::join_all(planes.into_iter().map(Spoke::prepare)).await;
        Fleet {
            hub,
            spokes: spokes.iter().map(|s| s.to_string()).zip(prepared).collect(),
            provider_file,
        }
    }

    /// The hub's control plane.
    pub fn hub(&self) -> &ControlPlane {
        &self.hub
    }

    /// The control plane of spoke `name`.
    pub fn spoke(&self, name: &str) -> &ControlPlane {
        &self.spoke_entry(name).plane
    }

    /// The hub's namespace of ClusterProfiles and token Secrets (`--fleet-namespace`).
    pub fn fleet_namespace(&self) -> &str {
        FLEET_NAMESPACE
    }

    /// The KEP-5339 provider config (`--fleet-provider-file`): provider `secretreader` runs the
    /// plugin with `KUBECONFIG` set to a hub admin kubeconfig whose context's namespace is
    /// [`FLEET_NAMESPACE`], the namespace the plugin reads its Secrets from.
    pub fn provider_file(&self) -> &Path {
        &self.provider_file
    }

    /// The user name the hub's credential authenticates as on every spoke
    /// (`--fleet-hub-user`).
    pub fn hub_user_on_spokes(&self) -> String {
        hub_user(SPOKE_NAMESPACE)
    }

    /// Puts spoke `name` on the hub, or updates it: Secret `<fleet namespace>/<name>` with the
    /// spoke's current token, and ClusterProfile `<fleet namespace>/<name>` with `labels` and
    /// its access provider (the spoke's server and CA, and the plugin's `clusterName`).
    pub async fn register(&self, name: &str, labels: &[(&str, &str)]) {
        let spoke = self.spoke_entry(name);
        let spoke_admin = spoke.plane.admin().await.unwrap();
        let secret = spoke.token_secret.lock().unwrap().clone();
        let token = fleet::token_in(&spoke_admin, SPOKE_NAMESPACE, &secret)
            .await
            .unwrap();
        let hub_admin = self.hub.admin().await.unwrap();
        fleet::put_hub_token(&hub_admin, FLEET_NAMESPACE, name, &token, FIELD_MANAGER)
            .await
            .unwrap();
        let profile = Profile {
            name,
            labels,
            spoke: &spoke.plane,
            cluster_manager: CLUSTER_MANAGER,
        };
        fleet::register(&hub_admin, FLEET_NAMESPACE, &profile, FIELD_MANAGER)
            .await
            .unwrap();
    }

    /// Deletes spoke `name`'s ClusterProfile from the hub (its token Secret stays).
    pub async fn delete_cluster_profile(&self, name: &str) {
        let profiles = fleet::cluster_profiles(&self.hub.admin().await.unwrap(), FLEET_NAMESPACE);
        profiles
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }

    /// Revokes spoke `name`'s current token (again, if it already is): deletes the Secret on the
    /// spoke it is bound to. The hub's Secret keeps the dead token. The spoke's apiserver may
    /// still accept it for up to 10 s (its cache of authenticated tokens), so tests wait for the
    /// refusal.
    pub async fn revoke_token(&self, name: &str) {
        let spoke = self.spoke_entry(name);
        let secret = spoke.token_secret.lock().unwrap().clone();
        let secrets: Api<Secret> =
            Api::namespaced(spoke.plane.admin().await.unwrap(), SPOKE_NAMESPACE);
        match secrets.delete(&secret, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(e) => panic!("deleting the token Secret {secret} on spoke {name}: {e}"),
        }
    }

    /// Gives spoke `name` a new token, puts it in the hub's Secret, then revokes the old one, as
    /// an operator rotating the credential would (no moment without a valid token on the hub).
    pub async fn rotate_token(&self, name: &str) {
        let spoke = self.spoke_entry(name);
        let spoke_admin = spoke.plane.admin().await.unwrap();
        let (secret, token) = new_token(&spoke_admin).await;
        let hub_admin = self.hub.admin().await.unwrap();
        fleet::put_hub_token(&hub_admin, FLEET_NAMESPACE, name, &token, FIELD_MANAGER)
            .await
            .unwrap();
        self.revoke_token(name).await;
        *spoke.token_secret.lock().unwrap() = secret;
    }

    fn spoke_entry(&self, name: &str) -> &Spoke {
        self.spokes
            .get(name)
            .unwrap_or_else(|| panic!("no spoke {name} in this fleet"))
    }
}

struct Spoke {
    plane: ControlPlane,
    /// The Secret on the spoke that the current token is bound to: deleting it revokes the
    /// token (there is no token controller to fill a legacy token Secret, so the token comes from
    /// the TokenRequest API, bound to this Secret).
    token_secret: Mutex<String>,
}

impl Spoke {
    /// oz's CRDs, namespace [`SPOKE_NAMESPACE`], the hub's credential, and a first token.
    async fn prepare(plane: ControlPlane) -> Spoke {
        let admin = plane.admin().await.unwrap();
        install_crds_into(&admin).await;
        create_namespace(&admin, SPOKE_NAMESPACE).await;
        let credential: Vec<String> = hub_credential_objects(SPOKE_NAMESPACE)
            .iter()
            .map(|object| object.to_string())
            .collect();
        fleet::apply_yaml(&admin, &credential.join("\n---\n"), FIELD_MANAGER)
            .await
            .unwrap();
        let (secret, _) = new_token(&admin).await;
        Spoke {
            plane,
            token_secret: Mutex::new(secret),
        }
    }
}

async fn start_plane(options: ControlPlaneOptions) -> ControlPlane {
    tokio::task::spawn_blocking(move || ControlPlane::start(options).unwrap())
        .await
        .unwrap()
}

async fn create_namespace(admin: &Client, name: &str) {
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
}

/// A new token of the hub's ServiceAccount on a spoke, bound to a new Secret there
/// ([`fleet::new_token`]): the Secret's name and the token.
async fn new_token(spoke_admin: &Client) -> (String, String) {
    fleet::new_token(
        spoke_admin,
        SPOKE_NAMESPACE,
        HUB_CREDENTIAL_NAME,
        TOKEN_LIFETIME,
    )
    .await
    .unwrap()
}
