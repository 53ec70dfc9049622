//! The fleet hub's flags (`docs/fleet.md`): flattened into oz-manager's run flags.

use std::path::PathBuf;

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
    /// The hub's settings, if it is one; oz's own namespace is the default fleet namespace.
    pub fn settings(&self, namespace: &str) -> Result<Option<HubSettings>, String> {
        if !self.fleet_hub {
            return Ok(None);
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
