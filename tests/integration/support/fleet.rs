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
};

use k8s_openapi::{
    ByteString,
    api::{
        authentication::v1::TokenRequest,
        core::v1::{Namespace, Secret, ServiceAccount},
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client,
    api::{ApiResource, DeleteParams, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams},
};
use oz::install::fleet::{HUB_CREDENTIAL_NAME, hub_credential_objects, hub_user};
use oz_testenv::{ControlPlane, ControlPlaneOptions};
use serde_json::{Value, json};

use super::{
    cluster::{apply_crds, install_crds_into},
    install::api_for,
    manifests::parse_manifest,
};

/// Where oz lives on each spoke, and so where the hub's ServiceAccount is.
pub const SPOKE_NAMESPACE: &str = "oz-system";
/// The hub's namespace for ClusterProfiles and the plugin's Secrets. Fixed: each fleet has a
/// hub of its own.
pub const FLEET_NAMESPACE: &str = "oz-fleet";
/// The access provider every ClusterProfile names, and the provider file maps to the plugin.
pub const PROVIDER: &str = "secretreader";
/// The cluster extension whose `extension` the plugin receives as its config (`clusterName`).
pub const EXEC_EXTENSION: &str = "client.authentication.k8s.io/exec";
/// What the hub's ClusterProfiles name as their cluster manager.
pub const CLUSTER_MANAGER: &str = "oz-tests";

const FIELD_MANAGER: &str = "oz-fleet-tests";
/// A spoke token outlives any test; tests end it by deleting the Secret it is bound to.
const TOKEN_SECONDS: i64 = 7 * 24 * 3600;

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
        apply_crds(&hub_admin, vec![cluster_profile_crd()]).await;
        create_namespace(&hub_admin, FLEET_NAMESPACE).await;
        let provider_file = write_provider_file(&hub);

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
        let token = token_in(&spoke_admin, &secret).await;
        let hub_admin = self.hub.admin().await.unwrap();
        put_hub_token(&hub_admin, name, &token).await;

        let profiles = cluster_profiles(&hub_admin);
        let labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
        let profile = json!({
            "apiVersion": "multicluster.x-k8s.io/v1alpha1",
            "kind": "ClusterProfile",
            "metadata": {"name": name, "namespace": FLEET_NAMESPACE, "labels": labels},
            "spec": {"displayName": name, "clusterManager": {"name": CLUSTER_MANAGER}},
        });
        let params = PatchParams::apply(FIELD_MANAGER).force();
        profiles
            .patch(name, &params, &Patch::Apply(&profile))
            .await
            .unwrap();
        // The CRD has a status subresource: the main resource's writes drop status.
        let status = json!({
            "apiVersion": "multicluster.x-k8s.io/v1alpha1",
            "kind": "ClusterProfile",
            "metadata": {"name": name, "namespace": FLEET_NAMESPACE},
            "status": {"accessProviders": [{
                "name": PROVIDER,
                "cluster": access_cluster(&spoke.plane, name),
            }]},
        });
        profiles
            .patch_status(name, &params, &Patch::Apply(&status))
            .await
            .unwrap();
    }

    /// Deletes spoke `name`'s ClusterProfile from the hub (its token Secret stays).
    pub async fn delete_cluster_profile(&self, name: &str) {
        let profiles = cluster_profiles(&self.hub.admin().await.unwrap());
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
        put_hub_token(&self.hub.admin().await.unwrap(), name, &token).await;
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
        for object in hub_credential_objects(SPOKE_NAMESPACE) {
            apply(&admin, object).await;
        }
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

fn cluster_profile_crd() -> CustomResourceDefinition {
    let path = oz_testenv::cluster_profile_crd().unwrap();
    let yaml = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_saphyr::from_str(&yaml).unwrap()
}

fn cluster_profiles(hub_admin: &Client) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        "multicluster.x-k8s.io",
        "v1alpha1",
        "ClusterProfile",
    ));
    Api::namespaced_with(hub_admin.clone(), FLEET_NAMESPACE, &resource)
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

/// Applies one object by server-side apply, as an install does.
async fn apply(admin: &Client, object: Value) {
    let (object, resource) = parse_manifest(&object.to_string());
    let name = object.metadata.name.clone().unwrap();
    api_for(admin, &object, &resource)
        .patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER),
            &Patch::Apply(&object),
        )
        .await
        .unwrap_or_else(|e| panic!("applying {} {name}: {e}", resource.kind));
}

/// A new token of the hub's ServiceAccount, bound to a new Secret on the spoke that keeps it
/// (`data.token`), so that deleting the Secret revokes the token as it would a legacy token
/// Secret's. Returns the Secret's name and the token.
async fn new_token(spoke_admin: &Client) -> (String, String) {
    let secrets: Api<Secret> = Api::namespaced(spoke_admin.clone(), SPOKE_NAMESPACE);
    let holder = secrets
        .create(
            &PostParams::default(),
            &Secret {
                metadata: ObjectMeta {
                    generate_name: Some(format!("{HUB_CREDENTIAL_NAME}-token-")),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let (name, uid) = (holder.metadata.name.unwrap(), holder.metadata.uid.unwrap());
    let accounts: Api<ServiceAccount> = Api::namespaced(spoke_admin.clone(), SPOKE_NAMESPACE);
    let request: TokenRequest = serde_json::from_value(json!({"spec": {
        "audiences": [],
        "expirationSeconds": TOKEN_SECONDS,
        "boundObjectRef": {"apiVersion": "v1", "kind": "Secret", "name": name, "uid": uid},
    }}))
    .unwrap();
    let token = accounts
        .create_token_request(HUB_CREDENTIAL_NAME, &PostParams::default(), &request)
        .await
        .unwrap()
        .status
        .unwrap()
        .token;
    let data = json!({"data": {"token": ByteString(token.clone().into_bytes())}});
    secrets
        .patch(&name, &PatchParams::default(), &Patch::Merge(&data))
        .await
        .unwrap();
    (name, token)
}

/// The token kept in Secret `secret` on the spoke.
async fn token_in(spoke_admin: &Client, secret: &str) -> String {
    let secrets: Api<Secret> = Api::namespaced(spoke_admin.clone(), SPOKE_NAMESPACE);
    let data = secrets.get(secret).await.unwrap().data.unwrap_or_default();
    let token = data
        .get("token")
        .expect("the token Secret holds data.token");
    String::from_utf8(token.0.clone()).unwrap()
}

/// Writes Secret `<fleet namespace>/<spoke>` on the hub with `data.token`, what the plugin reads.
async fn put_hub_token(hub_admin: &Client, spoke: &str, token: &str) {
    let secrets: Api<Secret> = Api::namespaced(hub_admin.clone(), FLEET_NAMESPACE);
    let secret = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": spoke, "namespace": FLEET_NAMESPACE},
        "data": {"token": ByteString(token.as_bytes().to_vec())},
    });
    secrets
        .patch(
            spoke,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&secret),
        )
        .await
        .unwrap();
}

/// A ClusterProfile's access provider cluster for `plane`: the kubeconfig cluster of its admin
/// kubeconfig (server and CA), with the exec extension that tells the plugin which Secret to
/// read.
fn access_cluster(plane: &ControlPlane, name: &str) -> Value {
    let kubeconfig = read_kubeconfig(plane.admin_kubeconfig());
    let cluster = &kubeconfig["clusters"][0]["cluster"];
    json!({
        "server": cluster["server"],
        "certificate-authority-data": cluster["certificate-authority-data"],
        "extensions": [{"name": EXEC_EXTENSION, "extension": {"clusterName": name}}],
    })
}

fn read_kubeconfig(path: &Path) -> Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap()
}

/// Writes, in a `fleet` directory of the hub's work dir (removed with it), the plugin's hub
/// kubeconfig and the provider file that points the plugin at it; returns the provider file.
fn write_provider_file(hub: &ControlPlane) -> PathBuf {
    let dir = hub.work_dir().join("fleet");
    std::fs::create_dir_all(&dir).unwrap();
    // The plugin reads from the namespace of its kubeconfig's current context.
    let mut kubeconfig = read_kubeconfig(hub.admin_kubeconfig());
    let current = kubeconfig["current-context"].clone();
    for context in kubeconfig["contexts"].as_array_mut().unwrap() {
        if context["name"] == current {
            context["context"]["namespace"] = json!(FLEET_NAMESPACE);
        }
    }
    let hub_kubeconfig = dir.join("hub-plugin.kubeconfig");
    std::fs::write(&hub_kubeconfig, kubeconfig.to_string()).unwrap();

    let providers = json!({"providers": [{
        "name": PROVIDER,
        "execConfig": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": oz_testenv::secretreader_plugin().unwrap(),
            "provideClusterInfo": true,
            "env": [{"name": "KUBECONFIG", "value": hub_kubeconfig}],
        },
    }]});
    let provider_file = dir.join("providers.json");
    std::fs::write(
        &provider_file,
        serde_json::to_string_pretty(&providers).unwrap(),
    )
    .unwrap();
    provider_file
}
