//! The rule as a table: kinds × session modes × actions × routes × own or group grant ×
//! before or after `expiresAt`, then the order of preference.

use chrono::TimeDelta;
use serde_json::json;

use super::*;

fn now() -> DateTime<Utc> {
    "2026-11-27T12:00:00Z".parse().unwrap()
}

fn config(grant_to: &str) -> AccessConfig {
    serde_json::from_value(json!({
        "allowedGroups": ["devs"],
        "grantTo": grant_to,
    }))
    .unwrap()
}

fn summary(
    kind: AccessKind,
    name: &str,
    by: Option<&str>,
    mode: Option<SessionMode>,
) -> GrantSummary {
    GrantSummary {
        kind,
        name: name.into(),
        template: "web".into(),
        requested_by: by.map(Into::into),
        phase: Some(RequestPhase::Ready),
        pod_name: Some("web-0".into()),
        session_mode: mode,
        expires_at: Some(now() + TimeDelta::minutes(30)),
        approvers: Vec::new(),
        extensions: Vec::new(),
    }
}

fn asked(user: &str, action: PodAction, route: Route, now: DateTime<Utc>) -> Asked<'_> {
    static DEVS: std::sync::LazyLock<Vec<String>> =
        std::sync::LazyLock::new(|| vec!["devs".to_string()]);
    Asked {
        user,
        groups: &DEVS,
        namespace: "shop",
        pod: "web-0",
        action,
        route,
        now,
        locks: &[],
    }
}

#[test]
fn a_lock_that_matches_the_user_namespace_or_template_grants_nothing() {
    let now = now();
    let grants = [summary(AccessKind::Exec, "own", Some("alice"), None)];
    let lock = |spec: serde_json::Value| {
        std::sync::Arc::new(crate::AccessLock::new(
            "l",
            serde_json::from_value(spec).unwrap(),
        ))
    };
    let open = asked("alice", PodAction::Exec, Route::Direct, now);
    assert!(granting(&grants, |_, _| None::<AccessConfig>, &open).is_some());
    for spec in [
        serde_json::json!({"user": "alice", "reason": "r"}),
        serde_json::json!({"group": "devs", "reason": "r"}),
        serde_json::json!({"namespace": "shop", "reason": "r"}),
        serde_json::json!({"template": {"namespace": "shop", "name": "web"}, "reason": "r"}),
    ] {
        let locks = [lock(spec.clone())];
        let locked = Asked {
            locks: &locks,
            ..open
        };
        assert!(
            granting(&grants, |_, _| None::<AccessConfig>, &locked).is_none(),
            "{spec}"
        );
    }
    // Someone else's lock, or one that has ended, changes nothing.
    for spec in [
        serde_json::json!({"user": "carol", "reason": "r"}),
        serde_json::json!({"user": "alice", "reason": "r", "expiresAt": "2020-01-01T00:00:00Z"}),
    ] {
        let locks = [lock(spec.clone())];
        let other = Asked {
            locks: &locks,
            ..open
        };
        assert!(
            granting(&grants, |_, _| None::<AccessConfig>, &other).is_some(),
            "{spec}"
        );
    }
}

#[test]
fn the_table() {
    use AccessKind::{Exec, Pod};
    use PodAction::{Attach, Debug, Exec as ExecAction, PortForward};
    use Route::{Brokered, Direct};
    let brokered = Some(SessionMode::Brokered);
    // (kind, session mode, action, route, granted)
    let rows = [
        (Exec, None, ExecAction, Direct, true),
        (Exec, None, ExecAction, Brokered, false),
        (Exec, None, Attach, Direct, false),
        (Exec, None, PortForward, Direct, false),
        (Exec, None, Debug, Direct, false),
        (Exec, brokered, ExecAction, Brokered, true),
        (Exec, brokered, ExecAction, Direct, false),
        (Exec, brokered, Attach, Brokered, false),
        (Pod, None, ExecAction, Direct, true),
        (Pod, None, Attach, Direct, true),
        (Pod, None, Attach, Brokered, false),
        (Pod, None, PortForward, Direct, false),
        (Pod, None, Debug, Direct, false),
        (Pod, brokered, ExecAction, Brokered, true),
        (Pod, brokered, Attach, Brokered, true),
        (Pod, brokered, ExecAction, Direct, false),
        (Pod, brokered, Attach, Direct, false),
    ];
    for (kind, mode, action, route, granted) in rows {
        // alice's own grant, to Requester; carol's grant, to Requester or to AllowedGroups; each
        // before and after its expiresAt.
        for (by, grant_to, group_granted) in [
            ("alice", "Requester", true),
            ("carol", "Requester", false),
            ("carol", "AllowedGroups", true),
        ] {
            for (when, in_time) in [(now(), true), (now() + TimeDelta::minutes(30), false)] {
                let request = summary(kind, "r", Some(by), mode);
                let template = config(grant_to);
                let found = granting(
                    [&request],
                    |_, _| Some(&template),
                    &asked("alice", action, route, when),
                )
                .is_some();
                assert_eq!(
                    found,
                    granted && group_granted && in_time,
                    "{kind:?} {mode:?} {action:?} by {route:?}, {by}'s grant to {grant_to}, in time {in_time}"
                );
            }
        }
    }
}

#[test]
fn not_ready_another_pod_no_expiry_or_no_template_grants_nothing() {
    let template = config("AllowedGroups");
    let ask = asked("alice", PodAction::Exec, Route::Direct, now());
    let mut pending = summary(AccessKind::Exec, "r", Some("alice"), None);
    pending.phase = Some(RequestPhase::Pending);
    let mut elsewhere = summary(AccessKind::Exec, "r", Some("alice"), None);
    elsewhere.pod_name = Some("web-1".into());
    let mut no_end = summary(AccessKind::Exec, "r", Some("alice"), None);
    no_end.expires_at = None;
    for request in [&pending, &elsewhere, &no_end] {
        assert!(
            granting([request], |_, _| Some(&template), &ask).is_none(),
            "{request:?}"
        );
    }
    // A group grant whose template is gone grants nothing; one's own still does.
    let carols = summary(AccessKind::Exec, "r", Some("carol"), None);
    assert!(granting([&carols], |_, _| None::<&AccessConfig>, &ask).is_none());
    let alices = summary(AccessKind::Exec, "r", Some("alice"), None);
    assert!(granting([&alices], |_, _| None::<&AccessConfig>, &ask).is_some());
}

#[test]
fn a_grant_oz_adopted_from_oz_is_bound_to_the_allowed_groups() {
    let adopted = summary(AccessKind::Exec, "oz-made", None, None);
    let ask = asked("alice", PodAction::Exec, Route::Direct, now());
    assert!(granting([&adopted], |_, _| Some(config("Requester")), &ask).is_some());
    let outsider = Asked { groups: &[], ..ask };
    assert!(granting([&adopted], |_, _| Some(config("Requester")), &outsider).is_none());
}

#[test]
fn ones_own_grant_wins_then_the_one_ending_last_then_kind_and_name() {
    let template = config("AllowedGroups");
    let ask = asked("alice", PodAction::Exec, Route::Direct, now());
    let mut carols_later = summary(AccessKind::Exec, "a-carol", Some("carol"), None);
    carols_later.expires_at = Some(now() + TimeDelta::hours(2));
    let alices = summary(AccessKind::Exec, "z-alice", Some("alice"), None);
    let chosen = granting([&carols_later, &alices], |_, _| Some(&template), &ask).unwrap();
    assert_eq!(chosen.name, "z-alice", "one's own first");

    let carols = summary(AccessKind::Exec, "b-carol", Some("carol"), None);
    let chosen = granting([&carols, &carols_later], |_, _| Some(&template), &ask).unwrap();
    assert_eq!(chosen.name, "a-carol", "then the one ending last");

    let exec = summary(AccessKind::Exec, "z", Some("alice"), None);
    let pod = summary(AccessKind::Pod, "a", Some("alice"), None);
    let chosen = granting([&pod, &exec], |_, _| Some(&template), &ask).unwrap();
    assert_eq!(chosen.kind, AccessKind::Exec, "then by kind, then name");
}

#[test]
fn a_forwarded_grant_names_the_hubs_approvers_as_the_hubs_users() {
    let request: crate::ExecAccessRequest = serde_json::from_value(serde_json::json!({
        "apiVersion": "crds.wizardofoz.co/v1alpha1", "kind": "ExecAccessRequest",
        "metadata": {"name": "alice-web", "namespace": "shop"},
        "spec": {"templateName": "web", "requester": {"username": "alice", "groups": ["devs"]},
                 "forwarded": {"hub": "hub", "cluster": "b", "requestName": "alice-web",
                               "requestUid": "u", "approvers": [{"approver": "dave", "at": "2026-11-28T00:00:00Z"}]}},
        "status": {"phase": "Ready"},
    }))
    .unwrap();
    let summary = GrantSummary::of(&request);
    assert_eq!(summary.approvers, ["dave@hub"]);
    assert_eq!(summary.requested_by.as_deref(), Some("alice"));
}
