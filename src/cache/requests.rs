//! What a request controller keeps of each of its requests: not the request, but its parts
//! packed into one buffer, made into the request again when a reconcile or a timer reads it.
//!
//! The cached request is most of a grant's heap. As a kube object it is a large struct (its
//! `ObjectMeta`, spec and status inline) and a few dozen allocations: one per string, one per
//! condition list, one per owner reference. Here it is the one struct kube's store and
//! controller need, holding only what they read (its name, namespace and resourceVersion,
//! and the metadata oz reads that costs no allocation), plus one buffer with everything else:
//! its template's name, its spec, its owner references, and its status, the conditions packed
//! field by field (their type, status and reason as a byte each, from a table of the words
//! seen), its other common fields as they are, and what is rarely set as the JSON it is.
//!
//! Packing is exact: [`CachedRequest::request`] gives back the request that was packed, field
//! for field, so a reconcile judges what the watch delivered. The phase is also kept unpacked,
//! and the template's name and `expiresAt` come first, as the timers, the gauge and the
//! template watch read them of every request.

use std::{borrow::Cow, marker::PhantomData};

use k8s_openapi::{
    apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time},
    jiff::Timestamp,
};
use kube::{Resource, runtime::watcher};
use oz_api::{AccessRequest, RequestPhase, RequestStatus, WatchedRequest};
use serde::{Deserialize, Deserializer, Serialize};

use super::packing::{
    Reader, put_bytes, put_conditions, put_opt_str, put_owners, put_str, put_time,
};
use crate::{
    Error, Result,
    builders::{GrantIdentity, grant_identity_of},
};

/// A request of kind `R` as the request controller caches it (see the module docs).
pub struct CachedRequest<R> {
    /// Its name, namespace and resourceVersion, generation, timestamps and the revoke
    /// annotation: everything of its metadata but its uid and owner references (packed).
    metadata: ObjectMeta,
    /// `status.phase`.
    phase: Option<RequestPhase>,
    /// The template's name, `status.expiresAt` and the uid (first, to be read alone), the spec,
    /// the owner references and the status.
    packed: Box<[u8]>,
    _kind: PhantomData<fn() -> R>,
}

impl<R: AccessRequest> CachedRequest<R> {
    /// `request`, packed.
    pub fn of(request: R) -> Result<Self> {
        let serialization = |source| Error::Serialization {
            what: "a request to cache",
            source,
        };
        let mut whole = serde_json::to_value(&request).map_err(serialization)?;
        let mut metadata = request.meta().clone();
        let owners = metadata.owner_references.take();
        // Packed: kube's store would copy it from the metadata into the request's key.
        let uid = metadata.uid.take();
        let status = request.request_status();
        let mut packed = Vec::with_capacity(512);
        put_str(&mut packed, request.template_name());
        put_time(&mut packed, status.and_then(|s| s.expires_at.as_ref()));
        put_opt_str(&mut packed, uid.as_deref());
        let spec = whole
            .get_mut("spec")
            .map(serde_json::Value::take)
            .unwrap_or_default();
        put_bytes(
            &mut packed,
            &serde_json::to_vec(&spec).map_err(serialization)?,
        );
        match &owners {
            Some(owners) => {
                packed.push(1);
                put_owners(&mut packed, owners);
            }
            None => packed.push(0),
        }
        match status {
            Some(status) => {
                packed.push(1);
                put_conditions(&mut packed, &status.conditions);
                packed.push(u8::from(status.ready));
                put_opt_str(&mut packed, status.pod_name.as_deref());
                put_opt_str(&mut packed, status.access_message.as_deref());
                put_time(&mut packed, status.approved_at.as_ref());
                // The rest, rarely set, as JSON: `{}` when none is.
                let rest = RequestStatus {
                    conditions: Vec::new(),
                    ready: false,
                    pod_name: None,
                    access_message: None,
                    phase: None,
                    expires_at: None,
                    approved_at: None,
                    ..status.clone()
                };
                put_bytes(
                    &mut packed,
                    &serde_json::to_vec(&rest).map_err(serialization)?,
                );
            }
            None => packed.push(0),
        }
        Ok(Self {
            metadata,
            phase: status.and_then(|s| s.phase),
            packed: packed.into_boxed_slice(),
            _kind: PhantomData,
        })
    }

    /// The request, as it was packed.
    pub fn request(&self) -> Result<R> {
        let corrupt = |source| Error::Serialization {
            what: "a cached request",
            source,
        };
        let mut read = Reader(&self.packed);
        let _template = read.str();
        let expires_at = read.time();
        let uid = read.opt_str();
        let spec: R::Spec = serde_json::from_slice(read.bytes()).map_err(corrupt)?;
        let mut metadata = self.metadata.clone();
        metadata.uid = uid;
        if read.byte() == 1 {
            metadata.owner_references = Some(read.owners());
        }
        let status = if read.byte() == 1 {
            let conditions = read.conditions();
            let ready = read.byte() == 1;
            let pod_name = read.opt_str();
            let access_message = read.opt_str();
            let approved_at = read.time();
            let rest: RequestStatus = serde_json::from_slice(read.bytes()).map_err(corrupt)?;
            Some(RequestStatus {
                conditions,
                ready,
                pod_name,
                access_message,
                phase: self.phase,
                expires_at: expires_at.map(Time),
                approved_at: approved_at.map(Time),
                ..rest
            })
        } else {
            None
        };
        Ok(R::from_parts(metadata, spec, status))
    }

    /// `spec.templateName`, read without unpacking the rest.
    pub fn template_name(&self) -> &str {
        Reader(&self.packed).str()
    }

    /// `status.phase`.
    pub fn phase(&self) -> Option<RequestPhase> {
        self.phase
    }

    /// `status.expiresAt`, read without unpacking the rest.
    pub fn expires_at(&self) -> Option<Timestamp> {
        let mut read = Reader(&self.packed);
        read.str();
        read.time()
    }

    /// `metadata.uid`, which is packed, not in [`Resource::meta`].
    pub fn uid(&self) -> Option<String> {
        let mut read = Reader(&self.packed);
        read.str();
        read.time();
        read.opt_str()
    }

    /// The identity of its grant, as [`grant_identity`](crate::builders::grant_identity) makes
    /// it of the request.
    pub fn grant_identity(&self) -> Result<GrantIdentity> {
        let name = self.metadata.name.clone().unwrap_or_default();
        let (Some(namespace), Some(uid)) = (self.metadata.namespace.clone(), self.uid()) else {
            return Err(Error::MissingMetadata(name, "namespace or uid"));
        };
        Ok(grant_identity_of::<R>(&name, namespace, &uid))
    }

    /// A watch event with its request packed; `None` for a request that cannot be packed
    /// (serde's own output always can), with a warning.
    pub fn event(event: watcher::Event<R>) -> Option<watcher::Event<Self>> {
        use watcher::Event::*;
        let pack = |request: R| match Self::of(request) {
            Ok(cached) => Some(cached),
            Err(error) => {
                tracing::warn!(%error, "could not cache a request");
                None
            }
        };
        Some(match event {
            Apply(r) => Apply(pack(r)?),
            Delete(r) => Delete(pack(r)?),
            Init => Init,
            InitApply(r) => InitApply(pack(r)?),
            InitDone => InitDone,
        })
    }
}

impl<R> Clone for CachedRequest<R> {
    fn clone(&self) -> Self {
        Self {
            metadata: self.metadata.clone(),
            phase: self.phase,
            packed: self.packed.clone(),
            _kind: PhantomData,
        }
    }
}

impl<R> std::fmt::Debug for CachedRequest<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedRequest")
            .field("metadata", &self.metadata)
            .field("phase", &self.phase)
            .field("packed", &self.packed.len())
            .finish()
    }
}

/// Listed and watched where requests of kind `R` are; kube's store and controller key it, and
/// match owner references to it, as they would `R`.
impl<R: AccessRequest> Resource for CachedRequest<R> {
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
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// Parsed as a watch parses a request ([`WatchedRequest`]), then packed.
impl<'de, R: AccessRequest> Deserialize<'de> for CachedRequest<R> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let WatchedRequest(request) = WatchedRequest::<R>::deserialize(deserializer)?;
        Self::of(request).map_err(serde::de::Error::custom)
    }
}

/// Serialized as the request it holds (kube never serializes a watched object; this is for
/// completeness).
impl<R: AccessRequest> Serialize for CachedRequest<R> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.request()
            .map_err(serde::ser::Error::custom)?
            .serialize(serializer)
    }
}

#[cfg(test)]
mod tests {
    use oz_api::ExecAccessRequest;
    use serde_json::json;

    use super::*;

    fn request() -> ExecAccessRequest {
        let t = "2026-11-23T08:00:00Z";
        let cond = |ty: &str, reason: &str, msg: &str| json!({"type": ty, "status": "True", "reason": reason, "message": msg, "lastTransitionTime": t, "observedGeneration": 1});
        serde_json::from_value(json!({
            "apiVersion": "crds.wizardofoz.co/v1alpha1",
            "kind": "ExecAccessRequest",
            "metadata": {
                "name": "grant-00001", "namespace": "bench-001", "uid": "0c7b2a6e-5d7f-4a8b-9b1e-3f2d8c1a7e44",
                "resourceVersion": "1234567", "generation": 1, "creationTimestamp": t,
                "annotations": {"crds.wizardofoz.co/revoked-by": "bob"},
                "ownerReferences": [{"apiVersion": "crds.wizardofoz.co/v1alpha1", "kind": "ExecAccessTemplate",
                    "name": "app", "uid": "9d1c7f2e-0a3b-4c5d-8e6f-7a8b9c0d1e2f", "controller": true, "blockOwnerDeletion": true}],
            },
            "spec": {"templateName": "app", "duration": "2h", "reason": "bench",
                     "requester": {"username": "alice", "uid": "6b1e", "groups": ["devs", "system:authenticated"]}},
            "status": {
                "conditions": [
                    cond("TargetTemplateExists", "Success", "Found Target Template"),
                    cond("SomeoneElses", "TheirReason", "not a word of oz's"),
                    {"type": "AccessStillValid", "status": "False", "reason": "Timeout", "message": "Access expired",
                     "lastTransitionTime": "2026-11-23T09:00:00.5Z"},
                ],
                "ready": false, "podName": "app-7d9f8b6c5d-x2k4q", "phase": "Expired",
                "accessMessage": "kubectl exec -ti -n bench-001 app-7d9f8b6c5d-x2k4q -- /bin/sh",
                "expiresAt": "2026-11-23T10:00:00Z",
                "approvalProgress": "1/2",
            }
        }))
        .unwrap()
    }

    #[test]
    fn a_cached_request_is_the_request_that_was_cached() {
        let original = request();
        let cached = CachedRequest::of(original.clone()).unwrap();
        // Packed again, its repeated messages take a byte each: it still comes back whole.
        let again = CachedRequest::of(original.clone()).unwrap();
        assert!(again.packed.len() <= cached.packed.len());
        assert_eq!(
            serde_json::to_value(again.request().unwrap()).unwrap(),
            serde_json::to_value(&original).unwrap()
        );
        let back = cached.request().unwrap();
        assert_eq!(
            serde_json::to_value(&back).unwrap(),
            serde_json::to_value(&original).unwrap()
        );
        assert!(back.status == original.status, "the status compares equal");
        assert_eq!(cached.template_name(), "app");
        assert_eq!(cached.phase(), Some(RequestPhase::Expired));
        assert_eq!(
            cached.expires_at(),
            Some("2026-11-23T10:00:00Z".parse().unwrap())
        );
        assert_eq!(cached.meta().name.as_deref(), Some("grant-00001"));
        assert!(cached.meta().owner_references.is_none(), "packed");
        assert!(cached.meta().uid.is_none(), "packed");
        assert_eq!(
            format!("{:?}", cached.grant_identity().unwrap()),
            format!("{:?}", crate::builders::grant_identity(&original).unwrap())
        );
    }

    #[test]
    fn a_request_without_status_or_owners_comes_back_so() {
        let mut original = request();
        original.status = None;
        original.metadata.owner_references = None;
        let back = CachedRequest::of(original.clone())
            .unwrap()
            .request()
            .unwrap();
        assert_eq!(
            serde_json::to_value(&back).unwrap(),
            serde_json::to_value(&original).unwrap()
        );
    }

    #[test]
    fn a_long_text_is_packed_whole() {
        let mut original = request();
        let status = original.status.as_mut().unwrap();
        status.access_message = Some("x".repeat(70_000));
        status.conditions[0].message = "y".repeat(300);
        let back = CachedRequest::of(original.clone())
            .unwrap()
            .request()
            .unwrap();
        assert!(back.status == original.status);
    }
}
