//! ozctl end to end: the real binary, run as the users, for requests, approvals, the audit
//! file and sessions.

pub mod approvals;
pub mod audit;
pub mod exec_hints;
pub mod extend;
pub mod requests;
pub mod sessions;
