//! One object of the install ([`Manifest`]), and the metadata and labels every object carries.

use std::collections::BTreeMap;

use kube::api::{DynamicObject, ObjectMeta};

use super::{InstallOptions, error::ManifestError, yaml::ErasedObject};

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
