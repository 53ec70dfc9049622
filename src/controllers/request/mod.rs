//! The request reconciler, generic over ExecAccessRequest and PodAccessRequest. It reads like
//! Oz's sequence (template → requester → duration → expiry → build → ready), with a builder doing
//! the work, and differs where Oz is wrong:
//!
//! - access ends exactly at `expiresAt`: the reconcile is scheduled for that instant and re-armed
//!   whenever the operator starts, so a grant never outlives its window by a polling interval;
//! - only the requester is granted (unless the template says AllowedGroups), and only if they
//!   are in allowedGroups;
//! - `expiresAt`, the chosen pod and the subjects are fixed at grant time, so editing a template
//!   never widens a grant, and neither does editing the status: `expiresAt` is never later than
//!   creation plus the decided duration, and the pod is the one in the grant's Role;
//! - a grant ends as soon as it has no template or no valid durations to stand on;
//! - `ready` is recomputed on every pass.

use std::{sync::Arc, time::Duration};

use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};
use kube::{
    Api, Resource, ResourceExt,
    api::{Patch, PatchParams},
    runtime::{
        controller::Action,
        events::{Event, EventType},
    },
};
use oz_api::{
    AccessRequest, AccessTemplate, RequestPhase, RequestStatus,
    access_command::render_access_command,
    condition_reason as reason, condition_type as kind,
    conditions::{self, Observation},
    duration::decide_access_duration,
};
use serde_json::json;

pub mod timers;

use timers::ExpiryTimers;
use crate::{
    Context, FIELD_MANAGER, Result,
    apply::apply_status,
    builders::{AccessBuilder, BuildError, GrantIdentity, grant_identity, rbac::subjects_for},
    metrics::{ControllerLabels, KindLabels},
    time,
};

/// oz-only condition: the requester is in the template's allowedGroups.
pub const REQUESTER_ALLOWED: &str = "RequesterAllowed";

/// How soon a request whose resources could not be built is looked at again, when no watch
/// will notice the fix (for example a workload whose pods are not running yet).
const RETRY_INVALID: Duration = Duration::from_secs(30);

/// The context of one request controller: the shared context, its kind's builder, and the
/// timers that revoke its grants at expiry.
pub struct RequestReconciler<B: AccessBuilder> {
    pub ctx: Context,
    pub builder: B,
    pub timers: ExpiryTimers<B>,
}

impl<B: AccessBuilder> RequestReconciler<B> {
    pub fn new(ctx: Context, builder: B) -> Self {
        let timers = ExpiryTimers::new(ctx.clone(), builder);
        Self {
            ctx,
            builder,
            timers,
        }
    }
}

type Request<B> = <B as AccessBuilder>::Request;

/// Reconciles one request.
pub async fn reconcile<B: AccessBuilder>(
    request: Arc<Request<B>>,
    this: Arc<RequestReconciler<B>>,
) -> Result<Action> {
    let ctx = &this.ctx;
    ctx.metrics
        .reconciles
        .get_or_create(&ControllerLabels {
            controller: "request",
            kind: Request::<B>::kind(&()).into(),
        })
        .inc();
    if request.meta().deletion_timestamp.is_some() {
        // Its Role, RoleBinding and Pod are owned by it: the garbage collector removes them.
        return Ok(Action::await_change());
    }
    let grant = grant_identity(&*request)?;
    let mut pass = Pass::new(&*request);

    match pass.status.phase {
        Some(RequestPhase::Expired) => return expired(&this, &request, &grant, pass).await,
        Some(RequestPhase::Denied) => return Ok(Action::await_change()),
        _ => {}
    }
    // A grant that was made ends at its time, whatever else has changed since.
    if let Some(expires_at) = pass.status.expires_at.clone()
        && pass.now >= expires_at.0
    {
        return expire(&this, &request, &grant, pass, expires_at.0).await;
    }

    // 1. The template, in the request's namespace.
    let templates: Api<<Request<B> as AccessRequest>::Template> =
        Api::namespaced(ctx.client.clone(), &grant.namespace);
    let Some(template) = templates.get_opt(request.template_name()).await? else {
        // No template, no access: a grant made through it ends now (its template may have been
        // deleted without cascading to its requests), rather than waiting for no one.
        this.builder.revoke(ctx, &grant).await?;
        pass.observe(Observation::no(
            kind::TARGET_TEMPLATE_EXISTS,
            reason::NOT_FOUND,
            format!(
                "Error: template does not exist: no {} named {:?} in namespace {:?}; fix spec.templateName or create the template",
                <Request<B> as AccessRequest>::Template::kind(&()),
                request.template_name(),
                grant.namespace
            ),
        ));
        pass.status.phase = Some(RequestPhase::Failed);
        // The template watch wakes this request when the template appears.
        return pass.finish(ctx, &*request, Wake::OnChange).await;
    };
    pass.observe(Observation::yes(
        kind::TARGET_TEMPLATE_EXISTS,
        reason::SUCCESS,
        "Found Target Template",
    ));
    own_by_template(ctx, &*request, &template).await?;
    let config = template.access_config();

    // 2. The requester, as the admission webhook recorded them.
    let Some(requester) = request.requester() else {
        return deny(
            &this,
            &request,
            &grant,
            pass,
            "no requester is recorded on this request; oz's admission webhook records who creates a request: check that it is installed".into(),
        )
        .await;
    };
    let Some(group) = config
        .allowed_groups
        .iter()
        .find(|g| requester.groups.contains(g))
    else {
        let message = format!(
            "user {:?} is not in any of the template's allowedGroups ({}); ask to be added to one of them, or use another template",
            requester.username,
            config.allowed_groups.join(", ")
        );
        return deny(&this, &request, &grant, pass, message).await;
    };
    pass.observe(Observation::yes(
        REQUESTER_ALLOWED,
        reason::SUCCESS,
        format!(
            "user {:?} is in allowed group {group:?}",
            requester.username
        ),
    ));

    // 3. The duration: decided once, from the creation time.
    let decision = match decide_access_duration(
        request.duration(),
        &config.default_duration,
        &config.max_duration,
    ) {
        Ok(decision) => decision,
        Err(e) => {
            // Nor without durations to bound it.
            this.builder.revoke(ctx, &grant).await?;
            pass.observe(Observation::no(
                kind::ACCESS_DURATIONS_VALID,
                reason::BAD_REQUEST,
                e.condition_message(),
            ));
            pass.status.phase = Some(RequestPhase::Failed);
            return pass.finish(ctx, &*request, Wake::OnChange).await;
        }
    };
    pass.observe(Observation::yes(
        kind::ACCESS_DURATIONS_VALID,
        reason::SUCCESS,
        decision.message,
    ));
    let created = request
        .meta()
        .creation_timestamp
        .as_ref()
        .map_or(pass.now, |t| t.0);
    let decided = time::add(created, decision.duration);
    let expires_at = match &pass.status.expires_at {
        // Fixed at grant time, and never later than the decision: whoever can write the status
        // cannot extend a grant with it.
        Some(fixed) => fixed.0.min(decided),
        None => decided,
    };
    pass.status.expires_at = Some(Time(expires_at));
    if pass.now >= expires_at {
        return expire(&this, &request, &grant, pass, expires_at).await;
    }
    // Before anything is built, so that nothing this pass creates can outlive it.
    this.timers.arm(&grant, expires_at);
    pass.observe(Observation::yes(
        kind::ACCESS_STILL_VALID,
        reason::SUCCESS,
        "Access still valid",
    ));
    let retry_invalid = chrono::TimeDelta::from_std(RETRY_INVALID).unwrap_or_default();
    let retry_at = time::add(pass.now, retry_invalid).min(expires_at);

    // 4. The access resources.
    let subjects = subjects_for(config, requester);
    let recorded_pod = pass.status.pod_name.clone();
    let built = match this
        .builder
        .build(
            ctx,
            &request,
            &template,
            &grant,
            subjects,
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
            return pass.finish(ctx, &*request, Wake::At(retry_at)).await;
        }
        Err(BuildError::Failed(e)) => return Err(e),
    };
    pass.observe(Observation::yes(
        kind::ACCESS_RESOURCES_CREATED,
        reason::SUCCESS,
        built.created_message,
    ));
    let pod_name = built.pod.name_any();
    pass.status.pod_name = Some(pod_name.clone());

    // 5. Readiness, and what to tell the user.
    match render_access_command(&config.access_command, &built.pod.metadata) {
        Ok(message) => pass.status.access_message = Some(message),
        Err(e) => {
            pass.status.access_message = None;
            pass.observe(Observation::no(
                kind::ACCESS_RESOURCES_READY,
                reason::NOT_YET_READY,
                format!("the template's spec.accessConfig.accessCommand cannot be rendered: {e}"),
            ));
            pass.status.phase = Some(RequestPhase::Failed);
            return pass.finish(ctx, &*request, Wake::At(expires_at)).await;
        }
    }
    if built.ready {
        pass.observe(Observation::yes(
            kind::ACCESS_RESOURCES_READY,
            reason::SUCCESS,
            "Ready",
        ));
        pass.status.phase = Some(RequestPhase::Ready);
    } else {
        pass.observe(Observation::no(
            kind::ACCESS_RESOURCES_READY,
            reason::NOT_YET_READY,
            format!("resources not yet available: waiting for pod {pod_name:?} to become ready"),
        ));
        pass.status.phase = Some(RequestPhase::Pending);
    }
    // Wake up exactly at expiry; watches wake it earlier for anything else.
    pass.finish(ctx, &*request, Wake::At(expires_at)).await
}

/// Ends the grant now: deletes its resources, marks the request Expired, records the lag.
async fn expire<B: AccessBuilder>(
    this: &RequestReconciler<B>,
    request: &Request<B>,
    grant: &GrantIdentity,
    pass: Pass,
    expires_at: Timestamp,
) -> Result<Action> {
    revoke_at_expiry(&this.ctx, this.builder, grant, expires_at).await?;
    record_expiry(&this.ctx, request, pass, expires_at).await?;
    after_expiry(&this.ctx, request, expires_at).await
}

/// Deletes a grant's resources at its expiry, and records how late that was if anything was
/// left to delete.
pub(super) async fn revoke_at_expiry<B: AccessBuilder>(
    ctx: &Context,
    builder: B,
    grant: &GrantIdentity,
    expires_at: Timestamp,
) -> Result<()> {
    if builder.revoke(ctx, grant).await? {
        let lag = time::seconds_past(Timestamp::now(), expires_at).max(0.0);
        ctx.metrics
            .revocation_lag
            .get_or_create(&KindLabels {
                kind: Request::<B>::kind(&()).into(),
            })
            .observe(lag);
    }
    Ok(())
}

/// Marks a request whose grant has been revoked Expired, with an Event.
async fn record_expiry<R: AccessRequest>(
    ctx: &Context,
    request: &R,
    mut pass: Pass,
    expires_at: Timestamp,
) -> Result<()> {
    pass.status.expires_at = Some(Time(expires_at));
    pass.observe(Observation::no(
        kind::ACCESS_STILL_VALID,
        reason::TIMEOUT,
        "Access expired",
    ));
    pass.status.phase = Some(RequestPhase::Expired);
    pass.status.access_message = None;
    pass.events.push((
        EventType::Normal,
        "Expired",
        format!("access ended at {expires_at}; its access resources were deleted"),
    ));
    pass.finish(ctx, request, Wake::OnChange).await?;
    Ok(())
}

/// Called by a grant's expiry timer once it has revoked the grant: marks the request Expired
/// now, so that what users read agrees with their access, instead of when the reconcile queue
/// reaches the request (after a start at scale, tens of seconds later).
pub(super) async fn record_expiry_by_timer<R: AccessRequest>(
    ctx: &Context,
    grant: &GrantIdentity,
    expires_at: Timestamp,
) -> Result<()> {
    let api: Api<R> = Api::namespaced(ctx.client.clone(), &grant.namespace);
    let Some(request) = api.get_opt(&grant.owner.name).await? else {
        return Ok(());
    };
    // The same request (not one created again under its name), still to be marked.
    let same = request.uid().as_deref() == Some(grant.owner.uid.as_str());
    let pass = Pass::new(&request);
    let settled = matches!(
        pass.status.phase,
        Some(RequestPhase::Expired | RequestPhase::Denied)
    );
    if !same || settled || request.meta().deletion_timestamp.is_some() || pass.now < expires_at {
        return Ok(());
    }
    record_expiry(ctx, &request, pass, expires_at).await
}

/// An already-expired request: make sure nothing of it is left, and delete it once its history
/// retention has passed.
async fn expired<B: AccessBuilder>(
    this: &RequestReconciler<B>,
    request: &Request<B>,
    grant: &GrantIdentity,
    pass: Pass,
) -> Result<Action> {
    this.builder.revoke(&this.ctx, grant).await?;
    let expires_at = pass.status.expires_at.as_ref().map_or(pass.now, |t| t.0);
    after_expiry(&this.ctx, request, expires_at).await
}

/// Keeps an expired request for the history retention, then deletes it.
async fn after_expiry<R: AccessRequest>(
    ctx: &Context,
    request: &R,
    expires_at: Timestamp,
) -> Result<Action> {
    let retention = chrono::TimeDelta::from_std(ctx.settings.history_retention)
        .unwrap_or(chrono::TimeDelta::MAX);
    let delete_at = time::add(expires_at, retention);
    let now = Timestamp::now();
    if now >= delete_at {
        let api: Api<R> =
            Api::namespaced(ctx.client.clone(), &request.namespace().unwrap_or_default());
        crate::apply::delete_if_present(&api, &request.name_any()).await?;
        return Ok(Action::await_change());
    }
    Ok(Action::requeue(time::until(now, delete_at)))
}

/// Refuses the request: nothing is (or stays) granted.
async fn deny<B: AccessBuilder>(
    this: &RequestReconciler<B>,
    request: &Request<B>,
    grant: &GrantIdentity,
    mut pass: Pass,
    message: String,
) -> Result<Action> {
    this.builder.revoke(&this.ctx, grant).await?;
    pass.observe(Observation::no(
        REQUESTER_ALLOWED,
        reason::NOT_ALLOWED,
        message.clone(),
    ));
    pass.status.phase = Some(RequestPhase::Denied);
    pass.status.access_message = None;
    pass.events.push((EventType::Warning, "Denied", message));
    pass.finish(&this.ctx, request, Wake::OnChange).await
}

/// Makes the template the request's controller owner, as Oz does, so deleting a template
/// deletes its requests and, through them, their access.
async fn own_by_template<R: AccessRequest>(
    ctx: &Context,
    request: &R,
    template: &R::Template,
) -> Result<()> {
    let owner = template
        .controller_owner_ref(&())
        .ok_or_else(|| crate::Error::MissingMetadata(template.name_any(), "uid"))?;
    if request
        .owner_references()
        .iter()
        .any(|o| o.uid == owner.uid)
    {
        return Ok(());
    }
    let api: Api<R> = Api::namespaced(ctx.client.clone(), &request.namespace().unwrap_or_default());
    let patch = json!({
        "apiVersion": R::api_version(&()),
        "kind": R::kind(&()),
        "metadata": {"ownerReferences": [owner]},
    });
    api.patch(
        &request.name_any(),
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await?;
    Ok(())
}

/// When a request is looked at again, if no watch wakes it first.
#[derive(Clone, Copy, Debug)]
enum Wake {
    /// Only when it, its template or its access resources change.
    OnChange,
    /// At this instant. The delay is computed as the reconcile returns, after its own API calls,
    /// so that however long they take they cannot push a grant's end past `expiresAt`.
    At(Timestamp),
}

impl Wake {
    fn action(self) -> Action {
        match self {
            Wake::OnChange => Action::await_change(),
            Wake::At(at) => Action::requeue(time::until(Timestamp::now(), at)),
        }
    }
}

/// One reconcile's view of the status: what it was, what it becomes, and the event to publish.
struct Pass {
    now: Timestamp,
    generation: Option<i64>,
    previous: RequestStatus,
    status: RequestStatus,
    events: Vec<(EventType, &'static str, String)>,
}

impl Pass {
    fn new<R: AccessRequest>(request: &R) -> Self {
        let previous = request.request_status().cloned().unwrap_or_default();
        Self {
            now: Timestamp::now(),
            generation: request.meta().generation,
            status: previous.clone(),
            previous,
            events: Vec::new(),
        }
    }

    fn observe(&mut self, observation: Observation) {
        conditions::set(
            &mut self.status.conditions,
            observation,
            self.generation,
            self.now,
        );
    }

    /// Recomputes `ready`, writes the status if it changed, publishes what changed, and
    /// returns when to `wake`.
    async fn finish<R: AccessRequest>(
        mut self,
        ctx: &Context,
        request: &R,
        wake: Wake,
    ) -> Result<Action> {
        self.status.ready = conditions::all_true(&self.status.conditions);
        if self.status == self.previous {
            return Ok(wake.action());
        }
        let api: Api<R> =
            Api::namespaced(ctx.client.clone(), &request.namespace().unwrap_or_default());
        match apply_status(&api, &request.name_any(), &self.status).await {
            // Deleted meanwhile (by a user, or with its template): nothing left to report on.
            Err(crate::Error::Kube(kube::Error::Api(status))) if status.code == 404 => {
                return Ok(Action::await_change());
            }
            other => other?,
        };

        let kind = R::kind(&()).to_string();
        let became = |phase| self.status.phase == Some(phase) && self.previous.phase != Some(phase);
        let created =
            |s: &RequestStatus| conditions::is_true(&s.conditions, kind::ACCESS_RESOURCES_CREATED);
        if created(&self.status) && !created(&self.previous) {
            let message = self
                .status
                .conditions
                .iter()
                .find(|c| c.type_ == kind::ACCESS_RESOURCES_CREATED);
            self.events.push((
                EventType::Normal,
                "Created",
                message.map(|c| c.message.clone()).unwrap_or_default(),
            ));
        }
        if became(RequestPhase::Ready) {
            if let Some(created) = &request.meta().creation_timestamp {
                let seconds = time::seconds_past(Timestamp::now(), created.0).max(0.0);
                ctx.metrics
                    .time_to_ready
                    .get_or_create(&KindLabels { kind })
                    .observe(seconds);
            }
            let pod = self.status.pod_name.clone().unwrap_or_default();
            let until = self
                .status
                .expires_at
                .as_ref()
                .map(|t| t.0.to_string())
                .unwrap_or_default();
            self.events.push((
                EventType::Normal,
                "Ready",
                format!("access to pod {pod} granted until {until}"),
            ));
        } else if self.events.is_empty() && self.status.phase == Some(RequestPhase::Failed) {
            // Publish a failure once per distinct problem, not on every retry.
            let failing = |s: &RequestStatus| {
                s.conditions
                    .iter()
                    .filter(|c| c.status != "True")
                    .map(|c| c.message.clone())
                    .collect::<Vec<_>>()
            };
            if failing(&self.status) != failing(&self.previous) {
                self.events.push((
                    EventType::Warning,
                    "Failed",
                    failing(&self.status).join("; "),
                ));
            }
        }
        for (type_, reason, note) in self.events {
            let event = Event {
                type_,
                reason: reason.into(),
                note: Some(note),
                action: "Reconcile".into(),
                secondary: None,
            };
            if let Err(e) = ctx.recorder.publish(&event, &request.object_ref(&())).await {
                tracing::warn!(error = %e, "could not publish an event");
            }
        }
        Ok(wake.action())
    }
}
