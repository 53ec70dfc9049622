//! The whole install: every object in the order to apply them, and as YAML.

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};

use super::{
    InstallOptions, Manifest, ManifestError, fleet, fleet_hub, manifest::manifests_yaml, meta,
    rbac, user_roles, workload,
};

/// Every object of the install, in the order to apply them: the Namespace, the CRDs (if
/// wanted), the ServiceAccount, oz's RBAC, a fleet hub's provider file and RBAC or a fleet
/// spoke's hub credential (if either), the users' ClusterRoles, Services, the Deployment, the
/// NetworkPolicy (if `webhook_ingress_cidrs` are given) and the webhook configurations (if the
/// webhooks run).
pub fn install_objects(options: &InstallOptions) -> Result<Vec<Manifest>, ManifestError> {
    options.validate()?;
    let o = options;
    let mut out = vec![Manifest::new(
        vec!["The operator's namespace.".into()],
        &Namespace {
            metadata: meta(o, &o.namespace, None),
            ..Default::default()
        },
    )?];
    if o.crds {
        for crd in oz_api::all_crds() {
            out.push(Manifest::new(vec![], &crd)?);
        }
    }
    out.push(Manifest::new(
        vec!["The identity oz-manager runs as; the RBAC below is all it may do.".into()],
        &ServiceAccount {
            metadata: meta(o, &o.manager_name(), Some(&o.namespace)),
            ..Default::default()
        },
    )?);
    out.extend(rbac::manifests(o)?);
    out.extend(fleet_hub::manifests(o)?);
    if o.fleet_spoke {
        out.extend(fleet::hub_credential_manifests(o)?);
    }
    out.extend(user_roles::manifests(o)?);
    out.extend(workload::manifests(o)?);
    Ok(out)
}

/// The install as YAML: a comment header with the command that prints it, then one document
/// per object of [`install_objects`], each with its comment.
pub fn install_yaml(options: &InstallOptions) -> Result<String, ManifestError> {
    manifests_yaml(&options.command_line(), install_objects(options)?)
}
