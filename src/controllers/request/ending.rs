//! Ending a grant, whoever ends it: the reconcile (a request found past its `expiresAt`, or
//! one whose revocation was asked for) or a grant's expiry timer. Its resources are revoked,
//! how late that was is recorded, the request is marked Expired or Revoked, and it is deleted
//! once its history retention has passed.
//!
//! Layering: the timers and the expiry and revocation steps call this module; it calls the
//! status pass, and nothing back.

use std::sync::Arc;

use futures::FutureExt;
use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};
use kube::{
    Api, Resource, ResourceExt,
    runtime::{
        controller::Action,
        events::EventType,
        reflector::{ObjectRef, Store},
    },
};
use oz_api::{
    AccessRequest, AccessTemplate, ExtensionPhase, OzResource, RequestPhase,
    condition_reason as reason, condition_type as kind, conditions::Observation,
};

use super::{outcome::Wake, status::Pass, stores::RequestStores};
use crate::{
    Context, Result,
    builders::{AccessBuilder, GrantIdentity},
    time,
};

/// Deletes a grant's resources at its expiry, and records how late that was if anything was
/// left to delete.
pub async fn revoke_at_expiry<B: AccessBuilder>(
    ctx: &Context,
    builder: B,
    grant: &GrantIdentity,
    expires_at: Timestamp,
) -> Result<()> {
    if builder.revoke(ctx, grant).await? {
        let lag = time::seconds_past(Timestamp::now(), expires_at).max(0.0);
        ctx.metrics
            .observe_revocation_lag(&B::Request::kind(&()), lag);
    }
    Ok(())
}

/// Records on `pass` that the grant, its resources revoked, expired at `expires_at`: the
/// request is Expired, with an Event.
pub fn record_expiry(pass: &mut Pass, expires_at: Timestamp) {
    pass.status.expires_at = Some(Time(expires_at));
    pass.observe(Observation::no(
        kind::ACCESS_STILL_VALID,
        reason::TIMEOUT,
        "Access expired",
    ));
    pass.status.phase = Some(RequestPhase::Expired);
    pass.status.access_message = None;
    close_waiting_extensions(pass, "the grant ended before it was approved");
    pass.note(
        EventType::Normal,
        "Expired",
        format!("access ended at {expires_at}; its access resources were deleted"),
    );
}

/// An ended grant's extension asks that still wait never will be granted: they are recorded
/// Denied, saying `why`, so the history does not show them waiting.
fn close_waiting_extensions(pass: &mut Pass, why: &str) {
    for ask in &mut pass.status.extensions {
        if ask.phase == ExtensionPhase::PendingApproval {
            ask.phase = ExtensionPhase::Denied;
            ask.message = Some(why.to_string());
        }
    }
}

/// Records on `pass` that the grant, its resources revoked, was revoked now at the request of
/// `by`: the request is Revoked, who asked in the condition's message and when in its
/// transition time, with an Event.
pub fn record_revocation(pass: &mut Pass, by: &str) {
    pass.observe(Observation::no(
        kind::ACCESS_STILL_VALID,
        reason::REVOKED,
        format!("Access revoked by {by}"),
    ));
    pass.status.phase = Some(RequestPhase::Revoked);
    close_waiting_extensions(pass, "the grant was revoked before it was approved");
    pass.status.access_message = None;
    pass.note(
        EventType::Normal,
        "Revoked",
        format!("access revoked by {by}; its access resources were deleted"),
    );
}

/// When a Revoked request's grant was revoked: its AccessStillValid condition's transition.
pub fn revoked_at(pass: &Pass) -> Option<Timestamp> {
    pass.status
        .conditions
        .iter()
        .find(|c| c.type_() == kind::ACCESS_STILL_VALID && c.reason() == reason::REVOKED)
        .map(|c| c.last_transition_time.0)
}

/// Called by a grant's expiry timer once it has revoked the grant: marks the request Expired
/// now, so that what users read agrees with their access, instead of when the reconcile queue
/// reaches the request (after a start at scale, tens of seconds later).
///
/// The request and its template are read from the controller's caches: the timer fires long
/// after the request was last written, so the cache has it as it is. Only while a cache's first
/// LIST is still coming in (timers are armed from its pages) are they read from the apiserver.
pub async fn record_expiry_by_timer<R: AccessRequest>(
    ctx: &Context,
    stores: &RequestStores<R>,
    grant: &GrantIdentity,
    expires_at: Timestamp,
) -> Result<()> {
    let Some(request) = cached_or_read_request(ctx, stores, grant).await? else {
        return Ok(());
    };
    let mut pass = Pass::new(&*request);
    if !timer_may_mark_expired(&*request, grant, pass.now, expires_at) {
        return Ok(());
    }
    let template = cached_or_read(
        ctx,
        &stores.templates,
        &grant.namespace,
        request.template_name(),
    )
    .await?;
    if let Some(template) = template {
        pass.notify_through(template.access_config().notifications.as_ref());
    }
    record_expiry(&mut pass, expires_at);
    pass.finish(ctx, &*request, Wake::OnChange).await?;
    Ok(())
}

/// The request of `grant` as the cache has it, unpacked, or as the apiserver has it while the
/// cache is not filled yet; `None` if it does not exist.
async fn cached_or_read_request<R: AccessRequest>(
    ctx: &Context,
    stores: &RequestStores<R>,
    grant: &GrantIdentity,
) -> Result<Option<Arc<R>>> {
    let (namespace, name) = (&grant.namespace, &grant.owner.name);
    Ok(
        match where_to_read(&stores.requests, &ObjectRef::new(name).within(namespace)) {
            Source::Cache(cached) => Some(Arc::new(cached.request()?)),
            Source::Gone => None,
            Source::Apiserver => Api::<R>::namespaced(ctx.client.clone(), namespace)
                .get_opt(name)
                .await?
                .map(Arc::new),
        },
    )
}

/// `name` in `namespace` as `store` has it, or as the apiserver has it while the store is not
/// filled yet; `None` if it does not exist.
async fn cached_or_read<K: OzResource>(
    ctx: &Context,
    store: &Store<K>,
    namespace: &str,
    name: &str,
) -> Result<Option<Arc<K>>> {
    Ok(
        match where_to_read(store, &ObjectRef::new(name).within(namespace)) {
            Source::Cache(object) => Some(object),
            Source::Gone => None,
            Source::Apiserver => Api::<K>::namespaced(ctx.client.clone(), namespace)
                .get_opt(name)
                .await?
                .map(Arc::new),
        },
    )
}

/// Where a timer reads what it needs to mark a request Expired.
#[derive(Debug)]
enum Source<K> {
    Cache(Arc<K>),
    /// Listed, and not there: deleted.
    Gone,
    /// The cache is not filled yet: the first LIST is still coming in. Timers fire during it
    /// (they are armed from its pages), and a store is filled only once its LIST completes;
    /// taking the request for deleted then would leave it Ready until its reconcile, which
    /// after a restart at scale is tens of seconds away.
    Apiserver,
}

fn where_to_read<K>(store: &Store<K>, key: &ObjectRef<K>) -> Source<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    match store.get(key) {
        Some(object) => Source::Cache(object),
        None if matches!(store.wait_until_ready().now_or_never(), Some(Ok(()))) => Source::Gone,
        None => Source::Apiserver,
    }
}

/// Whether a timer that revoked `grant` at `expires_at` marks `request` Expired: only the same
/// request (not one created again under its name), not being deleted, not already settled,
/// and only once its time has come.
fn timer_may_mark_expired<R: AccessRequest>(
    request: &R,
    grant: &GrantIdentity,
    now: Timestamp,
    expires_at: Timestamp,
) -> bool {
    let same = request.uid().as_deref() == Some(grant.owner.uid.as_str());
    let settled = request
        .request_status()
        .and_then(|s| s.phase)
        .is_some_and(RequestPhase::is_settled);
    same && !settled && request.meta().deletion_timestamp.is_none() && now >= expires_at
}

/// Keeps an ended (expired or revoked at `ended_at`) request for the history retention, then
/// deletes it.
pub async fn retain_then_delete<R: AccessRequest>(
    ctx: &Context,
    request: &R,
    ended_at: Timestamp,
) -> Result<Action> {
    let delete_at = delete_at(ended_at, ctx.settings.history_retention);
    let now = Timestamp::now();
    if now >= delete_at {
        let api: Api<R> =
            Api::namespaced(ctx.client.clone(), &request.namespace().unwrap_or_default());
        crate::apply::delete_if_present(&api, &request.name_any()).await?;
        return Ok(Action::await_change());
    }
    Ok(Action::requeue(time::until(now, delete_at)))
}

/// When a request that expired at `expires_at` is deleted: after `retention`, or never if that
/// is too long to represent.
fn delete_at(expires_at: Timestamp, retention: std::time::Duration) -> Timestamp {
    let retention = chrono::TimeDelta::from_std(retention).unwrap_or(chrono::TimeDelta::MAX);
    time::add(expires_at, retention)
}
#[cfg(test)]
mod tests {
    use std::{collections::BTreeMap, time::Duration};

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use oz_api::ExecAccessRequest;

    use super::*;
    use crate::controllers::fixtures::{self, at};

    #[test]
    fn a_timer_reads_the_apiserver_only_while_the_first_list_is_coming_in() {
        let (store, mut writer) = kube::runtime::reflector::store::<ExecAccessRequest>();
        let mut listed = request("uid-1", RequestPhase::Ready);
        listed.metadata.namespace = Some("ns".into());
        let key = ObjectRef::from_obj(&listed);
        assert!(matches!(where_to_read(&store, &key), Source::Apiserver));
        writer.apply_watcher_event(&kube::runtime::watcher::Event::Init);
        writer.apply_watcher_event(&kube::runtime::watcher::Event::InitApply(listed.clone()));
        assert!(
            matches!(where_to_read(&store, &key), Source::Apiserver),
            "the page is in, the store is not filled yet"
        );
        writer.apply_watcher_event(&kube::runtime::watcher::Event::InitDone);
        assert!(matches!(where_to_read(&store, &key), Source::Cache(_)));
        let other = ObjectRef::new("deleted").within("ns");
        assert!(matches!(where_to_read(&store, &other), Source::Gone));
    }

    fn request(uid: &str, phase: RequestPhase) -> ExecAccessRequest {
        let mut request = fixtures::request(phase, None);
        request.metadata.uid = Some(uid.into());
        request
    }

    fn grant_of(uid: &str) -> GrantIdentity {
        GrantIdentity {
            name: "r-uid1".into(),
            namespace: "shop".into(),
            labels: BTreeMap::new(),
            owner: OwnerReference {
                uid: uid.into(),
                name: "r".into(),
                ..Default::default()
            },
        }
    }

    #[test]
    fn a_timer_marks_only_its_own_unsettled_request_once_its_time_has_come() {
        let expires_at = at("2026-01-01T01:00:00Z");
        let after = at("2026-01-01T01:00:01Z");
        let grant = grant_of("uid-1");
        assert!(timer_may_mark_expired(
            &request("uid-1", RequestPhase::Ready),
            &grant,
            after,
            expires_at
        ));
        // Early (a clock behind), another request under the same name, or already settled.
        let before = at("2026-01-01T00:59:59Z");
        assert!(!timer_may_mark_expired(
            &request("uid-1", RequestPhase::Ready),
            &grant,
            before,
            expires_at
        ));
        assert!(!timer_may_mark_expired(
            &request("uid-2", RequestPhase::Ready),
            &grant,
            after,
            expires_at
        ));
        for settled in [RequestPhase::Expired, RequestPhase::Denied] {
            assert!(!timer_may_mark_expired(
                &request("uid-1", settled),
                &grant,
                after,
                expires_at
            ));
        }
        let mut deleting = request("uid-1", RequestPhase::Ready);
        deleting.metadata.deletion_timestamp = Some(Time(after));
        assert!(!timer_may_mark_expired(
            &deleting, &grant, after, expires_at
        ));
    }

    #[test]
    fn an_expired_request_is_kept_for_its_retention() {
        let expires_at = at("2026-01-01T01:00:00Z");
        assert_eq!(delete_at(expires_at, Duration::ZERO), expires_at);
        assert_eq!(
            delete_at(expires_at, Duration::from_secs(7 * 24 * 3600)),
            at("2026-01-08T01:00:00Z")
        );
        assert_eq!(delete_at(expires_at, Duration::MAX), Timestamp::MAX);
    }
}
