//! EnvoyFilter benchmarks: validating one EnvoyFilter from JSON bytes (decode, Istio rules, strict conversion
//! of an HTTP_FILTER value with a Lua `typed_config`, protoc-gen-validate rules), and applying it to a
//! gateway listener.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use admitpilot::envoy_proto::message_from_json;
use admitpilot::model::decode::DecodeOptions;
use admitpilot::translate::envoy_filter::{apply, PatchOptions};
use admitpilot::translate::{GatewayResources, Proxy};
use admitpilot::validate::validate_document;
use criterion::{criterion_group, criterion_main, Criterion};
use serde_json::json;

fn document() -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "networking.istio.io/v1alpha3",
        "kind": "EnvoyFilter",
        "metadata": {"name": "lua", "namespace": "higress-system"},
        "spec": {"workloadSelector": {"labels": {"app": "higress-gateway"}}, "configPatches": [{
            "applyTo": "HTTP_FILTER",
            "match": {"context": "GATEWAY", "listener": {"portNumber": 80, "filterChain": {"filter": {
                "name": "envoy.filters.network.http_connection_manager",
                "subFilter": {"name": "envoy.filters.http.router"}}}}},
            "patch": {"operation": "INSERT_BEFORE", "value": {"name": "envoy.lua", "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua",
                "default_source_code": {"inline_string":
                    "function envoy_on_request(h)\n  h:headers():add('x-bench', '1')\nend\n"}}}}}]}
    }))
    .unwrap()
}

fn bench(c: &mut Criterion) {
    let bytes = document();
    let options = DecodeOptions::default();
    // Warm the descriptor pool and the rule cache once, as a running webhook would have.
    let report = validate_document(&serde_json::from_slice(&bytes).unwrap(), &options);
    assert!(report.is_valid(), "{:?}", report.findings);
    c.bench_function("envoy_filter/validate_from_json_bytes", |b| {
        b.iter(|| {
            let doc: serde_json::Value = serde_json::from_slice(black_box(&bytes)).unwrap();
            black_box(validate_document(&doc, &options))
        })
    });

    let object = report.object.unwrap();
    let listener = message_from_json(&json!({"name": "0.0.0.0_80",
        "address": {"socket_address": {"address": "0.0.0.0", "port_value": 80}},
        "filter_chains": [{"filters": [{"name": "envoy.filters.network.http_connection_manager", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
            "stat_prefix": "in", "rds": {"config_source": {"ads": {}}, "route_config_name": "http.80"},
            "http_filters": [{"name": "envoy.filters.http.cors"}, {"name": "envoy.filters.http.router"}]}}]}]}))
    .unwrap();
    let resources = GatewayResources {
        listeners: vec![listener],
        ..GatewayResources::default()
    };
    let proxy = Proxy {
        namespace: "higress-system".into(),
        labels: [("app".to_string(), "higress-gateway".to_string())].into(),
        ..Default::default()
    };
    let patch_options = PatchOptions::default();
    c.bench_function("envoy_filter/apply_http_filter_insert", |b| {
        b.iter(|| {
            let mut res = resources.clone();
            apply(&mut res, &[&object], &proxy, &patch_options);
            black_box(res)
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
