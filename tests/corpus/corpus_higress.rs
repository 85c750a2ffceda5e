//! Conformance of higress-config validation with Higress: every case of the shared corpus
//! (`shared/corpus/higress/cases.yaml`) goes through `validate_document` as a `higress-system/higress-config`
//! ConfigMap; the verdict must match and an invalid case's first error must be Higress's exact string.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::corpus;

use admitpilot::model::decode::DecodeOptions;
use admitpilot::validate::validate_document;
use serde::Deserialize;
use serde_json::{json, Value};

#[derive(Deserialize)]
struct Case {
    id: String,
    item: String,
    verdict: String,
    #[serde(default)]
    error: Option<String>,
    input: serde_yaml_ng::Value,
}

/// The `higress` data key for a case: a YAML string input is the raw text, anything else is serialized.
fn higress_text(input: &serde_yaml_ng::Value) -> String {
    match input {
        serde_yaml_ng::Value::String(text) => text.clone(),
        other => serde_yaml_ng::to_string(other).unwrap(),
    }
}

fn configmap(higress: String) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "higress-config", "namespace": "higress-system"},
        "data": {"higress": higress},
    })
}

#[test]
fn every_corpus_case_matches_higress() {
    let Some(dir) = corpus::corpus_dir("higress") else {
        return;
    };
    let text = std::fs::read_to_string(dir.join("cases.yaml")).unwrap();
    let cases: Vec<Case> = serde_yaml_ng::from_str(&text).unwrap();
    assert!(cases.len() >= 60, "corpus shrank to {} cases", cases.len());
    let mut failures = Vec::new();
    let (mut valid, mut invalid) = (0, 0);
    for case in &cases {
        let report = validate_document(
            &configmap(higress_text(&case.input)),
            &DecodeOptions::default(),
        );
        assert!(!report.unrecognized, "{}: not recognised", case.id);
        let first_error = report.errors().next();
        match (case.verdict.as_str(), first_error) {
            ("valid", None) => valid += 1,
            ("valid", Some(error)) => {
                failures.push(format!("{}: expected valid, got {error}", case.id))
            }
            ("invalid", None) => failures.push(format!("{}: expected invalid, got valid", case.id)),
            ("invalid", Some(error)) => {
                invalid += 1;
                let expected = case.error.as_deref().unwrap();
                // The corpus describes the YAML syntax case instead of quoting a parser message.
                let matches = match expected.strip_suffix(" (YAML parse)") {
                    Some(prefix) => error.message.starts_with(prefix),
                    None => error.message == expected,
                };
                if !matches {
                    failures.push(format!(
                        "{}: expected `{expected}`, got `{}`",
                        case.id, error.message
                    ));
                }
                if !error.field.starts_with("data.higress") {
                    failures.push(format!("{}: error at `{}`", case.id, error.field));
                }
                if case.item != "top-level" {
                    let key = match case.item.as_str() {
                        "global" => "downstream",
                        other => other,
                    };
                    let expected_prefix = format!("data.higress.{key}");
                    if !error.field.starts_with(&expected_prefix) {
                        failures.push(format!(
                            "{}: error at `{}`, expected under `{expected_prefix}`",
                            case.id, error.field
                        ));
                    }
                }
            }
            (other, _) => failures.push(format!("{}: unknown verdict {other}", case.id)),
        }
    }
    println!(
        "higress corpus: {} cases, {valid} valid and {invalid} invalid matched, {} failures",
        cases.len(),
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_typo_case_warns_with_a_suggestion() {
    let report = validate_document(
        &configmap("gizp:\n  enable: true\n".into()),
        &DecodeOptions::default(),
    );
    assert!(report.is_valid());
    let warning = report.warnings().next().unwrap();
    assert_eq!(warning.field, "data.higress.gizp");
    assert!(warning.message.contains("did you mean `gzip`?"));
}

/// The higress-config section of Higress's Helm values (what the chart writes into the ConfigMap) is exactly
/// Higress's built-in defaults, with nothing to report.
#[test]
fn helm_chart_values_are_the_defaults() {
    let Some(dir) = corpus::corpus_dir("higress") else {
        return;
    };
    let text =
        std::fs::read_to_string(dir.join("helm/values-higress-config-section.yaml")).unwrap();
    let decoded = admitpilot::model::higress_config::decode_configmap(
        json!({"data": {"higress": text}}).as_object().unwrap(),
    );
    assert!(decoded.findings.is_empty(), "{:?}", decoded.findings);
    assert_eq!(
        decoded.config,
        admitpilot::model::higress_config::HigressConfig::default()
    );
}
