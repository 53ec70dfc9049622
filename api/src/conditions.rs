//! The one way oz sets and reads status conditions: setting keeps Oz's semantics
//! (apimachinery's SetStatusCondition), so `lastTransitionTime` moves only when the status
//! flips; reading answers "ready?", "does this hold?" and "what is failing?". And the
//! [`Condition`] they are kept in.

use std::borrow::Cow;

use k8s_openapi::{
    apimachinery::pkg::apis::meta::v1::{self as metav1, Time},
    jiff::Timestamp,
};
use serde::{Deserialize, Deserializer, Serialize};

use crate::{condition_reason, condition_type};

/// A status condition: the JSON and schema of Kubernetes' `metav1.Condition`, kept more
/// compactly. oz-manager holds every request in memory with its six conditions, and they were
/// the largest part of a cached request: 128 bytes each, their type, status and reason each a
/// string of its own (`measure/heap/src/bin/request_cache_bytes.rs`). Here the three words take 16 bytes
/// together when oz knows them all (each is its place in oz's list of words), and a condition
/// takes 72. Read them with [`Condition::type_`], [`Condition::status`] and
/// [`Condition::reason`].
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "metav1::Condition", into = "metav1::Condition")]
pub struct Condition {
    words: Words,
    /// Why, for humans.
    pub message: String,
    /// The generation of the object the condition was set from.
    pub observed_generation: Option<i64>,
    /// When the status last changed.
    pub last_transition_time: Time,
}

/// A condition's type, status and reason.
#[derive(Clone, PartialEq)]
enum Words {
    /// All three are words oz writes: their places in [`WORDS`].
    Known([u8; 3]),
    /// One or more is not (someone else wrote the condition): all three, as read.
    Read(Box<[Box<str>; 3]>),
}

/// The words of a condition's type, status and reason that oz writes. At most 256: a known
/// word is kept as its place in this list.
const WORDS: &[&str] = &[
    "True",
    "False",
    "Unknown",
    condition_type::TARGET_REF_EXISTS,
    condition_type::TEMPLATE_DURATIONS_VALID,
    condition_type::TARGET_TEMPLATE_EXISTS,
    condition_type::ACCESS_DURATIONS_VALID,
    condition_type::ACCESS_STILL_VALID,
    condition_type::ACCESS_RESOURCES_CREATED,
    condition_type::ACCESS_RESOURCES_READY,
    condition_type::APPROVED,
    condition_type::REQUESTER_ALLOWED,
    condition_type::ADOPTED_FROM_OZ,
    condition_type::ACCESS_COMMAND_VALID,
    condition_reason::SUCCESS,
    condition_reason::NOT_FOUND,
    condition_reason::NOT_ACCEPTABLE,
    condition_reason::BAD_REQUEST,
    condition_reason::TIMEOUT,
    condition_reason::FAILURE,
    condition_reason::NOT_YET_READY,
    condition_reason::NOT_ALLOWED,
    condition_reason::PENDING_APPROVAL,
    condition_reason::DENIED,
    condition_reason::BREAK_GLASS,
    condition_reason::OZ_GRANT,
];

impl Words {
    fn new(type_: &str, status: &str, reason: &str) -> Self {
        let place = |word: &str| WORDS.iter().position(|known| *known == word);
        match (place(type_), place(status), place(reason)) {
            // WORDS is far shorter than 256 (a test checks it), so each place fits in a byte.
            (Some(t), Some(s), Some(r)) => Words::Known([t as u8, s as u8, r as u8]),
            _ => Words::Read(Box::new([type_.into(), status.into(), reason.into()])),
        }
    }

    /// The type, status or reason: `i` is 0, 1 or 2.
    fn get(&self, i: usize) -> &str {
        match self {
            Words::Known(places) => WORDS[usize::from(places[i])],
            Words::Read(words) => &words[i],
        }
    }
}

impl Condition {
    /// A condition of `type_`, `status` and `reason`.
    pub fn new(
        type_: &str,
        status: &str,
        reason: &str,
        message: String,
        observed_generation: Option<i64>,
        last_transition_time: Time,
    ) -> Self {
        Self {
            words: Words::new(type_, status, reason),
            message,
            observed_generation,
            last_transition_time,
        }
    }

    /// The condition's type, e.g. `AccessStillValid`.
    pub fn type_(&self) -> &str {
        self.words.get(0)
    }

    /// `True`, `False` or `Unknown`.
    pub fn status(&self) -> &str {
        self.words.get(1)
    }

    /// Why, in one word, e.g. `Success`.
    pub fn reason(&self) -> &str {
        self.words.get(2)
    }
}

/// Field by field, as `metav1::Condition` shows itself.
impl std::fmt::Debug for Condition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Condition")
            .field("type_", &self.type_())
            .field("status", &self.status())
            .field("reason", &self.reason())
            .field("message", &self.message)
            .field("observed_generation", &self.observed_generation)
            .field("last_transition_time", &self.last_transition_time)
            .finish()
    }
}

impl From<metav1::Condition> for Condition {
    fn from(condition: metav1::Condition) -> Self {
        Self::new(
            &condition.type_,
            &condition.status,
            &condition.reason,
            condition.message,
            condition.observed_generation,
            condition.last_transition_time,
        )
    }
}

impl From<Condition> for metav1::Condition {
    fn from(condition: Condition) -> Self {
        Self {
            type_: condition.type_().to_owned(),
            status: condition.status().to_owned(),
            reason: condition.reason().to_owned(),
            message: condition.message,
            observed_generation: condition.observed_generation,
            last_transition_time: condition.last_transition_time,
        }
    }
}

impl schemars::JsonSchema for Condition {
    fn schema_name() -> Cow<'static, str> {
        metav1::Condition::schema_name()
    }

    fn schema_id() -> Cow<'static, str> {
        metav1::Condition::schema_id()
    }

    fn inline_schema() -> bool {
        metav1::Condition::inline_schema()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        metav1::Condition::json_schema(generator)
    }
}

/// Reads a status's conditions into a list of their exact length (a list read from JSON grows
/// by doubling: six conditions would hold room for eight).
pub fn read_exactly<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<Condition>, D::Error> {
    let mut conditions = Vec::<Condition>::deserialize(deserializer)?;
    conditions.shrink_to_fit();
    Ok(conditions)
}

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
    let existing = conditions
        .iter()
        .position(|c| c.type_() == observation.type_);
    let transitioned = match existing.map(|i| &conditions[i]) {
        Some(existing) if existing.status() == status => existing.last_transition_time.clone(),
        _ => Time(now),
    };
    let condition = Condition::new(
        observation.type_,
        status,
        observation.reason,
        observation.message,
        generation,
        transitioned,
    );
    match existing {
        Some(i) => conditions[i] = condition,
        None => conditions.push(condition),
    }
}

/// Oz's `ready`: every condition present is True (and there is at least one).
pub fn all_true(conditions: &[Condition]) -> bool {
    !conditions.is_empty() && conditions.iter().all(|c| c.status() == "True")
}

/// Whether a condition of this type is present and True.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    conditions
        .iter()
        .any(|c| c.type_() == type_ && c.status() == "True")
}

/// The conditions that do not hold, in their order: what a user is told is wrong.
pub fn failing(conditions: &[Condition]) -> impl Iterator<Item = &Condition> {
    conditions.iter().filter(|c| c.status() != "True")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn a_condition_reads_and_writes_the_json_of_kubernetes_condition() {
        let json = serde_json::json!([
            {"type": "AccessStillValid", "status": "True", "reason": "Success",
             "message": "valid until 10:00", "lastTransitionTime": "2026-01-01T00:00:00Z",
             "observedGeneration": 3},
            {"type": "SomeoneElses", "status": "Maybe", "reason": "Because", "message": "",
             "lastTransitionTime": "2026-01-01T00:00:00Z"},
        ]);
        let ours: Vec<Condition> = serde_json::from_value(json.clone()).unwrap();
        let theirs: Vec<metav1::Condition> = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(serde_json::to_value(&ours).unwrap(), json);
        assert_eq!(
            serde_json::to_value(&ours).unwrap(),
            serde_json::to_value(&theirs).unwrap()
        );
        // oz's words are kept as their places in WORDS; a condition with a word oz does not
        // write keeps all three as read.
        assert!(matches!(ours[0].words, Words::Known(_)));
        assert_eq!(
            (ours[0].type_(), ours[0].status(), ours[0].reason()),
            ("AccessStillValid", "True", "Success")
        );
        assert!(matches!(ours[1].words, Words::Read(_)));
        assert_eq!(
            (ours[1].type_(), ours[1].status(), ours[1].reason()),
            ("SomeoneElses", "Maybe", "Because")
        );
        assert_eq!(
            <Condition as schemars::JsonSchema>::json_schema(
                &mut schemars::SchemaGenerator::default()
            ),
            <metav1::Condition as schemars::JsonSchema>::json_schema(
                &mut schemars::SchemaGenerator::default()
            ),
        );
    }

    #[test]
    fn a_status_holds_its_conditions_in_a_list_of_their_length() {
        let condition = serde_json::json!({"type": "A", "status": "True", "reason": "Success",
            "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"});
        // From text, as a watch delivers it: a list read from a JSON value knows its length.
        let text = serde_json::json!({"conditions": vec![condition; 6]}).to_string();
        let status: crate::RequestStatus = serde_json::from_str(&text).unwrap();
        assert_eq!(status.conditions.len(), 6);
        assert_eq!(status.conditions.capacity(), 6);
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
        assert_eq!(conditions[0].status(), "False");
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
        let failing: Vec<_> = failing(&conditions).map(Condition::type_).collect();
        assert_eq!(failing, ["B"]);
    }

    #[test]
    fn every_word_oz_writes_is_kept_in_a_byte() {
        // A place in WORDS must fit in a u8, and no word may be listed twice (the second
        // would never be found).
        assert!(WORDS.len() <= 256);
        let unique: std::collections::BTreeSet<_> = WORDS.iter().collect();
        assert_eq!(unique.len(), WORDS.len());
        // What the controllers write, and what they read back, without a copy of any word.
        for type_ in [
            condition_type::REQUESTER_ALLOWED,
            condition_type::ADOPTED_FROM_OZ,
            condition_type::ACCESS_COMMAND_VALID,
        ] {
            let words = Words::new(type_, "False", condition_reason::OZ_GRANT);
            assert!(matches!(words, Words::Known(_)), "{type_}");
        }
    }

    #[test]
    fn a_condition_takes_72_bytes() {
        // Six of them per cached request: 432 bytes, where they took 768 as four strings and
        // three copy-on-write words each (oz-manager's memory at 10,000 grants).
        assert_eq!(std::mem::size_of::<Condition>(), 72);
    }
}
