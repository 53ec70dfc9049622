//! Step: verify the requester. Only someone in the template's allowedGroups, as oz's admission
//! webhook recorded them, is granted anything; anyone else is Denied, for good. Through a fleet
//! hub's template, only a request the hub forwarded is granted: the webhook lets no one else
//! make one, and this holds should a request get past it.

use oz_api::{
    AccessConfig, AccessRequest, Forwarded, Requester, condition_reason as reason,
    condition_type as kind, conditions::Observation,
};

use super::{
    outcome::{Step, go_on, stop},
    reconciling::Reconciling,
    status::Pass,
};
use crate::builders::AccessBuilder;

/// The requester, if `config` admits them (and, when the template is fleet hub `hub`'s, the
/// hub forwarded the request); otherwise the request is Denied and its grant, if any, revoked.
pub async fn verify_requester<'a, B: AccessBuilder>(
    r: &Reconciling<'a, B>,
    pass: &mut Pass,
    config: &AccessConfig,
    hub: Option<&str>,
) -> Step<&'a Requester> {
    let forwarded = r.request.forwarded();
    match admission(config, hub, forwarded, r.request.requester()) {
        Ok((requester, allowed)) => {
            pass.observe(allowed);
            go_on(requester)
        }
        Err(message) => {
            let why = Observation::no(kind::REQUESTER_ALLOWED, reason::NOT_ALLOWED, message);
            stop(r.deny(pass, why).await?)
        }
    }
}

/// Whether `config` admits `requester`: the requester and the condition to record if it does,
/// or why not, in words that say what to do about it. Through a template of fleet hub `hub`,
/// a request that does not carry what the hub attests (`forwarded`) is admitted by no one.
pub fn admission<'r>(
    config: &AccessConfig,
    hub: Option<&str>,
    forwarded: Option<&Forwarded>,
    requester: Option<&'r Requester>,
) -> Result<(&'r Requester, Observation), String> {
    if let Some(hub) = hub
        && forwarded.is_none()
    {
        return Err(format!(
            "the template is managed by fleet hub {hub:?}, which forwards the requests it \
             decides (spec.forwarded); this one it did not: request access on the hub"
        ));
    }
    let Some(requester) = requester else {
        return Err("no requester is recorded on this request; oz's admission webhook records who creates a request: check that it is installed".into());
    };
    match config.admitting_group(&requester.groups) {
        Some(group) => Ok((
            requester,
            Observation::yes(
                kind::REQUESTER_ALLOWED,
                reason::SUCCESS,
                format!(
                    "user {:?} is in allowed group {group:?}",
                    requester.username
                ),
            ),
        )),
        None => Err(format!(
            "user {:?} is not in any of the template's allowedGroups ({}); ask to be added to one of them, or use another template",
            requester.username,
            config.allowed_groups.join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(allowed: &[&str]) -> AccessConfig {
        AccessConfig {
            allowed_groups: allowed.iter().map(|g| g.to_string()).collect(),
            default_duration: "1h".into(),
            max_duration: "2h".into(),
            access_command: String::new(),
            grant_to: None,
            approval: None,
            notifications: None,
            session_mode: None,
            record_input: None,
            session_idle_timeout: None,
            max_extensions: None,
            max_total_duration: None,
            max_lead_time: None,
            max_grants_per_user: None,
            max_grants: None,
        }
    }

    fn user(groups: &[&str]) -> Requester {
        Requester {
            username: "alice".into(),
            uid: None,
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    #[test]
    fn a_member_of_an_allowed_group_is_admitted_by_the_first_such_group() {
        let alice = user(&["devs", "sre"]);
        let (who, admitted) = admission(
            &config(&["admins", "sre", "devs"]),
            None,
            None,
            Some(&alice),
        )
        .expect("admitted");
        assert_eq!(who.username, "alice");
        assert!(admitted.holds);
        assert_eq!(admitted.type_, kind::REQUESTER_ALLOWED);
        assert_eq!(
            admitted.message,
            "user \"alice\" is in allowed group \"sre\""
        );
    }

    #[test]
    fn anyone_else_is_told_which_groups_would_do() {
        let why = admission(
            &config(&["admins", "sre"]),
            None,
            None,
            Some(&user(&["devs"])),
        )
        .unwrap_err();
        assert_eq!(
            why,
            "user \"alice\" is not in any of the template's allowedGroups (admins, sre); ask to be added to one of them, or use another template"
        );
        assert!(admission(&config(&[]), None, None, Some(&user(&["devs"]))).is_err());
    }

    #[test]
    fn a_request_without_a_recorded_requester_is_refused() {
        let why = admission(&config(&["devs"]), None, None, None).unwrap_err();
        assert!(
            why.starts_with("no requester is recorded on this request"),
            "{why}"
        );
    }

    #[test]
    fn through_a_hub_template_only_a_request_the_hub_forwarded_is_admitted() {
        let alice = user(&["devs"]);
        let devs = config(&["devs"]);
        let why = admission(&devs, Some("hub-1"), None, Some(&alice)).unwrap_err();
        assert_eq!(
            why,
            "the template is managed by fleet hub \"hub-1\", which forwards the requests it \
             decides (spec.forwarded); this one it did not: request access on the hub"
        );
        let forwarded = Forwarded {
            hub: "hub-1".into(),
            cluster: "spoke-1".into(),
            request_name: "alice-x1".into(),
            request_uid: "uid-x1".into(),
            requester: None,
            approvers: Vec::new(),
        };
        let (who, _) = admission(&devs, Some("hub-1"), Some(&forwarded), Some(&alice))
            .expect("forwarded by its hub");
        assert_eq!(who.username, "alice");
        // The attested requester is still judged by the allowedGroups.
        let bob = user(&["qa"]);
        assert!(admission(&devs, Some("hub-1"), Some(&forwarded), Some(&bob)).is_err());
    }
}
