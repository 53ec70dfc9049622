//! The RBAC rules of the Helm chart (`charts/oz`), generated from the same functions as the
//! install's, so the chart cannot grant more or less than `oz-manager manifests`.
//!
//! The rules depend on the parts run (`controllers`) and, through resource names, on the
//! install's name. [`chart_rules_template`] writes one Helm `define` per valid set of parts and
//! per place (`watched`, `state`, `cluster`), with the name written as [`NAME_PLACEHOLDER`],
//! which the chart replaces with the release's name; and the fleet hub's (`oz.rules.fleetHub`)
//! and its credential's on a spoke (`oz.rules.fleetHubCredential`), which depend on neither.
//! The file is committed as
//! `charts/oz/templates/_rules.tpl`; a test fails when it drifts (`make manifests` rewrites it).

use super::{
    Component, InstallOptions, ManifestError, Rule, cluster_rules, operator_namespace_rules,
    options::join,
    rbac::{fleet_hub_credential_rules, fleet_hub_rules},
    watched_namespace_rules,
};

/// Stands for the install's name in the generated rules (`OZNAME-manager`, `OZNAME-requests`);
/// the chart replaces it with the release's name.
pub const NAME_PLACEHOLDER: &str = "OZNAME";

/// Where the chart keeps the generated rules, relative to the repository.
pub const CHART_RULES_PATH: &str = "charts/oz/templates/_rules.tpl";

/// Every set of parts oz-manager accepts (not empty; sessions only with the webhooks), in flag
/// order, as `--controllers` writes it.
pub fn valid_part_sets() -> Vec<Vec<Component>> {
    (1u32..1 << Component::ALL.len())
        .map(|bits| {
            Component::ALL
                .into_iter()
                .enumerate()
                .filter(|(i, _)| bits & (1 << i) != 0)
                .map(|(_, c)| c)
                .collect::<Vec<_>>()
        })
        .filter(|parts| {
            !parts.contains(&Component::Sessions) || parts.contains(&Component::Webhooks)
        })
        .collect()
}

/// The chart's `_rules.tpl`: for each valid set of parts, `oz.rules.<place>.<parts>` holding
/// that place's rules as a YAML list (empty when there are none).
pub fn chart_rules_template() -> Result<String, ManifestError> {
    let mut out = String::from(
        "{{/*\nGenerated from src/install/rbac/rules.rs by `make manifests`; do not edit by hand.\n\
         oz-manager's RBAC rules for each set of parts (`controllers`), with the install's name\n\
         written as OZNAME. The reason for every rule is written above it in\n\
         config/default/install.yaml; docs/rbac.md explains the design.\n*/}}\n",
    );
    for parts in valid_part_sets() {
        let options = InstallOptions {
            name: NAME_PLACEHOLDER.into(),
            controllers: parts.clone(),
            ..InstallOptions::default()
        };
        let places: [(&str, Vec<Rule>); 3] = [
            ("watched", watched_namespace_rules(&options)),
            ("state", operator_namespace_rules(&options)),
            ("cluster", cluster_rules(&options)),
        ];
        for (place, rules) in places {
            let rules: Vec<_> = rules.into_iter().map(|r| r.rule).collect();
            let yaml = if rules.is_empty() {
                String::new()
            } else {
                serde_saphyr::to_string(&rules)?
            };
            out.push_str(&format!(
                "{{{{- define \"oz.rules.{place}.{}\" }}}}\n{yaml}{{{{- end }}}}\n",
                join(&parts)
            ));
        }
    }
    // The fleet's rules depend on no part and no name.
    let fleet: [(&str, Vec<Rule>); 2] = [
        ("fleetHub", fleet_hub_rules()),
        ("fleetHubCredential", fleet_hub_credential_rules()),
    ];
    for (place, rules) in fleet {
        let rules: Vec<_> = rules.into_iter().map(|r| r.rule).collect();
        out.push_str(&format!(
            "{{{{- define \"oz.rules.{place}\" }}}}\n{}{{{{- end }}}}\n",
            serde_saphyr::to_string(&rules)?
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chart_rules_match_the_generator() {
        let path = format!("{}/{CHART_RULES_PATH}", env!("CARGO_MANIFEST_DIR"));
        let generated = chart_rules_template().unwrap();
        // `make manifests` sets this to rewrite the file rather than compare it.
        if std::env::var_os("OZ_WRITE_CHART_RULES").is_some() {
            std::fs::write(&path, &generated).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == generated,
            "{CHART_RULES_PATH} is out of date with src/install/: run `make manifests` and commit the result"
        );
    }

    #[test]
    fn every_valid_set_of_parts_validates_and_no_other_does() {
        let sets = valid_part_sets();
        assert_eq!(sets.len(), 11);
        for parts in sets {
            let options = InstallOptions {
                controllers: parts,
                ..InstallOptions::default()
            };
            options.validate().unwrap();
        }
    }
}
