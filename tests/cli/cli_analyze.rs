//! `admitpilot analyze` end to end: runs the real binary on a temporary folder and checks what it reports about the
//! documents taken together (reference findings with Istio codes, what the gateway would reject) and its exit codes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output};

const GATEWAY: &str = "apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: gw, namespace: shop}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: [\"*.example.com\"]
";

const SERVICE: &str = "apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  ports: [{port: 80}]
";

/// Bound to `gw` and a Gateway that does not exist, for a host `gw` does not serve.
const STRAY_VS: &str = "apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: api, namespace: shop}
spec:
  hosts: [api.example.org]
  gateways: [gw, public]
  http:
  - route: [{destination: {host: web}}]
";

/// Adds a listener on the address of the Gateway's listener.
const EXTRA_LISTENER: &str = "apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: extra, namespace: shop}
spec:
  configPatches:
  - applyTo: LISTENER
    match: {context: GATEWAY}
    patch:
      operation: ADD
      value:
        name: extra
        address: {socket_address: {address: 0.0.0.0, port_value: 80}}
        filter_chains:
        - filters:
          - name: envoy.filters.network.tcp_proxy
            typed_config:
              '@type': type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy
              stat_prefix: t
              cluster: BlackHoleCluster
";

/// Runs `admitpilot analyze` on a folder holding `files`, with `args` before the folder.
fn analyze(files: &[(&str, &str)], args: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    Command::new(env!("CARGO_BIN_EXE_admitpilot"))
        .arg("analyze")
        .args(args)
        .arg(dir.path())
        .output()
        .expect("run admitpilot analyze")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn a_consistent_config_is_clean() {
    let vs = STRAY_VS
        .replace("api.example.org", "api.example.com")
        .replace("gateways: [gw, public]", "gateways: [gw]");
    let output = analyze(
        &[
            ("gw.yaml", GATEWAY),
            ("svc.yaml", SERVICE),
            ("vs.yaml", &vs),
        ],
        &[],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    assert!(stdout(&output).ends_with("3 documents: 3 valid, 0 invalid (0 errors, 0 warnings)\n"));
}

#[test]
fn broken_references_are_warnings_that_fail_only_on_request() {
    let files = [
        ("gw.yaml", GATEWAY),
        ("svc.yaml", SERVICE),
        ("vs.yaml", STRAY_VS),
    ];
    let output = analyze(&files, &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stdout(&output));
    let text = stdout(&output);
    assert!(
        text.contains(r#"VirtualService shop/api: warning: spec.gateways[1]: [IST0101] Referenced gateway not found: "public""#),
        "{text}"
    );
    assert!(
        text.contains("warning: spec.hosts: [IST0132] one or more host [api.example.org] defined in VirtualService shop/api not found in Gateway shop/gw."),
        "{text}"
    );
    let strict = analyze(&files, &["--fail-on", "warning"]);
    assert_eq!(strict.status.code(), Some(1));
    let json: serde_json::Value =
        serde_json::from_slice(&analyze(&files, &["--output", "json"]).stdout).unwrap();
    assert_eq!(json[2]["findings"][0]["field"], "spec.gateways[1]");
}

#[test]
fn what_a_gateway_would_reject_is_an_error() {
    let output = analyze(&[("gw.yaml", GATEWAY), ("extra.yaml", EXTRA_LISTENER)], &[]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stdout(&output).contains("gateway shop/{istio=ingressgateway}: error: listener extra address: Envoy would reject it: listener 0.0.0.0_80 already listens on this address"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn unreadable_input_is_exit_2() {
    let output = Command::new(env!("CARGO_BIN_EXE_admitpilot"))
        .args(["analyze", "/nonexistent/config.yaml"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
}

/// A document without a namespace is analyzed in `--namespace` (default `default`), as `istioctl analyze` does.
#[test]
fn documents_without_a_namespace_get_the_namespace_flag() {
    const DR: &str = include_str!("namespace-less-destination-rule.yaml");
    let output = analyze(&[("dr.yaml", DR)], &["--output", "json"]);
    let results: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(results[0]["namespace"], "default", "{}", stdout(&output));
    assert!(
        results[0]["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["severity"] != "error"),
        "{results}"
    );
    let output = analyze(&[("dr.yaml", DR)], &["--output", "json", "-n", "shop"]);
    let results: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(results[0]["namespace"], "shop");
}
