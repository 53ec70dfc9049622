//! How both `ozctl audit` commands report what oz-audit found: a file it could not read, and
//! each problem with where it is.

use crate::{error::CliError, terminal_text::printable_line};

/// `oz_audit`'s error (a file that cannot be read) as ozctl's.
pub fn unreadable(error: oz_audit::Error) -> CliError {
    CliError::Unverifiable(error.to_string())
}

/// Where a problem is and what it is, as both commands print it:
/// `FILE:LINE (seq N): kind: detail`, or `(seq N-M)` for a range.
pub fn problem_line(problem: &oz_audit::Problem) -> String {
    let seq = match (problem.seq, problem.last_seq) {
        (Some(first), Some(last)) if last != first => format!(" (seq {first}-{last})"),
        (Some(seq), _) => format!(" (seq {seq})"),
        (None, _) => String::new(),
    };
    // The detail may quote the file, whose records hold commands users typed.
    let line = format!(
        "{}:{}{seq}: {}: {}",
        problem.file, problem.line, problem.kind, problem.detail
    );
    printable_line(&line).into_owned()
}
