//! The controllers: one template controller and one request controller per access kind, per
//! watched namespace (or cluster-wide), reacting to watches instead of polling.
//!
//! - [`template`]: the template reconciler (target, durations, access command);
//! - [`request`]: the request reconciler, one file per step, and its expiry timers;
//! - [`mod@template_controller`] and [`mod@request_controller`]: what each watches and how a change
//!   maps to what it reconciles; [`runner`]: how any of them is run, retried and stopped.

use futures::future::BoxFuture;
use oz_api::{AccessKind, AccessRequest};

use crate::{
    Context,
    builders::{AccessBuilder, ExecAccessBuilder, PodAccessBuilder},
    scope::Scope,
};

pub mod active_grants;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod request;
pub mod request_controller;
pub mod runner;
pub mod template;
pub mod template_controller;

pub use request::RequestReconciler;
use request_controller::request_controller;
use template_controller::{rollouts_installed, template_controller};

/// The controllers for `kinds` in `scope`, as futures that run until `shutdown` resolves.
pub async fn controllers(
    ctx: Context,
    scope: Scope,
    kinds: &[AccessKind],
    shutdown: impl std::future::Future<Output = ()> + Clone + Send + Sync + 'static,
) -> Vec<BoxFuture<'static, ()>> {
    let rollouts_installed = rollouts_installed(&ctx.client, &scope).await;
    let mut tasks = Vec::new();
    for kind in kinds {
        let pair = match kind {
            AccessKind::Exec => controllers_for(
                ExecAccessBuilder,
                &ctx,
                &scope,
                rollouts_installed,
                &shutdown,
            ),
            AccessKind::Pod => controllers_for(
                PodAccessBuilder,
                &ctx,
                &scope,
                rollouts_installed,
                &shutdown,
            ),
        };
        tasks.extend(pair);
    }
    tasks
}

/// The template controller and the request controller of one access kind.
fn controllers_for<B: AccessBuilder>(
    builder: B,
    ctx: &Context,
    scope: &Scope,
    rollouts_installed: bool,
    shutdown: &(impl std::future::Future<Output = ()> + Clone + Send + Sync + 'static),
) -> [BoxFuture<'static, ()>; 2] {
    [
        Box::pin(
            template_controller::<<B::Request as AccessRequest>::Template>(
                ctx.clone(),
                scope.clone(),
                rollouts_installed,
                shutdown.clone(),
            ),
        ),
        Box::pin(request_controller(
            ctx.clone(),
            scope.clone(),
            builder,
            shutdown.clone(),
        )),
    ]
}
