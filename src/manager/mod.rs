//! The oz-manager runtime: leader election, the controllers while leading, the webhook server
//! on every replica, the metrics and health endpoints, the namespace access probe, and a
//! graceful shutdown.

use std::{sync::Arc, time::Duration};

use futures::FutureExt;
use kube::Client;
use tokio::sync::watch;

use crate::{
    Context, controllers,
    metrics::Metrics,
    notify::{Notifier, NotifyMetrics},
};

pub mod access_probe;
pub mod command;
pub mod config;
pub mod endpoints;
pub mod identity;
pub mod leader;
pub mod memory;
pub mod sessions;
mod shutdown;
pub mod start_gate;

use leader::Leading;
use start_gate::RequestLists;

pub use command::Command;
pub use config::{LogFormat, ManagerConfig, RunArgs};
pub use endpoints::Health;
pub use shutdown::Shutdown;

/// Runs oz-manager until `shutdown` resolves.
pub async fn run(client: Client, config: ManagerConfig, shutdown: Shutdown) -> Result<(), String> {
    let mut metrics = Metrics::default();
    let webhook_metrics = oz_webhooks::WebhookMetrics::default();
    webhook_metrics.register(metrics.registry_mut());
    let notify_metrics = NotifyMetrics::default();
    notify_metrics.register(metrics.registry_mut());
    let sessions_metrics = sessions::SessionsMetrics::default();
    sessions_metrics.register(metrics.registry_mut());
    let metrics = Arc::new(metrics);
    let health = Arc::new(Health::default());
    if let Some(addr) = config.health_addr {
        endpoints::serve_health(addr, health.clone(), shutdown.clone()).await?;
    }
    if let Some(addr) = config.metrics_addr {
        endpoints::serve_metrics(addr, metrics.clone(), shutdown.clone()).await?;
    }
    let namespaces: Vec<String> = config
        .scopes
        .iter()
        .filter_map(|s| s.namespace().map(String::from))
        .collect();
    tokio::spawn(access_probe::run(
        client.clone(),
        namespaces,
        config.kinds.clone(),
        metrics.clone(),
        health.clone(),
    ));

    // Shared by the request controllers (through the context) and the webhooks' cache.
    let request_lists = RequestLists::default();
    let leadership = match &config.leader_election {
        Some(election) => Some(leader::start(client.clone(), &config.namespace, election).await?),
        None => None,
    };
    // Serving webhooks does not wait for leadership: followers answer admission too; only the
    // leader writes the certificate Secrets and the configurations.
    let webhook_server = match config.webhooks.clone() {
        Some(mut webhooks) => {
            webhooks.leader = leadership.as_ref().map(|l| l.leading.clone());
            webhooks.requests_after = Some(after_request_lists(
                &request_lists,
                config.scopes.len() * config.kinds.len(),
                leadership.as_ref(),
            ));
            webhooks.metrics = webhook_metrics.clone();
            // One question at start answers two: whom the Secrets and ConfigMap oz-manager
            // creates belong to, and which exec is oz's own for a brokered session.
            match identity::Identity::ask(&client).await {
                Ok(me) => {
                    webhooks.owner = me.owner_in(&webhooks.namespace);
                    tracing::info!(
                        user = %me.username,
                        owner = ?webhooks.owner.as_ref().map(|o| &o.name),
                        "oz-manager's identity; the owner of the Secrets and ConfigMap it creates"
                    );
                    if config.sessions.is_some() {
                        webhooks.enforce.brokers.insert(me.username);
                    }
                }
                // Without it, oz's own exec for a brokered session is denied where access
                // without a grant is: sessions there fail closed, which the warning explains.
                Err(error) => tracing::warn!(
                    %error,
                    sessions = config.sessions.is_some(),
                    "oz's Secrets get no owner (uninstalling leaves them), and brokered \
                     sessions will be refused in --audit-enforce-namespaces"
                ),
            }
            let verified = webhooks.client_ca.is_some();
            if !verified && config.unverified_webhook_callers {
                tracing::warn!(
                    "webhook callers are not verified, as chosen with \
                     --unverified-webhook-callers: records and Events from callers without a \
                     client certificate say `unverified`, and what they are told reveals \
                     nothing (docs/security.md)"
                );
            } else if !verified {
                tracing::warn!(
                    "webhook callers are not verified (no --webhook-client-ca-file): anyone who \
                     reaches the webhook port can send reviews; audit records and Events say \
                     `unverified`, and refusals for templates name no details. Verify the \
                     apiserver where the cluster allows it (--webhook-client-ca-file), or choose \
                     --unverified-webhook-callers and keep the port closed with a NetworkPolicy \
                     (docs/security.md)"
                );
            }
            let server = oz_webhooks::WebhookServer::start(client.clone(), webhooks)
                .await
                .map_err(|e| format!("cannot start the webhook server: {e}"))?;
            tracing::info!(addr = %server.local_addr(), "serving admission webhooks");
            Some(server)
        }
        None => None,
    };
    // Every replica serves sessions: the apiserver proxies to any of them.
    let sessions = match (&config.sessions, &webhook_server) {
        (Some(settings), Some(webhooks)) => Some(
            sessions::Sessions::start(client.clone(), settings, webhooks, &sessions_metrics)
                .await?,
        ),
        _ => None,
    };
    health.set_serving(true);

    let mut ctx = Context::new(client.clone(), metrics, config.settings.clone());
    ctx.request_lists = request_lists;
    // Started on every replica, but only the leader's controllers send.
    if let Some(notifications) = config.notifications.clone() {
        ctx.notifier = Notifier::start(client, &config.scopes, notifications, notify_metrics);
    }
    match leadership.as_ref().map(|l| l.leading.clone()) {
        None => {
            // Alone, this replica leads: a "no leader" alert must not fire for it.
            ctx.metrics.leader.set(1);
            run_controllers(&ctx, &config, shutdown.clone()).await
        }
        Some(mut leading) => loop {
            tracing::info!("waiting to become the leader");
            tokio::select! {
                _ = shutdown.clone() => break,
                became = wait_for(&mut leading, true) => if became.is_err() { break },
            }
            tracing::info!("leading: starting the controllers");
            health.set_leader(true);
            ctx.metrics.leader.set(1);
            let lost = leadership_lost(leading.clone());
            let stop = futures::future::select(Box::pin(shutdown.clone()), Box::pin(lost))
                .map(|_| ())
                .boxed()
                .shared();
            run_controllers(&ctx, &config, stop).await;
            health.set_leader(false);
            ctx.metrics.leader.set(0);
            if shutdown.peek().is_some() {
                break;
            }
            tracing::warn!("lost the leadership: controllers stopped");
        },
    }
    // The controllers have stopped: release the Lease first, so a follower takes over at once
    // rather than after the lease duration, and while this replica still finishes its webhooks.
    if let Some(leadership) = leadership {
        leadership.release(Duration::from_secs(5)).await;
    }
    if let Some(sessions) = sessions {
        sessions.shutdown(Duration::from_secs(5)).await;
    }
    if let Some(server) = webhook_server {
        let _ = server.shutdown(Duration::from_secs(5)).await;
    }
    Ok(())
}

/// Opens once this replica's request controllers (`expected` of them) have listed their
/// requests, or once it is found not to lead ([`start_gate`]).
fn after_request_lists(
    lists: &RequestLists,
    expected: usize,
    leadership: Option<&leader::Leadership>,
) -> watch::Receiver<bool> {
    let (open, gate) = watch::channel(false);
    let leading = match leadership {
        None => Leading::Always,
        Some(l) => Leading::Elected {
            looked: l.looked.clone(),
            leading: l.leading.clone(),
        },
    };
    let lists = lists.clone();
    tokio::spawn(async move {
        start_gate::request_lists_done(&lists, expected, leading).await;
        open.send_replace(true);
    });
    gate
}

async fn run_controllers(ctx: &Context, config: &ManagerConfig, stop: Shutdown) {
    let mut tasks = Vec::new();
    for scope in &config.scopes {
        tracing::info!(?scope, kinds = ?config.kinds, "starting controllers");
        tasks.extend(
            controllers::controllers(ctx.clone(), scope.clone(), &config.kinds, stop.clone()).await,
        );
    }
    if let Some(hub) = config.fleet_hub.clone() {
        let (client, stop) = (ctx.client.clone(), stop.clone());
        tasks.push(Box::pin(async move {
            if let Err(error) = crate::fleet::run(client, hub, stop).await {
                tracing::error!(%error, "the fleet hub stopped");
            }
        }));
    }
    if tasks.is_empty() {
        // `--controllers=webhooks`: no controller holds the process open, the webhook server
        // runs in the background; lead (or not) until asked to stop.
        stop.await;
        return;
    }
    futures::future::join_all(tasks).await;
}

/// Resolves once this replica, leading as `leading` last showed, has lost the Lease: on the
/// first value sent after that, whatever it is. A wait for `false` could miss the loss: the
/// elector takes the Lease back as soon as another holder's term runs out (3 s in the tests),
/// and a stop future first polled after that sees `true` again and waits on, so the
/// controllers would go on running through the other holder's term.
async fn leadership_lost(mut leading: watch::Receiver<bool>) {
    // While leading, the elector sends nothing but the loss (`false`): it sends `true` only
    // to a replica that is not leading.
    let _ = leading.changed().await;
}

async fn wait_for(
    leading: &mut watch::Receiver<bool>,
    state: bool,
) -> Result<(), watch::error::RecvError> {
    leading.wait_for(|l| *l == state).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;
    use tokio::sync::watch;

    use super::leadership_lost;

    #[tokio::test]
    async fn a_loss_is_seen_even_when_the_lease_is_back_before_anyone_looks() {
        let (elector, mut leading) = watch::channel(false);
        elector.send(true).unwrap();
        leading.changed().await.unwrap();
        let lost = leadership_lost(leading.clone());
        // Stepped down and took the Lease back before the stop future was first polled.
        elector.send(false).unwrap();
        elector.send(true).unwrap();
        assert!(lost.now_or_never().is_some(), "the loss went unseen");
    }

    #[tokio::test]
    async fn leading_on_is_not_a_loss() {
        let (elector, mut leading) = watch::channel(false);
        elector.send(true).unwrap();
        leading.changed().await.unwrap();
        assert!(leadership_lost(leading.clone()).now_or_never().is_none());
        drop(elector);
    }
}
