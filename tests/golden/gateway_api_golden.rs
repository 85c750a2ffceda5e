//! Golden tests for Gateway API translation: each `tests/golden-gateway-api/<case>/input.yaml` (one feature per
//! case) is decoded through the sources' gate, translated for the proxy of the Gateway API Gateway `default/gw`
//! (node label `gateway.networking.k8s.io/gateway-name: gw`, namespace `default`) and compared with
//! `output.json`. `UPDATE_GOLDEN=1` rewrites the outputs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::cases;

use std::path::{Path, PathBuf};

use admitpilot::translate::types::GATEWAY_NAME_LABEL;
use admitpilot::translate::{translate, Proxy};

fn proxy() -> Proxy {
    Proxy {
        namespace: "default".into(),
        labels: [(GATEWAY_NAME_LABEL.to_string(), "gw".to_string())].into(),
        ..Default::default()
    }
}

fn golden_cases() -> Vec<PathBuf> {
    cases::case_dirs(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden-gateway-api"))
}

#[test]
fn gateway_api_golden_cases_match() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1");
    let cases = golden_cases();
    assert!(!cases.is_empty(), "no golden cases found");
    let mut failures = Vec::new();
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().to_string();
        if !cases::golden_case_matches(case, &proxy(), update) {
            failures.push(name);
        }
    }
    assert!(
        failures.is_empty(),
        "golden outputs differ for {failures:?}; inspect with UPDATE_GOLDEN=1 and git diff"
    );
}

/// `examples/gateway-api` loads through the sources' gate and serves the three listeners of `web/public`.
#[test]
fn the_example_folder_serves_its_gateway() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/gateway-api");
    let snapshot = cases::snapshot_from_dir(&dir);
    let proxy = Proxy {
        namespace: "web".into(),
        labels: [(GATEWAY_NAME_LABEL.to_string(), "public".to_string())].into(),
        ..Default::default()
    };
    let resources = translate(&snapshot, &proxy);
    let listeners: Vec<&str> = resources
        .listeners
        .iter()
        .map(|l| l.name.as_str())
        .collect();
    assert_eq!(listeners, ["0.0.0.0_8080", "0.0.0.0_8443", "0.0.0.0_9000"]);
    assert_eq!(resources.secrets.len(), 1, "the HTTPS certificate over SDS");
    assert!(resources.left_out.is_empty(), "{:?}", resources.left_out);
}
