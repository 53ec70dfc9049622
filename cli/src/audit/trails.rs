//! A fleet's audit trails, read at once: a file or key on the command line may be labelled with
//! the fleet cluster it belongs to, `CLUSTER=PATH` ([`Labelled`]), and the files make one
//! [`Trail`] per cluster, each checked on its own with that cluster's keys alone (a spoke's
//! key must not vouch for another spoke's file). Files without a label make one trail too, as
//! when no file is labelled.

use std::{ffi::OsString, path::PathBuf};

use clap::builder::{OsStringValueParser, TypedValueParser};

use crate::error::CliError;

/// An audit file or a key file as given: `PATH`, or `CLUSTER=PATH` for a fleet cluster's.
///
/// The text before the first `=` is a cluster only when it is a name Kubernetes allows for a
/// ClusterProfile (lowercase letters, digits, `-` and `.`, starting and ending with a letter
/// or digit, at most 253 characters) and a path follows it; anything else is a path, so
/// `./a=b.jsonl` and `logs/a=b.jsonl` are files. A label is never guessed from the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Labelled {
    /// The fleet cluster (a ClusterProfile's name on the hub), if labelled.
    pub cluster: Option<String>,
    pub path: PathBuf,
    /// The argument as given, to tell it apart from a file of that very name.
    pub given: OsString,
}

impl Labelled {
    /// Reads an argument; `CLUSTER=` with nothing after it is refused.
    pub fn parse(given: OsString) -> Result<Labelled, String> {
        let labelled = given.to_str().and_then(|text| text.split_once('='));
        let (cluster, path) = match labelled {
            Some((cluster, path)) if is_cluster_name(cluster) => {
                if path.is_empty() {
                    return Err(format!(
                        "{cluster}= names cluster {cluster} but no file after the ="
                    ));
                }
                (Some(cluster.to_string()), PathBuf::from(path))
            }
            _ => (None, PathBuf::from(&given)),
        };
        Ok(Labelled {
            cluster,
            path,
            given,
        })
    }

    /// A path given with no label, as in the tests and wherever a caller has a path alone.
    pub fn unlabelled(path: impl Into<PathBuf>) -> Labelled {
        let path = path.into();
        Labelled {
            cluster: None,
            given: path.clone().into_os_string(),
            path,
        }
    }

    /// When a labelled argument is also the name of an existing file (`b=x` beside a file
    /// named `b=x`): which was meant cannot be told, so the user is asked to say.
    pub fn ambiguity(&self) -> Option<CliError> {
        let cluster = self.cluster.as_deref()?;
        std::path::Path::new(&self.given).exists().then(|| {
            let given = self.given.to_string_lossy();
            CliError::Usage(format!(
                "{given} is a file, and also reads as cluster {cluster}'s {}: write ./{given} for \
                 the file, or {cluster}={given} for the file as cluster {cluster}'s",
                self.path.display()
            ))
        })
    }
}

/// clap's parser for a [`Labelled`] argument; paths need not be UTF-8 (those are never
/// labelled).
pub fn labelled_parser() -> impl TypedValueParser<Value = Labelled> {
    OsStringValueParser::new().try_map(Labelled::parse)
}

/// Whether `name` may be a ClusterProfile's name: a DNS-1123 subdomain.
pub fn is_cluster_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    let inner = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !bytes.is_empty()
        && bytes.len() <= 253
        && bytes.first().is_some_and(inner)
        && bytes.last().is_some_and(inner)
        && bytes.iter().all(|b| inner(b) || *b == b'-' || *b == b'.')
        && name.split('.').all(|part| {
            let part = part.as_bytes();
            part.first().is_some_and(inner) && part.last().is_some_and(inner)
        })
}

/// One cluster's audit files, checked together: one chain (with its rotated files), or
/// several replicas' chains, as when no file is labelled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trail {
    /// The fleet cluster, or `None` for the files given without a label.
    pub cluster: Option<String>,
    pub files: Vec<PathBuf>,
}

/// How the output names a trail of `cluster`: `cluster b`, or `no cluster` for the files
/// without one.
pub fn name(cluster: Option<&str>) -> String {
    match cluster {
        Some(cluster) => format!("cluster {cluster}"),
        None => "no cluster".into(),
    }
}

/// The trails of `files`: one per cluster in the order each is first named, the unlabelled
/// files' where the first of them is. An argument that could be a label or a file is refused.
pub fn trails(files: &[Labelled]) -> Result<Vec<Trail>, CliError> {
    let mut trails: Vec<Trail> = Vec::new();
    for file in files {
        if let Some(ambiguous) = file.ambiguity() {
            return Err(ambiguous);
        }
        match trails.iter_mut().find(|t| t.cluster == file.cluster) {
            Some(trail) => trail.files.push(file.path.clone()),
            None => trails.push(Trail {
                cluster: file.cluster.clone(),
                files: vec![file.path.clone()],
            }),
        }
    }
    Ok(trails)
}

/// The trail of `cluster` alone (`--fleet-cluster`): the others are not read.
pub fn only(trails: Vec<Trail>, cluster: &str) -> Result<Vec<Trail>, CliError> {
    let kept: Vec<Trail> = trails
        .into_iter()
        .filter(|t| t.cluster.as_deref() == Some(cluster))
        .collect();
    if kept.is_empty() {
        return Err(CliError::Usage(format!(
            "no file is labelled with cluster {cluster}: give its files as {cluster}=PATH"
        )));
    }
    Ok(kept)
}

/// Whether any trail is a cluster's: then the output names each record's or file's cluster.
pub fn any_labelled(trails: &[Trail]) -> bool {
    trails.iter().any(|t| t.cluster.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Labelled, String> {
        Labelled::parse(text.into())
    }

    fn label(text: &str) -> (Option<String>, PathBuf) {
        let labelled = parse(text).unwrap();
        (labelled.cluster, labelled.path)
    }

    #[test]
    fn a_cluster_label_is_a_cluster_name_before_the_first_equals_sign() {
        let some = |c: &str, p: &str| (Some(c.to_string()), PathBuf::from(p));
        let none = |p: &str| (None, PathBuf::from(p));
        assert_eq!(label("b=audit-b.jsonl"), some("b", "audit-b.jsonl"));
        assert_eq!(
            label("eu-west.prod=/var/log/oz/audit.jsonl"),
            some("eu-west.prod", "/var/log/oz/audit.jsonl")
        );
        assert_eq!(label("b=x=y.jsonl"), some("b", "x=y.jsonl"));
        assert_eq!(label("audit.jsonl"), none("audit.jsonl"));
        assert_eq!(
            label("audit.jsonl.20261121T100000.000Z"),
            none("audit.jsonl.20261121T100000.000Z")
        );
        // Paths: what is before the = is no cluster name.
        for path in [
            "./a=b.jsonl",
            "logs/a=b.jsonl",
            "B=audit.jsonl",
            "-b=audit.jsonl",
            "b-=audit.jsonl",
            "a..b=audit.jsonl",
            "=audit.jsonl",
            "a_b=audit.jsonl",
        ] {
            assert_eq!(label(path), none(path), "{path}");
        }
        assert_eq!(
            parse("b=").unwrap_err(),
            "b= names cluster b but no file after the ="
        );
        assert!(is_cluster_name(&"a".repeat(253)));
        assert!(!is_cluster_name(&"a".repeat(254)));
    }

    #[test]
    fn files_make_one_trail_per_cluster_in_the_order_given() {
        let dir = tempfile::tempdir().unwrap();
        let at = |name: &str| dir.path().join(name).display().to_string();
        let files: Vec<Labelled> = [
            format!("b={}", at("b.jsonl")),
            at("local.jsonl"),
            format!("c={}", at("c.jsonl")),
            format!("b={}", at("b.jsonl.20261121T100000.000Z")),
        ]
        .into_iter()
        .map(|a| parse(&a).unwrap())
        .collect();
        let trails = trails(&files).unwrap();
        let summary: Vec<(Option<&str>, usize)> = trails
            .iter()
            .map(|t| (t.cluster.as_deref(), t.files.len()))
            .collect();
        assert_eq!(summary, [(Some("b"), 2), (None, 1), (Some("c"), 1)]);
        assert_eq!(name(trails[0].cluster.as_deref()), "cluster b");
        assert_eq!(name(trails[1].cluster.as_deref()), "no cluster");
        assert!(any_labelled(&trails));
        assert!(!any_labelled(&trails[1..2]));

        let c = only(trails.clone(), "c").unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].files, [dir.path().join("c.jsonl")]);
        let error = only(trails, "d").unwrap_err();
        assert_eq!(error.exit_code(), 2);
        assert_eq!(
            error.to_string(),
            "no file is labelled with cluster d: give its files as d=PATH"
        );
    }

    /// `b=x` next to a file named `b=x`: refused, with both ways to say which was meant.
    #[test]
    fn an_argument_that_is_both_a_label_and_a_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let cwd_relative = dir.path().join("b=x.jsonl");
        std::fs::write(&cwd_relative, "").unwrap();
        let given = cwd_relative.display().to_string();
        // An absolute path is never labelled: its first = comes after a /.
        assert_eq!(parse(&given).unwrap().cluster, None);
        let labelled = Labelled {
            cluster: Some("b".into()),
            path: "x.jsonl".into(),
            given: given.clone().into(),
        };
        let error = trails(&[labelled]).unwrap_err();
        assert_eq!(error.exit_code(), 2);
        assert_eq!(
            error.to_string(),
            format!(
                "{given} is a file, and also reads as cluster b's x.jsonl: write ./{given} for \
                 the file, or b={given} for the file as cluster b's"
            )
        );
    }
}
