//! Where in an access command a problem is, and what the problem is: what every step of
//! reading one (lexing, parsing, resolving fields) reports.

use std::fmt;

/// The summary of the supported subset, for error messages.
const SUPPORTED: &str = "oz supports literal text, {{ .Metadata.<Field> }}, \
     {{ index .Metadata.Labels \"key\" }} (or Annotations), quoted strings, comments and the \
     {{- / -}} trim markers";

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
