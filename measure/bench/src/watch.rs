//! Watches that timestamp what the benchmark waits for, as this client observes it: the first
//! time each request is seen in each phase, and each oz RoleBinding's deletion.
//!
//! Times are taken when the watch event reaches this process, so they include the apiserver's
//! watch delivery (typically a millisecond or two on loopback) on top of oz's own latency.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use futures::StreamExt;
use k8s_openapi::{api::rbac::v1::RoleBinding, jiff::Timestamp};
use kube::{
    Api, ResourceExt,
    runtime::{WatchStreamExt, watcher},
};
use oz_api::{ExecAccessRequest, RequestPhase};
use tokio::{sync::oneshot, task::JoinHandle};

use crate::{Result, cluster};

/// `namespace/name`.
pub fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// What was seen of one request.
#[derive(Clone, Debug, Default)]
pub struct Seen {
    /// When each phase was first seen (monotonic and wall-clock).
    pub phases: Vec<(RequestPhase, Instant, Timestamp)>,
    /// `status.expiresAt`, once set.
    pub expires_at: Option<Timestamp>,
    /// `status.podName`, once set.
    pub pod: Option<String>,
}

impl Seen {
    pub fn first(&self, phase: RequestPhase) -> Option<Instant> {
        self.phases
            .iter()
            .find(|(p, ..)| *p == phase)
            .map(|(_, t, _)| *t)
    }

    /// The wall-clock time `phase` was first seen.
    pub fn first_wall(&self, phase: RequestPhase) -> Option<Timestamp> {
        self.phases
            .iter()
            .find(|(p, ..)| *p == phase)
            .map(|(.., t)| *t)
    }
}

#[derive(Default)]
struct RequestState {
    seen: HashMap<String, Seen>,
    waiters: HashMap<String, Vec<(RequestPhase, oneshot::Sender<Seen>)>>,
}

/// A watch on ExecAccessRequests that records when each first reached each phase.
pub struct RequestWatch {
    state: Arc<Mutex<RequestState>>,
    task: JoinHandle<()>,
}

impl RequestWatch {
    /// Starts watching (with a label selector) and returns once the initial list is done.
    pub async fn start(api: Api<ExecAccessRequest>, labels: &str) -> Result<Self> {
        let state: Arc<Mutex<RequestState>> = Arc::default();
        let (listed, on_listed) = oneshot::channel();
        let stream = watcher(api, watcher::Config::default().labels(labels)).default_backoff();
        let recorder = state.clone();
        let task = tokio::spawn(async move {
            let mut listed = Some(listed);
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::Apply(request) | watcher::Event::InitApply(request)) => {
                        observe(&recorder, &request, Instant::now(), Timestamp::now());
                    }
                    Ok(watcher::Event::InitDone) => {
                        if let Some(listed) = listed.take() {
                            let _ = listed.send(());
                        }
                    }
                    Ok(_) => {}
                    Err(e) => eprintln!("oz-bench: request watch: {e}"),
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(30), on_listed)
            .await
            .map_err(|_| "the request watch did not list within 30s")??;
        Ok(Self { state, task })
    }

    /// Waits until request `key` has been seen in `phase` (or `timeout`).
    pub async fn wait_for(
        &self,
        key: &str,
        phase: RequestPhase,
        timeout: Duration,
    ) -> Option<Seen> {
        let receiver = {
            let mut state = self.state.lock().unwrap();
            if let Some(seen) = state.seen.get(key)
                && seen.first(phase).is_some()
            {
                return Some(seen.clone());
            }
            let (sender, receiver) = oneshot::channel();
            state
                .waiters
                .entry(key.to_string())
                .or_default()
                .push((phase, sender));
            receiver
        };
        tokio::time::timeout(timeout, receiver).await.ok()?.ok()
    }

    /// What has been seen of `key` so far.
    pub fn seen(&self, key: &str) -> Option<Seen> {
        self.state.lock().unwrap().seen.get(key).cloned()
    }

    /// How many requests have been seen in `phase`.
    pub fn count(&self, phase: RequestPhase) -> usize {
        self.state
            .lock()
            .unwrap()
            .seen
            .values()
            .filter(|s| s.first(phase).is_some())
            .count()
    }
}

impl Drop for RequestWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn observe(state: &Mutex<RequestState>, request: &ExecAccessRequest, at: Instant, wall: Timestamp) {
    let key = key(
        &request.namespace().unwrap_or_default(),
        &request.name_any(),
    );
    let status = request.status.as_ref();
    let mut state = state.lock().unwrap();
    let seen = state.seen.entry(key.clone()).or_default();
    if let Some(status) = status {
        if let Some(expires_at) = &status.expires_at {
            seen.expires_at = Some(expires_at.0);
        }
        if status.pod_name.is_some() {
            seen.pod = status.pod_name.clone();
        }
        if let Some(phase) = status.phase
            && seen.first(phase).is_none()
        {
            seen.phases.push((phase, at, wall));
        }
    }
    let seen = seen.clone();
    if let Some(waiters) = state.waiters.remove(&key) {
        let mut waiting = Vec::new();
        for (phase, sender) in waiters {
            if seen.first(phase).is_some() {
                let _ = sender.send(seen.clone());
            } else {
                waiting.push((phase, sender));
            }
        }
        if !waiting.is_empty() {
            state.waiters.insert(key, waiting);
        }
    }
}

/// A watch on oz's RoleBindings that records when each was seen deleted, by the request it
/// belonged to (its `oz.wizardofoz.co/request` label).
pub struct BindingWatch {
    deleted: Arc<Mutex<HashMap<String, Timestamp>>>,
    task: JoinHandle<()>,
}

impl BindingWatch {
    /// Starts watching oz's RoleBindings through `api` and returns once the initial list is done.
    pub async fn start(api: Api<RoleBinding>) -> Result<Self> {
        let deleted: Arc<Mutex<HashMap<String, Timestamp>>> = Arc::default();
        let (listed, on_listed) = oneshot::channel();
        let config = watcher::Config::default().labels(cluster::GRANT_LABEL_SELECTOR);
        let stream = watcher(api, config).default_backoff();
        let recorder = deleted.clone();
        let task = tokio::spawn(async move {
            let mut listed = Some(listed);
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                match event {
                    Ok(watcher::Event::Delete(binding)) => {
                        let now = Timestamp::now();
                        if let Some(request) = binding.labels().get(cluster::GRANT_REQUEST_LABEL) {
                            let key = key(&binding.namespace().unwrap_or_default(), request);
                            recorder.lock().unwrap().entry(key).or_insert(now);
                        }
                    }
                    Ok(watcher::Event::InitDone) => {
                        if let Some(listed) = listed.take() {
                            let _ = listed.send(());
                        }
                    }
                    Ok(_) => {}
                    Err(e) => eprintln!("oz-bench: RoleBinding watch: {e}"),
                }
            }
        });
        tokio::time::timeout(Duration::from_secs(30), on_listed)
            .await
            .map_err(|_| "the RoleBinding watch did not list within 30s")??;
        Ok(Self { deleted, task })
    }

    /// When the binding of request `key` (`namespace/name`) was seen deleted.
    pub fn deleted(&self, key: &str) -> Option<Timestamp> {
        self.deleted.lock().unwrap().get(key).copied()
    }
}

impl Drop for BindingWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}
