//! One object of the install under its comment, and what every object shares: the install's
//! labels and metadata, and how a comment is wrapped.

use std::collections::BTreeMap;

use kube::api::{DynamicObject, ObjectMeta};
use serde::Serialize;

use super::{error::ManifestError, options::InstallOptions};

/// One object of the install and the comment rendered above it: what it is for and, for RBAC,
/// why each rule exists.
#[derive(Clone, Debug)]
pub struct Manifest {
    /// Comment lines, without the `# `.
    pub comment: Vec<String>,
    /// The object, with `apiVersion` and `kind`.
    pub object: DynamicObject,
}

impl Manifest {
    /// `object` under `comment`.
    pub(super) fn new(
        comment: Vec<String>,
        object: &dyn ErasedObject,
    ) -> Result<Self, ManifestError> {
        Ok(Manifest {
            comment,
            object: object.to_dynamic()?,
        })
    }
}

/// The labels of every object oz installs.
pub(super) fn labels(options: &InstallOptions) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), "oz".to_string()),
        (
            "app.kubernetes.io/instance".to_string(),
            options.name.clone(),
        ),
    ])
}

/// An object's metadata: its name, its namespace (none when cluster-scoped) and the install's labels.
pub(super) fn meta(options: &InstallOptions, name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: namespace.map(Into::into),
        labels: Some(labels(options)),
        ..Default::default()
    }
}

/// The labels the Deployment's pods carry and the Services select.
pub(super) fn selector_labels(options: &InstallOptions) -> BTreeMap<String, String> {
    let mut labels = labels(options);
    labels.insert("app.kubernetes.io/component".into(), "manager".into());
    labels
}

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
