use super::*;
use crate::ApprovalConfig;

fn config(max: &str, total: Option<&str>, count: Option<u32>) -> AccessConfig {
    let mut config: AccessConfig = serde_json::from_value(serde_json::json!({
        "allowedGroups": ["devs"], "defaultDuration": "1h", "maxDuration": max,
    }))
    .unwrap();
    config.max_total_duration = total.map(str::to_string);
    config.max_extensions = count;
    config
}

fn ask(by: &str) -> ExtensionAsk {
    ExtensionAsk {
        by: by.into(),
        reason: None,
        asked_by: "alice".into(),
    }
}

fn minutes(m: i64) -> TimeDelta {
    TimeDelta::minutes(m)
}

#[test]
fn granted_asks_add_their_time_until_the_total_bound_cuts_them() {
    // Asked for 1h of at most 2h: 1h of room.
    let planned = plan(
        &config("2h", None, None),
        minutes(60),
        &[
            (ask("30m"), Decided::Granted),
            (ask("45m"), Decided::Granted),
            (ask("10m"), Decided::Granted),
        ],
    );
    assert_eq!(planned[0].added, minutes(30));
    assert_eq!(planned[0].message, None);
    // Cut to the 30m left, and said so.
    assert_eq!(planned[1].phase, ExtensionPhase::Granted);
    assert_eq!(planned[1].added, minutes(30));
    assert!(
        planned[1]
            .message
            .as_deref()
            .unwrap()
            .contains("cut to 30m")
    );
    // Nothing left: denied, naming the bound.
    assert_eq!(planned[2].phase, ExtensionPhase::Denied);
    assert!(
        planned[2]
            .message
            .as_deref()
            .unwrap()
            .contains("maxDuration (2h0m0s)")
    );
}

#[test]
fn max_total_duration_replaces_max_duration_as_the_bound() {
    let planned = plan(
        &config("1h", Some("3h"), None),
        minutes(60),
        &[(ask("3h"), Decided::Granted)],
    );
    assert_eq!(planned[0].added, minutes(120));
}

#[test]
fn pending_and_denied_asks_add_nothing_and_reserve_nothing() {
    let planned = plan(
        &config("2h", None, None),
        minutes(60),
        &[
            (ask("1h"), Decided::Pending),
            (ask("1h"), Decided::Denied("denied by bob".into())),
            (ask("1h"), Decided::Granted),
        ],
    );
    assert_eq!(planned[0].phase, ExtensionPhase::PendingApproval);
    assert_eq!(planned[1].phase, ExtensionPhase::Denied);
    assert_eq!(planned[1].message.as_deref(), Some("denied by bob"));
    assert_eq!(planned[2].added, minutes(60));
    let added: TimeDelta = planned.iter().map(|p| p.added).sum();
    assert_eq!(added, minutes(60));
}

#[test]
fn asks_past_max_extensions_are_denied_whatever_was_decided() {
    let planned = plan(
        &config("4h", None, Some(1)),
        minutes(60),
        &[
            (ask("10m"), Decided::Granted),
            (ask("10m"), Decided::Granted),
        ],
    );
    assert_eq!(planned[0].phase, ExtensionPhase::Granted);
    assert_eq!(planned[1].phase, ExtensionPhase::Denied);
    assert!(
        planned[1]
            .message
            .as_deref()
            .unwrap()
            .contains("maxExtensions (1)")
    );
    let none = plan(
        &config("4h", None, Some(0)),
        minutes(60),
        &[(ask("10m"), Decided::Granted)],
    );
    assert_eq!(none[0].phase, ExtensionPhase::Denied);
}

fn ready(base: i64, earlier: usize, records: &[ExtensionRecord]) -> AskedOf {
    AskedOf::of(true, minutes(base), earlier, records)
}

fn record(phase: ExtensionPhase, added: Option<&str>) -> ExtensionRecord {
    ExtensionRecord {
        number: 1,
        by: "30m".into(),
        asked_by: "alice".into(),
        reason: None,
        phase,
        added: added.map(str::to_string),
        approvals: Vec::new(),
        message: None,
    }
}

#[test]
fn only_the_requester_may_ask_and_only_as_themselves() {
    let config = config("2h", None, None);
    let ok = check_ask(
        &ask("30m"),
        "alice",
        Some("alice"),
        ready(60, 0, &[]),
        &config,
    );
    assert_eq!(ok, Ok(()));
    let forged = check_ask(
        &ask("30m"),
        "mallory",
        Some("alice"),
        ready(60, 0, &[]),
        &config,
    );
    assert!(
        forged
            .unwrap_err()
            .starts_with("askedBy: must be the user asking (mallory)")
    );
    let mut bobs = ask("30m");
    bobs.asked_by = "bob".into();
    let other = check_ask(&bobs, "bob", Some("alice"), ready(60, 0, &[]), &config);
    assert!(other.unwrap_err().starts_with("only the requester (alice)"));
}

#[test]
fn an_ask_needs_a_ready_grant_no_ask_waiting_and_room_left() {
    let config = config("2h", None, None);
    let not_ready = AskedOf::of(false, minutes(60), 0, &[]);
    let e = check_ask(&ask("30m"), "alice", Some("alice"), not_ready, &config).unwrap_err();
    assert!(e.contains("not Ready"), "{e}");
    // One waits, or is not recorded yet.
    let waiting = [record(ExtensionPhase::PendingApproval, None)];
    let e = check_ask(
        &ask("30m"),
        "alice",
        Some("alice"),
        ready(60, 1, &waiting),
        &config,
    );
    assert!(e.unwrap_err().contains("still waits"));
    let e = check_ask(
        &ask("30m"),
        "alice",
        Some("alice"),
        ready(60, 1, &[]),
        &config,
    );
    assert!(e.unwrap_err().contains("still waits"));
    // 1h asked and 1h granted already of 2h: no room.
    let granted = [record(ExtensionPhase::Granted, Some("1h"))];
    let e = check_ask(
        &ask("30m"),
        "alice",
        Some("alice"),
        ready(60, 1, &granted),
        &config,
    );
    assert!(e.unwrap_err().contains("maxDuration (2h0m0s) in all"));
    let half = [record(ExtensionPhase::Granted, Some("30m"))];
    assert_eq!(
        check_ask(
            &ask("30m"),
            "alice",
            Some("alice"),
            ready(60, 1, &half),
            &config
        ),
        Ok(())
    );
}

#[test]
fn an_ask_is_refused_with_the_field_at_fault() {
    let mut config = config("2h", None, Some(1));
    let e = check_ask(
        &ask("soon"),
        "alice",
        Some("alice"),
        ready(60, 0, &[]),
        &config,
    );
    assert!(e.unwrap_err().starts_with("by: "));
    let e = check_ask(
        &ask("-5m"),
        "alice",
        Some("alice"),
        ready(60, 0, &[]),
        &config,
    );
    assert!(e.unwrap_err().starts_with("by: "));
    let once = [record(ExtensionPhase::Granted, Some("10m"))];
    let e = check_ask(
        &ask("10m"),
        "alice",
        Some("alice"),
        ready(60, 1, &once),
        &config,
    );
    assert!(e.unwrap_err().contains("maxExtensions 1"));
    config.approval = Some(ApprovalConfig {
        approver_groups: vec!["leads".into()],
        required: 1,
        allow_self_approval: false,
        pending_timeout: None,
        reason_required: true,
        break_glass: false,
    });
    config.max_extensions = None;
    let e = check_ask(
        &ask("10m"),
        "alice",
        Some("alice"),
        ready(60, 0, &[]),
        &config,
    );
    assert!(e.unwrap_err().starts_with("reason: "));
}

#[test]
fn the_annotation_parses_or_names_its_form() {
    let asks = parse_asks(r#"[{"by":"30m","askedBy":"alice","reason":"deploy"}]"#).unwrap();
    assert_eq!(asks[0].reason.as_deref(), Some("deploy"));
    let e = parse_asks(r#"{"by":"30m"}"#).unwrap_err();
    assert!(
        e.contains(EXTEND_ANNOTATION) && e.contains("JSON array"),
        "{e}"
    );
    assert_eq!(extension_asks(&ObjectMeta::default()), Ok(Vec::new()));
}

#[test]
fn recorded_additions_sum_what_status_says_was_granted() {
    let records = [
        record(ExtensionPhase::Granted, Some("30m")),
        record(ExtensionPhase::Denied, None),
        record(ExtensionPhase::Granted, Some("15m")),
    ];
    assert_eq!(recorded_added(&records), minutes(45));
}
