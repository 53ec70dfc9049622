//! Progress on stderr: a spinner with the current step on a terminal, or one line per change
//! when stderr is a file or a pipe (CI logs, tests), so stdout holds only the result.

use std::{io::IsTerminal, time::Duration};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::terminal_text::printable_line;

/// A line of progress about one thing, such as `alice-x7k2p: AccessResourcesReady: ...`.
pub struct Progress {
    subject: String,
    spinner: Option<ProgressBar>,
    last: String,
}

impl Progress {
    /// Progress about `subject`: a spinner if stderr is a terminal.
    pub fn new(subject: impl Into<String>) -> Progress {
        let spinner = std::io::stderr().is_terminal().then(|| {
            let spinner = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            spinner.set_style(
                ProgressStyle::with_template("{spinner} {prefix}: {wide_msg} ({elapsed})")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            spinner.enable_steady_tick(Duration::from_millis(100));
            spinner
        });
        let subject = subject.into();
        if let Some(spinner) = &spinner {
            spinner.set_prefix(subject.clone());
        }
        Progress {
            subject,
            spinner,
            last: String::new(),
        }
    }

    /// Shows `message` as the current step (a condition's message, so on one line, escaped).
    pub fn set(&mut self, message: &str) {
        let message = printable_line(message);
        if message == self.last {
            return;
        }
        self.last = message.to_string();
        match &self.spinner {
            Some(spinner) => spinner.set_message(message.to_string()),
            None => eprintln!("{}: {message}", self.subject),
        }
    }

    /// The step shown last.
    pub fn last(&self) -> &str {
        &self.last
    }

    /// Removes the spinner, leaving the terminal as it was.
    pub fn finish(&self) {
        if let Some(spinner) = &self.spinner {
            spinner.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}
