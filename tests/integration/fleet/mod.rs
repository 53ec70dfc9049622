//! Fleets: a hub reaching spoke clusters through sig-multicluster ClusterProfiles.

mod inventory;
