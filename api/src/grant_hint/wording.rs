//! The hint in words: one line, fit to follow a refusal in kubectl's error output or ozctl's,
//! naming at most [`MAX_NAMED`] templates, each with the `ozctl create` line that asks
//! through it.

use crate::{PodAction, SessionMode};

use super::{
    choice::{GrantHint, MAX_NAMED},
    facts::{PodOwner, TemplateTarget},
};

/// How a hint speaks: to whom, with which program, and whom it sends the user to.
#[derive(Clone, Copy, Debug)]
pub struct Voice<'a> {
    /// How the user runs ozctl: `ozctl`, or `kubectl oz` for the plugin.
    pub program: &'a str,
    /// The user as the sentence names them: their user name (the webhook), or `you` (ozctl).
    pub user: &'a str,
    /// The groups whose members write the templates in the namespace, when known (where
    /// access is enforced, `--template-admin-groups`); empty when not.
    pub template_writers: &'a [String],
}

impl Voice<'_> {
    /// Whom to ask for a template in `namespace`.
    fn template_admin(&self, namespace: &str) -> String {
        match self.template_writers {
            [] => format!("a template admin of {namespace}"),
            groups => format!(
                "a template admin of {namespace} (a member of {})",
                groups.join(" or ")
            ),
        }
    }
}

impl GrantHint {
    /// What the user can do, as one line that follows the refusal after `; `. Deterministic:
    /// the same hint is always worded the same. Examples, to alice:
    ///
    /// - `ExecAccessTemplate web can grant it to alice: ozctl create exec web --target-pod web-0 -n shop`
    /// - `ExecAccessTemplates that can grant it to alice: web: ozctl create exec web --target-pod web-0 -n shop; web-rec (Brokered: its grant is used with ozctl exec, not kubectl exec): ozctl create exec web-rec --target-pod web-0 -n shop`
    /// - `no template grants it to alice: ExecAccessTemplate web admits only ops; ask to be added to one of those groups, or ask a template admin of shop for a template`
    /// - `no template can grant port-forward: oz grants exec and attach only`
    pub fn advice(&self, voice: &Voice<'_>) -> String {
        match self.action {
            PodAction::Exec => self.exec_advice(voice),
            PodAction::Attach => {
                let why = "no template grants attach to a workload's pod (an ExecAccessRequest \
                           grants exec; a PodAccessRequest grants attach only to its own copy of \
                           the pod)";
                match self.granting.is_empty() {
                    true => why.to_string(),
                    false => format!("{why}; to exec into it instead, {}", self.offers(voice)),
                }
            }
            PodAction::PortForward => {
                "no template can grant port-forward: oz grants exec and attach only".into()
            }
            PodAction::Debug => {
                "no template can grant debug (an ephemeral container): oz grants exec and attach only"
                    .into()
            }
        }
    }

    fn exec_advice(&self, voice: &Voice<'_>) -> String {
        if !self.granting.is_empty() {
            return self.offers(voice);
        }
        let namespace = &self.namespace;
        let admin = voice.template_admin(namespace);
        match &self.owner {
            PodOwner::Unknown => format!(
                "see which templates may grant it with: {} get templates -n {namespace}",
                voice.program
            ),
            PodOwner::NoWorkload => "no template can grant it: templates grant the pods of a \
                                     Deployment, StatefulSet, DaemonSet or Rollout, and none \
                                     controls it"
                .into(),
            PodOwner::Workload(workload) if self.closed.is_empty() => format!(
                "no template in {namespace} grants exec into it: ask {admin} for an \
                 ExecAccessTemplate for {workload}"
            ),
            PodOwner::Workload(_) => format!(
                "no template grants it to {user}: {closed}; ask to be added to one of those \
                 groups, or ask {admin} for a template",
                user = voice.user,
                closed = self.closed_templates(),
            ),
        }
    }

    /// The templates that could grant it, each with its `ozctl create` line.
    fn offers(&self, voice: &Voice<'_>) -> String {
        let user = voice.user;
        if let [only] = self.granting.as_slice() {
            return format!(
                "ExecAccessTemplate {}{} can grant it to {user}: {}",
                only.name,
                note(only, voice),
                self.create_line(only, voice.program)
            );
        }
        let named = self.granting.iter().take(MAX_NAMED).map(|t| {
            format!(
                "{}{}: {}",
                t.name,
                note(t, voice),
                self.create_line(t, voice.program)
            )
        });
        let mut text = format!(
            "ExecAccessTemplates that can grant it to {user}: {}",
            named.collect::<Vec<_>>().join("; ")
        );
        let more = self.granting.len().saturating_sub(MAX_NAMED);
        if more > 0 {
            text.push_str(&format!(
                "; and {more} more: {} get templates -n {}",
                voice.program, self.namespace
            ));
        }
        text
    }

    /// The command, run as `program`, that asks through `template` for this pod: with
    /// `--target-pod`, or, for a fleet hub's copy, the line to run on the hub.
    pub fn create_line(&self, template: &TemplateTarget, program: &str) -> String {
        match &template.hub {
            // The hub forwards no target pod: the spoke's oz picks one of the workload's.
            Some(_) => format!(
                "{program} create exec {} --fleet-cluster NAME",
                template.name
            ),
            None => format!(
                "{program} create exec {} --target-pod {} -n {}",
                template.name, self.pod, self.namespace
            ),
        }
    }

    /// The templates that target the pod but do not admit the user, with the groups they do.
    fn closed_templates(&self) -> String {
        let admits = |t: &TemplateTarget| listed(&t.allowed_groups, "groups");
        match self.closed.as_slice() {
            [only] => format!(
                "ExecAccessTemplate {} admits only {}",
                only.name,
                admits(only)
            ),
            closed => {
                let named = closed
                    .iter()
                    .take(MAX_NAMED)
                    .map(|t| format!("{} (admits {})", t.name, admits(t)));
                let mut text = format!(
                    "ExecAccessTemplates {}",
                    named.collect::<Vec<_>>().join(", ")
                );
                let more = closed.len().saturating_sub(MAX_NAMED);
                if more > 0 {
                    text.push_str(&format!(" and {more} more"));
                }
                text
            }
        }
    }
}

/// What the user must know of `template` before asking through it: that its grant is used with
/// `ozctl exec` (Brokered), that it is asked for on a fleet hub. Empty when neither.
fn note(template: &TemplateTarget, voice: &Voice<'_>) -> String {
    let mut notes = Vec::new();
    if template.session_mode == SessionMode::Brokered {
        notes.push(format!(
            "Brokered: its grant is used with {} exec, not kubectl exec",
            voice.program
        ));
    }
    if let Some(hub) = &template.hub {
        notes.push(format!("managed by fleet hub {hub}: ask for it on the hub"));
    }
    match notes.is_empty() {
        true => String::new(),
        false => format!(" ({})", notes.join("; ")),
    }
}

/// `items`, at most [`MAX_NAMED`] of them, the rest counted: `a, b, c and 2 more groups`.
/// `(no groups)` for none.
fn listed(items: &[String], noun: &str) -> String {
    if items.is_empty() {
        return format!("(no {noun})");
    }
    let mut text = items
        .iter()
        .take(MAX_NAMED)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    let more = items.len().saturating_sub(MAX_NAMED);
    if more > 0 {
        text.push_str(&format!(" and {more} more {noun}"));
    }
    text
}
