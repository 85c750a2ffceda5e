//! Conformance harness: walks the Istio corpus (`../shared/corpus/istio/{valid,invalid}/<Kind>/*.yaml`), validates
//! every document with `validate_document`, and checks valid documents get no errors and invalid ones at least one.
//! Files listed in `tests/corpus-known-differences.md` are exempt. One test per kind; `historical` prints a report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::corpus;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use admitpilot::model::decode::DecodeOptions;
use admitpilot::validate::{validate_document, Report};
use serde_json::Value;

/// Files (relative to the corpus root) exempted by `tests/corpus-known-differences.md` (both tables).
fn known_differences() -> BTreeSet<String> {
    listed_files(&known_differences_text())
}

/// Files in the "Differences from Istio" table only (the corpus labelling errors are not counted).
fn differences_from_istio() -> BTreeSet<String> {
    let text = known_differences_text();
    let section = text
        .split("\n## ")
        .find(|part| part.starts_with("Differences from Istio"))
        .unwrap_or_default();
    listed_files(section)
}

fn known_differences_text() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus-known-differences.md");
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The first-column file names of the markdown table rows in `text`.
fn listed_files(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|line| {
            let cell = line.trim().strip_prefix('|')?.split('|').next()?.trim();
            let cell = cell.trim_matches('`');
            cell.ends_with(".yaml").then(|| cell.to_string())
        })
        .collect()
}

/// `file` → `expected_error` from the corpus index, for failure messages.
fn expected_errors(root: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(root.join("index.json")).unwrap_or_default();
    let entries: Vec<Value> = serde_json::from_str(&text).unwrap_or_default();
    entries
        .iter()
        .filter_map(|e| {
            Some((
                e["file"].as_str()?.to_string(),
                e["expected_error"].as_str().unwrap_or_default().to_string(),
            ))
        })
        .collect()
}

/// Parses one corpus file and validates it; a YAML parse failure counts as an error verdict. The top-level `_err`
/// key some upstream test documents carry (the expected API-server message) is test metadata, not part of the
/// object, so it is removed first: otherwise it alone would make every such document invalid.
fn check_file(path: &Path) -> Result<Report, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let mut doc: Value = serde_yaml_ng::from_str(&text).map_err(|e| format!("YAML: {e}"))?;
    if let Some(fields) = doc.as_object_mut() {
        fields.remove("_err");
    }
    Ok(validate_document(&doc, &DecodeOptions::default()))
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "yaml"));
    files.sort();
    files
}

/// Checks every valid and invalid document of one kind folder; panics listing each disagreement.
fn check_kind(kind: &str) {
    let Some(root) = corpus::corpus_dir("istio") else {
        return;
    };
    let exempt = known_differences();
    let expected = expected_errors(&root);
    let mut failures = Vec::new();
    let mut counts = [(0usize, 0usize); 2];
    for (i, verdict) in ["valid", "invalid"].into_iter().enumerate() {
        for path in yaml_files(&root.join(verdict).join(kind)) {
            let rel = path
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .to_string();
            let outcome = check_file(&path);
            let (ok, detail) = match &outcome {
                Err(parse) => (verdict == "invalid", parse.clone()),
                Ok(report) if report.unrecognized => (false, "kind not recognised".to_string()),
                Ok(report) => {
                    let errors: Vec<String> = report.errors().map(ToString::to_string).collect();
                    ((verdict == "valid") == errors.is_empty(), errors.join("; "))
                }
            };
            counts[i].0 += 1;
            if ok && exempt.contains(&rel) {
                failures.push(format!(
                    "{rel}\n    listed as a known difference but now agrees: remove the row"
                ));
            } else if ok {
                counts[i].1 += 1;
            } else if exempt.contains(&rel) {
                println!("exempt (known difference): {rel}");
            } else {
                let want = expected.get(&rel).map(String::as_str).unwrap_or_default();
                failures.push(format!(
                    "{rel}\n    expected {verdict} (upstream: {want:?})\n    ours: {detail}"
                ));
            }
        }
    }
    println!(
        "{kind}: valid {}/{} pass, invalid {}/{} pass",
        counts[0].1, counts[0].0, counts[1].1, counts[1].0
    );
    assert!(
        failures.is_empty(),
        "{} corpus disagreement(s) for {kind}:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

macro_rules! corpus_kind_tests {
    ($($name:ident => $kind:literal),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                check_kind($kind);
            }
        )*
    };
}

corpus_kind_tests! {
    virtual_service => "VirtualService",
    destination_rule => "DestinationRule",
    gateway => "Gateway",
    service_entry => "ServiceEntry",
    sidecar => "Sidecar",
    workload_entry => "WorkloadEntry",
    workload_group => "WorkloadGroup",
    proxy_config => "ProxyConfig",
    envoy_filter => "EnvoyFilter",
    authorization_policy => "AuthorizationPolicy",
    peer_authentication => "PeerAuthentication",
    request_authentication => "RequestAuthentication",
    telemetry => "Telemetry",
    wasm_plugin => "WasmPlugin",
    traffic_extension => "TrafficExtension",
    not_yaml => "NotYAML",
}

/// At most 10 documents may differ from Istio's verdict; every listed file must exist.
#[test]
fn known_differences_are_few_and_real() {
    let exempt = known_differences();
    let from_istio = differences_from_istio();
    assert!(
        !from_istio.is_empty() && from_istio.len() <= 10,
        "differences from Istio must be 1..=10 rows, found {}",
        from_istio.len()
    );
    if let Some(root) = corpus::corpus_dir("istio") {
        for rel in &exempt {
            assert!(
                root.join(rel).is_file(),
                "known difference names a missing file: {rel}"
            );
        }
    }
}

/// Informational: how today's rules judge documents whose upstream label is historical (not asserted).
#[test]
fn historical_report() {
    let Some(root) = corpus::corpus_dir("istio") else {
        return;
    };
    let index: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(root.join("index.json")).unwrap_or_default())
            .unwrap_or_default();
    let notes: BTreeMap<&str, &str> = index
        .iter()
        .filter_map(|e| Some((e["file"].as_str()?, e["review_2026"].as_str().unwrap_or(""))))
        .collect();
    for verdict in ["valid", "invalid"] {
        let Ok(kinds) = std::fs::read_dir(root.join("historical").join(verdict)) else {
            continue;
        };
        let mut dirs: Vec<PathBuf> = kinds.filter_map(|e| e.ok().map(|e| e.path())).collect();
        dirs.sort();
        for dir in dirs {
            for path in yaml_files(&dir) {
                let rel = path
                    .strip_prefix(&root)
                    .unwrap()
                    .to_string_lossy()
                    .to_string();
                let ours = match check_file(&path) {
                    Err(e) => format!("parse error: {e}"),
                    Ok(r) if r.is_valid() => "valid".to_string(),
                    Ok(r) => format!(
                        "invalid ({})",
                        r.errors()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join("; ")
                    ),
                };
                let note = notes.get(rel.as_str()).copied().unwrap_or("");
                println!("historical {rel}\n    label {verdict}; ours {ours}\n    review: {note}");
            }
        }
    }
}
