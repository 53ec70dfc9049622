//! The templates webhook: in an enforced namespace only the template admin groups write
//! templates; elsewhere (and oz's own status writes) it never judges.

use super::*;
use oz_platform::registration::VALIDATE_TEMPLATES_PATH;

fn enforcing(namespace: &str, writers: &[&str]) -> EnforceSettings {
    EnforceSettings {
        namespaces: BTreeSet::from([namespace.to_string()]),
        template_writers: writers.iter().map(|g| g.to_string()).collect(),
        ..EnforceSettings::default()
    }
}

/// `operation` of template `web` in [`NS`] by `user_info`.
fn template_review(operation: &str, user_info: Value) -> Value {
    let template = json!({
        "apiVersion": "crds.wizardofoz.co/v1alpha1",
        "kind": "ExecAccessTemplate",
        "metadata": {"name": "web", "namespace": NS},
        "spec": {
            "controllerTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "accessConfig": {"allowedGroups": ["mallories"], "defaultDuration": "1h", "maxDuration": "2h"},
        },
    });
    let (object, old) = match operation {
        "CREATE" => (template, Value::Null),
        "DELETE" => (Value::Null, template),
        _ => (template.clone(), template),
    };
    let mut review = request_review("ExecAccessTemplate", operation, user_info, object, old);
    review["request"]["name"] = json!("web");
    review
}

#[tokio::test]
async fn in_an_enforced_namespace_only_the_template_admin_groups_write_templates() {
    let h = harness(standard_lookup(), enforcing(NS, &["platform"])).await;
    for operation in ["CREATE", "UPDATE", "DELETE"] {
        let mallory = h
            .review(
                VALIDATE_TEMPLATES_PATH,
                template_review(operation, user("mallory", &["mallories", "editors"])),
            )
            .await;
        assert_eq!(mallory["allowed"], false, "{operation}: {mallory}");
        assert_eq!(mallory["status"]["code"], 403);
        let message = mallory["status"]["message"].as_str().unwrap();
        assert!(
            message.contains("mallory may not")
                && message.contains(&format!("ExecAccessTemplate {NS}/web"))
                && message.contains("(platform)")
                && message.contains("--template-admin-groups"),
            "{message}"
        );
        let paula = h
            .review(
                VALIDATE_TEMPLATES_PATH,
                template_review(operation, user("paula", &["platform"])),
            )
            .await;
        assert_eq!(paula["allowed"], true, "{operation}: {paula}");
    }
}

#[tokio::test]
async fn elsewhere_and_for_status_the_templates_webhook_never_judges() {
    let h = harness(standard_lookup(), enforcing("elsewhere", &["platform"])).await;
    let mallory = user("mallory", &["mallories"]);
    let response = h
        .review(
            VALIDATE_TEMPLATES_PATH,
            template_review("CREATE", mallory.clone()),
        )
        .await;
    assert_eq!(response["allowed"], true, "{response}");

    let h = harness(standard_lookup(), enforcing(NS, &["platform"])).await;
    let mut status = template_review("UPDATE", mallory);
    status["request"]["subResource"] = json!("status");
    let response = h.review(VALIDATE_TEMPLATES_PATH, status).await;
    assert_eq!(response["allowed"], true, "{response}");
}
