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

use std::{collections::BTreeMap, fmt};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// Oz's default `accessCommand` (the CRD default of `spec.accessConfig.accessCommand`).
pub const DEFAULT_ACCESS_COMMAND: &str =
    "kubectl exec -ti -n {{ .Metadata.Namespace }} {{ .Metadata.Name }} -- /bin/sh";

/// What Go's `text/template` prints for a value that does not exist.
const NO_VALUE: &str = "<no value>";

/// The characters Go's template lexer treats as space, for trimming and between tokens.
const GO_SPACE: [char; 4] = [' ', '\t', '\r', '\n'];

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
    fn of(template: &str, offset: usize) -> Self {
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

/// A parsed template: text to copy, and values to look up in the pod metadata.
enum Segment<'t> {
    Text(&'t str),
    Value(Value),
}

/// What one action prints.
#[derive(Debug, PartialEq, Eq)]
enum Value {
    /// A quoted string constant.
    Literal(String),
    /// A scalar field of the metadata.
    Scalar(ScalarField),
    /// A whole labels or annotations map.
    Map(MapField),
    /// One entry of a map, and what to print when the key is missing.
    MapEntry {
        map: MapField,
        key: String,
        when_missing: &'static str,
    },
}

/// The scalar `ObjectMeta` fields that can be printed, by their Go names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ScalarField {
    Name,
    GenerateName,
    Namespace,
    Uid,
    ResourceVersion,
    Generation,
}

/// The map-valued `ObjectMeta` fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MapField {
    Labels,
    Annotations,
}

impl Value {
    fn render_into(&self, pod: &ObjectMeta, out: &mut String) {
        match self {
            Self::Literal(text) => out.push_str(text),
            Self::Scalar(field) => out.push_str(&field.read(pod)),
            Self::Map(field) => {
                // Go's fmt prints a map as map[k1:v1 k2:v2] with sorted keys, and byte-wise
                // sorted is BTreeMap's order too.
                let entries: Vec<String> = field
                    .read(pod)
                    .into_iter()
                    .flatten()
                    .map(|(key, value)| format!("{key}:{value}"))
                    .collect();
                out.push_str("map[");
                out.push_str(&entries.join(" "));
                out.push(']');
            }
            Self::MapEntry {
                map,
                key,
                when_missing,
            } => out.push_str(
                map.read(pod)
                    .and_then(|entries| entries.get(key))
                    .map_or(*when_missing, String::as_str),
            ),
        }
    }
}

impl ScalarField {
    /// Go names of the scalar fields, for parsing and for hints.
    const ALL: [(&'static str, Self); 6] = [
        ("Name", Self::Name),
        ("GenerateName", Self::GenerateName),
        ("Namespace", Self::Namespace),
        ("UID", Self::Uid),
        ("ResourceVersion", Self::ResourceVersion),
        ("Generation", Self::Generation),
    ];

    /// The value as Go prints it: unset strings are empty, an unset generation is 0.
    fn read(self, pod: &ObjectMeta) -> String {
        let text = |field: &Option<String>| field.clone().unwrap_or_default();
        match self {
            Self::Name => text(&pod.name),
            Self::GenerateName => text(&pod.generate_name),
            Self::Namespace => text(&pod.namespace),
            Self::Uid => text(&pod.uid),
            Self::ResourceVersion => text(&pod.resource_version),
            Self::Generation => pod.generation.unwrap_or_default().to_string(),
        }
    }
}

impl MapField {
    fn read(self, pod: &ObjectMeta) -> Option<&BTreeMap<String, String>> {
        match self {
            Self::Labels => pod.labels.as_ref(),
            Self::Annotations => pod.annotations.as_ref(),
        }
    }
}

/// `ObjectMeta` fields Go has but oz cannot print the way Go would (timestamps, pointers and
/// lists of structs print Go-internal representations nobody should depend on).
const UNPRINTABLE_FIELDS: [&str; 7] = [
    "SelfLink",
    "CreationTimestamp",
    "DeletionTimestamp",
    "DeletionGracePeriodSeconds",
    "OwnerReferences",
    "Finalizers",
    "ManagedFields",
];

/// Go's template keywords, none of which oz implements.
const KEYWORDS: [&str; 10] = [
    "if", "else", "end", "range", "with", "define", "template", "block", "break", "continue",
];

/// Go's predefined template functions other than `index`.
const OTHER_BUILTINS: [&str; 18] = [
    "and", "call", "html", "js", "len", "not", "or", "print", "printf", "println", "slice",
    "urlquery", "eq", "ge", "gt", "le", "lt", "ne",
];

/// Splits a template into text and actions, the way Go's lexer does, and checks each action.
fn parse(template: &str) -> Result<Vec<Segment<'_>>, RenderError> {
    let mut segments = Vec::new();
    let mut text_start = 0;
    let mut trim_text_start = false;
    loop {
        let open = template[text_start..].find("{{").map(|at| text_start + at);
        let mut text = &template[text_start..open.unwrap_or(template.len())];
        if trim_text_start {
            text = text.trim_start_matches(GO_SPACE);
        }
        let Some(open) = open else {
            push_text(&mut segments, text);
            return Ok(segments);
        };

        let mut body = open + 2;
        if has_left_trim_marker(&template[body..]) {
            text = text.trim_end_matches(GO_SPACE);
            body += 2;
        }
        push_text(&mut segments, text);

        let close = if template[body..].starts_with("/*") {
            skip_comment(template, open, body)?
        } else {
            let (value, close) = parse_action(template, open, body)?;
            segments.push(Segment::Value(value));
            close
        };
        text_start = close.end;
        trim_text_start = close.trims_following_text;
    }
}

fn push_text<'t>(segments: &mut Vec<Segment<'t>>, text: &'t str) {
    if !text.is_empty() {
        segments.push(Segment::Text(text));
    }
}

/// Where an action's closing delimiter ends, and whether it was ` -}}`.
struct Close {
    end: usize,
    trims_following_text: bool,
}

/// Go's rule: `{{-` trims only when followed by a space, so `{{-3}}` is the number -3.
fn has_left_trim_marker(after_open: &str) -> bool {
    let bytes = after_open.as_bytes();
    bytes.len() >= 2 && bytes[0] == b'-' && is_go_space(bytes[1])
}

/// Recognises `}}` or ` -}}` at `rest`, returning how many bytes it spans and whether it trims.
fn closing_delimiter(rest: &str) -> Option<(usize, bool)> {
    let bytes = rest.as_bytes();
    if rest.starts_with("}}") {
        Some((2, false))
    } else if bytes.len() >= 4 && is_go_space(bytes[0]) && rest[1..].starts_with("-}}") {
        Some((4, true))
    } else {
        None
    }
}

fn is_go_space(byte: u8) -> bool {
    GO_SPACE.contains(&char::from(byte))
}

/// Skips `/* ... */`, which Go requires to sit directly against the delimiters.
fn skip_comment(template: &str, open: usize, body: usize) -> Result<Close, RenderError> {
    let syntax = |problem: &str| RenderError::Syntax {
        at: Position::of(template, open),
        problem: problem.to_owned(),
    };
    let comment_end = template[body + 2..]
        .find("*/")
        .map(|at| body + 2 + at + 2)
        .ok_or_else(|| syntax("unclosed comment: end it with */}}"))?;
    let (length, trims) = closing_delimiter(&template[comment_end..]).ok_or_else(|| {
        syntax("comment ends before closing delimiter: write */}} or */ -}} with nothing between")
    })?;
    Ok(Close {
        end: comment_end + length,
        trims_following_text: trims,
    })
}

/// One lexical item inside an action, with its byte offset.
#[derive(Debug)]
enum Token {
    /// `.A.B.C`; empty for `.` alone.
    Field(Vec<String>),
    /// The `index` function.
    Index,
    /// A quoted string, unquoted.
    Text(String),
}

/// Lexes the action starting at `body` and turns it into the value it prints.
fn parse_action(template: &str, open: usize, body: usize) -> Result<(Value, Close), RenderError> {
    let mut tokens = Vec::new();
    let mut at = body;
    let close = loop {
        let rest = &template[at..];
        if rest.is_empty() {
            return Err(RenderError::Syntax {
                at: Position::of(template, open),
                problem: "unclosed action: end it with }}".to_owned(),
            });
        }
        if let Some((length, trims)) = closing_delimiter(rest) {
            break Close {
                end: at + length,
                trims_following_text: trims,
            };
        }
        if is_go_space(rest.as_bytes()[0]) {
            at += 1;
            continue;
        }
        let (token, length) = lex_token(template, at)?;
        tokens.push((token, at));
        at += length;
    };
    Ok((action_value(template, open, tokens)?, close))
}

/// Reads one token at byte offset `at`, refusing anything outside the supported subset.
fn lex_token(template: &str, at: usize) -> Result<(Token, usize), RenderError> {
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

/// Checks an action's tokens form one supported value.
fn action_value(
    template: &str,
    open: usize,
    tokens: Vec<(Token, usize)>,
) -> Result<Value, RenderError> {
    let mut tokens = tokens.into_iter();
    let Some((first, first_at)) = tokens.next() else {
        return Err(RenderError::Syntax {
            at: Position::of(template, open),
            problem: "missing value for command: an action must name a value, as in \
                      {{ .Metadata.Name }}"
                .to_owned(),
        });
    };
    let arguments: Vec<(Token, usize)> = tokens.collect();
    match first {
        Token::Index => index_value(template, first_at, arguments),
        Token::Field(_) | Token::Text(_) if !arguments.is_empty() => Err(RenderError::Syntax {
            at: Position::of(template, arguments[0].1),
            problem: "an action holds a single value; this one has more than one".to_owned(),
        }),
        Token::Field(names) => resolve_field(template, first_at, &names),
        Token::Text(text) => Ok(Value::Literal(text)),
    }
}

/// Checks `index <map> "key"`.
fn index_value(
    template: &str,
    index_at: usize,
    arguments: Vec<(Token, usize)>,
) -> Result<Value, RenderError> {
    let unsupported = |at: usize, construct: &str| RenderError::Unsupported {
        at: Position::of(template, at),
        construct: construct.to_owned(),
    };
    let mut arguments = arguments.into_iter();
    let (collection, key) = match (arguments.next(), arguments.next(), arguments.next()) {
        (None, ..) => {
            return Err(RenderError::Syntax {
                at: Position::of(template, index_at),
                problem: "index needs a map and a key, as in \
                          {{ index .Metadata.Labels \"app.kubernetes.io/name\" }}"
                    .to_owned(),
            });
        }
        (Some((_, at)), None, _) => return Err(unsupported(at, "`index` without a key")),
        (Some(_), Some(_), Some((_, at))) => {
            return Err(unsupported(at, "`index` with more than one key"));
        }
        (Some(collection), Some(key), None) => (collection, key),
    };

    let (Token::Field(names), collection_at) = collection else {
        return Err(unsupported(
            collection.1,
            "`index` of something other than .Metadata.Labels or .Metadata.Annotations",
        ));
    };
    let Value::Map(map) = resolve_field(template, collection_at, &names)? else {
        return Err(unsupported(
            collection_at,
            &format!(
                "`index` of .{}, which is not .Metadata.Labels or .Metadata.Annotations",
                names.join(".")
            ),
        ));
    };
    let (Token::Text(key), _) = key else {
        return Err(unsupported(
            key.1,
            "an `index` key that is not a quoted string",
        ));
    };
    Ok(Value::MapEntry {
        map,
        key,
        when_missing: "",
    })
}

/// Resolves a field path against `struct{ Metadata metav1.ObjectMeta }`.
fn resolve_field(template: &str, at: usize, names: &[String]) -> Result<Value, RenderError> {
    let position = Position::of(template, at);
    let path = format!(".{}", names.join("."));
    let unknown = |hint: String| RenderError::UnknownField {
        at: position,
        path: path.clone(),
        hint,
    };
    let unsupported = |construct: String| RenderError::Unsupported {
        at: position,
        construct,
    };

    let (top, field, below) = match names {
        [] => return Err(unsupported("`.` (the whole template data)".to_owned())),
        [top, ..] if top != "Metadata" => {
            let hint = if top.eq_ignore_ascii_case("metadata") {
                "Go field names are case-sensitive: write .Metadata".to_owned()
            } else {
                "the only top-level field is .Metadata, the target pod's metadata".to_owned()
            };
            return Err(unknown(hint));
        }
        [_] => {
            return Err(unsupported(
                ".Metadata on its own (print one of its fields, such as .Metadata.Name)".to_owned(),
            ));
        }
        [top, field, below @ ..] => (top, field.as_str(), below),
    };

    let map = match field {
        "Labels" => Some(MapField::Labels),
        "Annotations" => Some(MapField::Annotations),
        _ => None,
    };
    if let Some(map) = map {
        return match below {
            [] => Ok(Value::Map(map)),
            [key] => Ok(Value::MapEntry {
                map,
                key: key.clone(),
                when_missing: NO_VALUE,
            }),
            [..] => Err(unsupported(format!(
                "{path} (a label or annotation value is a string and has no fields)"
            ))),
        };
    }

    if let Some((name, scalar)) = ScalarField::ALL.iter().find(|(name, _)| *name == field) {
        return match below {
            [] => Ok(Value::Scalar(*scalar)),
            [..] => Err(unknown(format!(
                ".{top}.{name} is a string and has no fields"
            ))),
        };
    }
    if UNPRINTABLE_FIELDS.contains(&field) {
        return Err(unsupported(format!(".{top}.{field}")));
    }

    let known = ScalarField::ALL
        .iter()
        .map(|(name, _)| *name)
        .chain(["Labels", "Annotations"]);
    let hint = match known.clone().find(|name| name.eq_ignore_ascii_case(field)) {
        Some(name) => format!("Go field names are case-sensitive: write .{top}.{name}"),
        None => format!(
            "the fields oz can print are {}",
            known
                .map(|name| format!(".{top}.{name}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    Err(unknown(hint))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> ObjectMeta {
        ObjectMeta {
            name: Some("deployment-example-1a2b3c4d".into()),
            namespace: Some("oz-system".into()),
            generate_name: Some("deployment-example-".into()),
            uid: Some("0f1e2d3c-0000-4000-8000-000000000001".into()),
            resource_version: Some("4242".into()),
            generation: Some(3),
            labels: Some(BTreeMap::from([
                ("app".into(), "example".into()),
                ("app.kubernetes.io/name".into(), "shop".into()),
                ("pod-template-hash".into(), "5d4f8".into()),
            ])),
            annotations: Some(BTreeMap::from([(
                "kubectl.kubernetes.io/default-container".into(),
                "main".into(),
            )])),
            ..ObjectMeta::default()
        }
    }

    fn render(template: &str) -> String {
        render_access_command(template, &pod()).unwrap_or_else(|error| panic!("{error}"))
    }

    fn render_error(template: &str) -> RenderError {
        let error = render_access_command(template, &pod()).expect_err(template);
        assert_eq!(
            validate_access_command(template),
            Err(error.clone()),
            "validate and render must agree on {template:?}"
        );
        error
    }

    fn position(line: usize, column: usize) -> Position {
        Position { line, column }
    }

    #[test]
    fn the_default_is_ozs() {
        assert_eq!(
            DEFAULT_ACCESS_COMMAND,
            "kubectl exec -ti -n {{ .Metadata.Namespace }} {{ .Metadata.Name }} -- /bin/sh"
        );
        assert_eq!(validate_access_command(DEFAULT_ACCESS_COMMAND), Ok(()));
    }

    #[test]
    fn renders_the_default_as_oz_does() {
        assert_eq!(
            render(DEFAULT_ACCESS_COMMAND),
            "kubectl exec -ti -n oz-system deployment-example-1a2b3c4d -- /bin/sh"
        );
        // Oz's own unit test (access_command_test.go).
        let oz_test_pod = ObjectMeta {
            name: Some("podName".into()),
            namespace: Some("namespace".into()),
            ..ObjectMeta::default()
        };
        assert_eq!(
            render_access_command(DEFAULT_ACCESS_COMMAND, &oz_test_pod),
            Ok("kubectl exec -ti -n namespace podName -- /bin/sh".into())
        );
    }

    #[test]
    fn renders_ozs_example_template() {
        // examples/pod_access_template.yaml
        assert_eq!(
            render(
                "kubectl exec -ti -n {{ .Metadata.Namespace }} {{ .Metadata.Name }} -- /bin/bash"
            ),
            "kubectl exec -ti -n oz-system deployment-example-1a2b3c4d -- /bin/bash"
        );
    }

    #[test]
    fn spacing_inside_actions_does_not_matter() {
        assert_eq!(render("{{.Metadata.Name}}"), "deployment-example-1a2b3c4d");
        assert_eq!(
            render("{{\t.Metadata.Namespace\n}}/{{   .Metadata.Name   }}"),
            "oz-system/deployment-example-1a2b3c4d"
        );
    }

    #[test]
    fn renders_every_scalar_field() {
        assert_eq!(
            render(
                "{{.Metadata.GenerateName}}|{{.Metadata.UID}}|{{.Metadata.ResourceVersion}}|{{.Metadata.Generation}}"
            ),
            "deployment-example-|0f1e2d3c-0000-4000-8000-000000000001|4242|3"
        );
        // Unset fields print Go's zero values.
        let bare = ObjectMeta::default();
        assert_eq!(
            render_access_command("[{{.Metadata.Name}}][{{.Metadata.Generation}}]", &bare),
            Ok("[][0]".into())
        );
    }

    #[test]
    fn renders_labels_and_annotations() {
        assert_eq!(render("{{ .Metadata.Labels.app }}"), "example");
        assert_eq!(
            render(r#"{{ index .Metadata.Labels "app.kubernetes.io/name" }}"#),
            "shop"
        );
        assert_eq!(
            render(r#"{{ index .Metadata.Labels "pod-template-hash" }}"#),
            "5d4f8"
        );
        assert_eq!(
            render("{{ index .Metadata.Annotations `kubectl.kubernetes.io/default-container` }}"),
            "main"
        );
        assert_eq!(
            render(
                r#"kubectl exec -ti -n {{ .Metadata.Namespace }} {{ .Metadata.Name }} -c {{ index .Metadata.Annotations "kubectl.kubernetes.io/default-container" }} -- sh"#
            ),
            "kubectl exec -ti -n oz-system deployment-example-1a2b3c4d -c main -- sh"
        );
    }

    #[test]
    fn missing_keys_render_as_go_does() {
        // Field syntax on a map gives Go's "<no value>"; index gives the zero value "".
        assert_eq!(render("[{{ .Metadata.Labels.missing }}]"), "[<no value>]");
        assert_eq!(render(r#"[{{ index .Metadata.Labels "missing" }}]"#), "[]");
        let bare = ObjectMeta::default();
        assert_eq!(
            render_access_command(
                r#"[{{ .Metadata.Annotations.x }}][{{ index .Metadata.Labels "x" }}]"#,
                &bare
            ),
            Ok("[<no value>][]".into())
        );
    }

    #[test]
    fn renders_whole_maps_as_go_prints_them() {
        assert_eq!(
            render("{{ .Metadata.Labels }}"),
            "map[app:example app.kubernetes.io/name:shop pod-template-hash:5d4f8]"
        );
        assert_eq!(
            render_access_command("{{ .Metadata.Annotations }}", &ObjectMeta::default()),
            Ok("map[]".into())
        );
    }

    #[test]
    fn trim_markers_remove_adjacent_whitespace() {
        assert_eq!(
            render("a \t\n {{- .Metadata.Namespace -}} \n\t b"),
            "aoz-systemb"
        );
        assert_eq!(render("a  {{- .Metadata.Namespace }}  b"), "aoz-system  b");
        assert_eq!(render("a  {{ .Metadata.Namespace -}}  b"), "a  oz-systemb");
        assert_eq!(
            render("kubectl exec\n  {{- \" -n \" -}}\n  {{ .Metadata.Namespace }}"),
            "kubectl exec -n oz-system"
        );
        // Only whitespace is trimmed, and trimming at the template's edges is harmless.
        assert_eq!(render("x.{{- .Metadata.Namespace -}}.y"), "x.oz-system.y");
        assert_eq!(render("{{- .Metadata.Namespace -}}"), "oz-system");
        // Without the space, `-` is not a trim marker: ` - ` inside text stays.
        assert_eq!(render("-{{ .Metadata.Namespace }}-"), "-oz-system-");
    }

    #[test]
    fn comments_render_nothing() {
        assert_eq!(render("a {{/* why */}} b"), "a  b");
        assert_eq!(render("a {{- /* why */ -}} b"), "ab");
        assert_eq!(render("a{{/* }} is fine in here */}}b"), "ab");
        assert_eq!(render("a{{/* multi\nline */}}b"), "ab");
    }

    #[test]
    fn quoted_strings_print_themselves() {
        assert_eq!(render(r#"{{ "{{" }} and {{ "}}" }}"#), "{{ and }}");
        assert_eq!(
            render(r#"{{ "tab\there \"q\" \u00e9 \x41 \101" }}"#),
            "tab\there \"q\" é A A"
        );
        assert_eq!(render("{{ `raw \\n` }}"), "raw \\n");
    }

    #[test]
    fn plain_text_is_copied_exactly() {
        assert_eq!(render(""), "");
        assert_eq!(render("no actions at all }} {"), "no actions at all }} {");
        assert_eq!(
            render("ünïcödé {{ .Metadata.Namespace }} ✓\n"),
            "ünïcödé oz-system ✓\n"
        );
    }

    #[test]
    fn refuses_unsupported_constructs_with_their_position() {
        let cases: &[(&str, &str, Position)] = &[
            (
                "{{ .Metadata.Name | printf \"%s\" }}",
                "a pipeline `|`",
                position(1, 19),
            ),
            (
                "{{ if .Metadata.Name }}x{{ end }}",
                "the `if` action",
                position(1, 4),
            ),
            (
                "{{ range .Metadata.Labels }}{{ end }}",
                "the `range` action",
                position(1, 4),
            ),
            (
                "{{ with .Metadata }}{{ end }}",
                "the `with` action",
                position(1, 4),
            ),
            (
                "{{ define \"x\" }}{{ end }}",
                "the `define` action",
                position(1, 4),
            ),
            (
                "{{ template \"x\" }}",
                "the `template` action",
                position(1, 4),
            ),
            (
                "{{ printf \"%s\" .Metadata.Name }}",
                "the function `printf`",
                position(1, 4),
            ),
            (
                "{{ len .Metadata.Labels }}",
                "the function `len`",
                position(1, 4),
            ),
            (
                "{{ $name := .Metadata.Name }}",
                "the variable `$name`",
                position(1, 4),
            ),
            (
                "{{ (.Metadata.Name) }}",
                "a parenthesized expression",
                position(1, 4),
            ),
            ("{{ 42 }}", "the number 42", position(1, 4)),
            ("{{-3}}", "the number -3", position(1, 3)),
            ("{{ true }}", "the constant `true`", position(1, 4)),
            ("{{ 'x' }}", "a character constant", position(1, 4)),
            ("{{ . }}", "`.` (the whole template data)", position(1, 4)),
            (
                "{{ .Metadata.CreationTimestamp }}",
                ".Metadata.CreationTimestamp",
                position(1, 4),
            ),
            (
                "{{ index .Metadata.Name \"x\" }}",
                "`index` of .Metadata.Name, which is not .Metadata.Labels or .Metadata.Annotations",
                position(1, 10),
            ),
            (
                "{{ index .Metadata.Labels }}",
                "`index` without a key",
                position(1, 10),
            ),
            (
                "{{ index .Metadata.Labels \"a\" \"b\" }}",
                "`index` with more than one key",
                position(1, 31),
            ),
            (
                "{{ index .Metadata.Labels .Metadata.Name }}",
                "an `index` key that is not a quoted string",
                position(1, 27),
            ),
            ("line one\n  {{ if .X }}", "the `if` action", position(2, 6)),
        ];
        for (template, construct, at) in cases {
            let error = render_error(template);
            assert_eq!(
                error,
                RenderError::Unsupported {
                    at: *at,
                    construct: (*construct).to_owned()
                },
                "{template}"
            );
        }
    }

    #[test]
    fn unsupported_errors_explain_what_is_supported() {
        let message = render_error("{{ .Metadata.Name | upper }}").to_string();
        assert!(message.contains("a pipeline `|`"), "{message}");
        assert!(message.contains("line 1, column 19"), "{message}");
        assert!(
            message.contains("{{ index .Metadata.Labels \"key\" }}"),
            "{message}"
        );
    }

    #[test]
    fn refuses_malformed_templates_as_go_does() {
        let cases: &[(&str, &str, Position)] = &[
            (
                "kubectl {{ .Metadata.Name",
                "unclosed action",
                position(1, 9),
            ),
            ("{{ \"open }}", "unterminated quoted string", position(1, 4)),
            (
                "{{ `open }}",
                "unterminated raw quoted string",
                position(1, 4),
            ),
            ("{{/* open }}", "unclosed comment", position(1, 1)),
            (
                "{{/* c */ }}",
                "comment ends before closing delimiter",
                position(1, 1),
            ),
            ("{{ }}", "missing value for command", position(1, 1)),
            (
                "{{ upper .Metadata.Name }}",
                "function \"upper\" not defined",
                position(1, 4),
            ),
            (
                "{{ Metadata.Name }}",
                "fields start with a dot",
                position(1, 4),
            ),
            (
                "{{ .Metadata.Labels.app-name }}",
                "needs index",
                position(1, 24),
            ),
            (
                "{{ .Metadata.Labels.app.kubernetes.io/name }}",
                "needs index",
                position(1, 38),
            ),
            ("{{ .Metadata.Name.}}", "unexpected '.'", position(1, 18)),
            (
                "{{ .Metadata.Name .Metadata.Namespace }}",
                "single value",
                position(1, 19),
            ),
            ("{{-}}", "a trim marker needs a space", position(1, 3)),
            ("{{ \"\\q\" }}", "invalid escape \\q", position(1, 4)),
            ("{{ \"\\xff\" }}", "invalid escape \\x", position(1, 4)),
            ("{{ # }}", "unexpected '#'", position(1, 4)),
        ];
        for (template, problem_part, at) in cases {
            match render_error(template) {
                RenderError::Syntax {
                    at: actual_at,
                    problem,
                } => {
                    assert!(problem.contains(problem_part), "{template}: {problem}");
                    assert_eq!(actual_at, *at, "{template}: {problem}");
                }
                other => panic!("{template}: expected a syntax error, got {other:?}"),
            }
        }
    }

    #[test]
    fn refuses_fields_the_metadata_does_not_have() {
        let cases: &[(&str, &str, &str)] = &[
            ("{{ .metadata.name }}", ".metadata.name", "write .Metadata"),
            (
                "{{ .Pod.Name }}",
                ".Pod.Name",
                "the only top-level field is .Metadata",
            ),
            (
                "{{ .Metadata.name }}",
                ".Metadata.name",
                "write .Metadata.Name",
            ),
            (
                "{{ .Metadata.Uid }}",
                ".Metadata.Uid",
                "write .Metadata.UID",
            ),
            (
                "{{ .Metadata.Node }}",
                ".Metadata.Node",
                ".Metadata.Namespace, .Metadata.UID",
            ),
            (
                "{{ .Metadata.Name.First }}",
                ".Metadata.Name.First",
                "is a string and has no fields",
            ),
        ];
        for (template, path, hint_part) in cases {
            match render_error(template) {
                RenderError::UnknownField {
                    at,
                    path: actual_path,
                    hint,
                } => {
                    assert_eq!(actual_path, *path, "{template}");
                    assert!(hint.contains(hint_part), "{template}: {hint}");
                    assert_eq!(at, position(1, 4), "{template}");
                }
                other => panic!("{template}: expected an unknown field, got {other:?}"),
            }
        }
    }

    #[test]
    fn positions_count_characters_and_lines() {
        assert_eq!(Position::of("ab\ncd", 0), position(1, 1));
        assert_eq!(Position::of("ab\ncd", 4), position(2, 2));
        assert_eq!(Position::of("éé{{", 4), position(1, 3));
        assert_eq!(position(3, 7).to_string(), "line 3, column 7");
    }
}
