//! What an install adds to run oz-manager as a fleet hub (`docs/fleet.md`): the provider file
//! in a ConfigMap, which the Deployment mounts at [`FLEET_PROVIDER_FILE`] and names with
//! `--fleet-provider-file`, and the hub's RBAC in the fleet namespace alone
//! ([`fleet_hub_rules`]): reading the inventory there, and the token Secrets the secretreader
//! plugin reads there.
//!
//! The plugin (cluster-inventory-api v0.1.0, `plugins/secretreader`) runs inside oz-manager's
//! container, as oz's ServiceAccount (in-cluster credentials). With no kubeconfig it takes the
//! namespace to read from `POD_NAMESPACE`, which oz-manager's own environment sets to oz's
//! namespace: the provider file sets it to the fleet namespace in the plugin's `env`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;

use super::{
    FleetHubOptions, InstallOptions, Manifest, ManifestError, meta,
    rbac::{bound_role, fleet_hub_rules, rule_comments},
};

/// Where the image carries the cluster-inventory-api's secretreader credential plugin.
pub const SECRETREADER_PLUGIN: &str = "/usr/local/bin/secretreader-plugin";
/// The access provider the plugin serves, as ClusterProfiles name it.
pub const SECRETREADER_PROVIDER: &str = "secretreader";
/// Where the Deployment mounts the provider file's ConfigMap.
pub const FLEET_PROVIDER_DIR: &str = "/etc/oz/fleet";
/// The provider file's key in its ConfigMap, and its name in [`FLEET_PROVIDER_DIR`].
pub const FLEET_PROVIDER_KEY: &str = "providers.json";
/// The provider file as oz-manager reads it (`--fleet-provider-file`).
pub const FLEET_PROVIDER_FILE: &str = "/etc/oz/fleet/providers.json";

/// The name of the provider file's ConfigMap.
pub fn provider_config_map_name(o: &InstallOptions) -> String {
    format!("{}-fleet-providers", o.name)
}

/// The name of the hub's Role and RoleBinding in the fleet namespace: oz-manager's, as its
/// other Roles are named (`<name>-manager-state`).
pub fn fleet_role_name(o: &InstallOptions) -> String {
    format!("{}-fleet", o.manager_name())
}

/// The provider file of a hub whose fleet namespace is `namespace`: provider `secretreader`
/// runs the image's plugin with the cluster's info (its `clusterName` names the Secret), and
/// reads the token Secrets in `namespace`. Compact JSON with its keys in order, as the chart
/// writes it with `toJson`.
pub fn provider_file(namespace: &str) -> String {
    serde_json::json!({"providers": [{
        "name": SECRETREADER_PROVIDER,
        "execConfig": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": SECRETREADER_PLUGIN,
            "provideClusterInfo": true,
            "env": [{"name": "POD_NAMESPACE", "value": namespace}],
        },
    }]})
    .to_string()
}

/// The hub's objects: the provider file's ConfigMap in oz's namespace, then the Role and
/// RoleBinding of [`fleet_hub_rules`] in the fleet namespace. None unless the install is a hub.
pub(super) fn manifests(o: &InstallOptions) -> Result<Vec<Manifest>, ManifestError> {
    let Some(FleetHubOptions { namespace, .. }) = &o.fleet_hub else {
        return Ok(Vec::new());
    };
    let mut out = vec![Manifest::new(
        vec![
            format!(
                "The fleet hub's provider file, mounted at {FLEET_PROVIDER_FILE}: ClusterProfiles' access provider \
                 {SECRETREADER_PROVIDER} runs the image's plugin, which reads the spoke's token from Secret \
                 {namespace}/<cluster name>, key token (docs/fleet.md). Only this file names a command; a \
                 ClusterProfile cannot."
            ),
            "oz-manager reads it when it starts: restart it after a change.".into(),
        ],
        &ConfigMap {
            metadata: meta(o, &provider_config_map_name(o), Some(&o.namespace)),
            data: Some(BTreeMap::from([(
                FLEET_PROVIDER_KEY.to_string(),
                provider_file(namespace),
            )])),
            ..Default::default()
        },
    )?];
    let rules = fleet_hub_rules();
    let mut comment = vec![format!(
        "The fleet hub in its fleet namespace {namespace}, and nowhere else: the inventory, and the spokes' tokens."
    )];
    comment.extend(rule_comments(&rules));
    out.extend(bound_role(
        o,
        &fleet_role_name(o),
        Some(namespace),
        comment,
        &rules,
        format!("Grants it in {namespace}."),
    )?);
    Ok(out)
}
