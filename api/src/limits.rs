//! Limits on how much access a template hands out at once: `accessConfig.maxGrantsPerUser`
//! (grants one user holds through it) and `accessConfig.maxGrants` (all of its grants). A
//! request holds a place from its creation until its grant ends or it is refused
//! ([`holds_place`]); one over a limit is refused at admission with the limit named
//! ([`check_limits`]), and, should two race past the webhook for the last place, the later
//! (by creation) is denied by the controller ([`first_over`]).

use crate::{AccessConfig, AccessKind, RequestPhase};

/// Whether a request in `phase` holds one of its template's places: from creation (no phase
/// yet) through PendingApproval, Scheduled, Pending and Ready; not once Expired, Revoked,
/// Denied or Failed.
pub fn holds_place(phase: Option<RequestPhase>) -> bool {
    !matches!(
        phase,
        Some(
            RequestPhase::Expired
                | RequestPhase::Revoked
                | RequestPhase::Denied
                | RequestPhase::Failed
        )
    )
}

/// A request holding a place, as the limits count it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Place<'a> {
    /// Its requester.
    pub user: &'a str,
}

/// Checks a new request by `user` through `kind`'s template `template` (configured by
/// `config`) against the places `held` through that template already; the error names the
/// limit and what to do.
pub fn check_limits<'a>(
    config: &AccessConfig,
    (kind, template): (AccessKind, &str),
    user: &str,
    held: impl IntoIterator<Item = Place<'a>>,
) -> Result<(), String> {
    let (mut total, mut theirs) = (0u32, 0u32);
    for place in held {
        total += 1;
        theirs += u32::from(place.user == user);
    }
    let template_kind = kind.template_kind();
    if let Some(max) = config.max_grants_per_user
        && theirs >= max
    {
        return Err(format!(
            "spec.templateName: {user} already holds {theirs} grants through {template_kind} \
             {template:?}, its accessConfig.maxGrantsPerUser ({max}); end one (ozctl revoke) or \
             wait for one to end"
        ));
    }
    if let Some(max) = config.max_grants
        && total >= max
    {
        return Err(format!(
            "spec.templateName: {template_kind} {template:?} has {total} grants in force, its \
             accessConfig.maxGrants ({max}); try again when one has ended"
        ));
    }
    Ok(())
}

/// The limit `me` is over, if any, given the places held through its template by the requests
/// created before it (`earlier`): what the controller denies a request that raced another past
/// admission for the last place.
pub fn first_over<'a>(
    config: &AccessConfig,
    (kind, template): (AccessKind, &str),
    me: &str,
    earlier: impl IntoIterator<Item = Place<'a>>,
) -> Option<String> {
    check_limits(config, (kind, template), me, earlier).err()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(per_user: Option<u32>, total: Option<u32>) -> AccessConfig {
        let mut config: AccessConfig =
            serde_json::from_value(serde_json::json!({"allowedGroups": ["devs"]})).unwrap();
        config.max_grants_per_user = per_user;
        config.max_grants = total;
        config
    }

    fn places<'a>(users: &[&'a str]) -> Vec<Place<'a>> {
        users.iter().map(|user| Place { user }).collect()
    }

    #[test]
    fn a_request_over_a_limit_is_refused_with_the_limit_named() {
        let web = (AccessKind::Exec, "web");
        let one_each = config(Some(1), None);
        assert_eq!(
            check_limits(&one_each, web, "alice", places(&["bob"])),
            Ok(())
        );
        let e = check_limits(&one_each, web, "alice", places(&["bob", "alice"])).unwrap_err();
        assert_eq!(
            e,
            "spec.templateName: alice already holds 1 grants through ExecAccessTemplate \"web\", \
             its accessConfig.maxGrantsPerUser (1); end one (ozctl revoke) or wait for one to end"
        );
        let two = config(None, Some(2));
        assert_eq!(check_limits(&two, web, "alice", places(&["bob"])), Ok(()));
        let e = check_limits(&two, web, "alice", places(&["bob", "carol"])).unwrap_err();
        assert!(e.contains("accessConfig.maxGrants (2)"), "{e}");
        assert_eq!(
            check_limits(&config(None, None), web, "a", places(&["a"; 50])),
            Ok(())
        );
    }

    #[test]
    fn only_requests_whose_grant_may_still_stand_hold_a_place() {
        assert!(holds_place(None));
        for holding in [
            RequestPhase::PendingApproval,
            RequestPhase::Scheduled,
            RequestPhase::Pending,
            RequestPhase::Ready,
        ] {
            assert!(holds_place(Some(holding)), "{holding:?}");
        }
        for ended in [
            RequestPhase::Expired,
            RequestPhase::Revoked,
            RequestPhase::Denied,
            RequestPhase::Failed,
        ] {
            assert!(!holds_place(Some(ended)), "{ended:?}");
        }
    }
}
