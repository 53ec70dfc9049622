//! Which templates could grant a refused user the pod: [`grant_hint`].

use crate::{AccessKind, PodAction, SessionMode};

use super::facts::{PodOwner, TemplateTarget};

/// At most this many templates are named in a hint; the rest are counted ("and 2 more").
pub const MAX_NAMED: usize = 3;

/// What was refused: `user` (in `groups`) taking `action` on `pod` in `namespace`.
#[derive(Clone, Copy, Debug)]
pub struct Refused<'a> {
    pub user: &'a str,
    pub groups: &'a [String],
    pub namespace: &'a str,
    pub pod: &'a str,
    pub action: PodAction,
}

/// The templates that could grant a refused access, and those that target the pod but do not
/// admit the user: what [`GrantHint::advice`] words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrantHint {
    /// The refused action.
    pub action: PodAction,
    /// The pod's namespace.
    pub namespace: String,
    /// The pod.
    pub pod: String,
    /// What is known of the pod's workload.
    pub owner: PodOwner,
    /// The ExecAccessTemplates that target the pod's workload and admit the user: each could
    /// grant exec into the pod (for an attach, what could be done instead). The cluster's own
    /// before a fleet hub's copies, Direct before Brokered (the route the refused client took),
    /// then by name.
    pub granting: Vec<TemplateTarget>,
    /// The ExecAccessTemplates that target the pod's workload but admit none of the user's
    /// groups, by name: whom to ask to be added.
    pub closed: Vec<TemplateTarget>,
}

/// Which of `templates` (those of the pod's namespace, either kind) could grant `refused`, given
/// what is known of the pod (`owner`). The module documentation has the rule. Templates that
/// name fleet clusters, or are PodAccessTemplates, are never named: neither grants the pod.
pub fn grant_hint<'t>(
    refused: &Refused<'_>,
    owner: PodOwner,
    templates: impl IntoIterator<Item = &'t TemplateTarget>,
) -> GrantHint {
    let mut granting = Vec::new();
    let mut closed = Vec::new();
    if matches!(refused.action, PodAction::Exec | PodAction::Attach) {
        // A PodAccessRequest grants exec too, but on its own copy of the pod: on the pod
        // itself, only an ExecAccessRequest does.
        let for_the_pod = templates
            .into_iter()
            .filter(|t| t.kind == AccessKind::Exec && !t.names_clusters && t.targets(&owner));
        for template in for_the_pod {
            match template.admits(refused.groups) {
                true => granting.push(template.clone()),
                false => closed.push(template.clone()),
            }
        }
    }
    granting.sort_by(|a, b| {
        let key = |t: &TemplateTarget| {
            let brokered = t.session_mode == SessionMode::Brokered;
            (t.hub.is_some(), brokered, t.name.clone())
        };
        key(a).cmp(&key(b))
    });
    granting.dedup_by(|a, b| a.name == b.name && a.hub == b.hub);
    closed.sort_by(|a, b| a.name.cmp(&b.name));
    closed.dedup_by(|a, b| a.name == b.name);
    GrantHint {
        action: refused.action,
        namespace: refused.namespace.to_string(),
        pod: refused.pod.to_string(),
        owner,
        granting,
        closed,
    }
}
