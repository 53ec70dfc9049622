//! The request reconciler, generic over ExecAccessRequest and PodAccessRequest. [`reconcile`]
//! reads like Oz's sequence, one step per file, with a builder doing the work:
//!
//! 1. [`expire::is_access_over`]: an ended (Expired or Revoked) or Denied request, or one past
//!    its `expiresAt`, is granted nothing more;
//! 2. [`revoke::is_revocation_asked`]: a grant whose revocation was asked for ends now, and
//!    [`locked::is_locked`] one an AccessLock holds over;
//! 3. [`template::verify_template`]: its template exists, and owns it;
//! 4. [`adopt::oz_grant`]: a grant Oz made before oz took over is kept as Oz made it (the
//!    requester and approval steps are skipped for it), until Oz's end;
//! 5. [`requester::verify_requester`]: its requester is in allowedGroups (and, through a fleet
//!    hub's template, the hub forwarded it), and [`limits::within_limits`] the template's
//!    limits leave it a place;
//! 6. [`approval::verify_approval`]: if its template requires approval, its AccessApprovals
//!    add up (else it waits, or ends Denied or Expired);
//! 7. [`duration::verify_duration`]: the window is decided and `expiresAt` fixed, from
//!    creation or from approval;
//! 8. [`extend::verify_extensions`]: the granted extension asks (`ozctl extend`) move
//!    `expiresAt` later, within the template's bounds;
//! 9. [`expire::is_access_expired`]: the window is not over, and its [`timers`] revoke it when
//!    it is;
//! 10. [`schedule::is_access_started`]: a request scheduled ahead (`spec.startAt`) waits,
//!     granted nothing, until its window starts;
//! 11. [`build::verify_access_resources`]: the builder makes the grant for the requester (or
//!     Oz's grant is kept, [`adopt::keep_oz_grant`]); on a fleet hub, a fleet template's
//!     request is instead granted by its spoke ([`forward::forward`]);
//! 12. [`build::is_access_ready`]: ready or pending, and the access command to use it.
//!
//! Each step records what it found on one [`status::Pass`] and returns an [`outcome::Step`]:
//! go on, or stop, saying how the pass ends ([`outcome::Stop`]). The reconcile then writes the
//! status once. Ending a grant, whether a step or a timer ends it, is [`ending`]'s.
//!
//! News of each change (pending approval, approved, denied, ready, expiring soon, expired,
//! break-glass) goes to the notifier once the status says it ([`notices`]).
//!
//! Every read is from the controller's watch caches (the request, its template, approvals, the
//! grant's Role and RoleBinding, the workload's selector), and a grant's objects are written
//! only when they differ from what they should be, so a reconcile that finds everything in
//! order makes no writes; the watch events of oz's own writes do not wake the request again
//! ([`crate::cache::echoes`]).
//!
//! It differs from Oz where Oz is wrong:
//!
//! - access ends exactly at `expiresAt`: each grant's expiry timer fires at that instant and is
//!   re-armed whenever the operator starts, so a grant never outlives its window by a polling
//!   interval;
//! - only the requester is granted (unless the template says AllowedGroups), and only if they
//!   are in allowedGroups;
//! - `expiresAt`, the chosen pod and the subjects are fixed at grant time, so editing a template
//!   never widens a grant, and neither does editing the status: `expiresAt` is never later than
//!   creation plus the decided duration, and the pod is the one in the grant's Role;
//! - a grant ends as soon as it has no template or no valid durations to stand on;
//! - `ready` is recomputed on every pass.
//!
//! A grant Oz made before oz took over has no requester; it is adopted, not denied: kept as Oz
//! made it (bound to the allowedGroups) until Oz's end, then revoked on time ([`adopt`]).

use std::{ops::ControlFlow, sync::Arc};

use kube::{
    Resource,
    runtime::{
        controller::Action,
        reflector::{ObjectRef, Store},
    },
};
use oz_api::{AccessApproval, AccessTemplate};

use crate::{
    Context, Result,
    builders::{AccessBuilder, grant_identity},
    cache::{BuildCaches, requests::CachedRequest},
};

mod adopt;
mod approval;
mod build;
mod duration;
mod ending;
mod expire;
mod extend;
mod forward;
mod limits;
pub mod locked;
mod notices;
mod outcome;
mod reconciling;
mod requester;
mod revoke;
mod schedule;
mod status;
mod stores;
pub mod table_timers;
mod template;
pub mod timers;
mod wording;

use build::Grantee;
use outcome::{Stop, Wake};
use reconciling::Reconciling;
use status::Pass;
pub use stores::RequestStores;
use timers::ExpiryTimers;

/// The context of one request controller: the shared context, its kind's builder, the
/// timers that revoke its grants at expiry, and its watches' caches.
pub struct RequestReconciler<B: AccessBuilder> {
    pub ctx: Context,
    pub builder: B,
    pub timers: ExpiryTimers<B>,
    /// The requests and their templates.
    pub stores: RequestStores<B::Request>,
    /// The decisions on the requests.
    pub approvals: Store<AccessApproval>,
    /// The grants' objects, and what they stand on.
    pub cache: BuildCaches,
    /// Set once every cache above has been filled by its first LIST.
    caches_filled: tokio::sync::OnceCell<()>,
    /// Resolves once the controller is asked to stop: a reconcile still waiting for the
    /// caches then ends, as the stop has cut the watches that would fill them.
    stopping: Stopping,
}

/// A controller's stop signal, which any number of reconciles may wait on.
pub type Stopping = futures::future::Shared<futures::future::BoxFuture<'static, ()>>;

impl<B: AccessBuilder> RequestReconciler<B> {
    pub fn new(
        ctx: Context,
        builder: B,
        stores: RequestStores<B::Request>,
        approvals: Store<AccessApproval>,
        cache: BuildCaches,
        to_reconcile: futures::channel::mpsc::UnboundedSender<ObjectRef<CachedRequest<B::Request>>>,
        stopping: Stopping,
    ) -> Self {
        let timers = ExpiryTimers::new(ctx.clone(), builder, stores.clone(), to_reconcile);
        Self {
            ctx,
            builder,
            timers,
            stores,
            approvals,
            cache,
            caches_filled: tokio::sync::OnceCell::new(),
            stopping,
        }
    }
}

/// How soon a request woken while the cache lags oz's own write of it is looked at again: a
/// watch event takes milliseconds.
const CACHE_CATCH_UP: std::time::Duration = std::time::Duration::from_millis(200);

/// Runs one step: goes on with what it found, or returns how it stopped the pass.
macro_rules! step {
    ($step:expr) => {
        match $step.await? {
            ControlFlow::Continue(found) => found,
            ControlFlow::Break(stop) => return Ok(stop),
        }
    };
}

/// Reconciles one request.
pub async fn reconcile<B: AccessBuilder>(
    request: Arc<CachedRequest<B::Request>>,
    this: Arc<RequestReconciler<B>>,
) -> Result<Action> {
    let _measure = this
        .ctx
        .metrics
        .count_and_measure("request", &B::Request::kind(&()));
    let result = async {
        let unpacked = request.request()?;
        let action = reconcile_steps(&unpacked, &this).await?;
        Ok(look_again_if_missed(&this, &unpacked, action))
    }
    .await;
    // Which version of which request was reconciled: what a reader of the log (or a test
    // waiting for a reconcile of an edit) looks for.
    tracing::debug!(
        kind = %B::Request::kind(&()),
        namespace = %request.meta().namespace.as_deref().unwrap_or_default(),
        name = %request.meta().name.as_deref().unwrap_or_default(),
        resource_version = %request.meta().resource_version.as_deref().unwrap_or_default(),
        ok = result.is_ok(),
        "request reconciled"
    );
    result
}

/// `action`, unless a change by someone else to the request or its grant arrived while this
/// reconcile was writing them and was held back as a possible echo ([`crate::cache::echoes`]):
/// then the request is looked at again.
fn look_again_if_missed<B: AccessBuilder>(
    this: &RequestReconciler<B>,
    request: &B::Request,
    action: Action,
) -> Action {
    let Ok(grant) = grant_identity(request) else {
        return action;
    };
    let own = &this.ctx.echoes;
    let request_missed = own.take_missed(&grant.namespace, &grant.owner.name);
    let grant_missed = own.take_missed(&grant.namespace, &grant.name);
    if request_missed || grant_missed {
        Action::requeue(CACHE_CATCH_UP)
    } else {
        action
    }
}

async fn reconcile_steps<B: AccessBuilder>(
    request: &B::Request,
    this: &RequestReconciler<B>,
) -> Result<Action> {
    if request.meta().deletion_timestamp.is_some() {
        // Its Role, RoleBinding and Pod are owned by it: the garbage collector removes them.
        // A fleet hub's request withdraws its spoke's first.
        return forward::finish_deletion(&this.ctx, request).await;
    }
    // Every read below is from these caches: at start-up, wait until they are filled, so that
    // nothing is taken for missing that is only not listed yet. One reconcile waits for them and
    // the others for it: kube's `Store::wait_until_ready` left all but one of several reconciles
    // waiting at once asleep for good.
    let filled = this.caches_filled.get_or_init(|| async {
        // Said once a start: a controller that stays here (a watch refused by RBAC, say) shows
        // where it waits.
        tracing::info!(kind = %B::Request::kind(&()), "waiting for the caches' first lists to reconcile");
        this.stores.wait_until_ready().await;
        this.cache.wait_until_ready().await;
    });
    tokio::select! {
        _ = filled => {}
        // Stopping before they were filled: they never will be (the stop cut their watches),
        // and this pass has done nothing yet. Without this, the controller's graceful stop
        // would wait for it for good.
        () = this.stopping.clone() => return Ok(Action::await_change()),
    }
    let grant = grant_identity(request)?;
    let (namespace, name) = (&grant.namespace, &grant.owner.name);
    if this.ctx.echoes.ahead_of::<B::Request>(
        namespace,
        name,
        request.meta().resource_version.as_deref(),
    ) {
        // Woken by something else just after oz wrote this request: the cached copy is older
        // than oz's write, and a pass judged on it could write (and announce) it again. The
        // write's own watch event is dropped as an echo, so look again once it is in.
        return Ok(Action::requeue(CACHE_CATCH_UP));
    }
    let r = Reconciling {
        ctx: &this.ctx,
        builder: this.builder,
        request,
        grant,
        approvals: &this.approvals,
        stores: &this.stores,
        cache: &this.cache,
    };
    let mut pass = Pass::new(request);
    let stop = steps(&r, &mut pass, &this.timers).await?;
    write(&r, pass, stop, &this.timers).await
}

/// The steps, in order, until one stops the pass.
async fn steps<B: AccessBuilder>(
    r: &Reconciling<'_, B>,
    pass: &mut Pass,
    timers: &ExpiryTimers<B>,
) -> Result<Stop> {
    step!(expire::is_access_over(r, pass));
    step!(revoke::is_revocation_asked(r, pass));
    step!(locked::is_locked(r, pass));
    let template = step!(template::verify_template(r, pass));
    let config = template.access_config();
    let (grantee, approved_at) = match adopt::oz_grant(r).await? {
        Some(oz) => (Grantee::Oz(Box::new(oz)), None),
        None => {
            let hub = oz_api::fleet::managing_hub(template.meta());
            let requester = step!(requester::verify_requester(r, pass, config, hub));
            step!(limits::within_limits(r, pass, config, requester));
            let approved_at = step!(approval::verify_approval(r, pass, config, requester));
            (Grantee::Requester(requester), approved_at)
        }
    };
    let window = step!(duration::verify_duration(r, pass, config, approved_at));
    let requester = match &grantee {
        Grantee::Requester(requester) => Some(*requester),
        Grantee::Oz(_) => None,
    };
    let expires_at = step!(extend::verify_extensions(
        r, pass, config, requester, window
    ));
    step!(expire::is_access_expired(r, pass, expires_at));
    // Before anything is built, so that nothing this pass creates can outlive it. Only a
    // granted extension moves an armed timer later.
    if expires_at > window.ends {
        timers.extend_to(&r.grant, expires_at);
    } else {
        timers.arm(&r.grant, expires_at);
    }
    step!(schedule::is_access_started(r, pass, window.starts));
    expire::still_valid(pass);
    if let (Some(_), Grantee::Requester(requester)) = (template.clusters(), &grantee) {
        return forward::forward(r, pass, &template, requester, expires_at).await;
    }
    let built = step!(build::verify_access_resources(
        r, pass, &template, grantee, expires_at
    ));
    Ok(build::is_access_ready(r, pass, config, &built, expires_at))
}

/// Ends the pass as `stop` says: the one place a reconcile writes the request's status.
async fn write<B: AccessBuilder>(
    r: &Reconciling<'_, B>,
    mut pass: Pass,
    stop: Stop,
    timers: &ExpiryTimers<B>,
) -> Result<Action> {
    match stop {
        Stop::Write(Wake::BeforeExpiry(at)) if timers.wake(&r.grant, at) => {
            pass.finish(r.ctx, r.request, Wake::OnChange).await
        }
        Stop::Write(wake) => pass.finish(r.ctx, r.request, wake).await,
        Stop::Ended(at) => {
            pass.finish(r.ctx, r.request, Wake::OnChange).await?;
            ending::retain_then_delete(r.ctx, r.request, at).await
        }
        Stop::Retained(at) => ending::retain_then_delete(r.ctx, r.request, at).await,
        Stop::Leave(action) => Ok(action),
    }
}
