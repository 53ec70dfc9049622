//! Steps: verify the access resources (the builder makes the grant's Role, RoleBinding and, for
//! pod access, its Pod, for the requester; a grant Oz made is kept as Oz made it), then is the
//! access ready (and what to tell the user).

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use oz_api::{
    AccessConfig, AccessRequest, AccessTemplate, RequestPhase, Requester, SessionMode,
    access_command::{DEFAULT_ACCESS_COMMAND, RenderError, render_access_command},
    condition_reason as reason, condition_type as kind,
    conditions::Observation,
    duration::parse_positive_duration,
    notifications::DEFAULT_EXPIRING_SOON_BEFORE,
};

use super::{
    adopt::{self, OzGrant},
    notices::expiring_soon_message,
    outcome::{Step, Stop, Wake, go_on, stop},
    reconciling::Reconciling,
    status::Pass,
};
use crate::{
    builders::{AccessBuilder, BuildError, Built},
    notify::NoticeKind,
    time,
};

/// How soon a request whose resources could not be built is looked at again, when no watch
/// will notice the fix (for example a workload whose pods are not running yet).
const RETRY_INVALID: Duration = Duration::from_secs(30);

/// Whom a grant is for, as the steps before the build found it.
pub enum Grantee<'a> {
    /// The requester, admitted (and approved, if the template asks for approval).
    Requester(&'a Requester),
    /// No one oz admitted: a grant Oz made before oz took over, kept as Oz made it
    /// ([`adopt`]). Boxed: it holds three whole objects, read once.
    Oz(Box<OzGrant>),
}

/// What the builder made for the grantee, recorded as created (and the pod in
/// `status.podName`); or a Failed request, looked at again soon.
pub async fn verify_access_resources<B: AccessBuilder>(
    r: &Reconciling<'_, B>,
    pass: &mut Pass,
    template: &<B::Request as AccessRequest>::Template,
    grantee: Grantee<'_>,
    expires_at: Timestamp,
) -> Step<Built> {
    let requester = match grantee {
        Grantee::Requester(requester) => requester,
        Grantee::Oz(grant) => {
            let config = template.access_config();
            return go_on(adopt::keep_oz_grant(r, pass, config, *grant, expires_at).await?);
        }
    };
    let recorded_pod = pass.status.pod_name.clone();
    let built = match r
        .builder
        .build(
            r.ctx,
            r.cache,
            r.request,
            template,
            &r.grant,
            requester,
            recorded_pod.as_deref(),
        )
        .await
    {
        Ok(built) => built,
        Err(BuildError::Invalid(why)) => {
            pass.observe(Observation::no(
                kind::ACCESS_RESOURCES_CREATED,
                reason::FAILURE,
                format!("ERROR: {why}"),
            ));
            pass.observe(Observation::no(
                kind::ACCESS_RESOURCES_READY,
                reason::NOT_YET_READY,
                "no access resources",
            ));
            pass.status.phase = Some(RequestPhase::Failed);
            return stop(Stop::Write(Wake::At(retry_at(pass.now, expires_at))));
        }
        Err(BuildError::Failed(e)) => return Err(e),
    };
    pass.observe(Observation::yes(
        kind::ACCESS_RESOURCES_CREATED,
        reason::SUCCESS,
        built.created_message.clone(),
    ));
    pass.status.pod_name = Some(built.pod.name_any());
    pass.status.session_mode =
        (built.session_mode == SessionMode::Brokered).then_some(SessionMode::Brokered);
    go_on(built)
}

/// Records whether what was built is usable yet, and the access command that uses it. The
/// grant's expiry timer revokes it and marks it Expired exactly at `expiresAt`, and then has
/// the request reconciled, to finish what the timer could not; its watches wake it earlier for
/// anything else. So no reconcile is scheduled for the expiry: a requeue per grant in force
/// costs heap in kube's scheduler for every grant (docs/benchmarks.md), and woken at the same
/// instant as the timer, the reconcile raced it (both deleted the Role and RoleBinding, and
/// both wrote Expired). The one wake a Ready grant asks for, to be announced as expiring soon,
/// is kept by its timer for the same reason ([`Wake::BeforeExpiry`]).
pub fn is_access_ready<B: AccessBuilder>(
    r: &Reconciling<'_, B>,
    pass: &mut Pass,
    config: &AccessConfig,
    built: &Built,
    expires_at: Timestamp,
) -> Stop {
    let wake = Wake::OnChange;
    let request = r.request.name_any();
    match access_message(config, built.session_mode, &built.pod.metadata, &request) {
        Ok(message) => pass.status.access_message = Some(message),
        Err(e) => {
            pass.status.access_message = None;
            pass.observe(Observation::no(
                kind::ACCESS_RESOURCES_READY,
                reason::NOT_YET_READY,
                format!("the template's spec.accessConfig.accessCommand cannot be rendered: {e}"),
            ));
            pass.status.phase = Some(RequestPhase::Failed);
            return Stop::Write(wake);
        }
    }
    let (observation, phase) = readiness(built.ready, &built.pod.name_any());
    pass.observe(observation);
    pass.status.phase = Some(phase);
    let wake = match expiring_soon_at(config, expires_at) {
        Some(soon) if phase == RequestPhase::Ready && pass.now >= soon => {
            let message = expiring_soon_message(&pass.status);
            pass.announce(NoticeKind::ExpiringSoon, message);
            wake
        }
        // Woken then to say so.
        Some(soon) if pass.now < soon => Wake::BeforeExpiry(soon),
        _ => wake,
    };
    Stop::Write(wake)
}

/// What the user is told to run: the template's `accessCommand` rendered for the pod, except
/// that a Brokered grant with the default one is told to use `ozctl exec` for the request
/// (plain `kubectl exec` is refused). The command comes last, after ` -- `, where ozctl looks
/// for the default command of `ozctl exec`.
pub fn access_message(
    config: &AccessConfig,
    mode: SessionMode,
    pod: &ObjectMeta,
    request: &str,
) -> Result<String, RenderError> {
    if mode == SessionMode::Brokered && config.access_command == DEFAULT_ACCESS_COMMAND {
        let namespace = pod.namespace.as_deref().unwrap_or_default();
        return Ok(format!(
            "oz brokers this grant's sessions: it records them and closes them when the access \
             ends, and plain kubectl exec is refused. Use kubectl oz exec, or: \
             ozctl exec -n {namespace} {request} -- /bin/sh"
        ));
    }
    render_access_command(&config.access_command, pod)
}

/// When a grant ending at `expires_at` is announced as expiring soon: `expiringSoonBefore`
/// (default 5m) earlier.
pub fn expiring_soon_at(config: &AccessConfig, expires_at: Timestamp) -> Option<Timestamp> {
    let before = config
        .notifications
        .as_ref()
        .map_or(DEFAULT_EXPIRING_SOON_BEFORE, |n| n.expiring_soon_before());
    let before = parse_positive_duration(before).ok()?;
    Some(time::add(expires_at, -before))
}

/// The readiness condition and phase of a grant whose resources exist: Ready once its pod is,
/// Pending until then.
pub fn readiness(ready: bool, pod_name: &str) -> (Observation, RequestPhase) {
    if ready {
        (
            Observation::yes(kind::ACCESS_RESOURCES_READY, reason::SUCCESS, "Ready"),
            RequestPhase::Ready,
        )
    } else {
        (
            Observation::no(
                kind::ACCESS_RESOURCES_READY,
                reason::NOT_YET_READY,
                format!(
                    "resources not yet available: waiting for pod {pod_name:?} to become ready"
                ),
            ),
            RequestPhase::Pending,
        )
    }
}

/// When a build that failed on the user's objects is tried again: soon, but never after the
/// grant's end.
pub fn retry_at(now: Timestamp, expires_at: Timestamp) -> Timestamp {
    let retry_invalid = chrono::TimeDelta::from_std(RETRY_INVALID).unwrap_or_default();
    time::add(now, retry_invalid).min(expires_at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(access_command: &str) -> AccessConfig {
        let mut config: AccessConfig = serde_json::from_value(serde_json::json!({
            "allowedGroups": ["devs"], "defaultDuration": "1h", "maxDuration": "2h"
        }))
        .unwrap();
        config.access_command = access_command.into();
        config
    }

    fn web_0() -> ObjectMeta {
        ObjectMeta {
            name: Some("web-0".into()),
            namespace: Some("shop".into()),
            ..Default::default()
        }
    }

    #[test]
    fn a_brokered_grant_with_the_default_command_is_told_to_use_ozctl_exec() {
        let message = access_message(
            &config(DEFAULT_ACCESS_COMMAND),
            SessionMode::Brokered,
            &web_0(),
            "alice-x7k2p",
        )
        .unwrap();
        assert!(
            message.ends_with("ozctl exec -n shop alice-x7k2p -- /bin/sh"),
            "{message}"
        );
        assert!(message.contains("kubectl oz exec"), "{message}");
        assert!(
            message.contains("plain kubectl exec is refused"),
            "{message}"
        );
    }

    #[test]
    fn a_direct_grant_or_a_custom_command_is_rendered_as_before() {
        assert_eq!(
            access_message(
                &config(DEFAULT_ACCESS_COMMAND),
                SessionMode::Direct,
                &web_0(),
                "alice-x7k2p"
            )
            .unwrap(),
            "kubectl exec -ti -n shop web-0 -- /bin/sh"
        );
        assert_eq!(
            access_message(
                &config("ssh-ish {{ .Metadata.Name }}"),
                SessionMode::Brokered,
                &web_0(),
                "alice-x7k2p"
            )
            .unwrap(),
            "ssh-ish web-0"
        );
    }

    #[test]
    fn a_grant_is_ready_when_its_pod_is_and_pending_until_then() {
        let (ready, phase) = readiness(true, "web-0");
        assert!(ready.holds);
        assert_eq!(
            (ready.message.as_str(), phase),
            ("Ready", RequestPhase::Ready)
        );
        let (waiting, phase) = readiness(false, "web-0");
        assert!(!waiting.holds);
        assert_eq!(waiting.type_, kind::ACCESS_RESOURCES_READY);
        assert_eq!(phase, RequestPhase::Pending);
        assert_eq!(
            waiting.message,
            "resources not yet available: waiting for pod \"web-0\" to become ready"
        );
    }

    #[test]
    fn a_grant_is_announced_as_expiring_soon_five_minutes_before_unless_the_template_says() {
        let mut config: AccessConfig = serde_json::from_value(serde_json::json!({
            "allowedGroups": ["devs"], "defaultDuration": "1h", "maxDuration": "2h"
        }))
        .unwrap();
        let expires_at: Timestamp = "2026-01-01T01:00:00Z".parse().unwrap();
        assert_eq!(
            expiring_soon_at(&config, expires_at),
            Some("2026-01-01T00:55:00Z".parse().unwrap())
        );
        config.notifications = Some(oz_api::NotificationConfig {
            secret_refs: Vec::new(),
            expiring_soon_before: Some("30s".into()),
        });
        assert_eq!(
            expiring_soon_at(&config, expires_at),
            Some("2026-01-01T00:59:30Z".parse().unwrap())
        );
    }

    #[test]
    fn a_failed_build_is_retried_soon_but_not_past_expiry() {
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let later: Timestamp = "2026-01-01T01:00:00Z".parse().unwrap();
        let soon: Timestamp = "2026-01-01T00:00:10Z".parse().unwrap();
        assert_eq!(
            retry_at(now, later),
            "2026-01-01T00:00:30Z".parse::<Timestamp>().unwrap()
        );
        assert_eq!(retry_at(now, soon), soon);
    }
}
