//! RFC 4180 CSV, for `ozctl history -o csv`.

/// One CSV field: quoted when it holds a comma, a quote, a line break or leading/trailing
/// spaces, with quotes doubled. Fields that start like a formula (`=`, `+`, `-`, `@`) get a
/// leading `'` so a spreadsheet shows them instead of evaluating them.
pub fn field(value: &str) -> String {
    let value = if value.starts_with(['=', '+', '-', '@']) {
        format!("'{value}")
    } else {
        value.to_string()
    };
    let needs_quotes =
        value.contains([',', '"', '\n', '\r']) || value.starts_with(' ') || value.ends_with(' ');
    if needs_quotes {
        format!("\"{}\"", value.replace('"', "\"\""))
    } else {
        value
    }
}

/// One CSV record, ending in CRLF as RFC 4180 says.
pub fn record<I, S>(fields: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let fields: Vec<String> = fields.into_iter().map(|f| field(f.as_ref())).collect();
    format!("{}\r\n", fields.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_fields_stay_plain() {
        assert_eq!(field("alice-x7k2p"), "alice-x7k2p");
        assert_eq!(field("2026-11-21T12:00:00Z"), "2026-11-21T12:00:00Z");
        assert_eq!(field(""), "");
    }

    #[test]
    fn special_characters_are_quoted() {
        assert_eq!(field("devs,qa"), "\"devs,qa\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(field("two\nlines"), "\"two\nlines\"");
        assert_eq!(field(" padded"), "\" padded\"");
    }

    #[test]
    fn formulas_are_defused() {
        assert_eq!(field("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        assert_eq!(field("@SUM(A1)"), "'@SUM(A1)");
    }

    #[test]
    fn records_end_in_crlf() {
        assert_eq!(record(["a", "b,c", ""]), "a,\"b,c\",\r\n");
    }
}
