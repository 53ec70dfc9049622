//! A fleet spoke's names for its hub's users and groups, as an install passes them to
//! oz-manager (`--fleet-user-prefix`, `--fleet-group-prefix`; `docs/fleet.md`, "How identities
//! map between clusters"). The values are [`PrefixMap`]s, parsed by oz-manager's own parser.
//!
//! [`PrefixMap`]: oz_api::PrefixMap

use oz_api::{
    FleetNames,
    fleet::names::{GROUP_PREFIX_FLAG, USER_PREFIX_FLAG},
};

use super::ManifestError;

/// The flags and their values (`--fleet-user-prefix`, `HUB=SPOKE`), users first: the same
/// names and values in `oz-manager manifests` and in oz-manager's run flags.
pub(super) fn name_flags(names: &FleetNames) -> Vec<(&'static str, String)> {
    [
        (USER_PREFIX_FLAG, &names.users),
        (GROUP_PREFIX_FLAG, &names.groups),
    ]
    .into_iter()
    .filter_map(|(flag, map)| map.as_ref().map(|m| (flag, m.to_string())))
    .collect()
}

/// Refuses names to map on an install that is no fleet spoke (`spoke`): only a spoke has a hub
/// whose names it maps, and oz-manager refuses them without `--fleet-hub-user`.
pub(super) fn check_names(spoke: bool, names: &FleetNames) -> Result<(), ManifestError> {
    match name_flags(names).first() {
        Some((flag, _)) if !spoke => Err(ManifestError::Invalid(format!(
            "{flag} maps the hub's names on a fleet spoke: add --fleet-spoke-install, or leave \
             it out"
        ))),
        _ => Ok(()),
    }
}
