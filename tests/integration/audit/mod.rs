//! The audit trail: the tamper-evident audit file oz writes, and that only the apiserver may
//! have records written.

pub mod callers;
pub mod trail;
