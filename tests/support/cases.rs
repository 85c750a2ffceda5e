//! Translation test cases: parses multi-document YAML through the sources' admission gate into a snapshot,
//! and lists the golden cases under `tests/golden/`. Each test crate uses a subset, hence `dead_code`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use admitpilot::model::decode::DecodeOptions;
use admitpilot::model::document::parse_documents;
use admitpilot::model::Snapshot;
use admitpilot::source::admit::{admit, Verdict};
use admitpilot::source::{AdmitOptions, DEFAULT_NAMESPACE};
use admitpilot::translate::Proxy;

/// Decodes every document of a YAML text with the sources' gate; panics naming the first invalid one.
pub fn snapshot_from_yaml(text: &str, origin: &str) -> Snapshot {
    let options = AdmitOptions {
        decode: DecodeOptions::default(),
        default_namespace: DEFAULT_NAMESPACE.into(),
    };
    let mut snapshot = Snapshot {
        version: 1,
        ..Default::default()
    };
    for document in parse_documents(text) {
        let index = document.position;
        let value = document
            .value
            .unwrap_or_else(|e| panic!("{origin}: document {index}: {e}"));
        match admit(value, &options, &|_| None) {
            Verdict::Accept { object, .. } => {
                snapshot.objects.insert(object.key(), Arc::new(*object));
            }
            Verdict::Reject { key, errors, .. } => {
                panic!("{origin}: document {index} ({key:?}) is invalid: {errors:?}")
            }
            Verdict::Ignore => {}
        }
    }
    snapshot
}

/// Reads every YAML file of a folder (sorted, recursive) into one snapshot.
pub fn snapshot_from_dir(dir: &Path) -> Snapshot {
    let mut files = Vec::new();
    collect_yaml(dir, &mut files);
    files.sort();
    let text = files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect::<Vec<_>>()
        .join("\n---\n");
    snapshot_from_yaml(&text, &dir.display().to_string())
}

fn collect_yaml(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect_yaml(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
}

/// The gateway every golden case is rendered for: an Istio ingress gateway in `istio-system`.
pub fn golden_proxy() -> Proxy {
    Proxy {
        namespace: "istio-system".into(),
        labels: [("istio".to_string(), "ingressgateway".to_string())].into(),
        ..Default::default()
    }
}

/// The gateway the example folder is rendered for: Higress's default gateway.
pub fn example_proxy() -> Proxy {
    Proxy {
        namespace: "higress-system".into(),
        labels: [(
            "higress".to_string(),
            "higress-system-higress-gateway".to_string(),
        )]
        .into(),
        ..Default::default()
    }
}

/// Returns `tests/golden`.
pub fn golden_root() -> PathBuf {
    Path::new(crate::REPO_ROOT).join("tests/golden")
}

/// Returns `examples/gateway`.
pub fn example_dir() -> PathBuf {
    Path::new(crate::REPO_ROOT).join("examples/gateway")
}

/// Lists the golden case folders of `tests/golden`, sorted.
pub fn golden_cases() -> Vec<PathBuf> {
    case_dirs(&golden_root())
}

/// Lists the case folders in `root`, sorted.
pub fn case_dirs(root: &Path) -> Vec<PathBuf> {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    cases
}

/// Translates the golden case in `case` (its `input.yaml`) for `proxy` and compares the output with its
/// `output.json`, or rewrites that file when `update` is set; true when they match (or were rewritten).
pub fn golden_case_matches(case: &Path, proxy: &Proxy, update: bool) -> bool {
    let input = case.join("input.yaml");
    let expected_path = case.join("output.json");
    let text = std::fs::read_to_string(&input).unwrap();
    let snapshot = snapshot_from_yaml(&text, &input.display().to_string());
    let resources = admitpilot::translate::translate(&snapshot, proxy);
    let actual = admitpilot::translate::output::to_json(&resources, true).unwrap();
    let actual_text = serde_json::to_string_pretty(&actual).unwrap() + "\n";
    if update {
        std::fs::write(&expected_path, &actual_text).unwrap();
        return true;
    }
    std::fs::read_to_string(&expected_path).unwrap_or_default() == actual_text
}
