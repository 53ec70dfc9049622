//! When each grant was revoked, from a watch of oz's RoleBindings.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::StreamExt;
use k8s_openapi::{api::rbac::v1::RoleBinding, jiff::Timestamp};
use kube::{Api, Client, ResourceExt, api::PartialObjectMeta};

use super::{polling::SETTLE, requests::MANAGED_BY_OZ};

/// Records, from a watch, when each of oz's RoleBindings in a namespace disappears: the moment
/// a grant is revoked (oz deletes the binding first). A deletion is stamped when its event
/// arrives, so never before it happened. When the watch breaks (the apiserver is down) it
/// resumes from where it was, and the deletions meanwhile arrive then; if it must list afresh,
/// a binding missing from the new list is stamped when the list is complete. A missed moment is
/// only ever recorded late, never early. (A watch rather than polling: a slow LIST under load
/// stamped every revocation of its interval at its end, and 20 LISTs a second loaded the
/// apiserver being measured.)
pub struct RevocationClock {
    gone: Arc<Mutex<BTreeMap<String, Timestamp>>>,
    task: tokio::task::JoinHandle<()>,
}

impl RevocationClock {
    /// Starts watching `names` in `ns`, which must exist now. Returns once the watch has
    /// listed them, so that nothing after the return is missed.
    pub async fn start(admin: &Client, ns: &str, names: Vec<String>) -> Self {
        use kube::runtime::{WatchStreamExt, watcher};
        let gone = Arc::new(Mutex::new(BTreeMap::new()));
        let api: Api<PartialObjectMeta<RoleBinding>> = Api::namespaced(admin.clone(), ns);
        let record = gone.clone();
        let (listed, first_list) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let mut listed = Some(listed);
            let mut events = std::pin::pin!(
                watcher::watcher(api, watcher::Config::default().labels(MANAGED_BY_OZ))
                    .backoff(EveryFiftyMillis)
            );
            // The names present in a list in progress.
            let mut relisted: Vec<String> = Vec::new();
            while let Some(event) = events.next().await {
                let now = Timestamp::now();
                let Ok(event) = event else { continue };
                let mut gone = record.lock().unwrap();
                match event {
                    watcher::Event::Delete(binding) => {
                        let name = binding.name_any();
                        if names.contains(&name) {
                            gone.entry(name).or_insert(now);
                        }
                    }
                    watcher::Event::Init => relisted.clear(),
                    watcher::Event::InitApply(binding) => relisted.push(binding.name_any()),
                    watcher::Event::InitDone => {
                        for name in names.iter().filter(|n| !relisted.contains(n)) {
                            gone.entry(name.clone()).or_insert(now);
                        }
                        if let Some(listed) = listed.take() {
                            let _ = listed.send(());
                        }
                    }
                    watcher::Event::Apply(_) => {}
                }
            }
        });
        let _ = tokio::time::timeout(SETTLE, first_list).await;
        Self { gone, task }
    }

    /// When each binding was first seen gone.
    pub fn gone(&self) -> BTreeMap<String, Timestamp> {
        self.gone.lock().unwrap().clone()
    }
}

/// Retry a broken watch every 50 ms (kube's default backs off up to 30 s): a revocation right
/// after the apiserver's return must be seen then, not when the watch happens to retry.
struct EveryFiftyMillis;

impl Iterator for EveryFiftyMillis {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        Some(Duration::from_millis(50))
    }
}

impl kube::runtime::utils::Backoff for EveryFiftyMillis {
    fn reset(&mut self) {}
}

impl Drop for RevocationClock {
    fn drop(&mut self) {
        self.task.abort();
    }
}
