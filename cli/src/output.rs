//! Objects as JSON or YAML on stdout, as kubectl prints them.

use std::io::Write;

use clap::ValueEnum;
use serde::Serialize;

use super::error::CliError;

/// How a command that lists what it found prints: a table for people, or JSON for scripts
/// (`ozctl approvals`, `ozctl audit`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TableFormat {
    Table,
    Json,
}

/// How to print Kubernetes objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ObjectFormat {
    Json,
    Yaml,
}

/// `object` as JSON without `metadata.managedFields`, which kubectl hides too.
pub fn object_json<T: Serialize>(object: &T) -> serde_json::Value {
    let mut value = serde_json::to_value(object).unwrap_or_default();
    if let Some(metadata) = value
        .get_mut("metadata")
        .and_then(serde_json::Value::as_object_mut)
    {
        metadata.remove("managedFields");
    }
    value
}

/// Several objects as one kubectl-style `List`.
pub fn list_json(items: Vec<serde_json::Value>) -> serde_json::Value {
    serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items})
}

/// `value` in `format`, ending in a newline.
pub fn render(value: &impl Serialize, format: ObjectFormat) -> Result<String, CliError> {
    match format {
        ObjectFormat::Json => serde_json::to_string_pretty(value)
            .map(|text| text + "\n")
            .map_err(|e| CliError::Output(e.to_string())),
        ObjectFormat::Yaml => {
            serde_saphyr::to_string(value).map_err(|e| CliError::Output(e.to_string()))
        }
    }
}

/// Writes `text` to stdout as it is.
pub fn print(text: &str) -> Result<(), CliError> {
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn managed_fields_are_left_out() {
        let object = serde_json::json!({
            "kind": "ExecAccessRequest",
            "metadata": {"name": "a", "managedFields": [{"manager": "oz"}]},
        });
        let value = object_json(&object);
        assert_eq!(value["metadata"], serde_json::json!({"name": "a"}));
    }

    #[test]
    fn json_and_yaml_render() {
        let value = list_json(vec![serde_json::json!({"kind": "X"})]);
        let json = render(&value, ObjectFormat::Json).unwrap();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&json).unwrap(),
            value
        );
        let yaml = render(&value, ObjectFormat::Yaml).unwrap();
        assert!(yaml.contains("kind: List"), "{yaml}");
        assert!(yaml.ends_with('\n'));
    }
}
