//! Runs admitpilot's validation over the Istio EnvoyFilter conformance corpus (`../shared/corpus/istio`):
//! every current `valid` document must pass and every current `invalid` one must be rejected.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use admitpilot::model::decode::DecodeOptions;
use admitpilot::validate::validate_document;

fn corpus_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/istio");
    dir.join("index.json").exists().then_some(dir)
}

#[test]
fn envoy_filter_corpus_verdicts_match() {
    let Some(dir) = corpus_dir() else {
        println!("skipping: corpus not found beside the checkout");
        return;
    };
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("index.json")).unwrap()).unwrap();
    let mut checked = 0;
    let mut mismatches = Vec::new();
    for entry in index.as_array().unwrap() {
        if entry["kind"] != "EnvoyFilter" || entry["current"] != true {
            continue;
        }
        let file = entry["file"].as_str().unwrap();
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        let mut doc: serde_json::Value = serde_yaml_ng::from_str(&text).unwrap();
        // `_err` carries the API server's expected message, not part of the object.
        doc.as_object_mut().unwrap().remove("_err");
        let report = validate_document(&doc, &DecodeOptions::default());
        let expect_valid = entry["verdict"] == "valid";
        checked += 1;
        if report.is_valid() != expect_valid {
            let errors: Vec<String> = report.errors().map(ToString::to_string).collect();
            mismatches.push(format!("{file}: expected {}, got {errors:?}", entry["verdict"]));
        }
    }
    assert!(checked > 40, "only {checked} EnvoyFilter documents found");
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}
