//! Golden tests for Gateway API translation: each `tests/golden-gateway-api/<case>/input.yaml` (one feature per
//! case) is decoded through the sources' gate, translated for the proxy of the Gateway API Gateway `default/gw`
//! (node label `gateway.networking.k8s.io/gateway-name: gw`, namespace `default`) and compared with
//! `output.json`. `UPDATE_GOLDEN=1` rewrites the outputs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/cases.rs"]
mod cases;

use std::path::{Path, PathBuf};

use admitpilot::translate::types::GATEWAY_NAME_LABEL;
use admitpilot::translate::{output, translate, Proxy};

fn proxy() -> Proxy {
    Proxy {
        namespace: "default".into(),
        labels: [(GATEWAY_NAME_LABEL.to_string(), "gw".to_string())].into(),
        ..Default::default()
    }
}

fn golden_cases() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden-gateway-api");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    cases
}

#[test]
fn gateway_api_golden_cases_match() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1");
    let cases = golden_cases();
    assert!(!cases.is_empty(), "no golden cases found");
    let mut failures = Vec::new();
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().to_string();
        let input = case.join("input.yaml");
        let expected_path = case.join("output.json");
        let text = std::fs::read_to_string(&input).unwrap();
        let snapshot = cases::snapshot_from_yaml(&text, &input.display().to_string());
        let resources = translate(&snapshot, &proxy());
        assert!(
            !resources.listeners.is_empty(),
            "golden case {name}: the Gateway produced no listener"
        );
        let actual = output::to_json(&resources, true).unwrap();
        let actual_text = serde_json::to_string_pretty(&actual).unwrap() + "\n";
        if update {
            std::fs::write(&expected_path, &actual_text).unwrap();
            continue;
        }
        let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
        if expected != actual_text {
            failures.push(name);
        }
    }
    assert!(
        failures.is_empty(),
        "golden outputs differ for {failures:?}; inspect with UPDATE_GOLDEN=1 and git diff"
    );
}
