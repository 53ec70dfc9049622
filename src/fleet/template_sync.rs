//! Keeps each fleet template of the hub on the spokes it covers, and off the others. One pass
//! looks at everything from memory (the hub's templates and ClusterProfiles, each spoke's
//! hub-managed copies) and writes only what differs: a missing or changed copy is applied, a
//! copy the hub no longer wants is deleted, and each template's `status.clusters` says how it
//! stands on each spoke. A pass with nothing to change makes no API call.

use std::sync::Arc;

use kube::{
    Api, ResourceExt,
    api::{DeleteParams, DynamicObject, Patch, PatchParams},
};
use oz_api::{AccessKind, ClusterSync};
use serde_json::json;

use super::{
    copies::{FIELD_MANAGER, HubTemplate},
    profiles::ClusterProfile,
    spokes::{Spokes, explain_spoke_error, template_resource},
};

/// What a pass did, for the loop to decide when to look again.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct PassOutcome {
    /// Writes that failed (a spoke down, a namespace missing there): look again soon.
    pub failures: usize,
    /// Spokes that refused the hub's credential: to connect to again.
    pub refused: Vec<String>,
}

/// One pass over every fleet template of the hub (`templates`) and every spoke.
pub async fn sync_templates(
    hub_client: &kube::Client,
    hub: &str,
    templates: &[HubTemplate],
    profiles: &[Arc<ClusterProfile>],
    spokes: &Spokes,
) -> PassOutcome {
    let mut outcome = PassOutcome::default();
    for template in templates {
        let mut status = Vec::new();
        for profile in profiles {
            let Some(cluster) = profile.metadata.name.as_deref() else {
                continue;
            };
            if profile.metadata.deletion_timestamp.is_some()
                || !template.clusters.covers(cluster, profile.labels())
            {
                continue;
            }
            let result = match spokes.get(cluster) {
                Ok(spoke) => keep_copy(spoke, hub, template).await.map_err(|error| {
                    if matches!(&error, kube::Error::Api(status) if status.code == 401) {
                        outcome.refused.push(cluster.to_string());
                    }
                    explain_spoke_error(&template.namespace, error)
                }),
                Err(why) => Err(why),
            };
            if result.is_err() {
                outcome.failures += 1;
            }
            status.push(ClusterSync {
                name: cluster.to_string(),
                synced: result.is_ok(),
                message: result.err(),
            });
        }
        // By name: the inventory's cache has no order, and a status in another order each pass
        // would be written each pass.
        status.sort_by(|a, b| a.name.cmp(&b.name));
        if status != template.status
            && let Err(error) = write_status(hub_client, template, &status).await
        {
            tracing::warn!(kind = %template.kind, namespace = %template.namespace, name = %template.name,
                %error, "could not write a fleet template's status");
            outcome.failures += 1;
        }
    }
    for (cluster, spoke) in spokes.connected() {
        let Some(copies) = spoke.listed() else {
            continue;
        };
        let labels = profiles
            .iter()
            .find(|p| p.metadata.name.as_ref() == Some(cluster))
            .map(|p| p.labels().clone())
            .unwrap_or_default();
        for (kind, copy) in copies {
            let wanted = templates.iter().any(|t| {
                t.kind == kind
                    && copy.metadata.namespace.as_deref() == Some(t.namespace.as_str())
                    && copy.metadata.name.as_deref() == Some(t.name.as_str())
                    && t.clusters.covers(cluster, &labels)
            });
            if !wanted && let Err(error) = remove_copy(spoke, kind, &copy).await {
                tracing::warn!(%cluster, %error, "could not remove a template the hub no longer keeps there");
                outcome.failures += 1;
            }
        }
    }
    outcome
}

/// Makes sure `spoke` holds `template` as the hub writes it; an error says why it does not.
async fn keep_copy(
    spoke: &super::spokes::Spoke,
    hub: &str,
    template: &HubTemplate,
) -> Result<(), kube::Error> {
    if let Some(copy) = spoke.copy(template.kind, &template.namespace, &template.name) {
        let spec = copy.data.get("spec").cloned().unwrap_or_default();
        if template.is_held_by(hub, copy.labels(), &spec) {
            return Ok(());
        }
    }
    let api: Api<DynamicObject> = Api::namespaced_with(
        spoke.client.clone(),
        &template.namespace,
        &template_resource(template.kind),
    );
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(&template.name, &params, &Patch::Apply(template.copy(hub)))
        .await
        .map(|_| ())
}

/// Deletes a copy the hub no longer keeps on `spoke`, unless it is already going.
async fn remove_copy(
    spoke: &super::spokes::Spoke,
    kind: AccessKind,
    copy: &DynamicObject,
) -> Result<(), kube::Error> {
    if copy.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let (Some(namespace), Some(name)) = (&copy.metadata.namespace, &copy.metadata.name) else {
        return Ok(());
    };
    tracing::info!(%kind, %namespace, %name, "removing a template the hub no longer keeps on this spoke");
    let api: Api<DynamicObject> =
        Api::namespaced_with(spoke.client.clone(), namespace, &template_resource(kind));
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Writes `status.clusters` of the hub's template, and only that field, as the hub's manager.
async fn write_status(
    client: &kube::Client,
    template: &HubTemplate,
    clusters: &[ClusterSync],
) -> Result<(), kube::Error> {
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        &template.namespace,
        &template_resource(template.kind),
    );
    let patch = json!({
        "apiVersion": format!("{}/{}", oz_api::GROUP, oz_api::VERSION),
        "kind": template.kind.template_kind(),
        "status": { "clusters": clusters },
    });
    api.patch_status(
        &template.name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(patch),
    )
    .await
    .map(|_| ())
}
