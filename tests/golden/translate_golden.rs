//! Golden tests for translation: each `tests/golden/<case>/input.yaml` is decoded through the sources' gate,
//! translated for an Istio ingress gateway (`istio=ingressgateway` in `istio-system`) and compared with
//! `output.json`. `UPDATE_GOLDEN=1` rewrites the outputs. A case folder holding anything but those two
//! files, or an output without input, fails the test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::cases;

use admitpilot::translate::{output, translate};

#[test]
fn golden_cases_match() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1");
    let cases = cases::golden_cases();
    assert!(!cases.is_empty(), "no golden cases found");
    let mut failures = Vec::new();
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().to_string();
        for entry in std::fs::read_dir(case).unwrap() {
            let file = entry.unwrap().file_name();
            assert!(
                file == "input.yaml" || file == "output.json",
                "golden case {name}: unexpected file {file:?} (only input.yaml and output.json belong here)"
            );
        }
        let input = case.join("input.yaml");
        assert!(
            input.exists(),
            "golden case {name}: output.json has no input.yaml (orphan golden)"
        );
        if !cases::golden_case_matches(case, &cases::golden_proxy(), update) {
            failures.push(name);
        }
    }
    assert!(
        failures.is_empty(),
        "golden outputs differ for {failures:?}; inspect with UPDATE_GOLDEN=1 and git diff"
    );
}

#[test]
fn translation_is_deterministic() {
    for case in cases::golden_cases() {
        let text = std::fs::read_to_string(case.join("input.yaml")).unwrap();
        let snapshot = cases::snapshot_from_yaml(&text, "determinism");
        let first = translate(&snapshot, &cases::golden_proxy());
        let second = translate(&snapshot, &cases::golden_proxy());
        assert_eq!(
            output::to_json(&first, true).unwrap(),
            output::to_json(&second, true).unwrap()
        );
    }
}
