//! The requests the cache keeps, each only as its [`GrantSummary`], by namespace and name, and
//! the writer that keeps them from the watch's events.

use std::{
    borrow::Borrow,
    collections::{HashMap, HashSet},
    hash::{Hash, Hasher},
    sync::{Arc, PoisonError, RwLock},
};

use futures::{Stream, TryStreamExt};
use kube::{ResourceExt, runtime::watcher};
use oz_api::AccessRequest;
use tokio::sync::watch;

use crate::admission::GrantSummary;

/// The watches stopped (their future was dropped) before they had all listed once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the audit and admission cache's watches stopped before they had listed")]
pub struct WatchesStopped;

/// `events` applied to the summaries `writer` keeps; the requests themselves are dropped.
pub(super) fn summarize<R, S>(
    events: S,
    mut writer: SummaryWriter,
) -> impl Stream<Item = watcher::Result<()>>
where
    R: AccessRequest,
    S: Stream<Item = watcher::Result<watcher::Event<R>>>,
{
    events.map_ok(move |event| writer.apply(&event))
}

/// The requests of one kind, each as its [`GrantSummary`], by namespace and name.
pub(super) struct RequestSummaries {
    by_namespace: RwLock<HashMap<String, Summaries>>,
    /// Becomes true once the watch has listed.
    listed: watch::Receiver<bool>,
}

impl RequestSummaries {
    /// The requests in `namespace` that are `wanted`.
    pub(super) fn in_namespace(
        &self,
        namespace: &str,
        wanted: impl Fn(&GrantSummary) -> bool,
    ) -> Vec<GrantSummary> {
        let by_namespace = self
            .by_namespace
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        by_namespace
            .get(namespace)
            .map(|requests| {
                (requests.iter().map(|kept| &kept.0))
                    .filter(|summary| wanted(summary))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The requests in every namespace that are `wanted`, with their namespace.
    pub(super) fn everywhere(
        &self,
        wanted: impl Fn(&GrantSummary) -> bool,
    ) -> Vec<(String, GrantSummary)> {
        let by_namespace = self
            .by_namespace
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        by_namespace
            .iter()
            .flat_map(|(namespace, requests)| {
                (requests.iter().map(|kept| &kept.0))
                    .filter(|summary| wanted(summary))
                    .map(|summary| (namespace.clone(), summary.clone()))
            })
            .collect()
    }

    pub(super) fn listed(&self) -> bool {
        *self.listed.borrow()
    }

    pub(super) async fn wait_until_listed(&self) -> Result<(), WatchesStopped> {
        let mut listed = self.listed.clone();
        match listed.wait_for(|listed| *listed).await {
            Ok(_) => Ok(()),
            Err(_) => Err(WatchesStopped),
        }
    }
}

/// Keeps a [`RequestSummaries`] from its kind's watch events, the way a reflector's writer
/// keeps its store: a (re)list replaces everything once complete.
pub(super) struct SummaryWriter {
    pub(super) summaries: Arc<RequestSummaries>,
    listing: HashMap<String, Summaries>,
    listed: watch::Sender<bool>,
}

impl SummaryWriter {
    pub(super) fn new() -> Self {
        let (listed, reader) = watch::channel(false);
        Self {
            summaries: Arc::new(RequestSummaries {
                by_namespace: RwLock::default(),
                listed: reader,
            }),
            listing: HashMap::new(),
            listed,
        }
    }

    pub(super) fn apply<R: AccessRequest>(&mut self, event: &watcher::Event<R>) {
        fn namespace<R: AccessRequest>(request: &R) -> String {
            request.namespace().unwrap_or_default()
        }
        let write = || {
            self.summaries
                .by_namespace
                .write()
                .unwrap_or_else(PoisonError::into_inner)
        };
        match event {
            watcher::Event::Init => self.listing = HashMap::new(),
            watcher::Event::InitApply(request) => {
                self.listing
                    .entry(namespace(request))
                    .or_default()
                    .replace(ByName(GrantSummary::of(request)));
            }
            watcher::Event::InitDone => {
                *write() = std::mem::take(&mut self.listing);
                self.listed.send_replace(true);
            }
            watcher::Event::Apply(request) => {
                write()
                    .entry(namespace(request))
                    .or_default()
                    .replace(ByName(GrantSummary::of(request)));
            }
            watcher::Event::Delete(request) => {
                let mut by_namespace = write();
                let namespace = namespace(request);
                if let Some(requests) = by_namespace.get_mut(&namespace) {
                    requests.remove(request.name_any().as_str());
                    if requests.is_empty() {
                        by_namespace.remove(&namespace);
                    }
                }
            }
        }
    }
}

/// One namespace's summaries of one kind.
type Summaries = HashSet<ByName>;

/// A summary in a set, found by its name, which is then not kept a second time as a key.
#[derive(Debug)]
struct ByName(GrantSummary);

impl PartialEq for ByName {
    fn eq(&self, other: &Self) -> bool {
        self.0.name == other.0.name
    }
}

impl Eq for ByName {}

impl Hash for ByName {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // As the `str` it is borrowed as hashes, so a lookup by name finds it.
        self.0.name.as_str().hash(state);
    }
}

impl Borrow<str> for ByName {
    fn borrow(&self) -> &str {
        &self.0.name
    }
}
