//! What the admission handlers share.

use std::sync::Arc;

use oz_audit::AuditLog;

use super::{
    audit::EnforceSettings, delete_policy::DeletePolicy, events::AuditEvents, locks::Locks,
    lookup::AccessLookup, places::AdmittedPlaces, unverified_reads::UnverifiedReads,
};

/// What the handlers share.
pub struct AdmissionState {
    /// Reads templates and requests.
    pub lookup: Arc<dyn AccessLookup>,
    /// Where audit records go.
    pub audit_log: AuditLog,
    /// Publishes the audit Events on pods; `None` publishes none (handler tests).
    pub events: Option<AuditEvents>,
    /// Which execs are denied without a grant; by default none.
    pub enforce: EnforceSettings,
    /// Who may delete requests besides their requester.
    pub deletes: DeletePolicy,
    /// The apiserver reads that approval reviews from unverified callers may cost.
    pub unverified_reads: UnverifiedReads,
    /// On a fleet spoke, the user its hub's credential authenticates as (`--fleet-hub-user`):
    /// only it writes hub-managed templates and requests through them ([`super::fleet`]).
    /// `None` (the default): no hub, and none of those rules.
    pub fleet_hub_user: Option<String>,
    /// On a fleet spoke, this cluster's names for the hub's users and groups
    /// (`--fleet-user-prefix`, `--fleet-group-prefix`), applied to the requester the hub attests
    /// ([`super::fleet::requester_in_our_names`]). The default maps nothing.
    pub fleet_names: oz_api::FleetNames,
    /// The AccessLocks: a locked user's exec finds no grant, and their requests (and
    /// decisions on them) are refused. The default holds none.
    pub locks: Locks,
    /// The requests this replica admitted through limited templates that its cache may not
    /// show yet.
    pub places: AdmittedPlaces,
}
