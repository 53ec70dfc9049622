//! Which pods belong to which workload, which templates are named for which user and action,
//! and the exact words.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::*;
use crate::{AccessKind, ControllerKind, PodAction, SessionMode};

fn pod_meta(labels: &[(&str, &str)], owner: Option<(&str, &str, bool)>) -> ObjectMeta {
    ObjectMeta {
        name: Some("web-0".into()),
        labels: Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        ),
        owner_references: owner.map(|(kind, name, controller)| {
            vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: kind.into(),
                name: name.into(),
                uid: "uid".into(),
                controller: Some(controller),
                block_owner_deletion: None,
            }]
        }),
        ..Default::default()
    }
}

fn workload(kind: ControllerKind, name: &str) -> Option<PodWorkload> {
    Some(PodWorkload {
        kind,
        name: name.into(),
    })
}

#[test]
fn a_pod_belongs_to_the_workload_its_controller_owner_reference_names() {
    use ControllerKind::*;
    let hash = [("pod-template-hash", "7d9f")];
    let rollout_hash = [("rollouts-pod-template-hash", "5c2a")];
    let rows = [
        (
            pod_meta(&[], Some(("StatefulSet", "db", true))),
            workload(StatefulSet, "db"),
        ),
        (
            pod_meta(&[], Some(("DaemonSet", "agent", true))),
            workload(DaemonSet, "agent"),
        ),
        (
            pod_meta(&hash, Some(("ReplicaSet", "web-7d9f", true))),
            workload(Deployment, "web"),
        ),
        // A hyphen in the workload's own name stays in it.
        (
            pod_meta(&hash, Some(("ReplicaSet", "web-api-7d9f", true))),
            workload(Deployment, "web-api"),
        ),
        (
            pod_meta(&rollout_hash, Some(("ReplicaSet", "canary-5c2a", true))),
            workload(Rollout, "canary"),
        ),
        // A ReplicaSet without the hash label, or not named after it, is nobody's here.
        (pod_meta(&[], Some(("ReplicaSet", "web-7d9f", true))), None),
        (
            pod_meta(&hash, Some(("ReplicaSet", "web-0000", true))),
            None,
        ),
        (pod_meta(&hash, Some(("ReplicaSet", "7d9f", true))), None),
        (
            pod_meta(
                &[("pod-template-hash", "")],
                Some(("ReplicaSet", "web-", true)),
            ),
            None,
        ),
        // Only the controller counts; a Job's pod and a bare pod belong to no workload.
        (pod_meta(&[], Some(("StatefulSet", "db", false))), None),
        (pod_meta(&[], Some(("Job", "backup", true))), None),
        (pod_meta(&[], None), None),
    ];
    for (meta, expected) in rows {
        assert_eq!(PodWorkload::of_pod(&meta), expected, "{meta:?}");
        let owner = PodOwner::of_pod(&meta);
        assert_eq!(
            owner,
            expected.map_or(PodOwner::NoWorkload, PodOwner::Workload)
        );
    }
}

fn template(name: &str, target: &str, groups: &[&str]) -> TemplateTarget {
    TemplateTarget {
        kind: AccessKind::Exec,
        name: name.into(),
        workload: workload(ControllerKind::Deployment, target),
        allowed_groups: groups.iter().map(|g| g.to_string()).collect(),
        session_mode: SessionMode::Direct,
        hub: None,
        names_clusters: false,
    }
}

fn brokered(mut template: TemplateTarget) -> TemplateTarget {
    template.session_mode = SessionMode::Brokered;
    template
}

/// The templates of namespace shop: for Deployment web, `web` (devs), `web-rec` (devs,
/// Brokered), `web-ops` (ops), a hub's copy `fleet-web` (devs), a PodAccessTemplate `debug`
/// (devs) and a hub's fleet template `everywhere` (devs); `api` (devs) for Deployment api.
fn shop() -> Vec<TemplateTarget> {
    let mut debug = template("debug", "web", &["devs"]);
    debug.kind = AccessKind::Pod;
    let mut fleet_copy = template("fleet-web", "web", &["devs"]);
    fleet_copy.hub = Some("hub-1".into());
    let mut everywhere = template("everywhere", "web", &["devs"]);
    everywhere.names_clusters = true;
    vec![
        template("web-ops", "web", &["ops", "sre"]),
        fleet_copy,
        debug,
        brokered(template("web-rec", "web", &["devs"])),
        template("api", "api", &["devs"]),
        everywhere,
        template("web", "web", &["devs"]),
    ]
}

fn web_pod() -> PodOwner {
    PodOwner::Workload(PodWorkload {
        kind: ControllerKind::Deployment,
        name: "web".into(),
    })
}

fn hint_for(groups: &[&str], action: PodAction, templates: &[TemplateTarget]) -> GrantHint {
    let groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
    let refused = Refused {
        user: "alice",
        groups: &groups,
        namespace: "shop",
        pod: "web-0",
        action,
    };
    grant_hint(&refused, web_pod(), templates)
}

fn names(templates: &[TemplateTarget]) -> Vec<&str> {
    templates.iter().map(|t| t.name.as_str()).collect()
}

const TO_ALICE: Voice<'static> = Voice {
    program: "ozctl",
    user: "alice",
    template_writers: &[],
};

#[test]
fn only_exec_templates_for_the_pods_workload_that_admit_the_user_are_offered() {
    let hint = hint_for(&["devs"], PodAction::Exec, &shop());
    // Own before a hub's, Direct before Brokered, then by name; no PodAccessTemplate (its
    // grant is on a copy), no fleet template (it grants nothing here), no other workload's.
    assert_eq!(names(&hint.granting), ["web", "web-rec", "fleet-web"]);
    assert_eq!(names(&hint.closed), ["web-ops"]);

    let ops = hint_for(&["ops"], PodAction::Exec, &shop());
    assert_eq!(names(&ops.granting), ["web-ops"]);
    assert_eq!(names(&ops.closed), ["fleet-web", "web", "web-rec"]);

    // The order of the templates read changes nothing.
    let mut reversed = shop();
    reversed.reverse();
    assert_eq!(hint_for(&["devs"], PodAction::Exec, &reversed), hint);
}

#[test]
fn a_pod_of_no_known_workload_is_granted_by_no_template() {
    let groups = ["devs".to_string()];
    for owner in [PodOwner::Unknown, PodOwner::NoWorkload] {
        let refused = Refused {
            user: "alice",
            groups: &groups,
            namespace: "shop",
            pod: "web-0",
            action: PodAction::Exec,
        };
        let hint = grant_hint(&refused, owner.clone(), &shop());
        assert!(
            hint.granting.is_empty() && hint.closed.is_empty(),
            "{owner:?}"
        );
    }
}

#[test]
fn port_forward_and_debug_are_granted_by_no_template() {
    for action in [PodAction::PortForward, PodAction::Debug] {
        let hint = hint_for(&["devs"], action, &shop());
        assert!(
            hint.granting.is_empty() && hint.closed.is_empty(),
            "{action:?}"
        );
    }
    assert_eq!(
        hint_for(&["devs"], PodAction::PortForward, &shop()).advice(&TO_ALICE),
        "no template can grant port-forward: oz grants exec and attach only"
    );
    assert_eq!(
        hint_for(&["devs"], PodAction::Debug, &shop()).advice(&TO_ALICE),
        "no template can grant debug (an ephemeral container): oz grants exec and attach only"
    );
}

#[test]
fn one_template_is_named_with_the_command_that_asks_for_this_pod() {
    let only = [template("web", "web", &["devs"])];
    assert_eq!(
        hint_for(&["devs"], PodAction::Exec, &only).advice(&TO_ALICE),
        "ExecAccessTemplate web can grant it to alice: \
         ozctl create exec web --target-pod web-0 -n shop"
    );
    let plugin = Voice {
        program: "kubectl oz",
        user: "you",
        template_writers: &[],
    };
    let rec = [brokered(template("web-rec", "web", &["devs"]))];
    assert_eq!(
        hint_for(&["devs"], PodAction::Exec, &rec).advice(&plugin),
        "ExecAccessTemplate web-rec (Brokered: its grant is used with kubectl oz exec, not \
         kubectl exec) can grant it to you: kubectl oz create exec web-rec --target-pod web-0 -n shop"
    );
}

#[test]
fn several_templates_are_named_in_order_and_the_rest_counted() {
    assert_eq!(
        hint_for(&["devs"], PodAction::Exec, &shop()).advice(&TO_ALICE),
        "ExecAccessTemplates that can grant it to alice: \
         web: ozctl create exec web --target-pod web-0 -n shop; \
         web-rec (Brokered: its grant is used with ozctl exec, not kubectl exec): \
         ozctl create exec web-rec --target-pod web-0 -n shop; \
         fleet-web (managed by fleet hub hub-1: ask for it on the hub): \
         ozctl create exec fleet-web --fleet-cluster NAME"
    );
    let many: Vec<_> = ["e", "d", "c", "b", "a"]
        .iter()
        .map(|n| template(n, "web", &["devs"]))
        .collect();
    let advice = hint_for(&["devs"], PodAction::Exec, &many).advice(&TO_ALICE);
    assert_eq!(
        advice,
        "ExecAccessTemplates that can grant it to alice: \
         a: ozctl create exec a --target-pod web-0 -n shop; \
         b: ozctl create exec b --target-pod web-0 -n shop; \
         c: ozctl create exec c --target-pod web-0 -n shop; \
         and 2 more: ozctl get templates -n shop"
    );
}

#[test]
fn without_a_template_for_them_the_user_is_told_whom_to_ask() {
    let writers = ["system:masters".to_string(), "platform".to_string()];
    let enforced = Voice {
        template_writers: &writers,
        ..TO_ALICE
    };
    assert_eq!(
        hint_for(&["qa"], PodAction::Exec, &shop()).advice(&enforced),
        "no template grants it to alice: ExecAccessTemplates fleet-web (admits devs), \
         web (admits devs), web-ops (admits ops, sre) and 1 more; ask to be added to one of \
         those groups, or ask a template admin of shop (a member of system:masters or \
         platform) for a template"
    );
    let one = [template(
        "web-ops",
        "web",
        &["ops", "sre", "dba", "oncall", "leads"],
    )];
    assert_eq!(
        hint_for(&["qa"], PodAction::Exec, &one).advice(&TO_ALICE),
        "no template grants it to alice: ExecAccessTemplate web-ops admits only ops, sre, dba \
         and 2 more groups; ask to be added to one of those groups, or ask a template admin of \
         shop for a template"
    );
    let elsewhere = [template("api", "api", &["devs"])];
    assert_eq!(
        hint_for(&["devs"], PodAction::Exec, &elsewhere).advice(&enforced),
        "no template in shop grants exec into it: ask a template admin of shop (a member of \
         system:masters or platform) for an ExecAccessTemplate for Deployment web"
    );

    let groups = ["devs".to_string()];
    let refused = Refused {
        user: "alice",
        groups: &groups,
        namespace: "shop",
        pod: "web-0",
        action: PodAction::Exec,
    };
    assert_eq!(
        grant_hint(&refused, PodOwner::NoWorkload, &shop()).advice(&TO_ALICE),
        "no template can grant it: templates grant the pods of a Deployment, StatefulSet, \
         DaemonSet or Rollout, and none controls it"
    );
    assert_eq!(
        grant_hint(&refused, PodOwner::Unknown, &shop()).advice(&TO_ALICE),
        "see which templates may grant it with: ozctl get templates -n shop"
    );
}

#[test]
fn an_attach_is_told_no_template_grants_it_and_what_exec_would_take() {
    let only = [template("web", "web", &["devs"])];
    assert_eq!(
        hint_for(&["devs"], PodAction::Attach, &only).advice(&TO_ALICE),
        "no template grants attach to a workload's pod (an ExecAccessRequest grants exec; a \
         PodAccessRequest grants attach only to its own copy of the pod); to exec into it \
         instead, ExecAccessTemplate web can grant it to alice: \
         ozctl create exec web --target-pod web-0 -n shop"
    );
    assert_eq!(
        hint_for(&["qa"], PodAction::Attach, &only).advice(&TO_ALICE),
        "no template grants attach to a workload's pod (an ExecAccessRequest grants exec; a \
         PodAccessRequest grants attach only to its own copy of the pod)"
    );
}
