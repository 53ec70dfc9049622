//! What an action prints: a field path resolved against `struct{ Metadata metav1.ObjectMeta }`
//! while parsing, and rendered against the target pod's metadata as Go prints it.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{Position, RenderError};

/// What Go's `text/template` prints for a value that does not exist.
const NO_VALUE: &str = "<no value>";

/// What one action prints.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Value {
    /// A quoted string constant.
    Literal(String),
    /// A scalar field of the metadata.
    Scalar(ScalarField),
    /// A whole labels or annotations map.
    Map(MapField),
    /// One entry of a map, and what to print when the key is missing.
    MapEntry {
        map: MapField,
        key: String,
        when_missing: &'static str,
    },
}

/// The scalar `ObjectMeta` fields that can be printed, by their Go names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ScalarField {
    Name,
    GenerateName,
    Namespace,
    Uid,
    ResourceVersion,
    Generation,
}

/// The map-valued `ObjectMeta` fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum MapField {
    Labels,
    Annotations,
}

impl Value {
    pub(super) fn render_into(&self, pod: &ObjectMeta, out: &mut String) {
        match self {
            Self::Literal(text) => out.push_str(text),
            Self::Scalar(field) => out.push_str(&field.read(pod)),
            Self::Map(field) => {
                // Go's fmt prints a map as map[k1:v1 k2:v2] with sorted keys, and byte-wise
                // sorted is BTreeMap's order too.
                let entries: Vec<String> = field
                    .read(pod)
                    .into_iter()
                    .flatten()
                    .map(|(key, value)| format!("{key}:{value}"))
                    .collect();
                out.push_str("map[");
                out.push_str(&entries.join(" "));
                out.push(']');
            }
            Self::MapEntry {
                map,
                key,
                when_missing,
            } => out.push_str(
                map.read(pod)
                    .and_then(|entries| entries.get(key))
                    .map_or(*when_missing, String::as_str),
            ),
        }
    }
}

impl ScalarField {
    /// Go names of the scalar fields, for parsing and for hints.
    const ALL: [(&'static str, Self); 6] = [
        ("Name", Self::Name),
        ("GenerateName", Self::GenerateName),
        ("Namespace", Self::Namespace),
        ("UID", Self::Uid),
        ("ResourceVersion", Self::ResourceVersion),
        ("Generation", Self::Generation),
    ];

    /// The value as Go prints it: unset strings are empty, an unset generation is 0.
    fn read(self, pod: &ObjectMeta) -> String {
        let text = |field: &Option<String>| field.clone().unwrap_or_default();
        match self {
            Self::Name => text(&pod.name),
            Self::GenerateName => text(&pod.generate_name),
            Self::Namespace => text(&pod.namespace),
            Self::Uid => text(&pod.uid),
            Self::ResourceVersion => text(&pod.resource_version),
            Self::Generation => pod.generation.unwrap_or_default().to_string(),
        }
    }
}

impl MapField {
    fn read(self, pod: &ObjectMeta) -> Option<&BTreeMap<String, String>> {
        match self {
            Self::Labels => pod.labels.as_ref(),
            Self::Annotations => pod.annotations.as_ref(),
        }
    }
}

/// `ObjectMeta` fields Go has but oz cannot print the way Go would (timestamps, pointers and
/// lists of structs print Go-internal representations nobody should depend on).
const UNPRINTABLE_FIELDS: [&str; 7] = [
    "SelfLink",
    "CreationTimestamp",
    "DeletionTimestamp",
    "DeletionGracePeriodSeconds",
    "OwnerReferences",
    "Finalizers",
    "ManagedFields",
];

/// Resolves a field path against `struct{ Metadata metav1.ObjectMeta }`.
pub(super) fn resolve_field(
    template: &str,
    at: usize,
    names: &[String],
) -> Result<Value, RenderError> {
    let position = Position::of(template, at);
    let path = format!(".{}", names.join("."));
    let unknown = |hint: String| RenderError::UnknownField {
        at: position,
        path: path.clone(),
        hint,
    };
    let unsupported = |construct: String| RenderError::Unsupported {
        at: position,
        construct,
    };

    let (top, field, below) = match names {
        [] => return Err(unsupported("`.` (the whole template data)".to_owned())),
        [top, ..] if top != "Metadata" => {
            let hint = if top.eq_ignore_ascii_case("metadata") {
                "Go field names are case-sensitive: write .Metadata".to_owned()
            } else {
                "the only top-level field is .Metadata, the target pod's metadata".to_owned()
            };
            return Err(unknown(hint));
        }
        [_] => {
            return Err(unsupported(
                ".Metadata on its own (print one of its fields, such as .Metadata.Name)".to_owned(),
            ));
        }
        [top, field, below @ ..] => (top, field.as_str(), below),
    };

    let map = match field {
        "Labels" => Some(MapField::Labels),
        "Annotations" => Some(MapField::Annotations),
        _ => None,
    };
    if let Some(map) = map {
        return match below {
            [] => Ok(Value::Map(map)),
            [key] => Ok(Value::MapEntry {
                map,
                key: key.clone(),
                when_missing: NO_VALUE,
            }),
            [..] => Err(unsupported(format!(
                "{path} (a label or annotation value is a string and has no fields)"
            ))),
        };
    }

    if let Some((name, scalar)) = ScalarField::ALL.iter().find(|(name, _)| *name == field) {
        return match below {
            [] => Ok(Value::Scalar(*scalar)),
            [..] => Err(unknown(format!(
                ".{top}.{name} is a string and has no fields"
            ))),
        };
    }
    if UNPRINTABLE_FIELDS.contains(&field) {
        return Err(unsupported(format!(".{top}.{field}")));
    }

    let known = ScalarField::ALL
        .iter()
        .map(|(name, _)| *name)
        .chain(["Labels", "Annotations"]);
    let hint = match known.clone().find(|name| name.eq_ignore_ascii_case(field)) {
        Some(name) => format!("Go field names are case-sensitive: write .{top}.{name}"),
        None => format!(
            "the fields oz can print are {}",
            known
                .map(|name| format!(".{top}.{name}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    Err(unknown(hint))
}
