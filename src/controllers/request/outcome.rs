//! What a step of the request reconcile returns: go on with what it found, or stop here and
//! say how the pass ends. Steps only record on the status pass (`Pass`); the reconcile
//! writes it once, as the [`Stop`] says. A leaf: the steps and the reconcile import it, it
//! imports no step.

use std::ops::ControlFlow;

use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::Action;

use crate::{Result, time};

/// A step's outcome: go on with what it found, or stop the pass as [`Stop`] says.
pub type Step<T = ()> = Result<ControlFlow<Stop, T>>;

/// How a pass that stops ends.
#[derive(Debug)]
pub enum Stop {
    /// Write the status the pass decided, and look again as `Wake` says.
    Write(Wake),
    /// The grant has just ended (expired, or revoked on request) at this instant: write the
    /// status that says so, then keep the request as the grant's record for the history
    /// retention, counted from its end, and delete it after.
    Ended(Timestamp),
    /// The request had ended before, at this instant, and its status says so already: write
    /// nothing; keep it for the history retention, then delete it.
    Retained(Timestamp),
    /// Write nothing and return this action: nothing to say yet (the caches cannot tell), or
    /// nothing ever again (a Denied request).
    Leave(Action),
}

/// When a request is looked at again, if no watch wakes it first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// Only when it, its template or its access resources change.
    OnChange,
    /// At this instant. The delay is computed as the reconcile returns, after its own API calls,
    /// so that however long they take they cannot push a grant's end past `expiresAt`.
    At(Timestamp),
    /// At this instant, before the expiry of a grant in force: asked of the grant's expiry
    /// timer, which holds it for a few dozen bytes where kube's scheduler holds hundreds
    /// (`timers.rs`); as [`Wake::At`] if the grant has no timer.
    BeforeExpiry(Timestamp),
}

impl Wake {
    pub fn action(self) -> Action {
        match self {
            Wake::OnChange => Action::await_change(),
            Wake::At(at) | Wake::BeforeExpiry(at) => {
                Action::requeue(time::until(Timestamp::now(), at))
            }
        }
    }
}

/// Goes on with `found`.
pub fn go_on<T>(found: T) -> Step<T> {
    Ok(ControlFlow::Continue(found))
}

/// Stops the pass as `stop` says.
pub fn stop<T>(stop: Stop) -> Step<T> {
    Ok(ControlFlow::Break(stop))
}
