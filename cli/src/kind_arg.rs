//! How ozctl's command line names an access kind ([`oz_api::AccessKind`]): `--kind exec|pod`,
//! and "one kind, or both" when none is given.

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use oz_api::AccessKind;

/// Reads `--kind`: `exec` or `pod`, each listed in `--help` with the kinds it stands for.
pub fn parser() -> impl TypedValueParser<Value = AccessKind> {
    let words = AccessKind::ALL.map(|kind| {
        PossibleValue::new(kind.word()).help(format!(
            "{} / {}",
            kind.request_kind(),
            kind.template_kind()
        ))
    });
    PossibleValuesParser::new(words).map(|word| {
        word.parse::<AccessKind>()
            .expect("the parser admits only the kinds' own words")
    })
}

/// The kinds to look at: the one given, or both.
pub fn or_both(kind: Option<AccessKind>) -> Vec<AccessKind> {
    kind.map_or_else(|| AccessKind::ALL.to_vec(), |k| vec![k])
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser, Debug)]
    struct Args {
        #[arg(long, value_parser = parser())]
        kind: Option<AccessKind>,
    }

    #[test]
    fn kind_reads_each_word_and_refuses_others() {
        for kind in AccessKind::ALL {
            let args = Args::try_parse_from(["t", "--kind", kind.word()]).unwrap();
            assert_eq!(args.kind, Some(kind));
        }
        assert!(Args::try_parse_from(["t", "--kind", "debug"]).is_err());
        assert!(Args::try_parse_from(["t", "--kind", "Exec"]).is_err());
    }

    #[test]
    fn no_kind_means_both() {
        assert_eq!(or_both(None), AccessKind::ALL.to_vec());
        assert_eq!(or_both(Some(AccessKind::Pod)), vec![AccessKind::Pod]);
    }
}
