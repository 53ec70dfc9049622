//! What oz's watch caches keep of an object: the templates, approvals and Secrets they cache
//! drop the same metadata. Requests are parsed without it in the first place
//! ([`crate::WatchedRequest`]).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The annotation that asks oz to revoke a request's grant and keep the request as its record:
/// its value is the user who asks, which oz's webhook checks is the caller, and may only be
/// the requester or a request admin (`ozctl revoke` sets it). The one annotation oz reads on a
/// request, so the one its watches keep ([`crate::WatchedRequest`]).
pub const REVOKE_ANNOTATION: &str = "crds.wizardofoz.co/revoked-by";

/// Who asked for `meta`'s request to be revoked ([`REVOKE_ANNOTATION`]), if anyone.
pub fn revoke_asked_by(meta: &ObjectMeta) -> Option<&str> {
    meta.annotations
        .as_ref()?
        .get(REVOKE_ANNOTATION)
        .map(String::as_str)
        .filter(|user| !user.is_empty())
}

/// The annotation in which `kubectl apply` keeps a whole copy of what it applied.
pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drops from `meta` what no part of oz reads and can be most of a cached object's memory:
/// managedFields (parsed, a tree of every field each manager set: larger than the rest of a
/// cached request, docs/benchmarks.md) and the last-applied annotation (a second copy of the
/// object).
pub fn strip_unread_metadata(meta: &mut ObjectMeta) {
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(LAST_APPLIED_ANNOTATION);
    }
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
}
