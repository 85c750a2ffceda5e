//! `admitpilot validate` end to end: runs the real binary on temporary files and checks exit codes and output.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::process::{Command, Output, Stdio};

const VALID_VS: &str = "apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: shop}
spec:
  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews}
";

/// A document with an unknown top-level field: invalid whatever the per-kind rules are.
const INVALID_VS: &str = "apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: broken, namespace: shop}
spec:
  hosts: [broken]
specs: {}
";

fn admitpilot(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_admitpilot"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start admitpilot");
    let mut input = child.stdin.take().expect("stdin is piped");
    input
        .write_all(stdin.unwrap_or_default().as_bytes())
        .expect("write stdin");
    drop(input);
    child.wait_with_output().expect("admitpilot finishes")
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("create folder");
    }
    std::fs::write(&path, text).expect("write file");
    path.display().to_string()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn valid_file_exits_zero_with_a_summary() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(&dir, "vs.yaml", VALID_VS);
    let output = admitpilot(&["validate", &path], None);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    assert!(stdout(&output).contains("1 documents: 1 valid, 0 invalid"));
}

#[test]
fn invalid_document_exits_one_and_names_file_document_and_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(&dir, "all.yaml", &format!("{VALID_VS}---\n{INVALID_VS}"));
    let output = admitpilot(&["validate", &path], None);
    assert_eq!(output.status.code(), Some(1));
    let text = stdout(&output);
    let line = format!("{path}:2: VirtualService shop/broken: error: specs: ");
    assert!(text.contains(&line), "missing {line:?} in:\n{text}");
    assert!(text.contains("2 documents: 1 valid, 1 invalid"));
}

#[test]
fn folders_are_searched_recursively_and_json_output_lists_every_document() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(&dir, "a/vs.yaml", VALID_VS);
    write(&dir, "b/c/bad.yml", INVALID_VS);
    write(&dir, "notes.txt", "not config");
    let root = dir.path().display().to_string();
    let output = admitpilot(&["validate", "--output", "json", &root], None);
    assert_eq!(output.status.code(), Some(1));
    let results: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON output");
    let results = results.as_array().expect("an array");
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["name"], "reviews");
    assert_eq!(results[0]["valid"], true);
    assert_eq!(results[1]["valid"], false);
    assert_eq!(results[1]["doc"], "1");
    assert_eq!(results[1]["findings"][0]["severity"], "error");
    assert_eq!(results[1]["findings"][0]["field"], "specs");
}

#[test]
fn stdin_and_lists_are_read() {
    let list = format!(
        "apiVersion: v1\nkind: List\nitems:\n- {}\n",
        serde_json::to_string(&serde_yaml_ng::from_str::<serde_json::Value>(VALID_VS).unwrap())
            .unwrap()
    );
    let output = admitpilot(&["validate", "-"], Some(&list));
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    assert!(stdout(&output).contains("1 documents: 1 valid"));
}

#[test]
fn unparseable_or_missing_input_exits_two() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(&dir, "broken.yaml", "a: [\n");
    assert_eq!(
        admitpilot(&["validate", &path], None).status.code(),
        Some(2)
    );
    let missing = dir.path().join("missing.yaml").display().to_string();
    assert_eq!(
        admitpilot(&["validate", &missing], None).status.code(),
        Some(2)
    );
    assert_eq!(admitpilot(&["validate"], None).status.code(), Some(2));
}

#[test]
fn unknown_kinds_are_skipped_with_a_warning() {
    let output = admitpilot(
        &["validate", "-"],
        Some("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"),
    );
    assert_eq!(output.status.code(), Some(0));
    assert!(stdout(&output).contains("is not a kind admitpilot validates"));
}

#[test]
fn every_wrongly_typed_field_is_listed_in_json_output() {
    let doc = "apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: typos, namespace: shop}
spec:
  hosts: [typos, 7]
  http:
  - timeout: 5
    route:
    - destination: {host: typos, port: {number: eighty}}
  - route:
    - destination: {host: ''}
";
    let output = admitpilot(&["validate", "--output", "json", "-"], Some(doc));
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    let results: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON output");
    let findings = results[0]["findings"].as_array().expect("findings");
    let fields: Vec<&str> = findings
        .iter()
        .filter(|f| f["severity"] == "error")
        .map(|f| f["field"].as_str().unwrap())
        .collect();
    // The three decode errors, then the rules' verdict on the rest (the empty host of the second route).
    assert_eq!(
        fields,
        [
            "spec.hosts[1]",
            "spec.http[0].route[0].destination.port.number",
            "spec.http[0].timeout",
            "spec.http[1].route[0].destination.host",
        ],
        "{findings:?}"
    );
    assert_eq!(
        findings[0]["message"],
        "invalid type: integer `7`, expected a string"
    );
}

/// A document without a namespace is in `--namespace` (default `default`), as `istioctl validate` puts it: a
/// DestinationRule exporting to `.` and another namespace is valid there (it is refused only when `.` cannot be
/// told apart from the named namespace).
#[test]
fn documents_without_a_namespace_get_the_namespace_flag() {
    const DR: &str = include_str!("namespace-less-destination-rule.yaml");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write(&dir, "dr.yaml", DR);
    let output = admitpilot(&["validate", &path], None);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    assert!(
        stdout(&output).ends_with("1 documents: 1 valid, 0 invalid (0 errors, 0 warnings)\n"),
        "{}",
        stdout(&output)
    );
    let json = admitpilot(&["validate", "--output", "json", "-n", "shop", &path], None);
    let results: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(results[0]["namespace"], "shop");
    // Exporting to the namespace it is in, twice, is refused as Istio refuses it.
    let same = admitpilot(&["validate", "--namespace", "other", &path], None);
    assert_eq!(same.status.code(), Some(1), "{}", stdout(&same));
}
