//! The condition types and reasons Oz writes, with the same names, which oz writes too.

/// The condition types Oz writes, with the same names.
pub mod condition_type {
    pub const TARGET_REF_EXISTS: &str = "TargetRefExists";
    pub const TEMPLATE_DURATIONS_VALID: &str = "TemplateDurationsValid";
    pub const TARGET_TEMPLATE_EXISTS: &str = "TargetTemplateExists";
    pub const ACCESS_DURATIONS_VALID: &str = "AccessDurationsValid";
    pub const ACCESS_STILL_VALID: &str = "AccessStillValid";
    pub const ACCESS_RESOURCES_CREATED: &str = "AccessResourcesCreated";
    pub const ACCESS_RESOURCES_READY: &str = "AccessResourcesReady";
    /// oz only: the approvals the template requires have been made.
    pub const APPROVED: &str = "Approved";
    /// oz only: the requester is in the template's allowedGroups.
    pub const REQUESTER_ALLOWED: &str = "RequesterAllowed";
    /// oz only: the grant was made by Oz and kept as Oz made it, with no requester.
    pub const ADOPTED_FROM_OZ: &str = "AdoptedFromOz";
    /// oz only, a request with `spec.startAt`: its start has come.
    pub const ACCESS_STARTED: &str = "AccessStarted";
    /// oz only, on a request denied for its template's limits (`maxGrantsPerUser`, `maxGrants`).
    pub const WITHIN_LIMITS: &str = "WithinLimits";
    /// oz only, on templates: the accessCommand is a template oz can render.
    pub const ACCESS_COMMAND_VALID: &str = "AccessCommandValid";
}

/// The condition reasons Oz writes, with the same names.
pub mod condition_reason {
    pub const SUCCESS: &str = "Success";
    pub const NOT_FOUND: &str = "NotFound";
    pub const NOT_ACCEPTABLE: &str = "NotAcceptable";
    pub const BAD_REQUEST: &str = "BadRequest";
    pub const TIMEOUT: &str = "Timeout";
    pub const FAILURE: &str = "Failure";
    pub const NOT_YET_READY: &str = "NotYetReady";
    /// oz only: the requester is not in the template's allowedGroups.
    pub const NOT_ALLOWED: &str = "NotAllowed";
    /// oz only: the request waits for approvals.
    pub const PENDING_APPROVAL: &str = "PendingApproval";
    /// oz only: an approver denied the request.
    pub const DENIED: &str = "Denied";
    /// oz only: the requester approved their own request under the template's breakGlass.
    pub const BREAK_GLASS: &str = "BreakGlass";
    /// oz only: the reason of AdoptedFromOz.
    pub const OZ_GRANT: &str = "OzGrant";
    /// oz only: AccessStillValid is False because the grant was revoked before its end; the
    /// message names who revoked it, the transition time says when.
    pub const REVOKED: &str = "Revoked";
    /// oz only: the template is a fleet hub's, granting on its spokes, never where it is.
    pub const FLEET_TEMPLATE: &str = "FleetTemplate";
    /// oz only, a fleet hub: the request was created on its spoke, whose oz grants it.
    pub const FORWARDED: &str = "Forwarded";
    /// oz only, a fleet hub: the spoke the request names cannot be reached now.
    pub const SPOKE_UNREACHABLE: &str = "SpokeUnreachable";
    /// oz only: the reason of AccessStarted while a request waits for its `spec.startAt`.
    pub const SCHEDULED: &str = "Scheduled";
    /// oz only: the reason of WithinLimits: an earlier request took the last place.
    pub const OVER_LIMIT: &str = "OverLimit";
    /// oz only: another object already holds the name.
    pub const CONFLICT: &str = "Conflict";
}
