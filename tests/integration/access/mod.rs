//! Access end to end: exec and pod grants by a real oz-manager, the streams they let through,
//! every workload kind a template may target, and grants adopted from Oz.

pub mod exec;
pub mod limits;
pub mod oz_adoption;
pub mod pod;
pub mod streams;
pub mod targets;
