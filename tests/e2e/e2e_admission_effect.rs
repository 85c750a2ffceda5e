//! End-to-end effect check, with a real Envoy 1.40 (SotW, default `initial_fetch_timeout`). The main change: an
//! EnvoyFilter that is valid on its own but adds a listener on the address the Gateway's listener already uses.
//! - `admitpilot serve --config-dir` (the real binary) denies it at admission, naming the gateway, the listener
//!   and the rule; written into the folder anyway (as when the webhook is down), the push path leaves that object
//!   out (the webhook's check, object by object), so Envoy keeps serving, gets later changes, and rejects nothing;
//!   so are the other denied examples;
//! - the proof that each denial is real (a second listener on one address, a MERGE breaking a listener's or a
//!   cluster's field rule, a second virtual host with one domain): the same config served by an xDS server
//!   without admitpilot's checks makes Envoy reject the update.
//!
//! Skips with a message when Envoy is not installed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::envoy;
use support::pipeline;

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

    // Stored anyway (the webhook was down): the push path leaves the EnvoyFilter out; the rest of the change lands.
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
    wait_for_metric(&admitpilot, "admitpilot_xds_excluded_objects_total 1").await;
    // The EnvoyFilter is new: the log says the gateway gets nothing of it, not a "last good version".
    assert!(
        admitpilot.log().contains(
            "Envoy would reject what this object makes of the gateway's config; the gateway gets nothing of it"
        ),
        "{}",
        admitpilot.log()
    );
    assert_eq!(
        get(&http, &format!("{base}/api/x")).await.unwrap(),
        (200, "backend".into())
    );
    envoy
        .assert_nothing_rejected("a listener Envoy would reject was stored")
        .await;

    // The other denied examples, stored too: those breaking a field rule are left out as invalid, the second
    // virtual host for `*` by the push path; changes to the same route configuration after it still land.
    for case in denied_examples(port).into_iter().skip(1) {
        let name = case.object["metadata"]["name"]
            .as_str()
            .unwrap()
            .to_string();
        write(
            dir.path(),
            &format!("{name}.yaml"),
            &serde_yaml_ng::to_string(&case.object).unwrap(),
        );
    }
    wait_for_metric(&admitpilot, "admitpilot_xds_excluded_objects_total 2").await;
    write(
        dir.path(),
        "after.yaml",
        &virtual_service("after", "/after", backend.port),
    );
    wait_for_response(&http, &format!("{base}/after"), 200, "backend").await;
    for path in ["/api/x", "/later"] {
        assert_eq!(
            get(&http, &format!("{base}{path}")).await.unwrap(),
            (200, "backend".into())
        );
    }
    wait_for_metric(&admitpilot, "admitpilot_xds_held_back_resources_total 0").await;
    envoy
        .assert_nothing_rejected("changes Envoy would reject were stored")
        .await;
}

/// One change the webhook denies: the object, a fragment of the denial, and a fragment of the name of the Envoy
/// `*update_rejected` stat that counts the rejection when the change is served anyway.
struct Denied {
    object: Value,
    denial: &'static str,
    rejected_stat: &'static str,
}

/// Every kind of denial: by Envoy's field rules on a MERGE value (listener and cluster), and by the effect
/// check's structural rules (a second listener on one address, a second virtual host with one domain).
fn denied_examples(port: u16) -> Vec<Denied> {
    let filter = |name: &str, patch: Value| {
        json!({"apiVersion": "networking.istio.io/v1alpha3", "kind": "EnvoyFilter",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"configPatches": [patch]}})
    };
    vec![
        Denied {
            object: extra_listener(port),
            denial: "already listens on this address",
            rejected_stat: "listener_manager.lds.update_rejected",
        },
        Denied {
            object: filter(
                "big-headers",
                json!({"applyTo": "NETWORK_FILTER", "match": {"context": "GATEWAY", "listener": {"filterChain":
                    {"filter": {"name": "envoy.filters.network.http_connection_manager"}}}},
                "patch": {"operation": "MERGE", "value": {"typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                    "max_request_headers_kb": 99999}}}}),
            ),
            denial: "max_request_headers_kb: value must be greater than 0 and less than or equal to 8192",
            rejected_stat: "listener_manager.lds.update_rejected",
        },
        Denied {
            object: filter(
                "no-timeout",
                json!({"applyTo": "CLUSTER", "match": {"context": "GATEWAY"},
                "patch": {"operation": "MERGE", "value": {"connect_timeout": "0s"}}}),
            ),
            denial: "connect_timeout: value must be greater than 0s",
            rejected_stat: "cluster_manager.cds.update_rejected",
        },
        Denied {
            object: filter(
                "twin-host",
                json!({"applyTo": "VIRTUAL_HOST", "match": {"context": "GATEWAY"},
                "patch": {"operation": "ADD", "value": {"name": "twin", "domains": ["*"]}}}),
            ),
            denial: "(Envoy requires unique domains)",
            rejected_stat: ".rds.",
        },
    ]
}

/// The snapshot of `dir`'s files plus `extra`, decoded but not validated: what a control plane without
/// admitpilot's checks would serve.
fn unchecked_snapshot(dir: &std::path::Path, extra: &Value) -> admitpilot::model::Snapshot {
    let options = admitpilot::model::decode::DecodeOptions::default();
    let mut documents: Vec<Value> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            serde_yaml_ng::from_str(&text).unwrap()
        })
        .collect();
    documents.push(extra.clone());
    let mut snapshot = admitpilot::model::Snapshot {
        version: 1,
        ..Default::default()
    };
    for document in documents {
        let admitpilot::model::decode::Decoded::Object { object, .. } =
            admitpilot::model::decode::decode(&document, &options)
        else {
            panic!("does not decode: {document}");
        };
        snapshot
            .objects
            .insert(object.key(), std::sync::Arc::new(object));
    }
    snapshot
}

/// The proof that each denial is real: admitpilot denies it at admission, and served without admitpilot's
/// checks (decoded, not validated, translated with the push guard off) Envoy rejects the update.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_webhook_denies_envoy_rejects() {
    let Some(binary) = envoy_binary() else {
        return;
    };
    let port = free_port();
    let dir = api_config_dir(port, free_port());
    let admitpilot = Admitpilot::start(dir.path()).await;
    for (index, case) in denied_examples(port).into_iter().enumerate() {
        let review = admitpilot.review(case.object.clone()).await;
        assert_eq!(review["allowed"], false, "{review}");
        let message = review["status"]["message"].as_str().unwrap();
        assert!(message.contains(case.denial), "{message}");

        let snapshot = unchecked_snapshot(dir.path(), &case.object);
        let (_keep, snapshots) = tokio::sync::watch::channel(std::sync::Arc::new(snapshot));
        let translate = TranslateFn::caching(admitpilot::translate::Options::default()).unguarded();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let xds_port = listener.local_addr().unwrap().port();
        let (_server, stop, serving) = start_xds(listener, snapshots, translate).await;
        let base_id = 51_100 + u32::try_from(index).unwrap();
        let envoy = EnvoyProcess::start(&binary, &gateway_bootstrap(xds_port), base_id).await;
        let deadline = tokio::time::Instant::now() + CONVERGE;
        loop {
            let rejected: u64 = envoy
                .stats("update_rejected")
                .await
                .into_iter()
                .filter(|(name, _)| name.contains(case.rejected_stat))
                .map(|(_, value)| value)
                .sum();
            if rejected > 0 {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "Envoy accepted {}:\n{}",
                case.object,
                envoy.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        drop(envoy);
        let _ = stop.send(());
        serving.await.unwrap();
    }
}
