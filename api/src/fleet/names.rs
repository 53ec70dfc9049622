//! How a spoke names the hub's users and groups. The hub and a spoke each authenticate people
//! with their own authenticator, which may name one person differently: a spoke whose
//! authenticator prefixes names (`--oidc-username-prefix=corp:`) knows the hub's `alice` as
//! `corp:alice`. The spoke's oz-manager is told how its names differ ([`USER_PREFIX_FLAG`],
//! [`GROUP_PREFIX_FLAG`]), and its webhook puts the requester the hub attests into this
//! cluster's names ([`FleetNames::requester`]) before anything else reads the request.

use std::fmt;

use crate::Requester;

/// The spoke's flag that maps the hub's user names to its own.
pub const USER_PREFIX_FLAG: &str = "--fleet-user-prefix";
/// The spoke's flag that maps the hub's group names to its own.
pub const GROUP_PREFIX_FLAG: &str = "--fleet-group-prefix";

/// The group the apiserver puts every authenticated user in, whatever the authenticator: a
/// hub's user is in it on the spoke too, under the same name.
const AUTHENTICATED: &str = "system:authenticated";

/// One prefix replacement, written `HUB=SPOKE`: a hub name that starts with `hub` is known on
/// this cluster with `spoke` in its place. Either side may be empty: `=corp:` adds a prefix,
/// `hub:=` removes one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrefixMap {
    /// The prefix of the hub's names.
    pub hub: String,
    /// What this cluster's names have in its place.
    pub spoke: String,
}

impl PrefixMap {
    /// Parses `HUB=SPOKE`, the value of `flag`: exactly one `=`, since prefixes often hold `:`,
    /// and not both sides empty (that maps nothing: leave the flag out).
    pub fn parse(flag: &str, text: &str) -> Result<Self, String> {
        let example =
            format!("{flag}=oidc:=corp: (either side may be empty: =corp: adds a prefix)");
        let Some((hub, spoke)) = text.split_once('=') else {
            return Err(format!(
                "{text:?}: want HUB_PREFIX=SPOKE_PREFIX, the hub's prefix and this cluster's \
                 joined by '=', e.g. {example}"
            ));
        };
        if spoke.contains('=') {
            return Err(format!(
                "{text:?}: has more than one '='; want one '=' between the hub's prefix and this \
                 cluster's, e.g. {example}"
            ));
        }
        if hub.is_empty() && spoke.is_empty() {
            return Err(format!(
                "{text:?}: maps no name; leave {flag} out where the hub and this cluster use the \
                 same names"
            ));
        }
        if [hub, spoke].iter().any(|p| p.trim() != *p) {
            return Err(format!(
                "{text:?}: a prefix cannot start or end with a space; write it without, e.g. \
                 {example}"
            ));
        }
        Ok(Self {
            hub: hub.to_string(),
            spoke: spoke.to_string(),
        })
    }

    /// `name` in this cluster's names, if it starts with the hub's prefix.
    pub fn apply(&self, name: &str) -> Option<String> {
        name.strip_prefix(self.hub.as_str())
            .map(|rest| format!("{}{rest}", self.spoke))
    }
}

impl fmt::Display for PrefixMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.hub, self.spoke)
    }
}

/// How this spoke's names differ from its hub's. The default maps nothing: one person has the
/// same user name and groups on the hub and here.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FleetNames {
    /// User names ([`USER_PREFIX_FLAG`]). A hub user whose name lacks the hub's prefix has no
    /// name here, and is refused.
    pub users: Option<PrefixMap>,
    /// Groups ([`GROUP_PREFIX_FLAG`]). A hub group without the hub's prefix is dropped: it is
    /// no group of this cluster's, and a group here of the same name may be other people.
    /// `system:authenticated` is kept, as every user here is in it.
    pub groups: Option<PrefixMap>,
}

impl FleetNames {
    /// The requester the hub attests, `hub`, in this cluster's names. With a user mapping the
    /// hub's uid is left out (it is the hub authenticator's, not this cluster's). Refused, with
    /// the message for the request's creator, when the user name has no name here.
    pub fn requester(&self, hub: &Requester) -> Result<Requester, String> {
        let mut mapped = hub.clone();
        if let Some(users) = &self.users {
            mapped.username = users.apply(&hub.username).ok_or_else(|| {
                format!(
                    "spec.requester.username: the hub's user {name:?} does not start with {prefix:?}, \
                     the hub's prefix in this cluster's oz-manager {USER_PREFIX_FLAG}={users}, so \
                     this cluster has no name for them and grants them nothing; ask on the hub as \
                     a user whose name starts with {prefix:?}, or change {USER_PREFIX_FLAG} on \
                     this cluster",
                    name = hub.username,
                    prefix = users.hub,
                )
            })?;
            mapped.uid = None;
        }
        if let Some(groups) = &self.groups {
            mapped.groups = hub
                .groups
                .iter()
                .filter_map(|g| match g.as_str() {
                    AUTHENTICATED => Some(g.clone()),
                    _ => groups.apply(g),
                })
                .collect();
        }
        Ok(mapped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(text: &str) -> PrefixMap {
        PrefixMap::parse(USER_PREFIX_FLAG, text).unwrap()
    }

    fn requester(name: &str, groups: &[&str]) -> Requester {
        Requester {
            username: name.into(),
            uid: Some("hub-uid".into()),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    #[test]
    fn a_flag_value_is_the_hubs_prefix_and_this_clusters_around_one_equals_sign() {
        assert_eq!(
            map("oidc:=corp:"),
            PrefixMap {
                hub: "oidc:".into(),
                spoke: "corp:".into()
            }
        );
        assert_eq!(map("=eks:").hub, "");
        assert_eq!(map("hub:=").spoke, "");
        assert_eq!(map("oidc:=corp:").to_string(), "oidc:=corp:");
        for (bad, why) in [
            ("corp:", "want HUB_PREFIX=SPOKE_PREFIX"),
            ("", "want HUB_PREFIX=SPOKE_PREFIX"),
            ("a=b=c", "more than one '='"),
            ("=", "maps no name; leave --fleet-user-prefix out"),
            ("hub: =corp:", "cannot start or end with a space"),
            ("hub:= corp:", "cannot start or end with a space"),
        ] {
            let error = PrefixMap::parse(USER_PREFIX_FLAG, bad).unwrap_err();
            assert!(error.contains(why), "{bad:?}: {error}");
        }
    }

    #[test]
    fn a_prefix_is_replaced_added_or_removed() {
        assert_eq!(
            map("oidc:=corp:").apply("oidc:alice").as_deref(),
            Some("corp:alice")
        );
        assert_eq!(map("=corp:").apply("alice").as_deref(), Some("corp:alice"));
        assert_eq!(map("hub:=").apply("hub:alice").as_deref(), Some("alice"));
        assert_eq!(map("oidc:=corp:").apply("alice"), None);
        // A prefix, not a substring.
        assert_eq!(map("oidc:=corp:").apply("x-oidc:alice"), None);
    }

    #[test]
    fn without_a_mapping_the_hubs_names_are_this_clusters() {
        let alice = requester("alice", &["devs", "system:authenticated"]);
        assert_eq!(FleetNames::default().requester(&alice), Ok(alice));
    }

    #[test]
    fn the_requester_is_renamed_and_unprefixed_groups_are_dropped() {
        let names = FleetNames {
            users: Some(map("oidc:=corp:")),
            groups: Some(map("oidc:=corp:")),
        };
        let hub = requester(
            "oidc:alice",
            &[
                "oidc:devs",
                "devs",
                "system:authenticated",
                "system:masters",
            ],
        );
        assert_eq!(
            names.requester(&hub),
            Ok(Requester {
                username: "corp:alice".into(),
                uid: None,
                groups: vec!["corp:devs".into(), "system:authenticated".into()],
            })
        );
        // Groups alone: the user name and uid stay the hub's.
        let groups_only = FleetNames {
            users: None,
            groups: Some(map("=corp:")),
        };
        let mapped = groups_only
            .requester(&requester("alice", &["devs"]))
            .unwrap();
        assert_eq!(mapped.username, "alice");
        assert_eq!(mapped.uid.as_deref(), Some("hub-uid"));
        assert_eq!(mapped.groups, ["corp:devs"]);
    }

    #[test]
    fn a_hub_user_without_the_hubs_prefix_is_refused_naming_the_flag() {
        let names = FleetNames {
            users: Some(map("oidc:=corp:")),
            groups: None,
        };
        let error = names.requester(&requester("alice", &["devs"])).unwrap_err();
        assert!(error.starts_with("spec.requester.username:"), "{error}");
        assert!(
            error.contains("\"alice\" does not start with \"oidc:\""),
            "{error}"
        );
        assert!(error.contains("--fleet-user-prefix=oidc:=corp:"), "{error}");
    }
}
