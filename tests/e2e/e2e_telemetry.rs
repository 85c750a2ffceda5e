//! Telemetry access logging enforced on a gateway, end to end: the real `admitpilot serve --config-dir` binary, a
//! real Envoy 1.40 (SotW, default `initial_fetch_timeout`) and a backend on 127.0.0.1. A Telemetry selecting the
//! gateway turns on Istio's built-in `envoy` provider (Envoy's standard output) with the filter
//! `response.code >= 400`: a 404 is logged, a 200 is not; once the filter is removed the 200s are logged too.
//!
//! Providers of the mesh config (the `istio` ConfigMap in the folder): its `defaultProviders.accessLogging` (an
//! `envoyFileAccessLog` writing JSON lines to a file) log with no Telemetry at all; a Telemetry naming an
//! `envoyOtelAls` provider and the file sends records to an OpenTelemetry collector (a grpcio OTLP server,
//! tests/support/otlp_logs_collector.py, from `scripts/setup-tools`) with Istio's text body and the provider's
//! attributes. Every `*update_rejected` stat stays 0.
//!
//! Skips with a message when Envoy (or the collector's Python packages) is not installed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::envoy;
use support::pipeline;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use envoy::*;
use pipeline::*;
use serde_json::{json, Value};

const NODE_ID: &str = "router~127.0.0.1~gw-telemetry.default~default.svc.cluster.local";

fn telemetry(filter: Option<&str>) -> String {
    let filter = filter.map_or(String::new(), |f| {
        format!(", filter: {{expression: \"{f}\"}}")
    });
    format!(
        "apiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {{name: logs, namespace: default}}\nspec:\n  \
         selector: {{matchLabels: {{istio: ingressgateway}}}}\n  accessLogging:\n  - {{providers: [{{name: envoy}}]{filter}}}\n"
    )
}

/// Polls Envoy's standard output until a line holds `needle`.
async fn wait_for_log_line(envoy: &EnvoyProcess, http: &reqwest::Client, url: &str, needle: &str) {
    let deadline = tokio::time::Instant::now() + CONVERGE;
    loop {
        let _ = get(http, url).await;
        if envoy.stdout().lines().any(|line| line.contains(needle)) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no access log line with {needle:?}; stdout:\n{}",
            envoy.stdout()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telemetry_access_logging_reaches_the_gateway() {
    let Some(binary) = envoy_binary() else {
        return;
    };
    let backend = Backend::start("backend").await;
    let port = free_port();
    let dir = api_config_dir(port, backend.port);
    write(
        dir.path(),
        "telemetry.yaml",
        &telemetry(Some("response.code >= 400")),
    );
    let admitpilot = Admitpilot::start(dir.path()).await;
    let bootstrap = bootstrap(AdsApi::Sotw, admitpilot.xds_port, NODE_ID)
        .replace("app: e2e", "istio: ingressgateway");
    let envoy = EnvoyProcess::start(&binary, &bootstrap, 53_300).await;
    let http = client();
    let base = format!("http://127.0.0.1:{port}");
    wait_for_response(&http, &format!("{base}/api/ok"), 200, "backend").await;
    wait_for_log_line(
        &envoy,
        &http,
        &format!("{base}/missing"),
        "\"GET /missing HTTP/1.1\" 404",
    )
    .await;
    assert!(
        !envoy.stdout().contains("/api/ok"),
        "a 200 is filtered out:\n{}",
        envoy.stdout()
    );

    write(dir.path(), "telemetry.yaml", &telemetry(None));
    wait_for_log_line(
        &envoy,
        &http,
        &format!("{base}/api/later"),
        "\"GET /api/later HTTP/1.1\" 200",
    )
    .await;
    envoy.assert_nothing_rejected("telemetry").await;
    drop(admitpilot);
}

/// The OTLP logs collector (a Python grpcio server), killed on drop; the records it received, as JSON lines.
struct Collector {
    child: Child,
    port: u16,
    records: Arc<Mutex<Vec<Value>>>,
}

impl Collector {
    /// Starts the collector, or `None` (after a message) when its Python packages are missing.
    fn start() -> Option<Collector> {
        let python = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/support/otlp_logs_collector.py");
        let mut child = Command::new(python)
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .ok()?;
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let Some(port) = lines
            .next()
            .and_then(Result::ok)
            .and_then(|line| line.strip_prefix("PORT ").and_then(|p| p.parse().ok()))
        else {
            eprintln!("skipping: the OTLP collector did not start (run scripts/setup-tools)");
            let _ = child.kill();
            let _ = child.wait();
            return None;
        };
        let records = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&records);
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                if let Ok(record) = serde_json::from_str(&line) {
                    seen.lock().unwrap().push(record);
                }
            }
        });
        Some(Collector {
            child,
            port,
            records,
        })
    }

    fn records(&self) -> Vec<Value> {
        self.records.lock().unwrap().clone()
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `istio` ConfigMap: a JSON file log at `path` (the default provider) and an OpenTelemetry provider.
fn mesh_config(path: &std::path::Path, collector_port: u16) -> String {
    let mesh = format!(
        "defaultProviders:\n  accessLogging: [file-json]\nextensionProviders:\n- name: file-json\n  envoyFileAccessLog:\n    path: {}\n    logFormat:\n      labels: {{path: \"%REQ(:PATH)%\", code: \"%RESPONSE_CODE%\"}}\n- name: otel\n  envoyOtelAls:\n    service: otel.example.com\n    port: {collector_port}\n    logFormat:\n      labels: {{route: \"%ROUTE_NAME%\", path: \"%REQ(:PATH)%\"}}\n",
        path.display()
    );
    serde_yaml_ng::to_string(&json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "istio", "namespace": "istio-system"}, "data": {"mesh": mesh}}))
    .unwrap()
}

/// Requests `url` until `found` holds for what was logged.
async fn wait_until_logged(
    http: &reqwest::Client,
    url: &str,
    what: &str,
    found: impl Fn() -> bool,
) {
    let deadline = tokio::time::Instant::now() + CONVERGE;
    while !found() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "never logged: {what}"
        );
        let _ = get(http, url).await;
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mesh_config_providers_log_to_a_file_and_an_opentelemetry_collector() {
    let Some(binary) = envoy_binary() else {
        return;
    };
    let Some(collector) = Collector::start() else {
        return;
    };
    let backend = Backend::start("backend").await;
    let port = free_port();
    let dir = api_config_dir(port, backend.port);
    let logs = tempfile::tempdir().unwrap();
    let file = logs.path().join("access.log");
    write(dir.path(), "mesh.yaml", &mesh_config(&file, collector.port));
    write(
        dir.path(),
        "otel.yaml",
        &format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: otel, namespace: default}}\nspec:\n  hosts: [otel.example.com]\n  location: MESH_EXTERNAL\n  resolution: STATIC\n  ports: [{{number: {}, name: grpc, protocol: GRPC}}]\n  endpoints: [{{address: 127.0.0.1}}]\n",
            collector.port
        ),
    );
    let admitpilot = Admitpilot::start(dir.path()).await;
    let bootstrap = bootstrap(AdsApi::Sotw, admitpilot.xds_port, NODE_ID)
        .replace("app: e2e", "istio: ingressgateway");
    let envoy = EnvoyProcess::start(&binary, &bootstrap, 53_400).await;
    let http = client();
    let base = format!("http://127.0.0.1:{port}");
    wait_for_response(&http, &format!("{base}/api/ok"), 200, "backend").await;

    // No Telemetry: the default provider writes JSON lines to the file.
    let file_has = |path: &str| {
        std::fs::read_to_string(&file)
            .unwrap_or_default()
            .lines()
            .any(|line| {
                serde_json::from_str::<Value>(line)
                    .is_ok_and(|v| v["path"] == path && v["code"] == 200)
            })
    };
    wait_until_logged(
        &http,
        &format!("{base}/api/default"),
        "/api/default in the file",
        || file_has("/api/default"),
    )
    .await;
    assert!(collector.records().is_empty(), "{:?}", collector.records());

    // A Telemetry naming both: records reach the collector with the text body and the attributes.
    write(
        dir.path(),
        "telemetry.yaml",
        "apiVersion: telemetry.istio.io/v1\nkind: Telemetry\nmetadata: {name: logs, namespace: default}\nspec:\n  selector: {matchLabels: {istio: ingressgateway}}\n  accessLogging:\n  - providers: [{name: otel}, {name: file-json}]\n",
    );
    let otel_has = |path: &str| {
        collector.records().iter().any(|r| {
            r["attributes"]["path"] == path
                && r["body"]
                    .as_str()
                    .is_some_and(|b| b.contains(&format!("\"GET {path} HTTP/1.1\" 200")))
        })
    };
    wait_until_logged(
        &http,
        &format!("{base}/api/otel"),
        "/api/otel at the collector",
        || otel_has("/api/otel"),
    )
    .await;
    assert!(file_has("/api/otel"), "the file provider is still on");
    envoy.assert_nothing_rejected("mesh config providers").await;
    drop(admitpilot);
}
