//! The lexer of an action's inside: Go's tokens, of which only fields, `index` and quoted
//! strings are supported; every other token is refused by name.

use super::{Position, RenderError};

/// The characters Go's template lexer treats as space, for trimming and between tokens.
pub(super) const GO_SPACE: [char; 4] = [' ', '\t', '\r', '\n'];

/// Go's template keywords, none of which oz implements.
const KEYWORDS: [&str; 10] = [
    "if", "else", "end", "range", "with", "define", "template", "block", "break", "continue",
];

/// Go's predefined template functions other than `index`.
const OTHER_BUILTINS: [&str; 18] = [
    "and", "call", "html", "js", "len", "not", "or", "print", "printf", "println", "slice",
    "urlquery", "eq", "ge", "gt", "le", "lt", "ne",
];

/// One lexical item inside an action, with its byte offset.
#[derive(Debug)]
pub(super) enum Token {
    /// `.A.B.C`; empty for `.` alone.
    Field(Vec<String>),
    /// The `index` function.
    Index,
    /// A quoted string, unquoted.
    Text(String),
}

/// Reads one token at byte offset `at`, refusing anything outside the supported subset.
pub(super) fn lex_token(template: &str, at: usize) -> Result<(Token, usize), RenderError> {
    let rest = &template[at..];
    let position = Position::of(template, at);
    let unsupported = |construct: String| RenderError::Unsupported {
        at: position,
        construct,
    };
    let syntax = |problem: String| RenderError::Syntax {
        at: position,
        problem,
    };
    let first = rest.chars().next().unwrap_or_default();
    let second = rest[first.len_utf8()..].chars().next();

    match first {
        '"' => lex_interpreted_string(rest).map_err(syntax),
        '`' => {
            let length = rest[1..]
                .find('`')
                .ok_or_else(|| syntax("unterminated raw quoted string".to_owned()))?;
            // Go's strconv.Unquote drops carriage returns from raw strings.
            let text = rest[1..=length].replace('\r', "");
            Ok((Token::Text(text), length + 2))
        }
        '.' if second.is_some_and(is_identifier_start) => lex_field_chain(template, at),
        '.' if second.is_some_and(|c| c.is_ascii_digit()) => {
            Err(unsupported(format!("the number {}", leading_number(rest))))
        }
        '.' => Ok((Token::Field(Vec::new()), 1)),
        '$' => Err(unsupported(format!(
            "the variable `${}`",
            leading_identifier(&rest[1..])
        ))),
        '|' => Err(unsupported("a pipeline `|`".to_owned())),
        '(' | ')' => Err(unsupported("a parenthesized expression".to_owned())),
        ':' | '=' => Err(unsupported("a variable assignment".to_owned())),
        ',' => Err(unsupported("a `,` (range variables)".to_owned())),
        '\'' => Err(unsupported("a character constant".to_owned())),
        '0'..='9' => Err(unsupported(format!("the number {}", leading_number(rest)))),
        '+' | '-' if second.is_some_and(|c| c.is_ascii_digit() || c == '.') => {
            Err(unsupported(format!("the number {}", leading_number(rest))))
        }
        '-' => Err(syntax(
            "unexpected \"-\": a trim marker needs a space, as in {{- .Metadata.Name -}}"
                .to_owned(),
        )),
        c if is_identifier_start(c) => {
            let word = leading_identifier(rest);
            match word {
                "index" => Ok((Token::Index, word.len())),
                keyword if KEYWORDS.contains(&keyword) => {
                    Err(unsupported(format!("the `{keyword}` action")))
                }
                "true" | "false" | "nil" => Err(unsupported(format!("the constant `{word}`"))),
                function if OTHER_BUILTINS.contains(&function) => {
                    Err(unsupported(format!("the function `{function}`")))
                }
                "Metadata" => Err(syntax(
                    "function \"Metadata\" not defined: fields start with a dot, as in .Metadata.Name"
                        .to_owned(),
                )),
                other => Err(syntax(format!("function {other:?} not defined"))),
            }
        }
        other => Err(syntax(format!("unexpected {other:?} in action"))),
    }
}

/// Lexes `.A.B.C` and checks that it ends where Go's lexer expects a field to end.
fn lex_field_chain(template: &str, at: usize) -> Result<(Token, usize), RenderError> {
    let rest = &template[at..];
    let mut names = Vec::new();
    let mut length = 0;
    while rest[length..].starts_with('.')
        && rest[length + 1..]
            .chars()
            .next()
            .is_some_and(is_identifier_start)
    {
        let name = leading_identifier(&rest[length + 1..]);
        names.push(name.to_owned());
        length += 1 + name.len();
    }

    let after = &rest[length..];
    let ends_cleanly = match after.chars().next() {
        None => true,
        Some(next) => {
            GO_SPACE.contains(&next)
                || closing_delimiter(after).is_some()
                || matches!(next, '|' | '(' | ')' | ',' | ':')
        }
    };
    if ends_cleanly {
        return Ok((Token::Field(names), length));
    }
    let next = after.chars().next().unwrap_or_default();
    Err(RenderError::Syntax {
        at: Position::of(template, at + length),
        problem: format!(
            "unexpected {next:?} after .{}: a key that is not made of letters, digits and _ \
             needs index, as in {{{{ index .Metadata.Labels \"app.kubernetes.io/name\" }}}}",
            names.join(".")
        ),
    })
}

/// Lexes a Go double-quoted string and unquotes it, returning the token and its length.
fn lex_interpreted_string(rest: &str) -> Result<(Token, usize), String> {
    let mut text = String::new();
    let mut chars = rest.char_indices().skip(1);
    while let Some((offset, character)) = chars.next() {
        match character {
            '"' => return Ok((Token::Text(text), offset + 1)),
            '\n' => break,
            '\\' => {
                let Some((_, escape)) = chars.next() else {
                    break;
                };
                let mut hex_digits = |count: usize| -> Result<u32, String> {
                    let digits: String = (0..count)
                        .filter_map(|_| chars.next())
                        .map(|(_, c)| c)
                        .collect();
                    u32::from_str_radix(&digits, 16)
                        .ok()
                        .filter(|_| digits.len() == count)
                        .ok_or_else(|| {
                            format!("invalid escape \\{escape}{digits} in quoted string")
                        })
                };
                let decoded = match escape {
                    'a' => Some('\u{7}'),
                    'b' => Some('\u{8}'),
                    'f' => Some('\u{c}'),
                    'n' => Some('\n'),
                    'r' => Some('\r'),
                    't' => Some('\t'),
                    'v' => Some('\u{b}'),
                    '\\' => Some('\\'),
                    '"' => Some('"'),
                    'x' => char::from_u32(hex_digits(2)?).filter(char::is_ascii),
                    'u' => char::from_u32(hex_digits(4)?),
                    'U' => char::from_u32(hex_digits(8)?),
                    '0'..='7' => {
                        let digits: String = std::iter::once(escape)
                            .chain((0..2).filter_map(|_| chars.next()).map(|(_, c)| c))
                            .collect();
                        u32::from_str_radix(&digits, 8)
                            .ok()
                            .filter(|_| digits.len() == 3)
                            .and_then(char::from_u32)
                            .filter(char::is_ascii)
                    }
                    '\n' => break,
                    _ => None,
                };
                let decoded = decoded.ok_or_else(|| {
                    format!(
                        "invalid escape \\{escape} in quoted string (escapes that are not \
                         valid UTF-8 on their own, such as \\xff, are not supported)"
                    )
                })?;
                text.push(decoded);
            }
            other => text.push(other),
        }
    }
    Err("unterminated quoted string".to_owned())
}

/// Recognises `}}` or ` -}}` at `rest`, returning how many bytes it spans and whether it trims.
pub(super) fn closing_delimiter(rest: &str) -> Option<(usize, bool)> {
    let bytes = rest.as_bytes();
    if rest.starts_with("}}") {
        Some((2, false))
    } else if bytes.len() >= 4 && is_go_space(bytes[0]) && rest[1..].starts_with("-}}") {
        Some((4, true))
    } else {
        None
    }
}

pub(super) fn is_go_space(byte: u8) -> bool {
    GO_SPACE.contains(&char::from(byte))
}

/// Go identifiers start with a letter or `_`.
fn is_identifier_start(character: char) -> bool {
    character == '_' || character.is_alphabetic()
}

fn leading_identifier(text: &str) -> &str {
    let end = text
        .char_indices()
        .find(|(_, c)| !(*c == '_' || c.is_alphanumeric()))
        .map_or(text.len(), |(at, _)| at);
    &text[..end]
}

/// The number-ish prefix of `text`, for naming an unsupported number constant.
fn leading_number(text: &str) -> &str {
    let end = text
        .char_indices()
        .skip(1)
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_')))
        .map_or(text.len(), |(at, _)| at);
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(token: (Token, usize)) -> (String, usize) {
        match token {
            (Token::Text(text), length) => (text, length),
            other => panic!("expected a text token, got {other:?}"),
        }
    }

    #[test]
    fn interpreted_strings_unquote_go_escapes_and_report_their_length() {
        let lexed = |quoted: &str| lex_interpreted_string(quoted).map(text);
        assert_eq!(lexed(r#""a\tb" rest"#), Ok(("a\tb".to_owned(), 6)));
        assert_eq!(lexed(r#""\x41\u00e9\101""#), Ok(("AéA".to_owned(), 16)));
        assert_eq!(
            lexed(r#""\xff""#),
            Err(
                "invalid escape \\x in quoted string (escapes that are not valid UTF-8 on their \
                 own, such as \\xff, are not supported)"
                    .to_owned()
            )
        );
        assert_eq!(
            lexed("\"open\nline\""),
            Err("unterminated quoted string".to_owned())
        );
    }

    #[test]
    fn closing_delimiters_are_braces_or_a_trim_marker_after_a_space() {
        assert_eq!(closing_delimiter("}} after"), Some((2, false)));
        assert_eq!(closing_delimiter(" -}}"), Some((4, true)));
        assert_eq!(closing_delimiter("-}}"), None);
        assert_eq!(closing_delimiter(" }}"), None);
    }

    #[test]
    fn leading_names_and_numbers_stop_where_go_s_lexer_would() {
        for (text, identifier) in [("Name.rest", "Name"), ("_x1 y", "_x1")] {
            assert_eq!(leading_identifier(text), identifier, "{text:?}");
        }
        for (text, number) in [("-1.5e3 }}", "-1.5e3"), ("0x1F}}", "0x1F")] {
            assert_eq!(leading_number(text), number, "{text:?}");
        }
    }
}
