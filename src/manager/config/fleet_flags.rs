//! The fleet's flags (`docs/fleet.md`): a hub's, and a spoke's names for the hub's users;
//! flattened into oz-manager's run flags.

use std::path::PathBuf;

use oz_api::{
    FleetNames, PrefixMap,
    fleet::names::{GROUP_PREFIX_FLAG, USER_PREFIX_FLAG},
};

use crate::fleet::HubSettings;

/// A hub's flags.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct FleetHubArgs {
    /// Run as a fleet hub: keep the templates that name `clusters` on the spoke clusters they
    /// cover, reached through the ClusterProfiles of --fleet-namespace (docs/fleet.md).
    #[arg(long, env = "OZ_FLEET_HUB", requires = "fleet_provider_file")]
    pub fleet_hub: bool,

    /// The hub's name, on everything it keeps on spokes.
    #[arg(long, env = "OZ_FLEET_NAME", default_value = "hub")]
    pub fleet_name: String,

    /// Where the hub reads ClusterProfiles (and where the secretreader plugin reads their
    /// tokens); default: --namespace.
    #[arg(long, env = "OZ_FLEET_NAMESPACE")]
    pub fleet_namespace: Option<String>,

    /// The access providers' exec plugins, as the cluster-inventory-api's consumers write them:
    /// {"providers": [{"name": "secretreader", "execConfig": {...}}]}.
    #[arg(long, env = "OZ_FLEET_PROVIDER_FILE")]
    pub fleet_provider_file: Option<PathBuf>,
}

impl FleetHubArgs {
    /// The hub's settings, if it is one; oz's own namespace is the default fleet namespace. A
    /// hub is never scoped: it keeps fleet templates from every namespace, and a hub limited to
    /// some (`watched`) would forward requests through templates it was told not to serve.
    pub fn settings(
        &self,
        namespace: &str,
        watched: &[String],
    ) -> Result<Option<HubSettings>, String> {
        if !self.fleet_hub {
            return Ok(None);
        }
        if !watched.is_empty() {
            return Err(
                "--fleet-hub keeps fleet templates from every namespace: leave out --watch-namespaces"
                    .into(),
            );
        }
        let name = self.fleet_name.trim();
        if name.is_empty() || name.len() > 63 {
            return Err(
                "--fleet-name must be 1 to 63 characters: it is a label value on spokes".into(),
            );
        }
        Ok(Some(HubSettings {
            name: name.to_string(),
            namespace: self
                .fleet_namespace
                .clone()
                .unwrap_or_else(|| namespace.to_string()),
            provider_file: self
                .fleet_provider_file
                .clone()
                .ok_or("--fleet-hub needs --fleet-provider-file")?,
        }))
    }
}

/// A spoke's names for its hub's users and groups, where its authenticator names them
/// differently (`docs/fleet.md`, "How identities map between clusters").
#[derive(clap::Args, Clone, Debug, Default)]
pub struct FleetNameArgs {
    /// On a fleet spoke: HUB_PREFIX=SPOKE_PREFIX, how this cluster names the hub's users, e.g.
    /// oidc:=corp: (either side may be empty: =corp: adds a prefix). The user the hub attests
    /// is granted here as their name with HUB_PREFIX replaced by SPOKE_PREFIX; a hub user whose
    /// name lacks HUB_PREFIX is refused.
    #[arg(long, env = "OZ_FLEET_USER_PREFIX", value_name = "HUB_PREFIX=SPOKE_PREFIX",
          requires = "fleet_hub_user", value_parser = parse_user_prefix)]
    pub fleet_user_prefix: Option<PrefixMap>,

    /// On a fleet spoke: HUB_PREFIX=SPOKE_PREFIX, how this cluster names the hub's groups, as
    /// --fleet-user-prefix does users. A hub group without HUB_PREFIX is dropped (but
    /// system:authenticated, which every user here is in).
    #[arg(long, env = "OZ_FLEET_GROUP_PREFIX", value_name = "HUB_PREFIX=SPOKE_PREFIX",
          requires = "fleet_hub_user", value_parser = parse_group_prefix)]
    pub fleet_group_prefix: Option<PrefixMap>,
}

impl FleetNameArgs {
    /// This cluster's names for the hub's.
    pub fn names(&self) -> FleetNames {
        FleetNames {
            users: self.fleet_user_prefix.clone(),
            groups: self.fleet_group_prefix.clone(),
        }
    }
}

/// `--fleet-user-prefix`'s value, for oz-manager and `oz-manager manifests` alike.
pub(crate) fn parse_user_prefix(text: &str) -> Result<PrefixMap, String> {
    PrefixMap::parse(USER_PREFIX_FLAG, text)
}

/// `--fleet-group-prefix`'s value, for oz-manager and `oz-manager manifests` alike.
pub(crate) fn parse_group_prefix(text: &str) -> Result<PrefixMap, String> {
    PrefixMap::parse(GROUP_PREFIX_FLAG, text)
}
