//! Reaching a spoke's apiserver from its ClusterProfile, the KEP-5339 way: the hub's provider
//! file maps each access provider's name to an exec credential plugin (the kubeconfig exec
//! mechanism, `client.authentication.k8s.io/v1`); the ClusterProfile gives the server, its CA
//! and the plugin's per-cluster config. kube's client runs the plugin and renews the token.
//!
//! What a ClusterProfile may not choose: the command run (only the provider file names it; the
//! inventory's `additional-args` and `additional-envs` extensions are not honoured), a CA file
//! on the hub's disk, or skipping TLS verification.

use std::{collections::BTreeMap, path::Path};

use kube::config::{
    AuthInfo, Context, ExecConfig, ExecInteractiveMode, KubeConfigOptions, Kubeconfig,
    NamedAuthInfo, NamedCluster, NamedContext,
};
use serde::Deserialize;

use super::profiles::ClusterProfile;

/// The hub's provider file: `{"providers": [{"name": ..., "execConfig": {...}}]}`, the format
/// the cluster-inventory-api's consumers share.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Providers {
    providers: Vec<Provider>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Provider {
    name: String,
    exec_config: ExecConfig,
}

/// Why a spoke cannot be reached, in words that say what to fix.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    /// The provider file could not be read.
    #[error("cannot read the fleet provider file {path}: {reason}")]
    ProviderFile {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// No access provider of the profile is one the provider file names.
    #[error(
        "ClusterProfile {profile}: none of its access providers ({offered}) is in the hub's provider file \
         ({known}); add one to --fleet-provider-file, or have the inventory publish one of those"
    )]
    NoProvider {
        /// The profile.
        profile: String,
        /// The providers it offers.
        offered: String,
        /// The providers the hub knows.
        known: String,
    },
    /// The provider's cluster entry is not usable.
    #[error("ClusterProfile {profile}: {reason}")]
    Cluster {
        /// The profile.
        profile: String,
        /// What is wrong.
        reason: String,
    },
}

impl Providers {
    /// The providers in the JSON file at `path`.
    pub fn read(path: &Path) -> Result<Self, AccessError> {
        let failed = |reason: String| AccessError::ProviderFile {
            path: path.display().to_string(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| failed(e.to_string()))?;
        Self::parse(&text).map_err(failed)
    }

    /// The providers in `text`, a provider file's JSON; why not, if every provider does not
    /// name a command.
    pub fn parse(text: &str) -> Result<Self, String> {
        let providers: Self = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if let Some(p) = providers
            .providers
            .iter()
            .find(|p| p.exec_config.command.as_deref().is_none_or(str::is_empty))
        {
            return Err(format!("provider {:?} names no command", p.name));
        }
        Ok(providers)
    }

    /// The exec plugin the file runs for access provider `name`, if it names it.
    pub fn exec_config(&self, name: &str) -> Option<&ExecConfig> {
        self.providers
            .iter()
            .find(|p| p.name == name)
            .map(|p| &p.exec_config)
    }

    /// A kubeconfig that reaches `profile`'s cluster through the first of its access providers
    /// the file names.
    pub fn kubeconfig(&self, profile: &ClusterProfile) -> Result<Kubeconfig, AccessError> {
        let name = profile.metadata.name.clone().unwrap_or_default();
        let offered = profile
            .status
            .as_ref()
            .map(|s| s.access_providers.as_slice())
            .unwrap_or_default();
        let Some((access, provider)) = offered.iter().find_map(|access| {
            self.providers
                .iter()
                .find(|p| p.name == access.name)
                .map(|p| (access, p))
        }) else {
            let names = |names: Vec<&str>| {
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names.join(", ")
                }
            };
            return Err(AccessError::NoProvider {
                profile: name,
                offered: names(offered.iter().map(|a| a.name.as_str()).collect()),
                known: names(self.providers.iter().map(|p| p.name.as_str()).collect()),
            });
        };
        let mut cluster = access.cluster.clone();
        let refuse = |reason: &str| AccessError::Cluster {
            profile: name.clone(),
            reason: format!("access provider {:?}: {reason}", access.name),
        };
        if cluster.server.as_deref().is_none_or(str::is_empty) {
            return Err(refuse("its cluster names no server"));
        }
        if cluster.insecure_skip_tls_verify == Some(true) {
            return Err(refuse(
                "it asks to skip TLS verification, which oz never does for a spoke",
            ));
        }
        // A path on the hub's own disk is not the inventory's to choose.
        cluster.certificate_authority = None;
        cluster.other = BTreeMap::new();
        let mut exec = provider.exec_config.clone();
        exec.interactive_mode = Some(ExecInteractiveMode::Never);
        Ok(Kubeconfig {
            clusters: vec![NamedCluster {
                name: name.clone(),
                cluster: Some(cluster),
                ..Default::default()
            }],
            auth_infos: vec![NamedAuthInfo {
                name: provider.name.clone(),
                auth_info: Some(AuthInfo {
                    exec: Some(exec),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            contexts: vec![NamedContext {
                name: name.clone(),
                context: Some(Context {
                    cluster: name.clone(),
                    user: Some(provider.name.clone()),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            current_context: Some(name),
            ..Default::default()
        })
    }

    /// A client for `profile`'s cluster.
    pub async fn client(&self, profile: &ClusterProfile) -> Result<kube::Client, AccessError> {
        let name = profile.metadata.name.clone().unwrap_or_default();
        let invalid = |reason: String| AccessError::Cluster {
            profile: name.clone(),
            reason,
        };
        let config = kube::Config::from_custom_kubeconfig(
            self.kubeconfig(profile)?,
            &KubeConfigOptions::default(),
        )
        .await
        .map_err(|e| invalid(e.to_string()))?;
        kube::Client::try_from(config).map_err(|e| invalid(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use kube::config::{Cluster, NamedExtension};
    use serde_json::json;

    use super::*;
    use crate::fleet::profiles::{AccessProvider, ClusterProfileSpec, ClusterProfileStatus};

    fn providers() -> Providers {
        serde_json::from_value(
            json!({"providers": [{"name": "secretreader", "execConfig": {
            "apiVersion": "client.authentication.k8s.io/v1", "command": "/bin/plugin",
            "provideClusterInfo": true}}]}),
        )
        .unwrap()
    }

    fn profile(provider: &str, cluster: Cluster) -> ClusterProfile {
        let mut profile = ClusterProfile::new("b", ClusterProfileSpec::default());
        profile.status = Some(ClusterProfileStatus {
            access_providers: vec![AccessProvider {
                name: provider.into(),
                cluster,
            }],
        });
        profile
    }

    fn spoke() -> Cluster {
        Cluster {
            server: Some("https://127.0.0.1:6443".into()),
            certificate_authority_data: Some("Q0E=".into()),
            extensions: Some(vec![NamedExtension {
                name: "client.authentication.k8s.io/exec".into(),
                extension: json!({"clusterName": "b"}),
            }]),
            ..Default::default()
        }
    }

    #[test]
    fn the_profile_gives_the_server_and_the_provider_file_the_command() {
        let kubeconfig = providers()
            .kubeconfig(&profile("secretreader", spoke()))
            .unwrap();
        let cluster = kubeconfig.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.server.as_deref(), Some("https://127.0.0.1:6443"));
        assert_eq!(
            cluster.extensions.as_ref().unwrap()[0].extension["clusterName"],
            "b"
        );
        let exec = kubeconfig.auth_infos[0]
            .auth_info
            .as_ref()
            .unwrap()
            .exec
            .as_ref()
            .unwrap();
        assert_eq!(exec.command.as_deref(), Some("/bin/plugin"));
        assert!(exec.provide_cluster_info);
        assert_eq!(exec.interactive_mode, Some(ExecInteractiveMode::Never));
        assert_eq!(kubeconfig.current_context.as_deref(), Some("b"));
    }

    #[test]
    fn an_unknown_provider_is_named_with_what_would_do() {
        let error = providers()
            .kubeconfig(&profile("eks", spoke()))
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "ClusterProfile b: none of its access providers (eks) is in the hub's provider file \
             (secretreader); add one to --fleet-provider-file, or have the inventory publish one of those"
        );
    }

    #[test]
    fn a_profile_cannot_skip_tls_or_name_a_file_on_the_hub() {
        let insecure = Cluster {
            insecure_skip_tls_verify: Some(true),
            ..spoke()
        };
        assert!(
            providers()
                .kubeconfig(&profile("secretreader", insecure))
                .unwrap_err()
                .to_string()
                .contains("skip TLS verification")
        );
        let with_file = Cluster {
            certificate_authority: Some("/etc/hub/secret-ca.pem".into()),
            ..spoke()
        };
        let kubeconfig = providers()
            .kubeconfig(&profile("secretreader", with_file))
            .unwrap();
        assert_eq!(
            kubeconfig.clusters[0]
                .cluster
                .as_ref()
                .unwrap()
                .certificate_authority,
            None
        );
    }
}
