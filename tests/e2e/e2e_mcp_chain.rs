//! End-to-end MCP chain, all real processes: admitpilot A (`serve --config-dir`) serves its validated config over
//! MCP-over-xDS; admitpilot B (`serve --mcp-source xds://A`) takes it as its only config source and serves it
//! over xDS to a real Envoy 1.40 (default `initial_fetch_timeout`), which routes real HTTP to a backend on
//! 127.0.0.1. A file change on A reaches Envoy through B (added route, removed route); a file turned invalid
//! on A keeps its last good version all along the chain; A's `/debug/syncz` lists B as an MCP subscriber that
//! ACKed every collection. Envoy rejects nothing. Skips with a message when Envoy is not installed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::envoy;
use support::pipeline;

use envoy::*;
use pipeline::*;

const NODE_ID: &str = "router~127.0.0.1~gw-mcp.default~default.svc.cluster.local";

async fn run(api: AdsApi, base_id: u32) {
    let Some(binary) = envoy_binary() else {
        return;
    };
    let chain = McpChain::start().await;
    let (backend, port, dir, source) = (&chain.backend, chain.port, &chain.dir, &chain.source);
    let envoy = EnvoyProcess::start(&binary, &chain.bootstrap(api, NODE_ID), base_id).await;
    let http = client();
    let base = format!("http://127.0.0.1:{port}");
    wait_for_response(&http, &format!("{base}/api/x"), 200, "backend").await;

    // A lists B as an MCP subscriber that has ACKed what it was sent.
    source
        .wait_for_admin("/debug/syncz", "B subscribed over MCP", |text| {
            let Ok(connections) = serde_json::from_str::<Vec<serde_json::Value>>(text) else {
                return false;
            };
            connections.iter().any(|c| {
                c["subscriber"] == "mcp"
                    && c["node_id"]
                        .as_str()
                        .is_some_and(|id| id.starts_with("admitpilot-mcp-source~"))
                    && c["types"]["networking.istio.io/v1/VirtualService"]["acked_version"]
                        .is_string()
            })
        })
        .await;

    // A file added on A reaches Envoy behind B.
    write(
        dir.path(),
        "later.yaml",
        &virtual_service("later", "/later", backend.port),
    );
    wait_for_response(&http, &format!("{base}/later"), 200, "backend").await;

    // A file turned invalid on A: its last good version stays in force along the chain.
    write(
        dir.path(),
        "later.yaml",
        &virtual_service("later", "/later", backend.port).replace("http:", "http: 12\nignored:"),
    );
    source
        .wait_for_admin("/metrics", "the invalid file rejected", |text| {
            text.contains("admitpilot_source_rejected_objects_total{kind=\"VirtualService\"")
        })
        .await;
    wait_for_response(&http, &format!("{base}/later"), 200, "backend").await;

    // A file removed on A: the route goes away behind B.
    std::fs::remove_file(dir.path().join("later.yaml")).unwrap();
    wait_for_response(&http, &format!("{base}/later"), 404, "").await;
    wait_for_response(&http, &format!("{base}/api/x"), 200, "backend").await;
    envoy.assert_nothing_rejected("MCP chain").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_change_on_the_source_reaches_envoy_through_the_mcp_subscriber_sotw() {
    run(AdsApi::Sotw, 54_100).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_change_on_the_source_reaches_envoy_through_the_mcp_subscriber_delta() {
    run(AdsApi::Delta, 54_150).await;
}
