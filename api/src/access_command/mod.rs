//! Rendering `accessConfig.accessCommand`, the instructions a request's `status.accessMessage`
//! gives the user.
//!
//! Oz renders the string with Go's `text/template`, executed against
//! `struct{ Metadata metav1.ObjectMeta }` holding the target pod's metadata
//! (`internal/builders/utils/access_command.go`). Templates written for Oz must render the
//! same here, so this module implements the part of `text/template` such templates use, with
//! Go's output, and refuses the rest with an error naming the construct and where it is:
//!
//! | Supported                                        | Renders as                                      |
//! |--------------------------------------------------|-------------------------------------------------|
//! | literal text                                     | itself, byte for byte                           |
//! | `{{ .Metadata.Name }}`, `.Namespace`, `.GenerateName`, `.UID`, `.ResourceVersion` | the string (empty when unset) |
//! | `{{ .Metadata.Generation }}`                     | the number (`0` when unset)                     |
//! | `{{ .Metadata.Labels.app }}` (also `Annotations`) | the value; `<no value>` if the key is missing  |
//! | `{{ index .Metadata.Labels "app.kubernetes.io/name" }}` | the value; empty if the key is missing   |
//! | `{{ .Metadata.Labels }}` (also `Annotations`)    | Go's map print, `map[a:1 b:2]`                  |
//! | `{{ "text" }}`, `` {{ `text` }} ``               | the string, so `{{ "{{" }}` prints `{{`         |
//! | `{{/* comment */}}`                              | nothing                                         |
//! | `{{- ` and ` -}}`                                | trim the whitespace before / after the action  |
//!
//! The two renderings of a missing key are Go's: a field-style lookup on a map yields Go's
//! "invalid value", which `text/template` prints as `<no value>` under its default
//! `missingkey` option (Oz sets none), whereas the `index` function returns the map's zero
//! value, the empty string.
//!
//! Not supported: pipelines (`|`), `if`/`else`/`range`/`with`/`define`/`template`/`block`,
//! variables, parentheses, number and boolean constants, and every function but `index`.
//! Field paths are checked while parsing, so [`validate_access_command`] refuses everything
//! [`render_access_command`] would, and rendering a valid template cannot fail.
//!
//! Where each part lives: `parse.rs` splits the template into text and actions and checks each
//! action's grammar, `lex.rs` reads the tokens inside an action, and `value.rs` resolves field
//! paths against the pod metadata and prints them as Go does.

mod lex;
mod parse;
mod position;
#[cfg(test)]
mod tests;
mod value;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use parse::{Segment, parse};
pub use position::{Position, RenderError};

/// Oz's default `accessCommand` (the CRD default of `spec.accessConfig.accessCommand`).
pub const DEFAULT_ACCESS_COMMAND: &str =
    "kubectl exec -ti -n {{ .Metadata.Namespace }} {{ .Metadata.Name }} -- /bin/sh";

/// Renders an `accessCommand` template against the target pod's metadata, as Oz does.
///
/// ```
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
/// use oz_api::access_command::{DEFAULT_ACCESS_COMMAND, render_access_command};
///
/// let pod = ObjectMeta {
///     name: Some("web-1a2b3c".into()),
///     namespace: Some("shop".into()),
///     ..ObjectMeta::default()
/// };
/// assert_eq!(
///     render_access_command(DEFAULT_ACCESS_COMMAND, &pod).unwrap(),
///     "kubectl exec -ti -n shop web-1a2b3c -- /bin/sh"
/// );
/// ```
///
/// Fails exactly when [`validate_access_command`] does.
pub fn render_access_command(template: &str, pod: &ObjectMeta) -> Result<String, RenderError> {
    let segments = parse(template)?;
    let mut rendered = String::with_capacity(template.len());
    for segment in &segments {
        match segment {
            Segment::Text(text) => rendered.push_str(text),
            Segment::Value(value) => value.render_into(pod, &mut rendered),
        }
    }
    Ok(rendered)
}

/// Checks an `accessCommand` template without a pod, for admission and template validation.
///
/// Refuses malformed templates, constructs outside the supported subset, and fields the pod
/// metadata does not have; a template that passes renders for every pod.
pub fn validate_access_command(template: &str) -> Result<(), RenderError> {
    parse(template).map(drop)
}
