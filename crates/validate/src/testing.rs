//! Helpers for the per-kind rule tests (test builds only): take a spec as JSON and yield its findings, either
//! through the whole pipeline ([`findings_of`]: decode + rules) or from one kind's rules alone ([`run_rules`]).

use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use super::validate_document;
use admitpilot_model::decode::DecodeOptions;
use admitpilot_model::{Finding, Findings, ObjectMeta};

/// Decodes and validates a document of `api_version`/`kind` with `metadata` and `spec`; yields each finding's
/// field and whether it is an error.
pub(crate) fn findings_of(
    api_version: &str,
    kind: &str,
    metadata: Value,
    spec: Value,
) -> Vec<(String, bool)> {
    let doc = json!({"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": spec});
    let report = validate_document(&doc, &DecodeOptions::default());
    assert!(!report.unrecognized, "{kind} is not recognised");
    report
        .findings
        .iter()
        .map(|f| (f.field.clone(), f.is_error()))
        .collect()
}

/// The fields of the errors [`findings_of`] yields.
pub(crate) fn errors_of(
    api_version: &str,
    kind: &str,
    metadata: Value,
    spec: Value,
) -> Vec<String> {
    error_fields(findings_of(api_version, kind, metadata, spec))
}

/// The fields of the errors among `findings`.
pub(crate) fn error_fields(findings: Vec<(String, bool)>) -> Vec<String> {
    findings
        .into_iter()
        .filter(|(_, error)| *error)
        .map(|(field, _)| field)
        .collect()
}

/// Runs one kind's `validate` on `spec` (decoded with plain serde) with `meta`; yields the errors and the
/// warnings, each as `field: message`.
pub(crate) fn run_rules<T: DeserializeOwned>(
    spec: Value,
    meta: &ObjectMeta,
    validate: fn(&T, &ObjectMeta, &mut Findings),
) -> (Vec<String>, Vec<String>) {
    let spec: T = serde_json::from_value(spec).expect("the spec decodes");
    let mut out = Findings::default();
    validate(&spec, meta, &mut out);
    let (errors, warnings): (Vec<Finding>, Vec<Finding>) =
        out.0.into_iter().partition(Finding::is_error);
    let show = |findings: Vec<Finding>| {
        findings
            .into_iter()
            .map(|f| format!("{}: {}", f.field, f.message))
            .collect()
    };
    (show(errors), show(warnings))
}

/// Metadata with just a name and a namespace.
pub(crate) fn meta(name: &str, namespace: &str) -> ObjectMeta {
    ObjectMeta {
        name: name.into(),
        namespace: namespace.into(),
        ..ObjectMeta::default()
    }
}
