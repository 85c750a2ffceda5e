//! Telemetry access logging enforced on a gateway, end to end: the real `admitpilot serve --config-dir` binary, a
//! real Envoy 1.40 (SotW, default `initial_fetch_timeout`) and a backend on 127.0.0.1. A Telemetry selecting the
//! gateway turns on Istio's built-in `envoy` provider (Envoy's standard output) with the filter
//! `response.code >= 400`: a 404 is logged, a 200 is not; once the filter is removed the 200s are logged too. Every
//! `*update_rejected` stat stays 0.
//!
//! Skips with a message when Envoy is not installed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/envoy.rs"]
mod envoy;
#[path = "support/pipeline.rs"]
mod pipeline;

use envoy::*;
use pipeline::*;

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
