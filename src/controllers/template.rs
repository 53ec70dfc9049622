//! The template reconciler, generic over ExecAccessTemplate and PodAccessTemplate: does the
//! target exist, are the durations valid, does the access command parse. It runs when the
//! template or its target changes (targets are watched), never on a timer. Only the target
//! needs the cluster; the other checks, and what a change announces, are plain functions.

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use kube::{
    Api, ResourceExt,
    runtime::{
        controller::Action,
        events::{Event, EventType},
    },
};
use oz_api::{
    AccessConfig, AccessTemplate, CrossVersionObjectReference, TemplateStatus,
    access_command::validate_access_command,
    condition_reason as reason, condition_type as kind,
    conditions::{self, Observation},
    duration::{TEMPLATE_DURATIONS_VALID_MESSAGE, validate_template_durations},
};

use crate::{
    Context, Result,
    apply::apply_status,
    builders::workload::{self, Lookup},
};

/// Reconciles one template.
pub async fn reconcile<T: AccessTemplate>(template: Arc<T>, ctx: Arc<Context>) -> Result<Action> {
    let _measure = ctx.metrics.count_and_measure("template", &T::kind(&()));
    let namespace = template.namespace().unwrap_or_default();
    let config = template.access_config();
    let observations = [
        match template.clusters() {
            // A fleet hub's template: its workload is on the spokes, whose oz checks it there.
            Some(_) => Observation::yes(
                kind::TARGET_REF_EXISTS,
                reason::FLEET_TEMPLATE,
                "Checked on each spoke this template covers (status.clusters)",
            ),
            None => verify_target(&ctx, &namespace, template.target_ref()).await?,
        },
        verify_durations(config),
        verify_access_command(config),
    ];

    let mut previous = template.template_status().cloned().unwrap_or_default();
    // `clusters` is the fleet hub's to write (its own field manager): not written back here,
    // where a stale copy would undo the hub's newer one.
    previous.clusters.clear();
    let mut status = previous.clone();
    let now = Timestamp::now();
    for observation in observations {
        conditions::set(
            &mut status.conditions,
            observation,
            template.meta().generation,
            now,
        );
    }
    status.ready = conditions::all_true(&status.conditions);

    if status != previous {
        let api: Api<T> = Api::namespaced(ctx.client.clone(), &namespace);
        apply_status(&api, &template.name_any(), &status).await?;
        if let Some(event) = readiness_event(&previous, &status) {
            publish(&ctx, &*template, event).await;
        }
    }
    // Targets are watched, so nothing needs polling.
    Ok(Action::await_change())
}

/// Whether the workload the template targets exists; a template without one builds its pods
/// from `spec.podSpec`.
async fn verify_target(
    ctx: &Context,
    namespace: &str,
    target_ref: Option<&CrossVersionObjectReference>,
) -> Result<Observation> {
    let Some(target_ref) = target_ref else {
        return Ok(Observation::yes(
            kind::TARGET_REF_EXISTS,
            reason::SUCCESS,
            "Success: pods are built from spec.podSpec",
        ));
    };
    Ok(
        match workload::lookup(&ctx.client, namespace, target_ref).await? {
            Lookup::Found(_) => {
                Observation::yes(kind::TARGET_REF_EXISTS, reason::SUCCESS, "Success")
            }
            Lookup::Missing(why) => Observation::no(
                kind::TARGET_REF_EXISTS,
                reason::NOT_FOUND,
                format!("Error: {why}"),
            ),
        },
    )
}

/// Whether the template's default and maximum durations are valid.
fn verify_durations(config: &AccessConfig) -> Observation {
    match validate_template_durations(&config.default_duration, &config.max_duration) {
        Ok(_) => Observation::yes(
            kind::TEMPLATE_DURATIONS_VALID,
            reason::SUCCESS,
            TEMPLATE_DURATIONS_VALID_MESSAGE,
        ),
        Err(e) => Observation::no(
            kind::TEMPLATE_DURATIONS_VALID,
            reason::NOT_ACCEPTABLE,
            e.condition_message(),
        ),
    }
}

/// Whether the template's access command is a template oz can render.
fn verify_access_command(config: &AccessConfig) -> Observation {
    match validate_access_command(&config.access_command) {
        Ok(()) => Observation::yes(
            kind::ACCESS_COMMAND_VALID,
            reason::SUCCESS,
            "spec.accessConfig.accessCommand valid",
        ),
        Err(e) => Observation::no(
            kind::ACCESS_COMMAND_VALID,
            reason::NOT_ACCEPTABLE,
            format!("Error on spec.accessConfig.accessCommand: {e}"),
        ),
    }
}

/// The Event a status change announces: the first verdict, and every change of readiness after
/// it; a not-ready template names each failing condition.
fn readiness_event(
    previous: &TemplateStatus,
    status: &TemplateStatus,
) -> Option<(EventType, &'static str, String)> {
    if status.ready == previous.ready && !previous.conditions.is_empty() {
        return None;
    }
    Some(if status.ready {
        (
            EventType::Normal,
            "TemplateReady",
            "the target exists and the settings are valid".to_string(),
        )
    } else {
        let failing: Vec<_> = conditions::failing(&status.conditions)
            .map(|c| format!("{}: {}", c.type_(), c.message))
            .collect();
        (EventType::Warning, "TemplateNotReady", failing.join("; "))
    })
}

async fn publish<T: AccessTemplate>(
    ctx: &Context,
    template: &T,
    (type_, reason, note): (EventType, &'static str, String),
) {
    let event = Event {
        type_,
        reason: reason.into(),
        note: Some(note),
        action: "Verify".into(),
        secondary: None,
    };
    if let Err(e) = ctx.publish_event(&event, &template.object_ref(&())).await {
        tracing::warn!(error = %e, "could not publish an event");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::fixtures::conditions_of;

    fn config(default: &str, max: &str, command: &str) -> AccessConfig {
        AccessConfig {
            allowed_groups: vec!["devs".into()],
            default_duration: default.into(),
            max_duration: max.into(),
            access_command: command.into(),
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

    fn status(observations: &[Observation]) -> TemplateStatus {
        let conditions = conditions_of(observations);
        TemplateStatus {
            clusters: Vec::new(),
            ready: conditions::all_true(&conditions),
            conditions,
        }
    }

    #[test]
    fn valid_settings_hold_and_invalid_ones_say_why() {
        let good = config(
            "1h",
            "2h",
            "kubectl exec -ti -n {{.Metadata.Namespace}} {{.Metadata.Name}} -- /bin/sh",
        );
        assert!(verify_durations(&good).holds);
        assert!(verify_access_command(&good).holds);
        let bad = config("3h", "2h", "{{.Metadata.Name");
        let durations = verify_durations(&bad);
        assert!(!durations.holds);
        assert_eq!(durations.reason, reason::NOT_ACCEPTABLE);
        let command = verify_access_command(&bad);
        assert!(!command.holds);
        assert!(
            command
                .message
                .starts_with("Error on spec.accessConfig.accessCommand: "),
            "{}",
            command.message
        );
    }

    #[test]
    fn the_first_verdict_and_each_change_of_readiness_are_announced() {
        let ok = Observation::yes(kind::TARGET_REF_EXISTS, reason::SUCCESS, "Success");
        let missing = Observation::no(
            kind::TARGET_REF_EXISTS,
            reason::NOT_FOUND,
            "Error: Deployment \"web\" not found",
        );
        let ready = status(std::slice::from_ref(&ok));
        let broken = status(std::slice::from_ref(&missing));
        let first = readiness_event(&TemplateStatus::default(), &ready).expect("first verdict");
        assert_eq!((first.0, first.1), (EventType::Normal, "TemplateReady"));
        let (type_, reason, note) = readiness_event(&ready, &broken).expect("became not ready");
        assert_eq!((type_, reason), (EventType::Warning, "TemplateNotReady"));
        assert_eq!(note, "TargetRefExists: Error: Deployment \"web\" not found");
        // Still not ready, for another reason: no new Event.
        let other = Observation::no(kind::TARGET_REF_EXISTS, reason::NOT_FOUND, "Error: gone");
        assert!(readiness_event(&broken, &status(&[other])).is_none());
    }
}
