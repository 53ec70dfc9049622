//! Applying CustomResourceDefinitions and waiting until the apiserver serves them.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, Client, ResourceExt,
    api::{Patch, PatchParams},
};

use crate::{Error, Result};

/// Applies `crds` by server-side apply as `field_manager`, and waits until each is established.
pub async fn apply_crds(
    admin: &Client,
    crds: &[CustomResourceDefinition],
    field_manager: &str,
) -> Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(admin.clone());
    let params = PatchParams::apply(field_manager).force();
    for crd in crds {
        api.patch(&crd.name_any(), &params, &Patch::Apply(crd))
            .await?;
    }
    const WAIT: Duration = Duration::from_secs(60);
    for crd in crds {
        let name = crd.name_any();
        let established = kube::runtime::wait::conditions::is_crd_established();
        tokio::time::timeout(
            WAIT,
            kube::runtime::wait::await_condition(api.clone(), &name, established),
        )
        .await
        .map_err(|_| Error::Timeout(format!("CRD {name} was not established within {WAIT:?}")))?
        .map_err(|e| Error::Timeout(format!("watching CRD {name}: {e}")))?;
    }
    Ok(())
}
