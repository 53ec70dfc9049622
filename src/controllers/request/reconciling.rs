//! What every step of one request reconcile works on, and the ways a step ends a grant that
//! has nothing to stand on.

use kube::runtime::{events::EventType, reflector::Store};
use oz_api::{AccessApproval, RequestPhase, conditions::Observation};

use super::{
    outcome::{Stop, Wake},
    status::Pass,
    stores::RequestStores,
};
use crate::{
    Context, Result,
    builders::{AccessBuilder, GrantIdentity},
    cache::BuildCaches,
};

/// One request being reconciled, with what acting on its grant takes.
pub struct Reconciling<'a, B: AccessBuilder> {
    /// The shared context.
    pub ctx: &'a Context,
    /// The builder of the request's kind.
    pub builder: B,
    /// The request, as the watch cache has it.
    pub request: &'a B::Request,
    /// The name, labels and owner of its grant's objects.
    pub grant: GrantIdentity,
    /// The AccessApprovals in the controller's scope, as the watch cache has them.
    pub approvals: &'a Store<AccessApproval>,
    /// The requests and templates in the controller's scope, as the watch cache has them.
    pub stores: &'a RequestStores<B::Request>,
    /// The grants' objects and the workloads, as the watch caches have them.
    pub cache: &'a BuildCaches,
}

impl<B: AccessBuilder> Reconciling<'_, B> {
    /// Deletes the grant's access resources (on a fleet hub, withdraws the spoke's request).
    /// Returns whether anything existed here.
    pub async fn revoke(&self) -> Result<bool> {
        if let Some(hub) = &self.ctx.fleet {
            hub.withdraw(self.request).await?;
        }
        self.builder.revoke(self.ctx, &self.grant).await
    }

    /// Deletes what is left of a grant that has already been revoked (an Expired request): only
    /// what the caches show, so that a request re-read after its revocation makes no calls. A
    /// Role or RoleBinding someone puts back appears in the cache, and its watch wakes the
    /// request to delete it again. An access pod is not cached: it is always deleted.
    pub async fn revoke_leftovers(&self) -> Result<()> {
        let left = B::OWNS_PODS
            || self.cache.role(self.ctx, &self.grant).await?.is_some()
            || self.cache.binding(self.ctx, &self.grant).await?.is_some();
        if left {
            self.revoke().await?;
        }
        Ok(())
    }

    /// Ends the grant and fails the request because of `why`: a grant never stands without a
    /// template or valid durations. Waits for a change (the template watch wakes it).
    pub async fn withdraw(&self, pass: &mut Pass, why: Observation) -> Result<Stop> {
        self.revoke().await?;
        pass.observe(why);
        pass.status.phase = Some(RequestPhase::Failed);
        Ok(Stop::Write(Wake::OnChange))
    }

    /// Ends the grant and denies the request, for good, because of `why` (a requester outside
    /// allowedGroups, an approver's Deny): a Warning Event `Denied` says why.
    pub async fn deny(&self, pass: &mut Pass, why: Observation) -> Result<Stop> {
        self.revoke().await?;
        pass.note(EventType::Warning, "Denied", why.message.clone());
        pass.observe(why);
        pass.status.phase = Some(RequestPhase::Denied);
        pass.status.access_message = None;
        Ok(Stop::Write(Wake::OnChange))
    }
}
