//! The places a template's limits leave (`oz_api::limits`), and oz's cap on the grants one user
//! holds across every template (`--max-grants-per-user`), counted at admission: the requests
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

use super::lookup::{AccessLookup, GrantSummary};

/// How long an admitted request is counted from this ledger at most: the cache shows a new
/// request within milliseconds; one whose creation failed after admission stops holding a
/// place after this.
const REMEMBERED_FOR: Duration = Duration::from_secs(30);

/// Requests admitted through limited templates (or under a per-user cap), until the cache
/// shows them; and that cap.
#[derive(Default)]
pub struct AdmittedPlaces {
    admitted: Mutex<Vec<Admitted>>,
    /// `--max-grants-per-user`: how many grants one user may hold at once through every
    /// template this oz serves. `None`: no such cap.
    per_user: Option<u32>,
}

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
    /// Places capped at `per_user` grants a user across every template (`None`: no cap).
    pub fn capped(per_user: Option<u32>) -> Self {
        Self {
            per_user,
            ..Self::default()
        }
    }

    /// Checks `asking` against `config`'s limits and the per-user cap and, when it is admitted,
    /// counts its place until the cache shows it. With neither, it passes at once.
    pub async fn take(
        &self,
        lookup: &dyn AccessLookup,
        config: &AccessConfig,
        asking: Asking<'_>,
    ) -> Result<(), String> {
        let limited = config.max_grants.is_some() || config.max_grants_per_user.is_some();
        if !limited && self.per_user.is_none() {
            return Ok(());
        }
        let mut admitted = self.admitted.lock().await;
        let count_failed = |e| format!("could not count the grants in force: {e}");
        let through_template: Vec<(String, GrantSummary)> = if limited {
            let cached = lookup
                .requests(asking.namespace)
                .await
                .map_err(count_failed)?;
            (cached.into_iter())
                .filter(|r| r.kind == asking.kind && r.template == asking.template)
                .map(|r| (asking.namespace.to_string(), r))
                .collect()
        } else {
            Vec::new()
        };
        let of_user: Vec<(String, GrantSummary)> = match self.per_user {
            Some(_) => lookup
                .requests_of(asking.user)
                .await
                .map_err(count_failed)?,
            None => Vec::new(),
        };
        let shown = |a: &Admitted| {
            through_template
                .iter()
                .chain(&of_user)
                .any(|(ns, r)| *ns == a.namespace && r.kind == a.kind && r.name == a.name)
        };
        admitted.retain(|a| a.at.elapsed() < REMEMBERED_FOR && !shown(a));
        let other = |ns: &str, name: &str| !(ns == asking.namespace && name == asking.name);
        if limited {
            let from_cache = (through_template.iter())
                .filter(|(ns, r)| holds_place(r.phase) && other(ns, &r.name))
                .map(|(_, r)| Place {
                    user: r.requested_by.as_deref().unwrap_or_default(),
                });
            let from_here = (admitted.iter())
                .filter(|a| {
                    a.namespace == asking.namespace
                        && a.kind == asking.kind
                        && a.template == asking.template
                        && other(&a.namespace, &a.name)
                })
                .map(|a| Place { user: &a.user });
            check_limits(
                config,
                (asking.kind, asking.template),
                asking.user,
                from_cache.chain(from_here),
            )?;
        }
        if let Some(cap) = self.per_user {
            let held = (of_user.iter())
                .filter(|(ns, r)| holds_place(r.phase) && other(ns, &r.name))
                .count()
                + (admitted.iter())
                    .filter(|a| a.user == asking.user && other(&a.namespace, &a.name))
                    .count();
            if held >= cap as usize {
                return Err(format!(
                    "spec.requester: {} already holds {held} grants, the most oz lets one person \
                     hold at once (--max-grants-per-user {cap}); end one (ozctl revoke) or wait \
                     for one to end",
                    asking.user
                ));
            }
        }
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
