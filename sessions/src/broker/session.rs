//! One open session: pipes frames both ways (tapping the recording, counting bytes, noticing
//! input), and closes when the command ends, the user leaves, or [`closing`] says the grant
//! has ended; then tells the user why, and writes the end everywhere it is recorded.

use std::{future::pending, sync::Mutex};

use axum::extract::ws::{Message, WebSocket};
use chrono::{DateTime, Utc};
use futures::{
    SinkExt, StreamExt,
    stream::{SplitSink, SplitStream},
};
use kube::Api;
use oz_api::{AccessKind, AccessTemplate, ExecAccessTemplate, PodAccessTemplate, SessionEndReason};
use tokio::time::{Instant, sleep_until};
use tokio_tungstenite::tungstenite::Message as UpMessage;
use tracing::info;

use super::{
    frames,
    pipe::{forward_input, forward_output},
    state::Broker,
    streams::{Ended, Upstream},
};
use crate::{
    SessionInfo, audit,
    closing::{Holder, close_reason, closing_frames},
    grants::Grant,
    metrics::{ReasonLabels, StreamLabels},
    recording::Recording,
    status::{self, SessionChange},
};

/// A session, ready to run once the client's upgrade completes.
pub struct Session {
    broker: Broker,
    info: SessionInfo,
    grant: Grant,
    stdin: bool,
}

/// Counts the session as open until dropped, however the task ends.
struct OpenGuard(Broker);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.inner.config.metrics.open.dec();
        self.0.inner.open.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl Session {
    pub fn new(broker: Broker, info: SessionInfo, grant: Grant, stdin: bool) -> Self {
        Self {
            broker,
            info,
            grant,
            stdin,
        }
    }

    /// Runs the session to its end.
    pub async fn run(self, down: WebSocket, up: Upstream) {
        let inner = &self.broker.inner;
        let config = &inner.config;
        inner.open.send_modify(|n| *n += 1);
        config.metrics.open.inc();
        let _open = OpenGuard(self.broker.clone());
        config
            .metrics
            .total
            .get_or_create(&StreamLabels {
                stream: self.info.stream.subresource(),
            })
            .inc();

        let mut recording = config
            .recordings
            .start(&self.info, self.grant.record_input, None);
        let key = recording.key().to_string();
        let mut record = self.info.record();
        record.recording = Some(key.clone());
        let audit_grant = oz_audit::Grant {
            kind: self.info.grant.kind.request_kind().into(),
            name: self.info.grant.name.clone(),
            template: self.info.grant.template.clone(),
            approvers: self.grant.request.summary.approvers.clone(),
            extensions: self.grant.request.summary.extensions.clone(),
        };
        audit::write(
            &config.audit_log,
            &self.info,
            &audit_grant,
            self.stdin,
            &key,
            None,
        )
        .await;
        // Written while the session runs; the end waits for it, so the two never cross.
        let started = {
            let (client, info, record) = (inner.client.clone(), self.info.clone(), record.clone());
            tokio::spawn(async move {
                status::record(
                    &client,
                    &info.namespace,
                    &info.grant,
                    &SessionChange::Started(record),
                )
                .await
            })
        };

        let (mut down_tx, mut down_rx) = down.split();
        let (mut up_tx, mut up_rx) = up.split();
        let ended = self
            .pipe(
                &mut recording,
                &mut down_tx,
                &mut down_rx,
                &mut up_tx,
                &mut up_rx,
            )
            .await;
        let reason = ended.reason;
        if reason != SessionEndReason::Exited && ended.client_open {
            for frame in closing_frames(reason) {
                if frame[0] == frames::STDOUT {
                    recording.output(&frame[1..]);
                }
                if down_tx.send(Message::Binary(frame.into())).await.is_err() {
                    break;
                }
            }
        }
        if ended.client_open {
            let _ = down_tx.send(Message::Close(None)).await;
        }
        if ended.upstream_open {
            let _ = up_tx.send(UpMessage::Close(None)).await;
        }
        let ended_at = Utc::now();
        if reason == SessionEndReason::Expired
            && let Some(expires_at) = self.latest_expiry()
        {
            let lag = (ended_at - expires_at).as_seconds_f64();
            config.metrics.close_lag.observe(lag);
            info!(session = %self.info.id, lag_seconds = lag, "session closed at expiresAt");
        }
        config
            .metrics
            .ended
            .get_or_create(&ReasonLabels {
                reason: reason.label(),
            })
            .inc();
        info!(session = %self.info.id, reason = reason.label(), "session closed");

        let digest = recording.finish(ended_at, reason).await;
        let _ = started.await;
        record.ended_at = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::from_microsecond(ended_at.timestamp_micros())
                .expect("a chrono time is within jiff's range"),
        ));
        record.end_reason = Some(reason);
        status::record(
            &inner.client,
            &self.info.namespace,
            &self.info.grant,
            &SessionChange::Ended(record),
        )
        .await;
        audit::write(
            &config.audit_log,
            &self.info,
            &audit_grant,
            self.stdin,
            &key,
            Some(&audit::SessionEnd {
                at: ended_at,
                reason,
                recording: digest,
            }),
        )
        .await;
    }

    /// The grant's expiresAt as last seen.
    fn latest_expiry(&self) -> Option<DateTime<Utc>> {
        let grants = &self.broker.inner.grants;
        grants
            .request(
                self.info.grant.kind,
                &self.info.namespace,
                &self.info.grant.name,
            )
            .filter(|r| r.uid == self.info.grant.uid)
            .and_then(|r| r.summary.expires_at)
            .or(self.grant.request.summary.expires_at)
    }

    /// Pipes both directions at once, each on its own (see [`super::pipe`]), while watching
    /// the grant; returns how the session ended.
    async fn pipe(
        &self,
        recording: &mut Recording,
        down_tx: &mut SplitSink<WebSocket, Message>,
        down_rx: &mut SplitStream<WebSocket>,
        up_tx: &mut SplitSink<Upstream, UpMessage>,
        up_rx: &mut SplitStream<Upstream>,
    ) -> Ended {
        let metrics = &self.broker.inner.config.metrics;
        let last_input = Mutex::new(Instant::now());
        let (input_tap, output_tap) = recording.taps();
        let input = forward_input(down_rx, up_tx, input_tap, metrics, &last_input);
        let output = forward_output(up_rx, down_tx, output_tap, metrics, &self.info.id);
        tokio::select! {
            biased;
            ended = self.watch_grant(&last_input) => ended,
            ended = input => ended,
            ended = output => ended,
        }
    }

    /// Waits for the grant to end: oz shutting down, expiresAt, the idle timeout since
    /// `last_input`, a change to the request or template that [`close_reason`] closes on, or
    /// an AccessLock over the user (closed as Revoked).
    async fn watch_grant(&self, last_input: &Mutex<Instant>) -> Ended {
        let inner = &self.broker.inner;
        let grants = &inner.grants;
        let info = &self.info;
        let mut changes = grants.subscribe();
        let mut shutdown = inner.shutdown.subscribe();
        let mut expires_at = self
            .grant
            .request
            .summary
            .expires_at
            .unwrap_or_else(Utc::now);
        let idle_timeout = self.grant.idle_timeout;
        let end = |reason| Ended::new(reason, true, true);
        loop {
            let expiry = instant_of(expires_at);
            let idle = async {
                match idle_timeout {
                    Some(timeout) => {
                        let last = *last_input.lock().unwrap_or_else(|e| e.into_inner());
                        sleep_until(last + timeout).await;
                        // Input since the sleep began moves the deadline: check again.
                        let last = *last_input.lock().unwrap_or_else(|e| e.into_inner());
                        last + timeout <= Instant::now()
                    }
                    None => pending().await,
                }
            };
            tokio::select! {
                biased;
                true = async { shutdown.wait_for(|down| *down).await.is_ok() } => return end(SessionEndReason::ServerShutdown),
                () = sleep_until(expiry) => return end(SessionEndReason::Expired),
                idled = idle => if idled {
                    return end(SessionEndReason::IdleTimeout);
                },
                Ok(()) = changes.changed() => {
                    let request = grants
                        .request(info.grant.kind, &info.namespace, &info.grant.name)
                        .filter(|r| r.uid == info.grant.uid);
                    if let Some(at) = request.as_ref().and_then(|r| r.summary.expires_at) {
                        expires_at = at;
                    }
                    let template = grants.template(info.grant.kind, &info.namespace, &info.grant.template);
                    let holder = Holder { user: &info.user, groups: &info.groups };
                    let template_of = (info.grant.kind, info.grant.template.as_str());
                    if grants.locked((&info.user, &info.groups), &info.namespace, template_of) {
                        return end(SessionEndReason::Revoked);
                    }
                    if let Some(reason) = close_reason(holder, &info.grant.uid, expires_at, request.as_ref(), template.as_ref(), Utc::now()) {
                        return end(self.refine(reason).await);
                    }
                }
            }
        }
    }

    /// A grant that vanished or stopped being Ready while its template still seemed to exist:
    /// asks the apiserver whether the template is gone (the two watches may deliver the
    /// template's deletion after its requests' own).
    async fn refine(&self, reason: SessionEndReason) -> SessionEndReason {
        if reason != SessionEndReason::Revoked {
            return reason;
        }
        let client = self.broker.inner.client.clone();
        let (namespace, name) = (&self.info.namespace, &self.info.grant.template);
        let deleting = match self.info.grant.kind {
            AccessKind::Exec => Api::<ExecAccessTemplate>::namespaced(client, namespace)
                .get_opt(name)
                .await
                .map(|t| t.is_none_or(|t| being_deleted(&t))),
            AccessKind::Pod => Api::<PodAccessTemplate>::namespaced(client, namespace)
                .get_opt(name)
                .await
                .map(|t| t.is_none_or(|t| being_deleted(&t))),
        };
        match deleting {
            Ok(true) => SessionEndReason::TemplateDeleted,
            _ => reason,
        }
    }
}

fn being_deleted<T: AccessTemplate>(template: &T) -> bool {
    template.meta().deletion_timestamp.is_some()
}

/// The tokio instant of a wall-clock time (now, if it has passed).
fn instant_of(at: DateTime<Utc>) -> Instant {
    let wait = (at - Utc::now()).to_std().unwrap_or_default();
    Instant::now() + wait
}
