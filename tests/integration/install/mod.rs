//! What ships: the CRDs, the generated install (a fleet hub's too), the Helm chart, the image,
//! the users' roles, the binaries' versions, and the alerts and dashboard.

pub mod crds;
pub mod fleet;
pub mod helm;
pub mod image;
pub mod manifests;
pub mod monitoring;
pub mod user_roles;
pub mod versions;
