//! A fleet's plumbing on local control planes, shared by the integration tests' fleet fixture and
//! the benchmark's fleet part: a hub lists its spokes as ClusterProfiles (sig-multicluster's
//! inventory) and reaches each through the secretreader credential plugin, as a hub oz does.
//!
//! What a spoke holds for the hub is oz's own install (`oz-manager manifests --fleet-spoke`,
//! applied with [`apply_yaml`]); a token of its ServiceAccount comes from the TokenRequest API,
//! bound to a Secret on the spoke ([`new_token`]), and is copied to Secret
//! `<fleet namespace>/<spoke>` on the hub ([`put_hub_token`]), where the plugin reads it. The
//! ClusterProfile of the same name names the spoke's server and CA under the access provider
//! [`PROVIDER`] ([`register`]).

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    time::Duration,
};

use k8s_openapi::{
    ByteString,
    api::{
        authentication::v1::TokenRequest,
        core::v1::{Secret, ServiceAccount},
    },
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client, ResourceExt,
    api::{
        ApiResource, DynamicObject, GroupVersionKind, ObjectMeta, Patch, PatchParams, PostParams,
    },
    config::Kubeconfig,
};
use serde_json::{Value, json};

use crate::{ControlPlane, Error, Result};

/// The access provider every ClusterProfile names, and the provider file maps to the plugin.
pub const PROVIDER: &str = "secretreader";
/// The cluster extension whose `extension` the plugin receives as its config (`clusterName`).
pub const EXEC_EXTENSION: &str = "client.authentication.k8s.io/exec";

/// The ClusterProfiles in `namespace` of the hub.
pub fn cluster_profiles(hub_admin: &Client, namespace: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "multicluster.x-k8s.io",
        "v1alpha1",
        "ClusterProfile",
    ));
    Api::namespaced_with(hub_admin.clone(), namespace, &resource)
}

/// The ClusterProfile CRD, parsed from the file [`crate::cluster_profile_crd`] names.
pub fn read_cluster_profile_crd() -> Result<CustomResourceDefinition> {
    let path = crate::cluster_profile_crd()?;
    let yaml = std::fs::read_to_string(&path).map_err(|source| Error::Io {
        path: path.clone(),
        source,
    })?;
    serde_saphyr::from_str(&yaml).map_err(|e| Error::Manifest(format!("{}: {e}", path.display())))
}

/// Applies every object of a multi-document YAML stream (such as `oz-manager manifests`'
/// output) by server-side apply as `field_manager`: a namespaced object in the namespace it
/// names, any other cluster-wide.
pub async fn apply_yaml(admin: &Client, yaml: &str, field_manager: &str) -> Result<()> {
    let documents: Vec<Option<Value>> =
        serde_saphyr::from_multiple(yaml).map_err(|e| Error::Manifest(e.to_string()))?;
    for document in documents.into_iter().flatten() {
        let object: DynamicObject = serde_json::from_value(document)
            .map_err(|e| Error::Manifest(format!("not a Kubernetes object: {e}")))?;
        let types = (object.types.clone())
            .ok_or_else(|| Error::Manifest("an object without apiVersion and kind".into()))?;
        let (group, version) = types
            .api_version
            .split_once('/')
            .unwrap_or(("", &types.api_version));
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, &types.kind));
        let api: Api<DynamicObject> = match &object.metadata.namespace {
            Some(namespace) => Api::namespaced_with(admin.clone(), namespace, &resource),
            None => Api::all_with(admin.clone(), &resource),
        };
        api.patch(
            &object.name_any(),
            &PatchParams::apply(field_manager).force(),
            &Patch::Apply(&object),
        )
        .await?;
    }
    Ok(())
}

/// A new token of ServiceAccount `namespace/account` on a spoke, valid for `lifetime`, bound to
/// a new Secret there that keeps it (`data.token`), so that deleting the Secret revokes the
/// token as it would a legacy token Secret's. Returns the Secret's name and the token.
pub async fn new_token(
    spoke_admin: &Client,
    namespace: &str,
    account: &str,
    lifetime: Duration,
) -> Result<(String, String)> {
    let secrets: Api<Secret> = Api::namespaced(spoke_admin.clone(), namespace);
    let holder = secrets
        .create(
            &PostParams::default(),
            &Secret {
                metadata: ObjectMeta {
                    generate_name: Some(format!("{account}-token-")),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await?;
    let (name, uid) = (holder.name_any(), holder.uid().unwrap_or_default());
    let accounts: Api<ServiceAccount> = Api::namespaced(spoke_admin.clone(), namespace);
    let request: TokenRequest = serde_json::from_value(json!({"spec": {
        "audiences": [],
        "expirationSeconds": lifetime.as_secs(),
        "boundObjectRef": {"apiVersion": "v1", "kind": "Secret", "name": name, "uid": uid},
    }}))
    .map_err(|e| Error::Manifest(e.to_string()))?;
    let token = accounts
        .create_token_request(account, &PostParams::default(), &request)
        .await?
        .status
        .ok_or_else(|| Error::Manifest("a TokenRequest answered without status".into()))?
        .token;
    let data = json!({"data": {"token": ByteString(token.clone().into_bytes())}});
    secrets
        .patch(&name, &PatchParams::default(), &Patch::Merge(&data))
        .await?;
    Ok((name, token))
}

/// The token kept in Secret `namespace/secret` on the spoke ([`new_token`]).
pub async fn token_in(spoke_admin: &Client, namespace: &str, secret: &str) -> Result<String> {
    let secrets: Api<Secret> = Api::namespaced(spoke_admin.clone(), namespace);
    let data = secrets.get(secret).await?.data.unwrap_or_default();
    let token = data
        .get("token")
        .ok_or_else(|| Error::Manifest(format!("Secret {namespace}/{secret} has no token")))?;
    String::from_utf8(token.0.clone())
        .map_err(|_| Error::Manifest(format!("Secret {namespace}/{secret}'s token is not text")))
}

/// Writes Secret `<fleet_namespace>/<spoke>` on the hub with `data.token`: what the plugin reads.
pub async fn put_hub_token(
    hub_admin: &Client,
    fleet_namespace: &str,
    spoke: &str,
    token: &str,
    field_manager: &str,
) -> Result<()> {
    let secrets: Api<Secret> = Api::namespaced(hub_admin.clone(), fleet_namespace);
    let secret = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": spoke, "namespace": fleet_namespace},
        "data": {"token": ByteString(token.as_bytes().to_vec())},
    });
    secrets
        .patch(
            spoke,
            &PatchParams::apply(field_manager).force(),
            &Patch::Apply(&secret),
        )
        .await?;
    Ok(())
}

/// One spoke's ClusterProfile.
pub struct Profile<'a> {
    /// The profile's name, and the plugin's `clusterName` (the hub Secret it reads).
    pub name: &'a str,
    pub labels: &'a [(&'a str, &'a str)],
    /// Whose server and CA the profile names.
    pub spoke: &'a ControlPlane,
    /// What `spec.clusterManager.name` says.
    pub cluster_manager: &'a str,
}

/// Puts `profile` on the hub in `fleet_namespace`, or updates it: its spec and labels, then (the
/// CRD has a status subresource, so the main resource's writes drop status) its access provider
/// [`PROVIDER`] in status.
pub async fn register(
    hub_admin: &Client,
    fleet_namespace: &str,
    profile: &Profile<'_>,
    field_manager: &str,
) -> Result<()> {
    let profiles = cluster_profiles(hub_admin, fleet_namespace);
    let name = profile.name;
    let labels: BTreeMap<&str, &str> = profile.labels.iter().copied().collect();
    let spec = json!({
        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": name, "namespace": fleet_namespace, "labels": labels},
        "spec": {"displayName": name, "clusterManager": {"name": profile.cluster_manager}},
    });
    let params = PatchParams::apply(field_manager).force();
    profiles.patch(name, &params, &Patch::Apply(&spec)).await?;
    let status = json!({
        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": name, "namespace": fleet_namespace},
        "status": {"accessProviders": [{
            "name": PROVIDER,
            "cluster": access_cluster(profile.spoke, name)?,
        }]},
    });
    profiles
        .patch_status(name, &params, &Patch::Apply(&status))
        .await?;
    Ok(())
}

/// A ClusterProfile's access provider cluster for `plane`: the kubeconfig cluster of its admin
/// kubeconfig (server and CA), with the exec extension that tells the plugin which Secret to
/// read.
fn access_cluster(plane: &ControlPlane, name: &str) -> Result<Value> {
    let kubeconfig = Kubeconfig::read_from(plane.admin_kubeconfig())?;
    let cluster = (kubeconfig.clusters.first())
        .and_then(|c| c.cluster.as_ref())
        .ok_or_else(|| Error::Manifest("the admin kubeconfig names no cluster".into()))?;
    Ok(json!({
        "server": cluster.server,
        "certificate-authority-data": cluster.certificate_authority_data,
        "extensions": [{"name": EXEC_EXTENSION, "extension": {"clusterName": name}}],
    }))
}

/// Writes, in a `fleet` directory of the hub's work dir (removed with it), the plugin's hub
/// kubeconfig and the KEP-5339 provider file that points the plugin at it; returns the provider
/// file (`--fleet-provider-file`). Provider [`PROVIDER`] runs the plugin with `KUBECONFIG` set to
/// a hub admin kubeconfig whose context's namespace is `fleet_namespace`, the namespace the
/// plugin reads its Secrets from.
pub fn write_provider_file(hub: &ControlPlane, fleet_namespace: &str) -> Result<PathBuf> {
    let dir = hub.work_dir().join("fleet");
    create_dir(&dir)?;
    let mut kubeconfig = Kubeconfig::read_from(hub.admin_kubeconfig())?;
    let current = kubeconfig.current_context.clone();
    for named in &mut kubeconfig.contexts {
        if Some(&named.name) == current.as_ref()
            && let Some(context) = &mut named.context
        {
            context.namespace = Some(fleet_namespace.into());
        }
    }
    let hub_kubeconfig = dir.join("hub-plugin.kubeconfig");
    // JSON is YAML: the plugin reads it as a kubeconfig.
    write(
        &hub_kubeconfig,
        &serde_json::to_string(&kubeconfig).unwrap_or_default(),
    )?;
    let providers = json!({"providers": [{
        "name": PROVIDER,
        "execConfig": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": crate::secretreader_plugin()?,
            "provideClusterInfo": true,
            "env": [{"name": "KUBECONFIG", "value": hub_kubeconfig}],
        },
    }]});
    let provider_file = dir.join("providers.json");
    write(&provider_file, &format!("{providers:#}"))?;
    Ok(provider_file)
}

fn create_dir(path: &Path) -> Result<()> {
    std::fs::create_dir_all(path).map_err(|source| Error::Io {
        path: path.into(),
        source,
    })
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|source| Error::Io {
        path: path.into(),
        source,
    })
}
