//! Brokered sessions: the broker, its front door behind the apiserver's aggregation layer,
//! recordings, bounds, and every part together.

pub mod bounds;
pub mod broker;
pub mod brokered_grants;
pub mod end_to_end;
pub mod extended;
pub mod front_door;
pub mod locked;
pub mod plane;
pub mod recorded;
pub mod recordings;
