//! Step 7 of the mutation: the template's `patchSpecOperations` (RFC 6902) applied to the JSON
//! of the whole pod template, with errors that name the operation and the fix.

use json_patch::{
    AddOperation, CopyOperation, MoveOperation, PatchErrorKind, PatchOperation, RemoveOperation,
    ReplaceOperation, TestOperation, jsonptr::PointerBuf,
};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde_json::Value;

use super::MutationError;
use crate::{JsonPatchOperation, PatchOp};

/// Step 7: applies the RFC 6902 operations to the JSON of the whole template.
pub(super) fn apply_patch(
    pod: &PodTemplateSpec,
    operations: &[JsonPatchOperation],
) -> Result<PodTemplateSpec, MutationError> {
    let operations: Vec<PatchOperation> = operations
        .iter()
        .enumerate()
        .map(|(index, operation)| to_patch_operation(index, operation))
        .collect::<Result<_, _>>()?;

    let mut document =
        serde_json::to_value(pod).map_err(|source| MutationError::TemplateToJson { source })?;
    // Not `json_patch::patch`: on a failure it undoes the operations already applied, and an
    // undo that fails (a `move` whose target is invalid has already removed its source, so
    // undoing an earlier `add` under that source fails) panics. The document is thrown away on
    // any error, so there is nothing to undo. Found by fuzzing (`fuzz/`, pod_mutation).
    json_patch::patch_unsafe(&mut document, &operations).map_err(|error| {
        let index = error.operation;
        let (op, path, from) = describe(&operations[index]);
        MutationError::PatchFailed {
            index,
            op,
            path: path.clone(),
            reason: failure_reason(&error.kind, op, &path, from.as_deref()),
        }
    })?;

    let patched: PodTemplateSpec = serde_json::from_value(document.clone())
        .map_err(|source| MutationError::PatchedTemplateInvalid { source })?;
    // k8s-openapi ignores fields it does not know, so a misspelt path would vanish silently.
    let round_trip = serde_json::to_value(&patched)
        .map_err(|source| MutationError::TemplateToJson { source })?;
    if let Some(pointer) = first_dropped_field(&document, &round_trip, String::new()) {
        return Err(MutationError::PatchUnknownField { pointer });
    }
    Ok(patched)
}

/// Checks what the CRD schema cannot (a value's presence) and converts one operation.
fn to_patch_operation(
    index: usize,
    operation: &JsonPatchOperation,
) -> Result<PatchOperation, MutationError> {
    let pointer = |field: &'static str, text: &str| {
        PointerBuf::parse(text).map_err(|error| MutationError::PatchPointerInvalid {
            index,
            field,
            pointer: text.to_owned(),
            reason: error.to_string(),
        })
    };
    let path = pointer("path", &operation.path)?;
    let value = || {
        operation
            .value
            .clone()
            .ok_or_else(|| MutationError::PatchValueMissing {
                index,
                op: operation.op,
                path: operation.path.clone(),
            })
    };
    let from = || match operation.from.as_deref() {
        Some(from) => pointer("from", from),
        None => Err(MutationError::PatchFromMissing {
            index,
            op: operation.op,
        }),
    };
    Ok(match operation.op {
        PatchOp::Add => PatchOperation::Add(AddOperation {
            path,
            value: value()?,
        }),
        PatchOp::Remove => PatchOperation::Remove(RemoveOperation { path }),
        PatchOp::Replace => PatchOperation::Replace(ReplaceOperation {
            path,
            value: value()?,
        }),
        PatchOp::Move => PatchOperation::Move(MoveOperation {
            from: from()?,
            path,
        }),
        PatchOp::Copy => PatchOperation::Copy(CopyOperation {
            from: from()?,
            path,
        }),
        PatchOp::Test => PatchOperation::Test(TestOperation {
            path,
            value: value()?,
        }),
    })
}

/// The op, path and from of a converted operation, for error messages.
fn describe(operation: &PatchOperation) -> (PatchOp, String, Option<String>) {
    match operation {
        PatchOperation::Add(op) => (PatchOp::Add, op.path.to_string(), None),
        PatchOperation::Remove(op) => (PatchOp::Remove, op.path.to_string(), None),
        PatchOperation::Replace(op) => (PatchOp::Replace, op.path.to_string(), None),
        PatchOperation::Move(op) => (
            PatchOp::Move,
            op.path.to_string(),
            Some(op.from.to_string()),
        ),
        PatchOperation::Copy(op) => (
            PatchOp::Copy,
            op.path.to_string(),
            Some(op.from.to_string()),
        ),
        PatchOperation::Test(op) => (PatchOp::Test, op.path.to_string(), None),
    }
}

/// Why an operation failed, in terms of the pod template, with the fix.
fn failure_reason(kind: &PatchErrorKind, op: PatchOp, path: &str, from: Option<&str>) -> String {
    const PATH_HINT: &str = "paths refer to the pod template after the other mutations (labels \
        cleared, probes dropped, ...), unset fields are absent, and array indexes count from 0";
    match kind {
        PatchErrorKind::TestFailed => format!(
            "the value at {path} is not equal to the operation's value; correct the value, or \
             remove the test if the template may differ"
        ),
        PatchErrorKind::InvalidFromPointer => format!(
            "from {} does not exist in the pod template; {PATH_HINT}",
            from.unwrap_or_default()
        ),
        PatchErrorKind::InvalidPointer if op == PatchOp::Add => format!(
            "the parent of {path} does not exist in the pod template, or the array index is past \
             the end (use /- to append); add the parent object first; {PATH_HINT}"
        ),
        PatchErrorKind::InvalidPointer => {
            format!("{path} does not exist in the pod template; {PATH_HINT}")
        }
        PatchErrorKind::CannotMoveInsideItself => format!(
            "cannot move {} into its own child {path}; choose a path outside it",
            from.unwrap_or_default()
        ),
        other => other.to_string(),
    }
}

/// The JSON pointer of the first non-null field of `patched` that is missing from `typed`
/// (the same document after a round trip through [`PodTemplateSpec`]).
fn first_dropped_field(patched: &Value, typed: &Value, pointer: String) -> Option<String> {
    match (patched, typed) {
        (Value::Object(patched), Value::Object(typed)) => {
            patched.iter().find_map(|(key, value)| {
                if value.is_null() {
                    return None;
                }
                let pointer = format!("{pointer}/{}", key.replace('~', "~0").replace('/', "~1"));
                match typed.get(key) {
                    None => Some(pointer),
                    Some(typed) => first_dropped_field(value, typed, pointer),
                }
            })
        }
        (Value::Array(patched), Value::Array(typed)) => patched
            .iter()
            .zip(typed)
            .enumerate()
            .find_map(|(i, (patched, typed))| {
                first_dropped_field(patched, typed, format!("{pointer}/{i}"))
            }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PodTemplateSpecMutationConfig;
    use crate::pod_mutation::{fixtures::*, mutate_pod_template};
    use serde_json::json;

    fn patched(operations: Value) -> Value {
        mutate(
            &busy_template(),
            &config(json!({ "patchSpecOperations": operations })),
        )
    }

    fn patch_err(operations: Value) -> MutationError {
        mutate_pod_template(
            &busy_template(),
            Some(&config(json!({ "patchSpecOperations": operations }))),
        )
        .expect_err("patch should fail")
    }

    #[test]
    fn patch_add_replace_remove_move_copy_and_test() {
        let pod = patched(json!([
            {"op": "test", "path": "/spec/containers/1/name", "value": "proxy"},
            {"op": "add", "path": "/metadata/annotations/oz~1patched", "value": "yes"},
            {"op": "replace", "path": "/spec/containers/1/image", "value": "envoy:debug"},
            {"op": "remove", "path": "/spec/initContainers"},
            {"op": "copy", "from": "/spec/containers/0/env", "path": "/spec/containers/1/env"},
            {"op": "move", "from": "/spec/nodeSelector/disk", "path": "/spec/nodeSelector/storage"},
            {"op": "add", "path": "/spec/containers/0/args/-", "value": "--verbose"},
            {"op": "add", "path": "/spec/tolerations", "value": [{"operator": "Exists"}]},
            // The default mutations removed the grace period; a patch can set one again.
            {"op": "add", "path": "/spec/terminationGracePeriodSeconds", "value": 5}
        ]));
        assert_eq!(pod["metadata"]["annotations"]["oz/patched"], "yes");
        assert_eq!(pod["spec"]["containers"][1]["image"], "envoy:debug");
        assert!(pod["spec"].get("initContainers").is_none());
        assert_eq!(
            pod["spec"]["containers"][1]["env"],
            json!([{"name": "MODE", "value": "prod"}])
        );
        assert_eq!(pod["spec"]["nodeSelector"], json!({"storage": "ssd"}));
        assert_eq!(
            pod["spec"]["containers"][0]["args"],
            json!(["--serve", "--verbose"])
        );
        assert_eq!(pod["spec"]["tolerations"], json!([{"operator": "Exists"}]));
        assert_eq!(pod["spec"]["terminationGracePeriodSeconds"], 5);
    }

    #[test]
    fn patch_runs_last_and_sees_the_mutated_template() {
        let pod = mutate(
            &busy_template(),
            &config(json!({
                "command": ["sleep"],
                "podLabels": {"oz": "access"},
                "patchSpecOperations": [
                    // The configured command is already in place, and args were emptied.
                    {"op": "test", "path": "/spec/containers/0/command", "value": ["sleep"]},
                    {"op": "test", "path": "/spec/containers/0/args", "value": []},
                    {"op": "add", "path": "/spec/containers/0/args/-", "value": "infinity"},
                    // The workload's labels are already gone.
                    {"op": "test", "path": "/metadata/labels", "value": {"oz": "access"}},
                    {"op": "replace", "path": "/spec/containers/0/name", "value": "debug"}
                ]
            })),
        );
        assert_eq!(pod["spec"]["containers"][0]["name"], "debug");
        assert_eq!(pod["spec"]["containers"][0]["args"], json!(["infinity"]));
    }

    #[test]
    fn patch_can_add_metadata_to_a_template_without_metadata() {
        let source = template(json!({"spec": {"containers": [{"name": "c"}]}}));
        let pod = mutate(
            &source,
            &config(json!({"patchSpecOperations": [
                {"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}}
            ]})),
        );
        assert_eq!(pod["metadata"]["annotations"], json!({"a": "b"}));
    }

    #[test]
    fn empty_patch_list_changes_nothing() {
        assert_eq!(
            patched(json!([])),
            mutate(&busy_template(), &PodTemplateSpecMutationConfig::default())
        );
    }

    #[test]
    fn patch_value_missing_names_the_operation_and_the_fix() {
        for op in ["add", "replace", "test"] {
            let error = patch_err(json!([
                {"op": "remove", "path": "/spec/nodeSelector"},
                {"op": op, "path": "/spec/containers/0/name"}
            ]));
            assert_eq!(
                error.to_string(),
                format!(
                    "spec.controllerTargetMutationConfig.patchSpecOperations[1]: a {op} \
                     operation needs a value; add `value:` with the JSON value for \
                     /spec/containers/0/name (a null value counts as missing: to unset a field, \
                     use `op: remove`)"
                )
            );
        }
    }

    #[test]
    fn patch_from_missing_names_the_operation_and_the_fix() {
        for op in ["move", "copy"] {
            let error = patch_err(json!([{"op": op, "path": "/spec/containers/0/name"}]));
            assert!(
                matches!(error, MutationError::PatchFromMissing { index: 0, .. }),
                "{error}"
            );
            let message = error.to_string();
            assert!(
                message.starts_with(&format!(
                    "spec.controllerTargetMutationConfig.patchSpecOperations[0]: a {op} \
                     operation needs a source; add `from:`"
                )),
                "{message}"
            );
        }
    }

    #[test]
    fn patch_pointer_that_is_not_a_json_pointer() {
        let error = patch_err(json!([{"op": "remove", "path": "spec/containers"}]));
        let message = error.to_string();
        assert!(
            message.starts_with(
                "spec.controllerTargetMutationConfig.patchSpecOperations[0].path: \
                 \"spec/containers\" is not a JSON pointer"
            ),
            "{message}"
        );
        let error = patch_err(json!([
            {"op": "copy", "from": "/bad~2escape", "path": "/spec/nodeSelector/x"}
        ]));
        assert!(
            matches!(
                &error,
                MutationError::PatchPointerInvalid { field: "from", .. }
            ),
            "{error}"
        );
    }

    #[test]
    fn patch_on_a_missing_path_names_the_operation_path_and_why() {
        let error = patch_err(json!([
            {"op": "test", "path": "/spec/containers/0/name", "value": "app"},
            {"op": "replace", "path": "/spec/containers/5/name", "value": "x"}
        ]));
        assert!(
            matches!(
                &error,
                MutationError::PatchFailed {
                    index: 1,
                    op: PatchOp::Replace,
                    ..
                }
            ),
            "{error:?}"
        );
        assert_eq!(
            error.to_string(),
            "spec.controllerTargetMutationConfig.patchSpecOperations[1] (replace \
             /spec/containers/5/name) failed: /spec/containers/5/name does not exist in the pod \
             template; paths refer to the pod template after the other mutations (labels \
             cleared, probes dropped, ...), unset fields are absent, and array indexes count \
             from 0"
        );

        let message = patch_err(json!([
            {"op": "add", "path": "/metadata/labels/team", "value": "x"}
        ]))
        .to_string();
        assert!(
            message.contains("(add /metadata/labels/team) failed: the parent of /metadata/labels/team does not exist"),
            "{message}"
        );
        assert!(message.contains("labels cleared"), "{message}");

        let message = patch_err(json!([
            {"op": "move", "from": "/spec/hostname", "path": "/spec/subdomain"}
        ]))
        .to_string();
        assert!(
            message.contains("failed: from /spec/hostname does not exist"),
            "{message}"
        );

        let message = patch_err(json!([
            {"op": "move", "from": "/spec", "path": "/spec/inner"}
        ]))
        .to_string();
        assert!(
            message.contains("cannot move /spec into its own child"),
            "{message}"
        );
    }

    #[test]
    fn a_failing_move_after_an_add_under_its_source_is_an_error_not_a_panic() {
        // json_patch::patch undid the add after the move had removed /metadata, could not, and
        // panicked (found by fuzzing): a PodAccessTemplate could crash oz-manager.
        let error = patch_err(json!([
            {"op": "add", "path": "/metadata/automountServiceAccountToken", "value": ".5"},
            {"op": "move", "from": "/metadata", "path": "/~1/~1/"},
        ]));
        assert!(
            matches!(
                error,
                MutationError::PatchFailed {
                    index: 1,
                    op: PatchOp::Move,
                    ..
                }
            ),
            "{error}"
        );
    }

    #[test]
    fn patch_failing_test_names_the_operation() {
        let error = patch_err(json!([
            {"op": "test", "path": "/spec/containers/0/name", "value": "nginx"},
            {"op": "replace", "path": "/spec/containers/0/name", "value": "x"}
        ]));
        assert_eq!(
            error.to_string(),
            "spec.controllerTargetMutationConfig.patchSpecOperations[0] (test \
             /spec/containers/0/name) failed: the value at /spec/containers/0/name is not equal \
             to the operation's value; correct the value, or remove the test if the template \
             may differ"
        );
    }

    #[test]
    fn patch_result_that_is_not_a_pod_template_is_an_error() {
        let error = patch_err(json!([
            {"op": "replace", "path": "/spec/containers/0/name", "value": 5}
        ]));
        assert!(
            matches!(error, MutationError::PatchedTemplateInvalid { .. }),
            "{error}"
        );
        let message = error.to_string();
        assert!(
            message.starts_with(
                "spec.controllerTargetMutationConfig.patchSpecOperations: the patched pod \
                 template is no longer a valid PodTemplateSpec"
            ),
            "{message}"
        );

        let error = patch_err(json!([{"op": "replace", "path": "", "value": "pod"}]));
        assert!(matches!(
            error,
            MutationError::PatchedTemplateInvalid { .. }
        ));
    }

    #[test]
    fn patch_adding_an_unknown_field_is_an_error_naming_it() {
        let error = patch_err(json!([
            {"op": "add", "path": "/spec/containers/1/comand", "value": ["sleep"]}
        ]));
        assert_eq!(
            error.to_string(),
            "spec.controllerTargetMutationConfig.patchSpecOperations: the patched pod template \
             has a field that a PodTemplateSpec does not have, at /spec/containers/1/comand; \
             check the spelling of the patch paths (field names are camelCase, as `kubectl \
             explain pod.spec` shows them)"
        );
    }

    #[test]
    fn patch_values_of_other_json_types_are_accepted_where_they_fit() {
        // A number where the API has a quantity or an int-or-string is fine.
        let pod = patched(json!([
            {"op": "add", "path": "/spec/containers/1/resources", "value": {"limits": {"cpu": 1}}},
            {"op": "add", "path": "/spec/containers/1/ports",
             "value": [{"containerPort": 9901}]},
            {"op": "replace", "path": "/spec/containers/1/livenessProbe/httpGet/port", "value": "admin"}
        ]));
        assert_eq!(
            pod["spec"]["containers"][1]["resources"]["limits"]["cpu"],
            "1"
        );
        assert_eq!(
            pod["spec"]["containers"][1]["livenessProbe"]["httpGet"]["port"],
            "admin"
        );
    }
}
