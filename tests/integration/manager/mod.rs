//! oz-manager as a process: leader election, scoping and RBAC changes, the API calls it makes,
//! and the faults it survives.

pub mod api_calls;
pub mod faults;
pub mod process;
