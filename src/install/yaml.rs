//! The install as multi-document YAML, each object under its comment.

use kube::api::DynamicObject;
use serde::Serialize;

use super::ManifestError;

/// Comment lines stay under this width (after the `# `).
pub(super) const COMMENT_WIDTH: usize = 96;

/// `text` wrapped at word boundaries into lines of at most `width` characters (a longer word
/// gets a line of its own), the first prefixed with `first`, the rest with `rest`.
pub(super) fn wrap(text: &str, width: usize, first: &str, rest: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = first.to_string();
    let mut empty = true;
    for word in text.split_whitespace() {
        if !empty && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::replace(&mut line, rest.to_string()));
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    lines.push(line);
    lines
}

/// A typed object that can be turned into a [`DynamicObject`].
pub(super) trait ErasedObject {
    fn to_dynamic(&self) -> Result<DynamicObject, ManifestError>;
}

impl<K: kube::Resource<DynamicType = ()> + Serialize> ErasedObject for K {
    fn to_dynamic(&self) -> Result<DynamicObject, ManifestError> {
        let json = |source| ManifestError::Json {
            kind: K::kind(&()).to_string(),
            source,
        };
        let mut value = serde_json::to_value(self).map_err(json)?;
        // Typed objects leave apiVersion and kind to the client; a manifest needs them.
        value["apiVersion"] = K::api_version(&()).into();
        value["kind"] = K::kind(&()).into();
        serde_json::from_value(value).map_err(json)
    }
}
