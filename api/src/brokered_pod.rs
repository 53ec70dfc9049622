//! [`BrokeredPod`]: a pod as oz's sessions API serves it, so that kube's own `Api::exec` and
//! `Api::attach` open a brokered session exactly as they open a core one.

use std::borrow::Cow;

use k8s_openapi::{NamespaceResourceScope, apimachinery::pkg::apis::meta::v1::ObjectMeta};
use kube::{
    Resource,
    api::{Attach, Execute},
};
use serde::Deserialize;

use crate::{SESSIONS_GROUP, SESSIONS_VERSION};

/// A pod as oz's sessions API serves it: group `sessions.wizardofoz.co`, kind Pod, plural
/// pods. `Api::<BrokeredPod>::exec` opens
/// `/apis/sessions.wizardofoz.co/v1alpha1/namespaces/{ns}/pods/{pod}/exec` (websocket,
/// `v5.channel.k8s.io`), and `attach` likewise. Only those subresources exist: it is never read
/// as an object.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct BrokeredPod {
    /// Never filled: oz serves no pod objects.
    #[serde(default)]
    pub metadata: ObjectMeta,
}

impl Resource for BrokeredPod {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "Pod".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        SESSIONS_GROUP.into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        SESSIONS_VERSION.into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "pods".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl Execute for BrokeredPod {}
impl Attach for BrokeredPod {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_brokered_pod_is_served_by_the_sessions_api() {
        assert_eq!(
            BrokeredPod::url_path(&(), Some("team")),
            "/apis/sessions.wizardofoz.co/v1alpha1/namespaces/team/pods"
        );
    }
}
