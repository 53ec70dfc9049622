//! The form in which oz's watches parse a request: straight from the apiserver's JSON into the
//! request, without the metadata no part of oz reads ever being allocated.
//!
//! A request parsed whole holds several times the heap of the same request without its
//! managedFields (a tree of every field each manager set), labels and annotations
//! (`measure/heap/src/bin/request_cache_bytes.rs` counts both; docs/benchmarks.md has the
//! figures). Dropping them after parsing kept the caches small, but every LIST page and watch
//! event still made the whole tree first, on oz-manager's peak after a restart, and its freed
//! pieces left holes among the requests kept. Skipped as the JSON is read, they cost a scan and
//! nothing else.
//!
//! oz never writes a request back whole (status is applied, everything else patched), so nothing
//! skipped here is lost; no part of oz reads a request's labels, or its annotations but
//! [`REVOKE_ANNOTATION`] and [`EXTEND_ANNOTATION`], the ones kept (a template's annotations are
//! read, so templates are parsed whole).

use std::{borrow::Cow, collections::BTreeMap};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::{Resource, runtime::watcher};
use serde::{Deserialize, Deserializer};

use crate::{AccessRequest, EXTEND_ANNOTATION, REVOKE_ANNOTATION, RequestStatus};

/// A request of kind `R` as a watch parses it: everything but its metadata's managedFields,
/// labels and annotations. Watch this type, and take the request out of each event with
/// [`WatchedRequest::into_request_event`].
#[derive(Clone, Debug)]
pub struct WatchedRequest<R>(pub R);

impl<R: AccessRequest> WatchedRequest<R> {
    /// The request inside each object of `event`.
    pub fn into_request_event(event: watcher::Event<Self>) -> watcher::Event<R> {
        use watcher::Event::*;
        match event {
            Apply(Self(r)) => Apply(r),
            Delete(Self(r)) => Delete(r),
            Init => Init,
            InitApply(Self(r)) => InitApply(r),
            InitDone => InitDone,
        }
    }
}

/// Every field of `ObjectMeta` but `managedFields`, `labels` and the annotations other than
/// [`REVOKE_ANNOTATION`] and [`EXTEND_ANNOTATION`], which serde skips without building them.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct KeptMetadata {
    #[serde(default, deserialize_with = "revoke_annotation_only")]
    annotations: Option<BTreeMap<String, String>>,
    creation_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
    generate_name: Option<String>,
    generation: Option<i64>,
    name: Option<String>,
    namespace: Option<String>,
    owner_references: Option<Vec<OwnerReference>>,
    resource_version: Option<String>,
    self_link: Option<String>,
    uid: Option<String>,
}

impl From<KeptMetadata> for ObjectMeta {
    fn from(kept: KeptMetadata) -> Self {
        ObjectMeta {
            creation_timestamp: kept.creation_timestamp,
            deletion_grace_period_seconds: kept.deletion_grace_period_seconds,
            deletion_timestamp: kept.deletion_timestamp,
            finalizers: kept.finalizers,
            generate_name: kept.generate_name,
            generation: kept.generation,
            name: kept.name,
            namespace: kept.namespace,
            owner_references: kept.owner_references,
            resource_version: kept.resource_version,
            self_link: kept.self_link,
            uid: kept.uid,
            annotations: kept.annotations,
            labels: None,
            managed_fields: None,
        }
    }
}

/// The annotations map, with [`REVOKE_ANNOTATION`] and [`EXTEND_ANNOTATION`] alone kept: every
/// other value is skipped as it is read; `None` without either.
fn revoke_annotation_only<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<BTreeMap<String, String>>, D::Error> {
    struct Visitor;
    impl<'de> serde::de::Visitor<'de> for Visitor {
        type Value = Option<BTreeMap<String, String>>;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a map of annotations")
        }

        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut map: A,
        ) -> Result<Self::Value, A::Error> {
            let mut kept = None;
            while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                if key == REVOKE_ANNOTATION || key == EXTEND_ANNOTATION {
                    let value: String = map.next_value()?;
                    kept.get_or_insert_with(BTreeMap::new)
                        .insert(key.into_owned(), value);
                } else {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
            Ok(kept)
        }
    }
    deserializer.deserialize_any(Visitor)
}

/// A request's three parts; `apiVersion` and `kind` are skipped (the type says them).
#[derive(Deserialize)]
struct Parts<Spec> {
    metadata: KeptMetadata,
    spec: Spec,
    status: Option<RequestStatus>,
}

impl<'de, R: AccessRequest> Deserialize<'de> for WatchedRequest<R> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let parts = Parts::<R::Spec>::deserialize(deserializer)?;
        Ok(Self(R::from_parts(
            parts.metadata.into(),
            parts.spec,
            parts.status,
        )))
    }
}

/// Listed and watched where requests of kind `R` are.
impl<R: AccessRequest> Resource for WatchedRequest<R> {
    type DynamicType = ();
    type Scope = <R as Resource>::Scope;

    fn kind(dt: &()) -> Cow<'_, str> {
        R::kind(dt)
    }

    fn group(dt: &()) -> Cow<'_, str> {
        R::group(dt)
    }

    fn version(dt: &()) -> Cow<'_, str> {
        R::version(dt)
    }

    fn plural(dt: &()) -> Cow<'_, str> {
        R::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        self.0.meta()
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.0.meta_mut()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{ExecAccessRequest, PodAccessRequest, strip_unread_metadata};

    /// A request with every metadata field set, as the apiserver might send it.
    fn request_json(kind: &str) -> serde_json::Value {
        let t = "2026-11-23T08:00:00Z";
        json!({
            "apiVersion": "crds.wizardofoz.co/v1alpha1",
            "kind": kind,
            "metadata": {
                "name": "grant-1", "namespace": "shop", "generateName": "grant-",
                "uid": "0c7b2a6e-5d7f-4a8b-9b1e-3f2d8c1a7e44", "resourceVersion": "1234567",
                "selfLink": "/apis/x", "generation": 2, "creationTimestamp": t,
                "deletionTimestamp": t, "deletionGracePeriodSeconds": 0,
                "finalizers": ["crds.wizardofoz.co/grant"],
                "labels": {"team": "payments"},
                "annotations": {"note": "x", "kubectl.kubernetes.io/last-applied-configuration": "{}"},
                "ownerReferences": [{"apiVersion": "crds.wizardofoz.co/v1alpha1", "kind": "ExecAccessTemplate",
                    "name": "app", "uid": "9d1c7f2e", "controller": true, "blockOwnerDeletion": true}],
                "managedFields": [{"manager": "oz", "operation": "Apply", "apiVersion": "crds.wizardofoz.co/v1alpha1",
                    "time": t, "fieldsType": "FieldsV1", "subresource": "status",
                    "fieldsV1": {"f:status": {"f:phase": {}}}}],
            },
            "spec": {"templateName": "app", "duration": "2h", "reason": "bench",
                     "requester": {"username": "alice", "uid": "6b1e", "groups": ["devs"]}},
            "status": {
                "conditions": [{"type": "AccessStillValid", "status": "True", "reason": "Success",
                    "message": "valid", "lastTransitionTime": t, "observedGeneration": 2}],
                "ready": true, "podName": "app-1", "phase": "Ready", "expiresAt": t,
            },
        })
    }

    /// `json` as a watch parses it, checked against the request parsed whole and then stripped
    /// of what a watch skips: everything else is kept, field for field (the types have no
    /// PartialEq, so they are compared as JSON).
    fn watched_keeps_all_it_reads<R: AccessRequest>(json: &serde_json::Value) -> R {
        let watched: WatchedRequest<R> = serde_json::from_value(json.clone()).unwrap();
        let mut expected: R = serde_json::from_value(json.clone()).unwrap();
        let meta = expected.meta_mut();
        strip_unread_metadata(meta);
        meta.labels = None;
        if let Some(annotations) = meta.annotations.as_mut() {
            annotations.retain(|key, _| key == REVOKE_ANNOTATION || key == EXTEND_ANNOTATION);
        }
        if meta.annotations.as_ref().is_some_and(BTreeMap::is_empty) {
            meta.annotations = None;
        }
        assert_eq!(
            serde_json::to_value(&watched.0).unwrap(),
            serde_json::to_value(&expected).unwrap()
        );
        watched.0
    }

    #[test]
    fn a_watched_request_is_the_request_without_managed_fields_labels_or_annotations() {
        let exec: ExecAccessRequest =
            watched_keeps_all_it_reads(&request_json("ExecAccessRequest"));
        assert_eq!(exec.metadata.finalizers.as_ref().map(Vec::len), Some(1));
        assert_eq!(exec.metadata.managed_fields, None);
        assert_eq!(exec.metadata.labels, None);
        assert_eq!(exec.metadata.annotations, None);
        let _: PodAccessRequest = watched_keeps_all_it_reads(&request_json("PodAccessRequest"));
    }

    /// The revoke and extension annotations are the ones a watch keeps: oz reads them to
    /// revoke and to extend.
    #[test]
    fn a_watched_request_keeps_the_revoke_and_extension_annotations_alone() {
        let mut json = request_json("ExecAccessRequest");
        json["metadata"]["annotations"][REVOKE_ANNOTATION] = json!("alice");
        json["metadata"]["annotations"][EXTEND_ANNOTATION] =
            json!(r#"[{"by":"30m","askedBy":"alice"}]"#);
        let exec: ExecAccessRequest = watched_keeps_all_it_reads(&json);
        assert_eq!(crate::revoke_asked_by(&exec.metadata), Some("alice"));
        let asks = crate::extension::extension_asks(&exec.metadata).unwrap();
        assert_eq!(asks[0].by, "30m");
        assert_eq!(
            exec.metadata.annotations.as_ref().map(BTreeMap::len),
            Some(2)
        );
        json["metadata"]["annotations"] = json!(null);
        let exec: ExecAccessRequest = watched_keeps_all_it_reads(&json);
        assert_eq!(exec.metadata.annotations, None);
    }

    #[test]
    fn a_request_without_status_or_metadata_fields_parses() {
        let json = json!({
            "apiVersion": "crds.wizardofoz.co/v1alpha1", "kind": "ExecAccessRequest",
            "metadata": {"name": "r"}, "spec": {"templateName": "app"},
        });
        let watched: WatchedRequest<ExecAccessRequest> = serde_json::from_value(json).unwrap();
        assert_eq!(watched.0.metadata.name.as_deref(), Some("r"));
        assert!(watched.0.status.is_none());
    }
}
