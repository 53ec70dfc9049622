//! The connection to the cluster, resolved the way kubectl resolves it: `--kubeconfig`, else
//! `$KUBECONFIG` (a list of files, merged), else `~/.kube/config`; `--context`, else the
//! current-context; `-n/--namespace`, else the context's namespace, else `default`. Without any
//! kubeconfig, a pod's service account is used.

use std::path::PathBuf;

use clap::Args;
use k8s_openapi::NamespaceResourceScope;
use kube::{
    Api, Client, Config, Resource,
    config::{KubeConfigOptions, Kubeconfig, KubeconfigError},
};

use super::error::{CliError, kubeconfig_message};

/// The flags every command takes to find the cluster, as kubectl names them.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Cluster options")]
pub struct ClusterArgs {
    /// The kubeconfig file [default: $KUBECONFIG, else ~/.kube/config]
    #[arg(long, global = true, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use [default: its current-context]
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// The namespace [default: the context's namespace, else "default"]
    #[arg(short = 'n', long, global = true, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
}

/// A client for the chosen cluster, the namespace to work in, and how to tell the user about
/// both.
#[derive(Clone)]
pub struct Session {
    /// The client, authenticated as the kubeconfig's user.
    pub client: Client,
    /// The namespace every command works in.
    pub namespace: String,
    /// The cluster's URL, for error messages.
    pub server: String,
    /// The flags as given, to pass on to kubectl.
    pub cluster: ClusterArgs,
    /// How to write the next command for the user.
    pub hints: Hints,
}

/// Writes the ozctl commands a message suggests, the way this user runs ozctl (`ozctl`, or
/// `kubectl oz` as a plugin), in this namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hints {
    /// `ozctl` or `kubectl oz`.
    pub program: String,
    /// The session's namespace.
    pub namespace: String,
}

impl Hints {
    /// `ozctl <args> -n <namespace>`.
    pub fn command(&self, args: &str) -> String {
        format!("{} {args} -n {}", self.program, self.namespace)
    }
}

impl Session {
    /// Resolves the kubeconfig, context and namespace and makes a client. Nothing is sent to
    /// the cluster yet.
    pub async fn connect(cluster: &ClusterArgs, program: &str) -> Result<Session, CliError> {
        let config = load_config(cluster).await?;
        let server = config.cluster_url.to_string();
        let namespace = cluster
            .namespace
            .clone()
            .unwrap_or_else(|| config.default_namespace.clone());
        let client = Client::try_from(config).map_err(|e| CliError::from_kube(e, &server))?;
        Ok(Session {
            client,
            hints: Hints {
                program: program.to_string(),
                namespace: namespace.clone(),
            },
            namespace,
            server,
            cluster: cluster.clone(),
        })
    }

    /// The API of a namespaced kind, in this session's namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: Resource<DynamicType = (), Scope = NamespaceResourceScope>,
    {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// A client error in words, with the fix.
    pub fn error(&self, error: kube::Error) -> CliError {
        let error = CliError::from_kube(error, &self.server);
        namespace_hint(error, &self.namespace, self.cluster.namespace.is_some())
    }

    /// An ozctl command line the user can run next, in this namespace: `ozctl get -n team`.
    pub fn hint(&self, args: &str) -> String {
        self.hints.command(args)
    }
}

/// An RBAC refusal in namespace `default` that the user did not ask for (no `-n`; the context
/// names none, or names default): most often the user meant another namespace, where they have
/// the rights, rather than needing new ones. Other errors are left as they are.
pub fn namespace_hint(error: CliError, namespace: &str, explicit: bool) -> CliError {
    match error {
        CliError::Forbidden { message } if !explicit && namespace == "default" => {
            CliError::Forbidden {
                message: format!(
                    "{message} (the namespace is default: pass -n NAMESPACE if you meant another)"
                ),
            }
        }
        other => other,
    }
}

async fn load_config(cluster: &ClusterArgs) -> Result<Config, CliError> {
    let options = KubeConfigOptions {
        context: cluster.context.clone(),
        ..Default::default()
    };
    let kubeconfig = match (&cluster.kubeconfig, std::env::var_os("KUBECONFIG")) {
        (Some(path), _) => Kubeconfig::read_from(path).map_err(kubeconfig_error)?,
        (None, Some(list)) if !list.is_empty() => read_list(&list)?,
        (None, _) => match Kubeconfig::read() {
            Ok(kubeconfig) => kubeconfig,
            Err(e) => {
                // No kubeconfig at all: inside a pod, its service account will do.
                let missing = match &e {
                    KubeconfigError::ReadConfig(io, _) => io.kind() == std::io::ErrorKind::NotFound,
                    KubeconfigError::FindPath => true,
                    _ => false,
                };
                if missing
                    && cluster.context.is_none()
                    && let Ok(config) = Config::incluster()
                {
                    return Ok(config);
                }
                return Err(kubeconfig_error(e));
            }
        },
    };
    Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(kubeconfig_error)
}

/// The files of a KUBECONFIG list, merged (the first to set a value wins). As in kubectl, files
/// that do not exist are skipped.
fn read_list(list: &std::ffi::OsStr) -> Result<Kubeconfig, CliError> {
    let existing: Vec<PathBuf> = std::env::split_paths(list)
        .filter(|path| !path.as_os_str().is_empty() && path.exists())
        .collect();
    if existing.is_empty() {
        return Err(CliError::Kubeconfig(format!(
            "none of the files in KUBECONFIG ({}) exists; fix KUBECONFIG or pass --kubeconfig",
            list.to_string_lossy()
        )));
    }
    existing
        .iter()
        .try_fold(Kubeconfig::default(), |merged, path| {
            Kubeconfig::read_from(path).and_then(|next| merged.merge(next))
        })
        .map_err(kubeconfig_error)
}

fn kubeconfig_error(error: KubeconfigError) -> CliError {
    CliError::Kubeconfig(kubeconfig_message(&error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_in_a_namespace_nobody_chose_suggests_another() {
        let forbidden = || CliError::Forbidden {
            message: "execaccessrequests is forbidden: User \"alice\" cannot list resource \
                      \"execaccessrequests\" in the namespace \"default\""
                .into(),
        };
        let hinted = namespace_hint(forbidden(), "default", false).to_string();
        assert!(
            hinted.ends_with(
                "in the namespace \"default\" (the namespace is default: pass -n NAMESPACE if you \
                 meant another); ask a cluster admin to grant it"
            ),
            "{hinted}"
        );
        // Asked for with -n, or another namespace: as it was.
        for (namespace, explicit) in [("default", true), ("team", false)] {
            let plain = namespace_hint(forbidden(), namespace, explicit).to_string();
            assert!(!plain.contains("pass -n"), "{plain}");
        }
        let other = namespace_hint(CliError::Api("gone".into()), "default", false);
        assert_eq!(other.to_string(), "gone");
    }

    #[test]
    fn hints_name_the_program_and_namespace() {
        let hints = Hints {
            program: "kubectl oz".into(),
            namespace: "team-a".into(),
        };
        assert_eq!(
            hints.command("get templates"),
            "kubectl oz get templates -n team-a"
        );
    }
}
