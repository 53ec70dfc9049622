//! Text that others wrote, made safe to print on a terminal: a request's reason and ticket, an
//! approval's comment, a condition's message, a command recorded in the audit file, an error the
//! apiserver relays. Raw, an escape sequence in such text (ESC, CSI) would move the cursor,
//! recolour or retitle the reader's terminal, or hide what follows it, and bidi overrides would
//! show the text in another order than it is. Each such character is shown as an escape instead
//! (`\u{1b}`), so the reader sees that it is there.
//!
//! Every human-facing output goes through here: table cells ([`crate::table::Table`]), the
//! fields of `get requests NAME`, progress lines, the access instructions and the error line.
//! Machine formats (`-o json|yaml`, CSV) carry the text as it is, escaped by their own rules.

use std::borrow::Cow;

/// Whether `c` changes how a terminal shows the text after it: a control character (C0, DEL,
/// C1, which includes the one-character CSI) or a bidirectional override or isolate.
fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
        )
}

/// `text` with each unsafe character shown as `\u{..}`; newlines and tabs are kept, for text
/// laid out on several lines.
pub fn printable(text: &str) -> Cow<'_, str> {
    escape(text, |c| match c {
        '\n' | '\t' => Some(c),
        _ => None,
    })
}

/// `text` on one line, for a table cell or a one-line message: newlines, carriage returns and
/// tabs become spaces, other unsafe characters are shown as `\u{..}`.
pub fn printable_line(text: &str) -> Cow<'_, str> {
    escape(text, |c| match c {
        '\n' | '\r' | '\t' => Some(' '),
        _ => None,
    })
}

/// `text` with each unsafe character replaced by what `keep` says, else by its escape.
fn escape(text: &str, keep: impl Fn(char) -> Option<char>) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !is_unsafe(c) {
            out.push(c);
        } else if let Some(kept) = keep(c) {
            out.push(kept);
        } else {
            out.push_str(&c.escape_unicode().to_string());
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_left_alone() {
        for text in ["INC-42: web returns 502s", "jürgen's 😀 reason", ""] {
            assert!(matches!(printable(text), Cow::Borrowed(t) if t == text));
            assert!(matches!(printable_line(text), Cow::Borrowed(t) if t == text));
        }
    }

    #[test]
    fn escape_sequences_are_shown_not_run() {
        // Clear the screen, then a title that hides what follows.
        let reason = "ok\u{1b}[2J\u{1b}]0;pwned\u{7}";
        assert_eq!(printable(reason), r"ok\u{1b}[2J\u{1b}]0;pwned\u{7}");
        assert_eq!(printable_line(reason), r"ok\u{1b}[2J\u{1b}]0;pwned\u{7}");
        // The one-character CSI (C1), DEL, NUL, and a backspace that would erase what is shown.
        assert_eq!(
            printable_line("a\u{9b}31mb\u{7f}\u{0}c\u{8}"),
            r"a\u{9b}31mb\u{7f}\u{0}c\u{8}"
        );
        // A right-to-left override would show "approved" text reversed.
        assert_eq!(
            printable_line("x\u{202e}y\u{2066}z"),
            r"x\u{202e}y\u{2066}z"
        );
    }

    #[test]
    fn layout_characters_are_kept_or_flattened() {
        assert_eq!(
            printable("two\nlines\tand a tab\r"),
            "two\nlines\tand a tab\\u{d}"
        );
        assert_eq!(
            printable_line("two\nlines\tand\ra tab"),
            "two lines and a tab"
        );
    }
}
