use super::*;

fn lock(spec: serde_json::Value) -> AccessLockSpec {
    serde_json::from_value(spec).unwrap()
}

fn devs() -> Vec<String> {
    vec!["devs".into(), "system:authenticated".into()]
}

fn alice_in_shop(groups: &[String]) -> LockTarget<'_> {
    LockTarget {
        user: "alice",
        groups,
        namespace: "shop",
        template: Some((AccessKind::Exec, "web")),
    }
}

#[test]
fn every_field_a_lock_gives_must_match() {
    let groups = devs();
    let alice = alice_in_shop(&groups);
    assert!(lock(serde_json::json!({"user": "alice", "reason": "r"})).matches(&alice));
    assert!(!lock(serde_json::json!({"user": "carol", "reason": "r"})).matches(&alice));
    assert!(lock(serde_json::json!({"group": "devs", "reason": "r"})).matches(&alice));
    assert!(lock(serde_json::json!({"namespace": "shop", "reason": "r"})).matches(&alice));
    assert!(!lock(serde_json::json!({"namespace": "bank", "reason": "r"})).matches(&alice));
    // All of them: alice, but only in bank.
    let both = lock(serde_json::json!({"user": "alice", "namespace": "bank", "reason": "r"}));
    assert!(!both.matches(&alice));
    // A template: by namespace and name, and kind when given.
    let web = |kind: Option<&str>| {
        let mut spec =
            serde_json::json!({"template": {"namespace": "shop", "name": "web"}, "reason": "r"});
        if let Some(kind) = kind {
            spec["template"]["kind"] = serde_json::json!(kind);
        }
        lock(spec)
    };
    assert!(web(None).matches(&alice));
    assert!(web(Some("ExecAccessTemplate")).matches(&alice));
    assert!(!web(Some("PodAccessTemplate")).matches(&alice));
    let unknown = LockTarget {
        template: None,
        ..alice
    };
    assert!(!web(None).matches(&unknown));
}

#[test]
fn a_lock_holds_until_its_end_and_the_first_by_name_is_told() {
    let now: Timestamp = "2026-11-28T12:00:00Z".parse().unwrap();
    let ended = lock(
        serde_json::json!({"user": "alice", "reason": "over", "expiresAt": "2026-11-28T11:00:00Z"}),
    );
    let later = lock(
        serde_json::json!({"user": "alice", "reason": "incident 7", "expiresAt": "2026-11-28T13:00:00Z"}),
    );
    let group = lock(serde_json::json!({"group": "devs", "reason": "freeze"}));
    assert!(!ended.holds(now) && later.holds(now) && group.holds(now));
    let groups = devs();
    let named = |name: &str, spec: &AccessLockSpec| AccessLock::new(name, spec.clone());
    let locks = [
        named("c-freeze", &group),
        named("a-ended", &ended),
        named("b-incident", &later),
    ];
    let found = locking(&locks, &alice_in_shop(&groups), now).unwrap();
    assert_eq!(found.name(), "b-incident");
    assert_eq!(
        found.refusal(),
        "locked by AccessLock b-incident: incident 7"
    );
    let carol = LockTarget {
        user: "carol",
        groups: &[],
        ..alice_in_shop(&groups)
    };
    assert!(locking(&locks, &carol, now).is_none());
    // One being deleted no longer holds.
    let mut deleting = named("b-incident", &later);
    deleting.metadata.deletion_timestamp = Some(Time(now));
    assert_eq!(
        locking([&deleting, &locks[0]], &alice_in_shop(&groups), now).map(AccessLock::name),
        Some("c-freeze")
    );
}
