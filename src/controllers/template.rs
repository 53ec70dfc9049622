//! The template reconciler, generic over ExecAccessTemplate and PodAccessTemplate: does the
//! target exist, are the durations valid, does the access command parse. It runs when the
//! template or its target changes (targets are watched), never on a timer.

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
    AccessTemplate, TemplateStatus,
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

/// oz-only condition: the accessCommand is a template oz can render.
pub const ACCESS_COMMAND_VALID: &str = "AccessCommandValid";

/// Reconciles one template.
pub async fn reconcile<T: AccessTemplate>(template: Arc<T>, ctx: Arc<Context>) -> Result<Action> {
    let _measure = ctx.metrics.count_and_measure("template", &T::kind(&()));
    let namespace = template.namespace().unwrap_or_default();
    let config = template.access_config();

    let target = match template.target_ref() {
        Some(target_ref) => match workload::lookup(&ctx.client, &namespace, target_ref).await? {
            Lookup::Found(_) => {
                Observation::yes(kind::TARGET_REF_EXISTS, reason::SUCCESS, "Success")
            }
            Lookup::Missing(why) => Observation::no(
                kind::TARGET_REF_EXISTS,
                reason::NOT_FOUND,
                format!("Error: {why}"),
            ),
        },
        None => Observation::yes(
            kind::TARGET_REF_EXISTS,
            reason::SUCCESS,
            "Success: pods are built from spec.podSpec",
        ),
    };
    let durations =
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
        };
    let command = match validate_access_command(&config.access_command) {
        Ok(()) => Observation::yes(
            ACCESS_COMMAND_VALID,
            reason::SUCCESS,
            "spec.accessConfig.accessCommand valid",
        ),
        Err(e) => Observation::no(
            ACCESS_COMMAND_VALID,
            reason::NOT_ACCEPTABLE,
            format!("Error on spec.accessConfig.accessCommand: {e}"),
        ),
    };

    let previous = template.template_status().cloned().unwrap_or_default();
    let mut status = previous.clone();
    let now = Timestamp::now();
    for observation in [target, durations, command] {
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
        if status.ready != previous.ready || previous.conditions.is_empty() {
            publish_readiness(&ctx, &*template, &status).await;
        }
    }
    // Targets are watched, so nothing needs polling.
    Ok(Action::await_change())
}

async fn publish_readiness<T: AccessTemplate>(
    ctx: &Context,
    template: &T,
    status: &TemplateStatus,
) {
    let (type_, reason, note) = if status.ready {
        (
            EventType::Normal,
            "TemplateReady",
            "the target exists and the settings are valid".to_string(),
        )
    } else {
        let failing: Vec<_> = conditions::failing(&status.conditions)
            .map(|c| format!("{}: {}", c.type_, c.message))
            .collect();
        (EventType::Warning, "TemplateNotReady", failing.join("; "))
    };
    let event = Event {
        type_,
        reason: reason.into(),
        note: Some(note),
        action: "Verify".into(),
        secondary: None,
    };
    if let Err(e) = ctx
        .recorder
        .publish(&event, &template.object_ref(&()))
        .await
    {
        tracing::warn!(error = %e, "could not publish an event");
    }
}
