//! global-option → `global-option`: takes the stored global option ([`EffectiveGlobal`]), yields the
//! EnvoyFilter Higress always has: optional `x-real-ip` and suppressed `x-envoy-*` headers, downstream idle
//! timeouts, header size and HTTP/2 settings, listener and cluster buffer limits, upstream idle timeout and an
//! optional route timeout.

use serde_json::{json, Value};

use super::{document, gateway, hcm, http_filter, patch, HCM, HCM_TYPE, ROUTER, ROUTER_TYPE};
use admitpilot_model::higress_config::EffectiveGlobal;

/// Name of the EnvoyFilter.
const NAME: &str = "global-option";

/// Builds the global-option EnvoyFilter. Its keys mix camelCase and snake_case exactly as Higress writes them
/// (protobuf JSON accepts both).
pub(super) fn envoy_filter(g: &EffectiveGlobal, namespace: &str) -> Value {
    let mut patches = Vec::new();
    if g.add_x_real_ip_header {
        patches.push(patch(
            "ROUTE_CONFIGURATION",
            Some(gateway()),
            "MERGE",
            json!({"request_headers_to_add": [{
                "append": false,
                "header": {"key": "x-real-ip", "value": "%REQ(X-ENVOY-EXTERNAL-ADDRESS)%"},
            }]}),
        ));
    }
    if g.disable_x_envoy_headers {
        patches.push(patch(
            "HTTP_FILTER",
            Some(http_filter(ROUTER)),
            "REPLACE",
            json!({"name": ROUTER, "typed_config": {"@type": ROUTER_TYPE, "suppress_envoy_headers": true}}),
        ));
    }
    let down = &g.downstream;
    let idle = format!("{}s", down.idle_timeout);
    patches.push(patch(
        "NETWORK_FILTER",
        Some(hcm()),
        "MERGE",
        json!({"name": HCM, "typed_config": {
            "@type": HCM_TYPE,
            "common_http_protocol_options": {"idleTimeout": idle},
            "http2_protocol_options": {
                "maxConcurrentStreams": g.http2.max_concurrent_streams,
                "initialStreamWindowSize": g.http2.initial_stream_window_size,
                "initialConnectionWindowSize": g.http2.initial_connection_window_size,
            },
            "maxRequestHeadersKb": down.max_request_headers_kb,
            "streamIdleTimeout": idle,
        }}),
    ));
    patches.push(patch(
        "LISTENER",
        Some(gateway()),
        "MERGE",
        json!({"per_connection_buffer_limit_bytes": down.connection_buffer_limits}),
    ));
    if down.route_timeout != 0 {
        patches.push(patch(
            "HTTP_ROUTE",
            Some(json!({"context": "GATEWAY",
                "routeConfiguration": {"vhost": {"route": {"action": "ROUTE"}}}})),
            "MERGE",
            json!({"route": {"timeout": format!("{}s", down.route_timeout)}}),
        ));
    }
    patches.push(patch(
        "CLUSTER",
        Some(gateway()),
        "MERGE",
        json!({"common_http_protocol_options": {"idleTimeout": format!("{}s", g.upstream.idle_timeout)}}),
    ));
    patches.push(patch(
        "CLUSTER",
        Some(gateway()),
        "MERGE",
        json!({"per_connection_buffer_limit_bytes": g.upstream.connection_buffer_limits}),
    ));
    document(NAME, namespace, patches)
}

#[cfg(test)]
mod tests {
    use super::*;
    use admitpilot_model::higress_config::{Downstream, GlobalOption};

    fn apply_to(filter: &Value) -> Vec<&str> {
        filter["spec"]["configPatches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["applyTo"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn http2_null_still_sends_the_default_http2_settings() {
        let global = GlobalOption {
            downstream: Some(Downstream {
                http2: None,
                idle_timeout: 0,
                ..Downstream::default()
            }),
            ..GlobalOption::default()
        };
        let filter = envoy_filter(&global.effective(), "ns");
        let hcm = &filter["spec"]["configPatches"][0]["patch"]["value"]["typed_config"];
        assert_eq!(hcm["http2_protocol_options"]["maxConcurrentStreams"], 100);
        assert_eq!(hcm["streamIdleTimeout"], "0s");
        assert_eq!(
            apply_to(&filter),
            ["NETWORK_FILTER", "LISTENER", "CLUSTER", "CLUSTER"]
        );
    }

    #[test]
    fn absent_parts_are_defaults() {
        let global = GlobalOption {
            downstream: None,
            upstream: None,
            add_x_real_ip_header: true,
            disable_x_envoy_headers: false,
        };
        let filter = envoy_filter(&global.effective(), "ns");
        assert_eq!(
            apply_to(&filter),
            [
                "ROUTE_CONFIGURATION",
                "NETWORK_FILTER",
                "LISTENER",
                "CLUSTER",
                "CLUSTER"
            ]
        );
        assert_eq!(
            filter["spec"]["configPatches"][4]["patch"]["value"]
                ["per_connection_buffer_limit_bytes"],
            10_485_760
        );
    }
}
