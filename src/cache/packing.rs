//! The byte format of a packed request ([`super::requests`]): each `put_` function appends one
//! value, and [`Reader`] reads them back in the same order.
//!
//! What repeats across requests is packed as a byte: the words of conditions (their types,
//! statuses and reasons) and the conditions' messages seen in more than one request, each as
//! its place in a table of its own. Times and generations are variable-length integers: a
//! time in whole seconds (as the apiserver writes them) takes 6 bytes, not 13.

use std::{
    collections::VecDeque,
    sync::{LazyLock, Mutex, RwLock},
};

use k8s_openapi::{
    apimachinery::pkg::apis::meta::v1::{self as metav1, OwnerReference, Time},
    jiff::Timestamp,
};
use oz_api::Condition;

/// Words of conditions' types, statuses and reasons seen so far, each packed as its place
/// here. oz writes a few dozen; past 255 (someone else's conditions), a word is packed whole.
static WORDS: LazyLock<RwLock<Vec<Box<str>>>> = LazyLock::new(RwLock::default);

/// Conditions' messages seen in more than one request, each packed as its place here. oz's
/// messages say the same few things to every request ("Found Target Template", who is in which
/// allowed group, the duration granted); the one or two that name a request's own grant are
/// never seen twice, so they never take a place. Past 255, a message is packed whole.
static MESSAGES: LazyLock<RwLock<Vec<Box<str>>>> = LazyLock::new(RwLock::default);

/// The messages seen once lately, not yet in [`MESSAGES`]: one seen again while here takes a
/// place there.
static SEEN_ONCE: LazyLock<Mutex<VecDeque<Box<str>>>> = LazyLock::new(Mutex::default);

/// How many messages seen once are remembered: more than the messages of one request, and
/// than those of the few requests reconciled at once.
const SEEN_ONCE_CAPACITY: usize = 64;

/// Marks a word or message packed whole.
const WHOLE: u8 = u8::MAX;

/// `text`'s place in `table`, added if it is not there yet and `may_add` says so, while the
/// table has room.
fn place_in(
    table: &RwLock<Vec<Box<str>>>,
    text: &str,
    may_add: impl FnOnce() -> bool,
) -> Option<u8> {
    let place = {
        let table = table.read().unwrap_or_else(|e| e.into_inner());
        table.iter().position(|t| &**t == text)
    };
    let place = place.or_else(|| {
        if !may_add() {
            return None;
        }
        let mut table = table.write().unwrap_or_else(|e| e.into_inner());
        if let Some(place) = table.iter().position(|t| &**t == text) {
            return Some(place);
        }
        (table.len() < usize::from(WHOLE)).then(|| {
            table.push(text.into());
            table.len() - 1
        })
    });
    place.map(|place| place as u8)
}

/// Packs `text` as its place in `table`, or whole.
fn put_placed(packed: &mut Vec<u8>, place: Option<u8>, text: &str) {
    match place {
        Some(place) => packed.push(place),
        None => {
            packed.push(WHOLE);
            put_str(packed, text);
        }
    }
}

fn put_word(packed: &mut Vec<u8>, word: &str) {
    put_placed(packed, place_in(&WORDS, word, || true), word);
}

fn put_message(packed: &mut Vec<u8>, message: &str) {
    let seen_before = || {
        let mut seen = SEEN_ONCE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(at) = seen.iter().position(|m| &**m == message) {
            seen.remove(at);
            return true;
        }
        if seen.len() == SEEN_ONCE_CAPACITY {
            seen.pop_front();
        }
        seen.push_back(message.into());
        false
    };
    put_placed(packed, place_in(&MESSAGES, message, seen_before), message);
}

pub(super) fn put_conditions(packed: &mut Vec<u8>, conditions: &[Condition]) {
    put_len(packed, conditions.len());
    for condition in conditions {
        put_word(packed, condition.type_());
        put_word(packed, condition.status());
        put_word(packed, condition.reason());
        put_message(packed, &condition.message);
        put_time(packed, Some(&condition.last_transition_time));
        match condition.observed_generation {
            Some(generation) => {
                packed.push(1);
                put_varint(packed, zigzag(generation));
            }
            None => packed.push(0),
        }
    }
}

pub(super) fn put_opt_str(packed: &mut Vec<u8>, text: Option<&str>) {
    match text {
        Some(text) => {
            packed.push(1);
            put_str(packed, text);
        }
        None => packed.push(0),
    }
}

/// A time: absent (0), in whole seconds (1), or with its nanoseconds (2).
pub(super) fn put_time(packed: &mut Vec<u8>, time: Option<&Time>) {
    match time {
        Some(Time(at)) => {
            let nanos = at.subsec_nanosecond();
            packed.push(if nanos == 0 { 1 } else { 2 });
            put_varint(packed, zigzag(at.as_second()));
            if nanos != 0 {
                packed.extend_from_slice(&nanos.to_le_bytes());
            }
        }
        None => packed.push(0),
    }
}

/// Owner references, their apiVersion and kind as words (a request's owner is its template).
pub(super) fn put_owners(packed: &mut Vec<u8>, owners: &[OwnerReference]) {
    put_len(packed, owners.len());
    for owner in owners {
        put_word(packed, &owner.api_version);
        put_word(packed, &owner.kind);
        put_str(packed, &owner.name);
        put_str(packed, &owner.uid);
        let flag = |value: Option<bool>| match value {
            None => 0,
            Some(false) => 1,
            Some(true) => 2,
        };
        packed.push(flag(owner.controller) | flag(owner.block_owner_deletion) << 2);
    }
}

/// A length: one byte below 255, else 255 and four bytes.
fn put_len(packed: &mut Vec<u8>, len: usize) {
    match u8::try_from(len) {
        Ok(short) if short < u8::MAX => packed.push(short),
        _ => {
            packed.push(u8::MAX);
            packed.extend_from_slice(&(len as u32).to_le_bytes());
        }
    }
}

pub(super) fn put_bytes(packed: &mut Vec<u8>, bytes: &[u8]) {
    put_len(packed, bytes.len());
    packed.extend_from_slice(bytes);
}

pub(super) fn put_str(packed: &mut Vec<u8>, text: &str) {
    put_bytes(packed, text.as_bytes());
}

/// `value` seven bits a byte, lowest first, the high bit set on every byte but the last.
fn put_varint(packed: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        packed.push(value as u8 | 0x80);
        value >>= 7;
    }
    packed.push(value as u8);
}

/// A signed value as an unsigned one whose size follows its magnitude: 0, -1, 1, -2, ….
fn zigzag(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

fn unzigzag(value: u64) -> i64 {
    (value >> 1) as i64 ^ -((value & 1) as i64)
}

/// Reads back what the `put_` functions packed, in the same order. The buffer is only ever
/// one they wrote.
pub(super) struct Reader<'a>(pub(super) &'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> &'a [u8] {
        let (taken, rest) = self.0.split_at(n);
        self.0 = rest;
        taken
    }

    pub(super) fn byte(&mut self) -> u8 {
        self.take(1)[0]
    }

    fn len(&mut self) -> usize {
        match self.byte() {
            u8::MAX => u32::from_le_bytes(self.take(4).try_into().unwrap_or_default()) as usize,
            short => usize::from(short),
        }
    }

    pub(super) fn bytes(&mut self) -> &'a [u8] {
        let len = self.len();
        self.take(len)
    }

    pub(super) fn str(&mut self) -> &'a str {
        std::str::from_utf8(self.bytes()).unwrap_or_default()
    }

    fn varint(&mut self) -> u64 {
        let mut value = 0;
        for shift in (0..64).step_by(7) {
            let byte = self.byte();
            value |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                break;
            }
        }
        value
    }

    pub(super) fn opt_str(&mut self) -> Option<String> {
        (self.byte() == 1).then(|| self.str().to_string())
    }

    pub(super) fn time(&mut self) -> Option<Timestamp> {
        let form = self.byte();
        (form != 0).then(|| {
            let seconds = unzigzag(self.varint());
            let nanos = match form {
                1 => 0,
                _ => i32::from_le_bytes(self.take(4).try_into().unwrap_or_default()),
            };
            Timestamp::new(seconds, nanos).unwrap_or_default()
        })
    }

    pub(super) fn owners(&mut self) -> Vec<OwnerReference> {
        let count = self.len();
        (0..count)
            .map(|_| {
                let (api_version, kind) = (self.word(), self.word());
                let (name, uid) = (self.str().to_string(), self.str().to_string());
                let flags = self.byte();
                let flag = |bits: u8| match bits & 3 {
                    0 => None,
                    1 => Some(false),
                    _ => Some(true),
                };
                OwnerReference {
                    api_version,
                    kind,
                    name,
                    uid,
                    controller: flag(flags),
                    block_owner_deletion: flag(flags >> 2),
                }
            })
            .collect()
    }

    fn placed(&mut self, table: &RwLock<Vec<Box<str>>>) -> String {
        match self.byte() {
            WHOLE => self.str().to_string(),
            place => {
                let table = table.read().unwrap_or_else(|e| e.into_inner());
                table
                    .get(usize::from(place))
                    .map(|t| t.to_string())
                    .unwrap_or_default()
            }
        }
    }

    fn word(&mut self) -> String {
        self.placed(&WORDS)
    }

    pub(super) fn conditions(&mut self) -> Vec<Condition> {
        let count = self.len();
        let mut conditions = Vec::with_capacity(count);
        for _ in 0..count {
            let (type_, status, reason) = (self.word(), self.word(), self.word());
            let message = self.placed(&MESSAGES);
            let at = self.time().unwrap_or_default();
            let observed_generation = (self.byte() == 1).then(|| unzigzag(self.varint()));
            conditions.push(Condition::from(metav1::Condition {
                type_,
                status,
                reason,
                message,
                last_transition_time: Time(at),
                observed_generation,
            }));
        }
        conditions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_and_times_come_back_as_packed_small_ones_in_few_bytes() {
        for value in [0, 1, -1, 63, -64, 64, 1_800_000_000, i64::MAX, i64::MIN] {
            let mut packed = Vec::new();
            put_varint(&mut packed, zigzag(value));
            assert_eq!(unzigzag(Reader(&packed).varint()), value);
        }
        let size = |value: i64| {
            let mut packed = Vec::new();
            put_varint(&mut packed, zigzag(value));
            packed.len()
        };
        assert_eq!((size(1), size(-64), size(1_800_000_000)), (1, 1, 5));

        let whole: Timestamp = "2026-11-23T08:00:00Z".parse().unwrap();
        let fine: Timestamp = "2026-11-23T08:00:00.5Z".parse().unwrap();
        let early: Timestamp = "1969-07-20T20:17:40Z".parse().unwrap();
        for (time, bytes) in [
            (Some(whole), 6),
            (Some(fine), 10),
            (Some(early), 5),
            (None, 1),
        ] {
            let mut packed = Vec::new();
            put_time(&mut packed, time.map(Time).as_ref());
            assert_eq!(packed.len(), bytes, "{time:?}");
            assert_eq!(Reader(&packed).time(), time);
        }
    }

    #[test]
    fn a_message_seen_in_two_requests_is_packed_as_a_byte_and_one_seen_once_whole() {
        let pack = |message: &str| {
            let mut packed = Vec::new();
            put_message(&mut packed, message);
            packed
        };
        let unique = "Success. Role grant-00042-0c7b2a6e, RoleBinding grant-00042-0c7b2a6e created";
        let first = pack("a message repeated by every request, for this test");
        let again = pack("a message repeated by every request, for this test");
        let once = pack(unique);
        assert!(first.len() > 40 && once.len() > 40, "packed whole");
        assert_eq!(again.len(), 1);
        for packed in [first, again, once] {
            let message = Reader(&packed).placed(&MESSAGES);
            assert!(message == unique || message.contains("repeated"));
        }
        assert!(!MESSAGES.read().unwrap().iter().any(|m| &**m == unique));
    }
}
