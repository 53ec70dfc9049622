//! The `oz_active_grants` gauge, kept from a request controller's cache.

use std::time::Duration;

use kube::runtime::reflector::Store;
use oz_api::{AccessRequest, RequestPhase};

use crate::{Context, cache::requests::CachedRequest};

/// Keeps `oz_active_grants` counting the Ready requests in the cache. The gauge is shared by
/// every scope (one controller per watched namespace), so each adds what it counts, and takes
/// it back when it stops.
pub async fn count_active_grants<R: AccessRequest>(
    ctx: Context,
    store: Store<CachedRequest<R>>,
    kind: String,
) {
    struct Counted {
        gauge: prometheus_client::metrics::gauge::Gauge,
        ready: i64,
    }
    impl Drop for Counted {
        fn drop(&mut self) {
            self.gauge.dec_by(self.ready);
        }
    }
    let mut counted = Counted {
        gauge: ctx.metrics.active_grants_of(&kind),
        ready: 0,
    };
    loop {
        let ready = store
            .state()
            .iter()
            .filter(|r| r.phase() == Some(RequestPhase::Ready))
            .count() as i64;
        counted.gauge.inc_by(ready - counted.ready);
        counted.ready = ready;
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
}
