//! The chart (`charts/admitpilot`) rendered with the real Helm CLI: in, the helm binary and `--set` values; out, the
//! rendered YAML or its documents. Helm runs with throw-away cache, config and data folders.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

/// The chart's folder.
pub const CHART: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../charts/admitpilot");

/// Runs `helm` with `args` and empty Helm folders of its own.
pub fn run_helm(helm: &Path, args: &[&str]) -> Output {
    let home = tempfile::tempdir().unwrap();
    Command::new(helm)
        .args(args)
        .env("HELM_CACHE_HOME", home.path().join("cache"))
        .env("HELM_CONFIG_HOME", home.path().join("config"))
        .env("HELM_DATA_HOME", home.path().join("data"))
        .output()
        .expect("run helm")
}

/// Renders the chart as release `ap` in namespace `higress-system` with `--set` values; returns the raw YAML.
pub fn render_yaml(helm: &Path, sets: &[&str]) -> String {
    let mut args = vec!["template", "ap", CHART, "--namespace", "higress-system"];
    for set in sets {
        args.extend(["--set", set]);
    }
    let output = run_helm(helm, &args);
    assert!(
        output.status.success(),
        "helm template {sets:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// [`render_yaml`], parsed into its documents.
pub fn render(helm: &Path, sets: &[&str]) -> Vec<Value> {
    admitpilot::model::document::parse_documents(&render_yaml(helm, sets))
        .into_iter()
        .map(|d| d.value.expect("rendered YAML parses"))
        .collect()
}
