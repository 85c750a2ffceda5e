//! higress-config through the whole translation: a Gateway, a VirtualService and a `higress-config` ConfigMap
//! are decoded like any source documents and translated for a gateway proxy; the EnvoyFilters built from
//! higress-config must show up, applied by the patch engine, in the Envoy resources the proxy receives.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use admitpilot::model::decode::{decode, DecodeOptions, Decoded};
use admitpilot::model::{ConfigObject, Snapshot};
use admitpilot::translate::{translate, GatewayResources, Proxy};
use envoy_types::pb::envoy::config::listener::v3::filter;
use envoy_types::pb::envoy::extensions::compression::gzip::compressor::v3::Gzip;
use envoy_types::pb::envoy::extensions::filters::http::compressor::v3::Compressor;
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    http_filter, HttpConnectionManager,
};
use envoy_types::pb::google::protobuf::Any;
use prost::Message;
use serde_json::{json, Value};

fn object(doc: Value) -> Arc<ConfigObject> {
    match decode(&doc, &DecodeOptions::default()) {
        Decoded::Object { object, .. } => Arc::new(object),
        other => panic!("document does not decode: {other:?}"),
    }
}

fn resources(higress: &str) -> GatewayResources {
    let gateway = object(json!({
        "apiVersion": "networking.istio.io/v1", "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "higress-system"},
        "spec": {"selector": {"higress": "higress-system-higress-gateway"},
                 "servers": [{"port": {"number": 80, "name": "http", "protocol": "HTTP"}, "hosts": ["*"]}]}
    }));
    let route = object(json!({
        "apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
        "metadata": {"name": "web", "namespace": "apps"},
        "spec": {"hosts": ["web.example.com"], "gateways": ["higress-system/gw"],
                 "http": [{"route": [{"destination": {"host": "web"}}]}]}
    }));
    let config = object(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "higress-config", "namespace": "higress-system"},
        "data": {"higress": higress},
    }));
    // The tracing collector the tests name; without it, tracing would be left out (see translate::dangling).
    let collector = object(json!({
        "apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
        "metadata": {"name": "zipkin", "namespace": "tracing"},
        "spec": {"hosts": ["zipkin.tracing.svc.cluster.local"], "resolution": "DNS",
                 "ports": [{"number": 9411, "name": "http", "protocol": "HTTP"}]}
    }));
    let snapshot = Snapshot {
        version: 1,
        objects: [gateway, route, config, collector]
            .into_iter()
            .map(|o| (o.key(), o))
            .collect(),
    };
    let proxy = Proxy {
        namespace: "higress-system".into(),
        labels: [(
            "higress".to_string(),
            "higress-system-higress-gateway".to_string(),
        )]
        .into(),
        ..Default::default()
    };
    translate(&snapshot, &proxy)
}

fn unpack<M: Message + Default>(any: &Any) -> M {
    M::decode(any.value.as_slice()).unwrap()
}

fn hcm(out: &GatewayResources) -> HttpConnectionManager {
    let listener = &out.listeners[0];
    let filter = &listener.filter_chains[0].filters[0];
    let Some(filter::ConfigType::TypedConfig(any)) = &filter.config_type else {
        panic!("HCM without typed config")
    };
    unpack(any)
}

fn filter_config(hcm: &HttpConnectionManager, name: &str) -> Any {
    let filter = hcm.http_filters.iter().find(|f| f.name == name).unwrap();
    let Some(http_filter::ConfigType::TypedConfig(any)) = &filter.config_type else {
        panic!("{name} without typed config")
    };
    any.clone()
}

#[test]
fn defaults_add_gzip_and_the_global_options() {
    let out = resources("{}");
    let listener = &out.listeners[0];
    assert_eq!(
        listener
            .per_connection_buffer_limit_bytes
            .as_ref()
            .unwrap()
            .value,
        32768
    );
    let hcm = hcm(&out);
    let names: Vec<&str> = hcm.http_filters.iter().map(|f| f.name.as_str()).collect();
    let compressor = names
        .iter()
        .position(|n| *n == "envoy.filters.http.compressor")
        .expect("gzip filter inserted");
    let cors = names
        .iter()
        .position(|n| *n == "envoy.filters.http.cors")
        .unwrap();
    assert_eq!(compressor + 1, cors, "{names:?}");
    let compressor: Compressor = unpack(&filter_config(&hcm, "envoy.filters.http.compressor"));
    let gzip: Gzip = unpack(
        compressor
            .compressor_library
            .unwrap()
            .typed_config
            .as_ref()
            .unwrap(),
    );
    assert_eq!(gzip.chunk_size.unwrap().value, 4096);
    assert_eq!(gzip.memory_level.unwrap().value, 5);
    assert_eq!(hcm.max_request_headers_kb.unwrap().value, 60);
    assert_eq!(hcm.stream_idle_timeout.unwrap().seconds, 180);
    assert_eq!(
        hcm.http2_protocol_options
            .unwrap()
            .max_concurrent_streams
            .unwrap()
            .value,
        100
    );
    for cluster in &out.clusters {
        assert_eq!(
            cluster.per_connection_buffer_limit_bytes.unwrap().value,
            10_485_760,
            "{}",
            cluster.name
        );
    }
}

// The deprecated fields Higress's patches set are checked to be absent.
#[allow(deprecated)]
#[test]
fn every_option_reaches_the_proxy() {
    let out = resources(
        "tracing: {enable: true, sampling: 25, zipkin: {service: zipkin.tracing.svc.cluster.local, port: 9411}}\n\
         gzip: {chunkSize: 8192}\n\
         downstream: {routeTimeout: 30, idleTimeout: 200}\n\
         upstream: {idleTimeout: 20}\n\
         addXRealIpHeader: true\ndisableXEnvoyHeaders: true\n",
    );
    let hcm = hcm(&out);
    let tracing = hcm.tracing.as_ref().expect("tracing merged");
    assert_eq!(tracing.random_sampling.as_ref().unwrap().value, 25.0);
    assert_eq!(
        tracing.provider.as_ref().unwrap().name,
        "envoy.tracers.zipkin"
    );
    assert_eq!(hcm.stream_idle_timeout.unwrap().seconds, 200);
    let router: Router = unpack(&filter_config(&hcm, "envoy.filters.http.router"));
    assert!(router.suppress_envoy_headers, "REPLACE by global-option");
    assert_eq!(
        tracing.spawn_upstream_span,
        Some(envoy_types::pb::google::protobuf::BoolValue { value: true }),
        "a span per upstream request, instead of the router's deprecated start_child_span"
    );
    assert!(!router.start_child_span);
    let compressor: Compressor = unpack(&filter_config(&hcm, "envoy.filters.http.compressor"));
    let gzip: Gzip = unpack(
        compressor
            .compressor_library
            .unwrap()
            .typed_config
            .as_ref()
            .unwrap(),
    );
    assert_eq!(gzip.chunk_size.unwrap().value, 8192);
    let route_config = &out.route_configs[0];
    assert!(route_config
        .request_headers_to_add
        .iter()
        .any(|h| h.header.as_ref().unwrap().key == "x-real-ip"));
    let route = &route_config.virtual_hosts[0].routes[0];
    let Some(envoy_types::pb::envoy::config::route::v3::route::Action::Route(action)) =
        &route.action
    else {
        panic!("not a route action")
    };
    assert_eq!(action.timeout.unwrap().seconds, 30);
    for cluster in &out.clusters {
        // Higress's patch sets the deprecated cluster field; it reaches Envoy as the typed options.
        assert_eq!(
            cluster.common_http_protocol_options, None,
            "{}",
            cluster.name
        );
        let typed = &cluster.typed_extension_protocol_options
            ["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"];
        let options =
            envoy_types::pb::envoy::extensions::upstreams::http::v3::HttpProtocolOptions::decode(
                typed.value.as_slice(),
            )
            .unwrap();
        let common = options
            .common_http_protocol_options
            .unwrap_or_else(|| panic!("{} has no upstream idle timeout", cluster.name));
        assert_eq!(common.idle_timeout.unwrap().seconds, 20);
    }
}

/// An enabled mcpServer is not served (its golang filter config cannot be encoded): neither the HTTP filter
/// nor its ECDS config reaches the proxy, so no listener waits for a config that never comes.
#[test]
fn mcp_server_filters_are_left_out_whole() {
    let out = resources("mcpServer: {enable: true, redis: {address: 'redis:6379'}}\n");
    let hcm = hcm(&out);
    assert!(
        hcm.http_filters
            .iter()
            .all(|f| !f.name.starts_with("golang-filter-")),
        "{:?}",
        hcm.http_filters
    );
    assert!(out.extension_configs.is_empty());
}
