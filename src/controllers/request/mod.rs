//! The request reconciler, generic over ExecAccessRequest and PodAccessRequest. [`reconcile`]
//! reads like Oz's sequence, one step per file, with a builder doing the work:
//!
//! 1. [`expire::is_access_over`]: an Expired or Denied request, or one past its `expiresAt`,
//!    is granted nothing more;
//! 2. [`template::verify_template`]: its template exists, and owns it;
//! 3. [`adopt::oz_grant`]: a grant Oz made before oz took over is kept as Oz made it until
//!    Oz's end ([`adopt::keep_oz_grant`]), then revoked on time;
//! 4. [`requester::verify_requester`]: its requester is in allowedGroups;
//! 5. [`approval::verify_approval`]: if its template requires approval, its AccessApprovals
//!    add up (else it waits, or ends Denied or Expired);
//! 6. [`duration::verify_duration`]: the window is decided and `expiresAt` fixed, from
//!    creation or from approval;
//! 7. [`expire::is_access_expired`]: the window is not over, and its [`timers`] revoke it when
//!    it is;
//! 8. [`build::verify_access_resources`]: the builder makes the grant;
//! 9. [`build::is_access_ready`]: ready or pending, and the access command to use it.
//!
//! News of each change (pending approval, approved, denied, ready, expiring soon, expired,
//! break-glass) goes to the notifier once the status says it ([`notices`]).
//!
//! Every step records its conditions on one [`status::Pass`], written once. It differs from Oz
//! where Oz is wrong:
//!
//! - access ends exactly at `expiresAt`: the reconcile is scheduled for that instant and re-armed
//!   whenever the operator starts, so a grant never outlives its window by a polling interval;
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
    runtime::{controller::Action, reflector::Store},
};
use oz_api::{AccessApproval, AccessTemplate};

use crate::{
    Context, Result,
    builders::{AccessBuilder, grant_identity},
};

mod adopt;
mod approval;
mod build;
mod duration;
mod expire;
mod notices;
mod reconciling;
mod requester;
mod status;
mod template;
pub mod timers;

use reconciling::Reconciling;
pub use requester::REQUESTER_ALLOWED;
use status::Pass;
use timers::ExpiryTimers;

/// The context of one request controller: the shared context, its kind's builder, the
/// timers that revoke its grants at expiry, and the cache of the decisions on its requests.
pub struct RequestReconciler<B: AccessBuilder> {
    pub ctx: Context,
    pub builder: B,
    pub timers: ExpiryTimers<B>,
    pub approvals: Store<AccessApproval>,
}

impl<B: AccessBuilder> RequestReconciler<B> {
    pub fn new(ctx: Context, builder: B, approvals: Store<AccessApproval>) -> Self {
        let timers = ExpiryTimers::new(ctx.clone(), builder);
        Self {
            ctx,
            builder,
            timers,
            approvals,
        }
    }
}

/// Runs one step: goes on with what it found, or returns the action it ended the reconcile
/// with.
macro_rules! step {
    ($step:expr) => {
        match $step.await? {
            ControlFlow::Continue(found) => found,
            ControlFlow::Break(action) => return Ok(action),
        }
    };
}

/// Reconciles one request.
pub async fn reconcile<B: AccessBuilder>(
    request: Arc<B::Request>,
    this: Arc<RequestReconciler<B>>,
) -> Result<Action> {
    let _measure = this
        .ctx
        .metrics
        .count_and_measure("request", &B::Request::kind(&()));
    let result = reconcile_steps(&request, &this).await;
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

async fn reconcile_steps<B: AccessBuilder>(
    request: &Arc<B::Request>,
    this: &RequestReconciler<B>,
) -> Result<Action> {
    if request.meta().deletion_timestamp.is_some() {
        // Its Role, RoleBinding and Pod are owned by it: the garbage collector removes them.
        return Ok(Action::await_change());
    }
    let r = Reconciling {
        ctx: &this.ctx,
        builder: this.builder,
        request: &**request,
        grant: grant_identity(&**request)?,
        approvals: &this.approvals,
    };
    let mut pass = Pass::new(&**request);

    step!(expire::is_access_over(&r, &mut pass));
    let template = step!(template::verify_template(&r, &mut pass));
    let config = template.access_config();
    if let Some(oz_grant) = adopt::oz_grant(&r).await? {
        return adopt::keep_oz_grant(&r, pass, config, oz_grant, &this.timers).await;
    }
    let requester = step!(requester::verify_requester(&r, &mut pass, config));
    let approved_at = step!(approval::verify_approval(&r, &mut pass, config, requester));
    let expires_at = step!(duration::verify_duration(
        &r,
        &mut pass,
        config,
        approved_at
    ));
    step!(expire::is_access_expired(&r, &mut pass, expires_at));
    // Before anything is built, so that nothing this pass creates can outlive it.
    this.timers.arm(&r.grant, expires_at);
    expire::still_valid(&mut pass);
    let built = step!(build::verify_access_resources(
        &r, &mut pass, &template, requester, expires_at
    ));
    build::is_access_ready(&r, pass, config, &built, expires_at).await
}
