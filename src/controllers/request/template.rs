//! Step: verify the template. The request's template must exist in its namespace; it then
//! becomes the request's controller owner, as in Oz, so deleting a template deletes its
//! requests and, through them, their access.

use kube::{
    Api, Resource, ResourceExt,
    api::{Patch, PatchParams},
};
use oz_api::{
    AccessRequest, AccessTemplate, condition_reason as reason, condition_type as kind,
    conditions::Observation,
};
use serde_json::json;

use super::{
    outcome::{Step, go_on, stop},
    reconciling::Reconciling,
    status::Pass,
};
use crate::{
    FIELD_MANAGER, Result,
    builders::{AccessBuilder, blocking},
};

type Template<B> = <<B as AccessBuilder>::Request as AccessRequest>::Template;

/// The request's template, or the end of its grant if there is none.
pub async fn verify_template<B: AccessBuilder>(
    r: &Reconciling<'_, B>,
    pass: &mut Pass,
) -> Step<Template<B>> {
    let (kind, name) = (Template::<B>::kind(&()), r.request.template_name());
    // From the watch cache: a template is read by every reconcile, and its watch wakes the
    // requests naming it whenever it changes.
    let cached = r
        .stores
        .template_of(r.request)
        .map(|t| Template::<B>::clone(&t));
    let found = match cached {
        Some(template) => Some(template),
        // Not cached: perhaps only not yet (created a moment before the request). A request
        // must not fail for the cache's lag, so the apiserver has the last word.
        None => {
            let templates: Api<Template<B>> =
                Api::namespaced(r.ctx.client.clone(), &r.grant.namespace);
            templates.get_opt(name).await?
        }
    };
    let template = match found {
        Some(t) if t.meta().deletion_timestamp.is_none() => t,
        // A template on its way out grants nothing more. Adopting the request again would also
        // undo an orphaning delete: the garbage collector has just removed the ownerReference,
        // and a new one would have the request deleted with the template after all.
        Some(_) => return no_template(r, pass, deleted_template_message(&kind, name)).await,
        None => {
            let message = missing_template_message(&kind, name, &r.grant.namespace);
            return no_template(r, pass, message).await;
        }
    };
    if template.clusters().is_some() {
        // A fleet hub's template: its workload is on the spokes, and access there is granted
        // by the spokes' oz. Granting it here would hand out a Role on the hub.
        let why = Observation::no(
            kind::TARGET_TEMPLATE_EXISTS,
            reason::FLEET_TEMPLATE,
            fleet_template_message(&kind, name),
        );
        return stop(r.withdraw(pass, why).await?);
    }
    pass.observe(Observation::yes(
        kind::TARGET_TEMPLATE_EXISTS,
        reason::SUCCESS,
        "Found Target Template",
    ));
    own_by_template(r, &template).await?;
    pass.notify_through(template.access_config().notifications.as_ref());
    go_on(template)
}

/// No template, no access: a grant made through it ends now (its template may have been deleted
/// without cascading to its requests), rather than waiting for no one.
async fn no_template<B: AccessBuilder, T>(
    r: &Reconciling<'_, B>,
    pass: &mut Pass,
    message: String,
) -> Step<T> {
    let why = Observation::no(kind::TARGET_TEMPLATE_EXISTS, reason::NOT_FOUND, message);
    stop(r.withdraw(pass, why).await?)
}

/// What a request whose template is missing says, and how to fix it.
fn fleet_template_message(kind: &str, name: &str) -> String {
    format!(
        "{kind} {name:?} names clusters: it grants access on the spoke clusters it covers, \
         never on this one; its spokes hold it, and access there is granted by their oz"
    )
}

fn missing_template_message(kind: &str, name: &str, namespace: &str) -> String {
    format!(
        "Error: template does not exist: no {kind} named {name:?} in namespace {namespace:?}; fix spec.templateName or create the template"
    )
}

/// What a request whose template is being deleted says.
fn deleted_template_message(kind: &str, name: &str) -> String {
    format!(
        "Error: {kind} {name:?} is being deleted and grants no access; create a new request once a template exists again"
    )
}

/// Makes the template the request's controller owner, unless it already is.
async fn own_by_template<B: AccessBuilder>(
    r: &Reconciling<'_, B>,
    template: &Template<B>,
) -> Result<()> {
    let owner = template
        .controller_owner_ref(&())
        .map(blocking)
        .ok_or_else(|| crate::Error::MissingMetadata(template.name_any(), "uid"))?;
    if r.request
        .owner_references()
        .iter()
        .any(|o| o.uid == owner.uid)
    {
        return Ok(());
    }
    let api: Api<B::Request> = Api::namespaced(r.ctx.client.clone(), &r.grant.namespace);
    let patch = json!({
        "apiVersion": B::Request::api_version(&()),
        "kind": B::Request::kind(&()),
        "metadata": {"ownerReferences": [owner]},
    });
    let name = r.request.name_any();
    let (params, patch) = (
        PatchParams::apply(FIELD_MANAGER).force(),
        Patch::Apply(&patch),
    );
    let patching = api.patch(&name, &params, &patch);
    let before = r.request.meta().resource_version.as_deref();
    r.ctx
        .echoes
        .track(&r.grant.namespace, &name, before, patching)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_template_is_named_with_its_kind_and_namespace() {
        assert_eq!(
            missing_template_message("ExecAccessTemplate", "web", "shop"),
            "Error: template does not exist: no ExecAccessTemplate named \"web\" in namespace \"shop\"; fix spec.templateName or create the template"
        );
    }

    #[test]
    fn a_template_being_deleted_is_named_and_says_what_to_do() {
        assert_eq!(
            deleted_template_message("PodAccessTemplate", "debug"),
            "Error: PodAccessTemplate \"debug\" is being deleted and grants no access; create a new request once a template exists again"
        );
    }

    #[test]
    fn a_fleet_template_says_it_grants_on_its_spokes_only() {
        assert_eq!(
            fleet_template_message("ExecAccessTemplate", "web"),
            "ExecAccessTemplate \"web\" names clusters: it grants access on the spoke clusters it covers, never on this one; its spokes hold it, and access there is granted by their oz"
        );
    }
}
