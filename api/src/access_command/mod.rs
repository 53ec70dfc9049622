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
#[cfg(test)]
mod tests;
mod value;

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use parse::{Segment, parse};

/// Oz's default `accessCommand` (the CRD default of `spec.accessConfig.accessCommand`).
pub const DEFAULT_ACCESS_COMMAND: &str =
    "kubectl exec -ti -n {{ .Metadata.Namespace }} {{ .Metadata.Name }} -- /bin/sh";

/// The summary of the supported subset, for error messages.
const SUPPORTED: &str = "oz supports literal text, {{ .Metadata.<Field> }}, \
     {{ index .Metadata.Labels \"key\" }} (or Annotations), quoted strings, comments and the \
     {{- / -}} trim markers";

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

/// A place in the template: 1-based line, and 1-based column counted in characters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Position {
    /// Line number, starting at 1.
    pub line: usize,
    /// Column number in characters, starting at 1.
    pub column: usize,
}

impl Position {
    /// The position of a byte offset into `template`.
    pub(super) fn of(template: &str, offset: usize) -> Self {
        let before = &template[..offset];
        let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
        Self {
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
        }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "line {}, column {}", self.line, self.column)
    }
}

/// Why an `accessCommand` template cannot be rendered.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// The template is malformed; Go's `text/template` would refuse it too.
    #[error("accessCommand is not a valid template at {at}: {problem}")]
    Syntax {
        /// Where the problem starts.
        at: Position,
        /// What is wrong, and how to fix it where that is clear.
        problem: String,
    },

    /// The template is valid Go, but uses a construct oz does not implement.
    #[error("accessCommand uses {construct} at {at}, which is not supported; {SUPPORTED}")]
    Unsupported {
        /// Where the construct starts.
        at: Position,
        /// The construct, such as "a pipeline `|`" or "the `if` action".
        construct: String,
    },

    /// A field path the pod metadata does not have.
    #[error("accessCommand refers to {path} at {at}, which does not exist: {hint}")]
    UnknownField {
        /// Where the field path starts.
        at: Position,
        /// The field path as written, such as `.Metadata.name`.
        path: String,
        /// What exists instead.
        hint: String,
    },
}
