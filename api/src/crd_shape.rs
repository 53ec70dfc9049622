//! What the CRDs of the two template kinds share, and what the CRDs of the two request kinds
//! share: group, version, status type, short name, category, printer columns and (for requests)
//! the immutable spec. Declaring each once keeps `kubectl get` showing the same columns for
//! Exec and Pod kinds, so one cannot drift from the other.
//!
//! Each macro takes the kind, its short name and the spec struct (its doc comment, attributes
//! and fields), and adds the shared derives and `#[kube(...)]` attributes.

/// Declares a spec struct and, through kube's `CustomResource`, its namespaced kind in oz's group,
/// version and category, with the given status type and printer columns. `last` holds
/// attributes that go after the struct's own.
macro_rules! oz_kind_spec {
    (
        status = $status:tt,
        columns = { $($column:tt)* },
        last = { $(#[$last:meta])* },
        kind = $kind:tt,
        shortname = $shortname:tt,
        $(#[$attribute:meta])*
        $visibility:vis struct $spec:ident $fields:tt
    ) => {
        #[derive(
            kube::CustomResource,
            kube::KubeSchema,
            Clone,
            Debug,
            PartialEq,
            serde::Serialize,
            serde::Deserialize,
        )]
        #[kube(
            group = "crds.wizardofoz.co",
            version = "v1alpha1",
            kind = $kind,
            namespaced,
            status = $status,
            shortname = $shortname,
            category = "oz",
            $($column)*
        )]
        #[serde(rename_all = "camelCase")]
        $(#[$attribute])*
        $(#[$last])*
        $visibility struct $spec $fields
    };
}

/// Declares an access template's spec struct and its kind, given as
/// `kind = "…", shortname = "…",` then the struct with its doc comment and attributes.
macro_rules! access_template_spec {
    ($($kind_and_spec:tt)*) => {
        oz_kind_spec! {
            status = "TemplateStatus",
            columns = {
                printcolumn(
                    name = "Ready",
                    type_ = "boolean",
                    json_path = ".status.ready",
                    description = "Is template ready?"
                ),
                printcolumn(
                    name = "Kind",
                    type_ = "string",
                    json_path = ".spec.controllerTargetRef.kind",
                    description = "Target controller kind"
                ),
                printcolumn(
                    name = "Target",
                    type_ = "string",
                    json_path = ".spec.controllerTargetRef.name",
                    description = "Target controller name"
                ),
                printcolumn(
                    name = "Age",
                    type_ = "date",
                    json_path = ".metadata.creationTimestamp"
                )
            },
            last = {},
            $($kind_and_spec)*
        }
    };
}

/// Declares an access request's spec struct and its kind, as `access_template_spec` does. The
/// spec is immutable: its last validation rule refuses any change after creation.
macro_rules! access_request_spec {
    ($($kind_and_spec:tt)*) => {
        oz_kind_spec! {
            status = "RequestStatus",
            columns = {
                printcolumn(name = "Template", type_ = "string", json_path = ".spec.templateName"),
                printcolumn(name = "Pod", type_ = "string", json_path = ".status.podName"),
                printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
                printcolumn(name = "Ready", type_ = "boolean", json_path = ".status.ready"),
                printcolumn(
                    name = "Approvals",
                    type_ = "string",
                    json_path = ".status.approvalProgress",
                    description = "Approvals made of those required"
                ),
                printcolumn(
                    name = "Expires",
                    type_ = "string",
                    json_path = ".status.expiresAt",
                    description = "When the access ends"
                ),
                printcolumn(
                    name = "Age",
                    type_ = "date",
                    json_path = ".metadata.creationTimestamp"
                ),
                // Wide only: with the Name, Phase and Expires columns, what oz-manager reads of
                // every request at start-up to arm its expiry timers (`crate::expiry_table`).
                printcolumn(
                    name = "Namespace",
                    type_ = "string",
                    json_path = ".metadata.namespace",
                    priority = 1
                ),
                printcolumn(name = "UID", type_ = "string", json_path = ".metadata.uid", priority = 1)
            },
            last = {
                #[x_kube(validation = Rule::new("self == oldSelf")
                    .message("spec is immutable: a request cannot be changed after it is created; delete it and create a new one"))]
            },
            $($kind_and_spec)*
        }
    };
}
