//! What to tell a user refused a way into a pod: which templates could grant them that pod, and
//! the `ozctl create` line that asks through each. The enforced webhook adds it to its denial
//! and `ozctl exec` to its errors, so both say the same thing, from one pure function over what
//! both can read: the pod's workload ([`PodOwner`]) and the namespace's templates
//! ([`TemplateTarget`]).
//!
//! A template could grant pod P to user U for action A when it targets the workload that
//! controls P (its `controllerTargetRef`, matched against P's controller owner reference, as
//! the exec controller matches it), U is in its `allowedGroups`, it names no fleet clusters
//! (such a template grants nothing where it is), and its kind grants A on P itself. Only an
//! ExecAccessTemplate does that, and only for exec: a PodAccessRequest's exec and attach are on
//! a private copy of the pod, never on P; nothing oz grants allows port-forward or debug.
//!
//! - `facts.rs`: what is read ([`PodWorkload`], [`PodOwner`], [`TemplateTarget`]);
//! - `choice.rs`: which templates ([`grant_hint`], [`GrantHint`]);
//! - `wording.rs`: the sentence ([`GrantHint::advice`], [`Voice`]).

mod choice;
mod facts;
mod wording;

pub use choice::{GrantHint, MAX_NAMED, Refused, grant_hint};
pub use facts::{PodOwner, PodWorkload, TemplateTarget};
pub use wording::Voice;

#[cfg(test)]
mod tests;
