//! A request controller's caches of its requests, their templates and the AccessLocks, shared
//! by its reconciles and its expiry timers.

use std::sync::Arc;

use kube::runtime::reflector::{ObjectRef, Store};
use oz_api::{AccessLock, AccessRequest};

use crate::cache::requests::CachedRequest;

/// A request controller's caches of its requests (packed) and their templates, shared with its
/// timers.
pub struct RequestStores<R: AccessRequest> {
    pub requests: Store<CachedRequest<R>>,
    pub templates: Store<R::Template>,
    /// The AccessLocks, cluster-wide.
    pub locks: Store<AccessLock>,
}

impl<R: AccessRequest> Clone for RequestStores<R> {
    fn clone(&self) -> Self {
        Self {
            requests: self.requests.clone(),
            templates: self.templates.clone(),
            locks: self.locks.clone(),
        }
    }
}

impl<R: AccessRequest> RequestStores<R> {
    /// The template `request` names, as the cache has it.
    pub fn template_of(&self, request: &R) -> Option<Arc<R::Template>> {
        let namespace = request.meta().namespace.as_deref().unwrap_or_default();
        self.templates
            .get(&ObjectRef::new(request.template_name()).within(namespace))
    }

    /// Waits until the request and template stores have been filled by their first LIST. Not
    /// the locks: an install whose RBAC predates them (no cluster-wide read of AccessLocks)
    /// must still grant and revoke on time. A lock's first LIST wakes every request it holds
    /// over, so a grant made before it arrived is revoked as soon as it does.
    pub async fn wait_until_ready(&self) {
        // A store whose writer is gone belongs to a controller that is stopping.
        let _ = self.requests.wait_until_ready().await;
        let _ = self.templates.wait_until_ready().await;
    }
}
