//! What the hint reads: the workload a pod belongs to, and of each template what it targets,
//! whom it admits and how its grant is used.

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::{
    AccessKind, AccessTemplate, ControllerKind, CrossVersionObjectReference, SessionMode,
    fleet::managing_hub,
};

/// A workload controller, by kind and name, in the pod's namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodWorkload {
    /// Deployment, StatefulSet, DaemonSet or Rollout.
    pub kind: ControllerKind,
    /// Its name.
    pub name: String,
}

/// The pod-template-hash labels a ReplicaSet's pods carry, and the workload kind whose
/// ReplicaSet it is: the ReplicaSet is named `<workload>-<hash>`.
const REPLICA_SET_HASH_LABELS: [(&str, ControllerKind); 2] = [
    ("pod-template-hash", ControllerKind::Deployment),
    ("rollouts-pod-template-hash", ControllerKind::Rollout),
];

impl PodWorkload {
    /// The workload that controls the pod whose metadata is `meta`, as its controller owner
    /// reference says: a StatefulSet or DaemonSet directly; a Deployment or Rollout through the
    /// ReplicaSet it names `<workload>-<hash>`, where the pod carries the hash as its
    /// `pod-template-hash` (Rollout: `rollouts-pod-template-hash`) label. `None` for a pod no
    /// such workload controls (a bare pod, a Job's, an access pod oz made).
    ///
    /// It reads only the name in the reference, not the uid: the exec controller also checks
    /// the uid of a StatefulSet or DaemonSet before it grants.
    pub fn of_pod(meta: &ObjectMeta) -> Option<Self> {
        let owner = meta
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))?;
        let direct = |kind| {
            Some(Self {
                kind,
                name: owner.name.clone(),
            })
        };
        match owner.kind.as_str() {
            "StatefulSet" => direct(ControllerKind::StatefulSet),
            "DaemonSet" => direct(ControllerKind::DaemonSet),
            "ReplicaSet" => {
                let labels = meta.labels.as_ref()?;
                REPLICA_SET_HASH_LABELS.iter().find_map(|(label, kind)| {
                    let hash = labels.get(*label).filter(|h| !h.is_empty())?;
                    let name = owner.name.strip_suffix(hash.as_str())?.strip_suffix('-')?;
                    (!name.is_empty()).then(|| Self {
                        kind: *kind,
                        name: name.to_string(),
                    })
                })
            }
            _ => None,
        }
    }

    /// The workload `target` names.
    pub fn of_target(target: &CrossVersionObjectReference) -> Self {
        Self {
            kind: target.kind,
            name: target.name.clone(),
        }
    }
}

impl fmt::Display for PodWorkload {
    /// `Deployment web`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} {}", self.kind, self.name)
    }
}

/// What is known of the pod a user was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodOwner {
    /// Its metadata could not be read: not (yet) in a cache, or not readable by the user.
    Unknown,
    /// No workload controls it ([`PodWorkload::of_pod`] is `None`).
    NoWorkload,
    /// This workload controls it.
    Workload(PodWorkload),
}

impl PodOwner {
    /// What the pod whose metadata is `meta` belongs to.
    pub fn of_pod(meta: &ObjectMeta) -> Self {
        PodWorkload::of_pod(meta).map_or(Self::NoWorkload, Self::Workload)
    }
}

/// A template as the hint reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateTarget {
    /// Its kind.
    pub kind: AccessKind,
    /// Its name.
    pub name: String,
    /// `spec.controllerTargetRef`; `None` for a PodAccessTemplate that gives its own podSpec.
    pub workload: Option<PodWorkload>,
    /// `spec.accessConfig.allowedGroups`.
    pub allowed_groups: Vec<String>,
    /// `spec.accessConfig.sessionMode`, its default applied: a Brokered grant is used with
    /// `ozctl exec`, never `kubectl exec`.
    pub session_mode: SessionMode,
    /// On a fleet spoke, the hub whose copy it is ([`managing_hub`]): requests through it are
    /// made on the hub.
    pub hub: Option<String>,
    /// `spec.clusters` is set: a fleet hub's template, which grants nothing where it is.
    pub names_clusters: bool,
}

impl TemplateTarget {
    /// `template`, as the hint reads it.
    pub fn of<T: AccessTemplate>(template: &T) -> Self {
        let config = template.access_config();
        Self {
            kind: T::KIND,
            name: template.meta().name.clone().unwrap_or_default(),
            workload: template.target_ref().map(PodWorkload::of_target),
            allowed_groups: config.allowed_groups.clone(),
            session_mode: config.session_mode(),
            hub: managing_hub(template.meta()).map(str::to_string),
            names_clusters: template.clusters().is_some(),
        }
    }

    /// Whether a user in `groups` may ask through it, as [`crate::AccessConfig::admits`] says:
    /// one of their groups is in `allowedGroups`.
    pub fn admits(&self, groups: &[String]) -> bool {
        self.allowed_groups.iter().any(|g| groups.contains(g))
    }

    /// Whether it targets `owner`'s workload.
    pub fn targets(&self, owner: &PodOwner) -> bool {
        matches!(owner, PodOwner::Workload(w) if self.workload.as_ref() == Some(w))
    }
}
