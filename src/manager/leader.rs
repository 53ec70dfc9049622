//! Leader election on a coordination.k8s.io Lease.
//!
//! Every write to the Lease is a compare-and-swap (a patch that carries the resourceVersion it
//! read), so two candidates can never both take it. The Lease is watched, so a change is seen at
//! once rather than when a sleep ends:
//!
//! - a leader that stops (SIGTERM) releases the Lease, and a follower takes it within moments,
//!   not after the lease duration;
//! - a leader that sees the Lease held by someone else (an admin rewrote `holderIdentity`, or it
//!   was taken after a renewal failed) steps down at once, without writing the Lease again;
//! - a leader that cannot renew steps down before its Lease can expire, so that by the time a
//!   follower may take over, it has stopped.
//!
//! (kube-lease-manager, used before, does none of these: its follower sleeps until the lease
//! would expire even when it was released, and its leader keeps leading while renewals fail.)

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::MicroTime,
    jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::{ObjectMeta, Patch, PatchParams, PostParams},
    runtime::{WatchStreamExt, watcher},
};
use serde_json::json;
use tokio::{
    sync::{oneshot, watch},
    task::JoinHandle,
    time::Instant,
};

/// Whether this replica's controllers run: always without leader election, otherwise while it
/// leads.
pub enum Leading {
    Always,
    /// `looked` becomes true once the Lease has been looked at; `leading` says whether it is
    /// ours ([`Leadership`]).
    Elected {
        looked: watch::Receiver<bool>,
        leading: watch::Receiver<bool>,
    },
}

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

/// How often the Lease is read again when nothing else wakes the elector (its watch may be
/// refused, e.g. by an install without `watch` on the Lease).
const POLL: Duration = Duration::from_secs(2);
/// How soon a failed read or write of the Lease is tried again.
const RETRY: Duration = Duration::from_millis(500);

/// This replica's part in leader election, while it runs.
pub struct Leadership {
    /// Whether this replica leads now.
    pub leading: watch::Receiver<bool>,
    /// Becomes true once the Lease has been looked at (taken, or found held, or unreadable):
    /// from then on `leading` being false means "a follower", not "not decided yet".
    pub looked: watch::Receiver<bool>,
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl Leadership {
    /// Stops competing and, if this replica holds the Lease, releases it so that a follower
    /// takes over at once. Call it once nothing is written as leader any more. Waits at most
    /// `timeout`.
    pub async fn release(self, timeout: Duration) {
        let _ = self.stop.send(());
        let _ = tokio::time::timeout(timeout, self.task).await;
    }
}

/// Starts competing for the Lease.
pub async fn start(
    client: Client,
    namespace: &str,
    election: &LeaderElection,
) -> Result<Leadership, String> {
    let elector = Elector {
        leases: Api::namespaced(client, namespace),
        election: election.clone(),
    };
    // Fail at start-up, not in the background, when the Lease cannot even be read.
    elector
        .leases
        .get_opt(&election.lease_name)
        .await
        .map_err(|e| {
            format!(
                "cannot set up leader election on Lease {namespace}/{}: {e}",
                election.lease_name
            )
        })?;
    let (leading_tx, leading) = watch::channel(false);
    let (looked_tx, looked) = watch::channel(false);
    let (stop, stopped) = oneshot::channel();
    let task = tokio::spawn(elector.run(leading_tx, looked_tx, stopped));
    Ok(Leadership {
        leading,
        looked,
        stop,
        task,
    })
}

struct Elector {
    leases: Api<Lease>,
    election: LeaderElection,
}

/// What one look at the Lease found, after taking or renewing it if it could.
#[derive(Debug, PartialEq, Eq)]
enum Held {
    /// This replica holds it: renewed (or taken) at the instant the write was sent.
    ByUs,
    /// Someone else holds it, for this much longer unless renewed.
    ByOther { holder: String, left: Duration },
}

impl Held {
    /// A write lost a race with another writer (409): held by someone, unknown, so the Lease
    /// is read again at once.
    const LOOK_AGAIN: Held = Held::ByOther {
        holder: String::new(),
        left: Duration::ZERO,
    };
}

/// What to do with the Lease as read at `now`.
#[derive(Debug, PartialEq, Eq)]
enum Decision {
    /// Ours: renew it.
    Renew,
    /// Free or expired: take it.
    Take,
    /// Another holder's, for `left` longer.
    Wait { holder: String, left: Duration },
}

fn decide(spec: &LeaseSpec, identity: &str, now: Timestamp) -> Decision {
    let holder = spec.holder_identity.as_deref().filter(|h| !h.is_empty());
    match holder {
        None => Decision::Take,
        Some(h) if h == identity => Decision::Renew,
        Some(h) => {
            let expires = spec.renew_time.as_ref().map(|t| {
                let seconds = spec.lease_duration_seconds.unwrap_or(0).max(0);
                t.0 + Duration::from_secs(seconds as u64)
            });
            match expires.filter(|e| *e > now) {
                Some(e) => Decision::Wait {
                    holder: h.to_string(),
                    left: Duration::try_from(e.duration_since(now)).unwrap_or_default(),
                },
                None => Decision::Take,
            }
        }
    }
}

impl Elector {
    fn lease_duration(&self) -> Duration {
        Duration::from_secs(self.election.lease_duration)
    }

    /// Until when, after a renewal sent at `sent`, this replica may act as the leader: half a
    /// grace before the Lease could expire, so that its controllers have stopped by the time a
    /// follower may take over.
    fn hold_deadline(&self, sent: Instant) -> Instant {
        let margin = Duration::from_millis(self.election.renew_grace * 500);
        sent + self.lease_duration().saturating_sub(margin)
    }

    /// When to renew after a renewal sent at `sent`.
    fn renew_at(&self, sent: Instant) -> Instant {
        let grace = Duration::from_secs(self.election.renew_grace);
        sent + self.lease_duration().saturating_sub(grace)
    }

    async fn run(
        self,
        leading: watch::Sender<bool>,
        looked: watch::Sender<bool>,
        mut stop: oneshot::Receiver<()>,
    ) {
        let name = self.election.lease_name.clone();
        let mut changes = watcher::watcher(
            self.leases.clone(),
            watcher::Config::default().fields(&format!("metadata.name={name}")),
        )
        .default_backoff()
        .applied_objects()
        .boxed();
        // Until when this replica may lead, while it does.
        let mut held_until: Option<Instant> = None;
        let mut next = Instant::now();
        loop {
            tokio::select! {
                biased;
                _ = &mut stop => break,
                _ = tokio::time::sleep_until(held_until.map_or(next, |h| h.min(next))) => {}
                Some(change) = changes.next() => {
                    // A refused or broken watch retries with a backoff; polling goes on.
                    let Ok(lease) = change else { continue };
                    let holder = lease
                        .spec
                        .and_then(|s| s.holder_identity)
                        .filter(|h| !h.is_empty());
                    let ours = holder.as_deref() == Some(self.election.identity.as_str());
                    if held_until.is_some() && holder.is_some() && !ours {
                        // Someone else holds it now: stop leading at once, and do not renew
                        // over them. An empty holder while this replica leads is a stale
                        // event (the watch's first list can predate the take, e.g. of a
                        // Lease a Helm chart created or a replica released): nobody else
                        // clears the holder, and the next renewal rewrites it.
                        held_until = None;
                        step_down(&leading, &format!("the Lease is now held by {}", holder.unwrap_or_default()));
                        next = Instant::now();
                    } else if held_until.is_none() && (holder.is_none() || ours) {
                        // Released (take it now), or handed to this replica (lead now).
                        next = Instant::now();
                    }
                    continue;
                }
            }
            if held_until.is_some_and(|h| Instant::now() >= h) {
                held_until = None;
                step_down(&leading, "the Lease could not be renewed in time");
            }
            if Instant::now() < next {
                continue;
            }
            let sent = Instant::now();
            next = match self.take_or_renew().await {
                Ok(Held::ByUs) => {
                    held_until = Some(self.hold_deadline(sent));
                    if !*leading.borrow() {
                        tracing::info!(lease = %name, identity = %self.election.identity, "took the Lease: leading");
                        let _ = leading.send(true);
                    }
                    self.renew_at(sent)
                }
                Ok(Held::ByOther { holder, left }) => {
                    if held_until.take().is_some() {
                        step_down(&leading, &format!("the Lease is now held by {holder}"));
                    }
                    // Woken earlier by the watch when it is released or changes hands.
                    sent + left.min(POLL)
                }
                Err(error) => {
                    tracing::warn!(lease = %name, %error, "reading or writing the Lease failed; retrying");
                    sent + RETRY
                }
            };
            looked.send_if_modified(|looked| !std::mem::replace(looked, true));
        }
        if held_until.is_some() {
            let _ = leading.send(false);
            match self.release().await {
                Ok(()) => {
                    tracing::info!(lease = %name, "released the Lease: a follower takes over now")
                }
                Err(error) => {
                    tracing::warn!(lease = %name, %error, "could not release the Lease; a follower takes over when it expires")
                }
            }
        }
    }

    /// Reads the Lease and takes or renews it if it may.
    async fn take_or_renew(&self) -> Result<Held, kube::Error> {
        let name = &self.election.lease_name;
        let now = Timestamp::now();
        let Some(lease) = self.leases.get_opt(name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    ..Default::default()
                },
                spec: Some(self.held_spec(now, now, 0)),
            };
            return match self.leases.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(Held::ByUs),
                // Created by another candidate meanwhile: look again.
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(Held::LOOK_AGAIN),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let resource_version = lease.metadata.resource_version.clone();
        let written = match decide(&spec, &self.election.identity, now) {
            Decision::Wait { holder, left } => return Ok(Held::ByOther { holder, left }),
            Decision::Renew => {
                let acquired = spec.acquire_time.map_or(now, |t| t.0);
                self.held_spec(acquired, now, spec.lease_transitions.unwrap_or(0))
            }
            Decision::Take => self.held_spec(now, now, spec.lease_transitions.unwrap_or(0) + 1),
        };
        match self.swap(resource_version, &written).await {
            Ok(()) => Ok(Held::ByUs),
            // Changed since it was read (taken by another candidate, or rewritten): look again.
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Held::LOOK_AGAIN),
            Err(e) => Err(e),
        }
    }

    fn held_spec(&self, acquired: Timestamp, renewed: Timestamp, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.election.identity.clone()),
            lease_duration_seconds: Some(self.election.lease_duration as i32),
            acquire_time: Some(MicroTime(acquired)),
            renew_time: Some(MicroTime(renewed)),
            lease_transitions: Some(transitions),
            ..Default::default()
        }
    }

    /// Writes `spec` (merged) if the Lease is still at `resource_version` (a 409 otherwise).
    async fn swap(
        &self,
        resource_version: Option<String>,
        spec: &impl serde::Serialize,
    ) -> kube::Result<()> {
        let patch = json!({
            "metadata": {"resourceVersion": resource_version},
            "spec": spec,
        });
        self.leases
            .patch(
                &self.election.lease_name,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .map(|_| ())
    }

    /// Clears the holder, if it is still this replica.
    async fn release(&self) -> kube::Result<()> {
        let Some(lease) = self.leases.get_opt(&self.election.lease_name).await? else {
            return Ok(());
        };
        let spec = lease.spec.unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.election.identity.as_str()) {
            return Ok(());
        }
        let cleared = json!({"holderIdentity": null, "renewTime": null, "acquireTime": null});
        self.swap(lease.metadata.resource_version, &cleared).await
    }
}

fn step_down(leading: &watch::Sender<bool>, why: &str) {
    tracing::warn!(why, "lost leadership: stopping the controllers");
    let _ = leading.send(false);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(holder: Option<&str>, renewed: Option<&str>, seconds: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: holder.map(Into::into),
            renew_time: renewed.map(|t| MicroTime(t.parse().unwrap())),
            lease_duration_seconds: Some(seconds),
            ..Default::default()
        }
    }

    #[test]
    fn a_free_or_expired_lease_is_taken_ours_renewed_anothers_waited_on() {
        let now: Timestamp = "2026-01-01T00:00:10Z".parse().unwrap();
        assert_eq!(decide(&spec(None, None, 15), "me", now), Decision::Take);
        assert_eq!(decide(&spec(Some(""), None, 15), "me", now), Decision::Take);
        assert_eq!(
            decide(
                &spec(Some("me"), Some("2026-01-01T00:00:00Z"), 5),
                "me",
                now
            ),
            Decision::Renew
        );
        assert_eq!(
            decide(
                &spec(Some("you"), Some("2026-01-01T00:00:00Z"), 15),
                "me",
                now
            ),
            Decision::Wait {
                holder: "you".into(),
                left: Duration::from_secs(5)
            }
        );
        assert_eq!(
            decide(
                &spec(Some("you"), Some("2026-01-01T00:00:00Z"), 5),
                "me",
                now
            ),
            Decision::Take
        );
        assert_eq!(
            decide(&spec(Some("you"), None, 15), "me", now),
            Decision::Take
        );
    }
}
