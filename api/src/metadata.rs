//! What oz's watch caches keep of an object: the controllers' cache of requests and the
//! webhooks' cache of requests and templates both drop the same metadata, and the controllers'
//! requests their labels and annotations too.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The annotation in which `kubectl apply` keeps a whole copy of what it applied.
pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drops from `meta` what no part of oz reads and can be most of a cached object's memory:
/// managedFields (parsed, a tree of every field each manager set; oz-bench measured ~30 KB per
/// cached request) and the last-applied annotation (a second copy of the object).
pub fn strip_unread_metadata(meta: &mut ObjectMeta) {
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(LAST_APPLIED_ANNOTATION);
    }
}

/// Drops from a cached request's `meta` what [`strip_unread_metadata`] drops, and its labels and
/// annotations: no part of oz reads a request's (a template's annotations are read, a Secret's
/// labels too, so this is for requests only), and one label alone costs a cached request
/// ~0.55 KB, a B-tree node of 11 slots. oz-bench labels every request it makes, as users and
/// their tools may. oz never writes a request back whole, so nothing dropped here is lost.
pub fn strip_unread_request_metadata(meta: &mut ObjectMeta) {
    strip_unread_metadata(meta);
    meta.labels = None;
    meta.annotations = None;
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

    use super::*;

    #[test]
    fn managed_fields_and_the_last_applied_copy_go_and_nothing_else() {
        let mut meta = ObjectMeta {
            name: Some("r".into()),
            managed_fields: Some(vec![ManagedFieldsEntry::default()]),
            annotations: Some(BTreeMap::from([
                (LAST_APPLIED_ANNOTATION.to_string(), "{}".to_string()),
                ("team".to_string(), "payments".to_string()),
            ])),
            ..Default::default()
        };
        strip_unread_metadata(&mut meta);
        assert_eq!(meta.managed_fields, None);
        assert_eq!(
            meta.annotations,
            Some(BTreeMap::from([(
                "team".to_string(),
                "payments".to_string()
            )]))
        );
        assert_eq!(meta.name.as_deref(), Some("r"));
    }

    #[test]
    fn a_request_keeps_no_labels_or_annotations_and_everything_oz_reads() {
        let mut meta = ObjectMeta {
            name: Some("r".into()),
            namespace: Some("shop".into()),
            uid: Some("u-1".into()),
            resource_version: Some("7".into()),
            generation: Some(2),
            labels: Some(BTreeMap::from([("team".into(), "payments".into())])),
            annotations: Some(BTreeMap::from([("note".into(), "x".into())])),
            managed_fields: Some(vec![ManagedFieldsEntry::default()]),
            ..Default::default()
        };
        let kept = ObjectMeta {
            labels: None,
            annotations: None,
            managed_fields: None,
            ..meta.clone()
        };
        strip_unread_request_metadata(&mut meta);
        assert_eq!(meta, kept);
    }
}
