//! Fleets: a hub reaching spoke clusters through sig-multicluster ClusterProfiles, keeping its
//! templates there and having them grant the requests it decided.

mod failures;
mod identities;
mod inventory;
mod requests;
mod setup;
mod templates;
