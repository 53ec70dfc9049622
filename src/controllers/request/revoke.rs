//! Step: has someone asked for the grant to be revoked (the annotation
//! `crds.wizardofoz.co/revoked-by`, which `ozctl revoke` sets and oz's webhook lets only the
//! requester or a request admin set, naming themselves)? Then its resources are deleted now,
//! the request is marked Revoked with who (the condition's message) and when (its transition
//! time), and it is kept as the grant's record for the history retention, as an expired one is.
//! Deleting the request also revokes, but leaves no record: this is how a revocation stays in
//! access reviews.

use kube::Resource;

use super::{
    ending,
    outcome::{Step, Stop, go_on, stop},
    reconciling::Reconciling,
    status::Pass,
};
use crate::builders::AccessBuilder;

/// Ends the grant now if its revocation was asked for; goes on otherwise.
pub async fn is_revocation_asked<B: AccessBuilder>(
    r: &Reconciling<'_, B>,
    pass: &mut Pass,
) -> Step {
    let Some(by) = oz_api::revoke_asked_by(r.request.meta()) else {
        return go_on(());
    };
    // Before the status says so: what users read never runs ahead of their access.
    r.revoke().await?;
    ending::record_revocation(pass, by);
    stop(Stop::Ended(pass.now))
}
