//! Tests of the whole renderer through its two public functions.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

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
        render("kubectl exec -ti -n {{ .Metadata.Namespace }} {{ .Metadata.Name }} -- /bin/bash"),
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
