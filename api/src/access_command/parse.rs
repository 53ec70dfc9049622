//! The parser: a template split into text and actions as Go's lexer does (delimiters, trim
//! markers, comments), and each action's tokens checked to form one supported value.

use super::{
    Position, RenderError,
    lex::{GO_SPACE, Token, closing_delimiter, is_go_space, lex_token},
    value::{Value, resolve_field},
};

/// A parsed template: text to copy, and values to look up in the pod metadata.
pub(super) enum Segment<'t> {
    Text(&'t str),
    Value(Value),
}

/// Splits a template into text and actions, the way Go's lexer does, and checks each action.
pub(super) fn parse(template: &str) -> Result<Vec<Segment<'_>>, RenderError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_left_trim_marker_needs_a_space_after_the_dash() {
        assert!(has_left_trim_marker("- .Metadata.Name }}"));
        assert!(has_left_trim_marker("-\t.Metadata.Name }}"));
        assert!(!has_left_trim_marker("-3}}"));
        assert!(!has_left_trim_marker("-"));
    }

    #[test]
    fn templates_split_into_text_and_values_with_trimmed_text_dropped() {
        let segments = parse("a {{- \"b\" -}} c{{/* note */}}d").unwrap();
        let texts: Vec<&str> = segments
            .iter()
            .map(|segment| match segment {
                Segment::Text(text) => *text,
                Segment::Value(Value::Literal(text)) => text.as_str(),
                Segment::Value(other) => panic!("unexpected value {other:?}"),
            })
            .collect();
        assert_eq!(texts, ["a", "b", "c", "d"]);
    }
}
