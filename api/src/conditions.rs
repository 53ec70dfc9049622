//! The one way oz sets and reads status conditions: setting keeps Oz's semantics
//! (apimachinery's SetStatusCondition), so `lastTransitionTime` moves only when the status
//! flips; reading answers "ready?", "does this hold?" and "what is failing?".

use k8s_openapi::{
    apimachinery::pkg::apis::meta::v1::{Condition, Time},
    jiff::Timestamp,
};

/// A condition to record: its type, whether it holds, and Oz's reason and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observation {
    pub type_: &'static str,
    pub holds: bool,
    pub reason: &'static str,
    pub message: String,
}

impl Observation {
    pub fn yes(type_: &'static str, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            type_,
            holds: true,
            reason,
            message: message.into(),
        }
    }

    pub fn no(type_: &'static str, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            type_,
            holds: false,
            reason,
            message: message.into(),
        }
    }
}

/// Records `observation` in `conditions`, keeping the transition time when the status is
/// unchanged.
pub fn set(
    conditions: &mut Vec<Condition>,
    observation: Observation,
    generation: Option<i64>,
    now: Timestamp,
) {
    let status = if observation.holds { "True" } else { "False" };
    let transitioned = match conditions.iter().find(|c| c.type_ == observation.type_) {
        Some(existing) if existing.status == status => existing.last_transition_time.clone(),
        _ => Time(now),
    };
    let condition = Condition {
        type_: observation.type_.into(),
        status: status.into(),
        reason: observation.reason.into(),
        message: observation.message,
        observed_generation: generation,
        last_transition_time: transitioned,
    };
    match conditions.iter_mut().find(|c| c.type_ == condition.type_) {
        Some(existing) => *existing = condition,
        None => conditions.push(condition),
    }
}

/// Oz's `ready`: every condition present is True (and there is at least one).
pub fn all_true(conditions: &[Condition]) -> bool {
    !conditions.is_empty() && conditions.iter().all(|c| c.status == "True")
}

/// Whether a condition of this type is present and True.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == type_ && c.status == "True")
}

/// The conditions that do not hold, in their order: what a user is told is wrong.
pub fn failing(conditions: &[Condition]) -> impl Iterator<Item = &Condition> {
    conditions.iter().filter(|c| c.status != "True")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn transition_time_moves_only_when_the_status_flips() {
        let mut conditions = vec![];
        set(
            &mut conditions,
            Observation::yes("A", "Success", "ok"),
            Some(1),
            at("2026-01-01T00:00:00Z"),
        );
        set(
            &mut conditions,
            Observation::yes("A", "Success", "still ok"),
            Some(2),
            at("2026-01-01T00:05:00Z"),
        );
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].message, "still ok");
        assert_eq!(conditions[0].observed_generation, Some(2));
        assert_eq!(
            conditions[0].last_transition_time.0,
            at("2026-01-01T00:00:00Z")
        );

        set(
            &mut conditions,
            Observation::no("A", "NotFound", "gone"),
            Some(2),
            at("2026-01-01T00:10:00Z"),
        );
        assert_eq!(conditions[0].status, "False");
        assert_eq!(
            conditions[0].last_transition_time.0,
            at("2026-01-01T00:10:00Z")
        );
    }

    #[test]
    fn ready_needs_every_condition_true() {
        let now = at("2026-01-01T00:00:00Z");
        let mut conditions = vec![];
        assert!(!all_true(&conditions));
        set(
            &mut conditions,
            Observation::yes("A", "Success", ""),
            None,
            now,
        );
        assert!(all_true(&conditions));
        set(
            &mut conditions,
            Observation::no("B", "Failure", ""),
            None,
            now,
        );
        assert!(!all_true(&conditions));
        assert!(is_true(&conditions, "A"));
        assert!(!is_true(&conditions, "B"));
        assert!(!is_true(&conditions, "C"));
        let failing: Vec<_> = failing(&conditions).map(|c| c.type_.as_str()).collect();
        assert_eq!(failing, ["B"]);
    }
}
