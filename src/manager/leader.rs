//! Leader election on a coordination.k8s.io Lease (kube-lease-manager, which writes the Lease
//! by server-side apply, so two candidates can never both hold it).

use kube::Client;
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use tokio::{sync::watch, task::JoinHandle};

/// How this replica takes part in leader election.
#[derive(Clone, Debug)]
pub struct LeaderElection {
    /// The Lease's name, in the operator's namespace.
    pub lease_name: String,
    /// This replica's identity (its pod name in a cluster).
    pub identity: String,
    /// Seconds a leader holds the Lease without renewing it; a follower takes over after that.
    pub lease_duration: u64,
    /// Seconds before expiry the leader renews.
    pub renew_grace: u64,
}

/// Starts competing for the Lease. The receiver says whether this replica leads now; dropping
/// every receiver releases the Lease (the task then ends).
pub async fn start(
    client: Client,
    namespace: &str,
    election: &LeaderElection,
) -> Result<
    (
        watch::Receiver<bool>,
        JoinHandle<kube_lease_manager::Result<LeaseManager>>,
    ),
    String,
> {
    let manager = LeaseManagerBuilder::new(client, &election.lease_name)
        .with_namespace(namespace)
        .with_identity(&election.identity)
        .with_duration(election.lease_duration)
        .with_grace(election.renew_grace)
        .build()
        .await
        .map_err(|e| {
            format!(
                "cannot set up leader election on Lease {namespace}/{}: {e}",
                election.lease_name
            )
        })?;
    Ok(manager.watch().await)
}
