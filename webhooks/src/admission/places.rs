//! The places a template's limits leave (`oz_api::limits`), counted at admission: the requests
//! in the handlers' cache that hold one, and the ones this replica admitted a moment ago that
//! the cache has not shown yet ([`AdmittedPlaces`]). Admissions through a limited template are
//! judged one at a time, so two requests racing for the last place are told apart here: the
//! second is refused with the limit named. (Through two replicas at once, the controller tells
//! them apart instead: the later one is denied.)

use std::time::{Duration, Instant};

use oz_api::{
    AccessConfig, AccessKind,
    limits::{Place, check_limits, holds_place},
};
use tokio::sync::Mutex;

use super::AccessLookup;

/// How long an admitted request is counted from this ledger at most: the cache shows a new
/// request within milliseconds; one whose creation failed after admission stops holding a
/// place after this.
const REMEMBERED_FOR: Duration = Duration::from_secs(30);

/// Requests admitted through limited templates, until the cache shows them.
#[derive(Default)]
pub struct AdmittedPlaces(Mutex<Vec<Admitted>>);

struct Admitted {
    namespace: String,
    kind: AccessKind,
    template: String,
    name: String,
    user: String,
    at: Instant,
}

/// The new request a place is asked for.
pub struct Asking<'a> {
    pub namespace: &'a str,
    pub kind: AccessKind,
    pub template: &'a str,
    /// Its name (set by the apiserver, from generateName too, before validating admission).
    pub name: &'a str,
    pub user: &'a str,
    /// A dry run takes no place.
    pub dry_run: bool,
}

impl AdmittedPlaces {
    /// Checks `asking` against `config`'s limits and, when it is admitted, counts its place
    /// until the cache shows it. Templates without limits pass at once.
    pub async fn take(
        &self,
        lookup: &dyn AccessLookup,
        config: &AccessConfig,
        asking: Asking<'_>,
    ) -> Result<(), String> {
        if config.max_grants.is_none() && config.max_grants_per_user.is_none() {
            return Ok(());
        }
        let mut admitted = self.0.lock().await;
        let cached = lookup
            .requests(asking.namespace)
            .await
            .map_err(|e| format!("could not count the template's grants in force: {e}"))?;
        let cached: Vec<_> = cached
            .iter()
            .filter(|r| r.kind == asking.kind && r.template == asking.template)
            .collect();
        admitted.retain(|a| {
            a.at.elapsed() < REMEMBERED_FOR
                && !(a.namespace == asking.namespace
                    && a.kind == asking.kind
                    && cached.iter().any(|r| r.name == a.name))
        });
        let from_cache = cached
            .iter()
            .filter(|r| holds_place(r.phase) && r.name != asking.name)
            .map(|r| Place {
                user: r.requested_by.as_deref().unwrap_or_default(),
            });
        let from_here = admitted
            .iter()
            .filter(|a| {
                a.namespace == asking.namespace
                    && a.kind == asking.kind
                    && a.template == asking.template
                    && a.name != asking.name
            })
            .map(|a| Place { user: &a.user });
        check_limits(
            config,
            (asking.kind, asking.template),
            asking.user,
            from_cache.chain(from_here),
        )?;
        if !asking.dry_run {
            admitted.push(Admitted {
                namespace: asking.namespace.to_string(),
                kind: asking.kind,
                template: asking.template.to_string(),
                name: asking.name.to_string(),
                user: asking.user.to_string(),
                at: Instant::now(),
            });
        }
        Ok(())
    }
}
