//! higress-config → EnvoyFilters (pure): takes an effective [`HigressConfig`] and the Higress namespace, yields
//! the `networking.istio.io/v1alpha3` EnvoyFilter documents Higress's item controllers synthesize, as JSON
//! values, in Higress's order (tracing, gzip, global-option, mcpServer). The translation layer decodes them
//! like any other EnvoyFilter and runs them through the patch engine.
//!
//! Each item is built from the value Higress's item controller stores: an absent (`null`) item is its
//! defaults. Patch values are built with `serde_json`, so a quote or backslash inside a service name, content
//! type or password stays part of the value (Higress formats JSON text with `fmt.Sprintf` and breaks there).
//! Deliberate differences from Higress, each documented where it is made: gzip emits Envoy's `chunk_size`
//! (Higress writes a non-existent `check_size`), and tracing keeps a `sampling` of 0 (Higress's stored copy
//! turns it into 100), and [`envoy_filters`] leaves out filters whose extension config cannot be encoded.

mod global_option;
mod gzip;
mod mcp_server;
mod tracing;

use serde_json::{json, Value};

use admitpilot_envoy_proto::pool;
use admitpilot_model::decode::{decode, DecodeOptions, Decoded};
use admitpilot_model::higress_config::HigressConfig;
use admitpilot_model::{ConfigObject, Spec};

/// Name of the HTTP connection manager network filter.
const HCM: &str = "envoy.filters.network.http_connection_manager";
/// Name of the router HTTP filter.
const ROUTER: &str = "envoy.filters.http.router";
/// Name of the CORS HTTP filter (gzip and the MCP session filter are placed next to it).
const CORS: &str = "envoy.filters.http.cors";
/// Type URL of the HTTP connection manager.
const HCM_TYPE: &str =
    "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";
/// Type URL of the router filter.
const ROUTER_TYPE: &str = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router";

/// Builds every EnvoyFilter Higress builds for `config`, in Higress's order. With Higress's defaults these are
/// `global-option` and `higress-config-gzip`.
pub fn higress_envoy_filters(config: &HigressConfig, namespace: &str) -> Vec<Value> {
    let mut out = Vec::new();
    out.extend(tracing::envoy_filter(
        &config.tracing.clone().unwrap_or_default(),
        namespace,
    ));
    out.extend(gzip::envoy_filter(
        &config.gzip.clone().unwrap_or_default(),
        namespace,
    ));
    out.push(global_option::envoy_filter(
        &config.global_option().effective(),
        namespace,
    ));
    out.extend(mcp_server::envoy_filters(
        &config.mcp_server.clone().unwrap_or_default(),
        namespace,
    ));
    out
}

/// The EnvoyFilters admitpilot serves for `config`: [`higress_envoy_filters`] minus any filter with an
/// EXTENSION_CONFIG whose config type the Envoy descriptor pool cannot encode. Serving only the HTTP filter half
/// of such a pair would leave Envoy waiting for an ECDS config that never comes; today this drops the MCP
/// filters (Envoy's contrib golang filter), and `validate` warns when `mcpServer.enable` is set.
pub fn envoy_filters(config: &HigressConfig, namespace: &str) -> Vec<Value> {
    higress_envoy_filters(config, namespace)
        .into_iter()
        .filter(encodable_extension_configs)
        .collect()
}

/// Tells whether every EXTENSION_CONFIG of an EnvoyFilter names a config type the descriptor pool knows.
fn encodable_extension_configs(filter: &Value) -> bool {
    filter["spec"]["configPatches"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|patch| patch["applyTo"] == "EXTENSION_CONFIG")
        .all(|patch| {
            patch["patch"]["value"]["typed_config"]["@type"]
                .as_str()
                .and_then(|url| url.rsplit_once('/'))
                .is_some_and(|(_, name)| pool().get_message_by_name(name).is_some())
        })
}

/// An EnvoyFilter document in the Higress namespace, without workload selector or priority.
fn document(name: &str, namespace: &str, patches: Vec<Value>) -> Value {
    json!({
        "apiVersion": "networking.istio.io/v1alpha3",
        "kind": "EnvoyFilter",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"configPatches": patches},
    })
}

/// One config patch; `matcher` is `None` for EXTENSION_CONFIG patches, which have no match.
fn patch(apply_to: &str, matcher: Option<Value>, operation: &str, value: Value) -> Value {
    let mut patch = json!({
        "applyTo": apply_to,
        "patch": {"operation": operation, "value": value},
    });
    if let (Some(matcher), Some(object)) = (matcher, patch.as_object_mut()) {
        object.insert("match".into(), matcher);
    }
    patch
}

/// Match on the gateway context only.
fn gateway() -> Value {
    json!({"context": "GATEWAY"})
}

/// Match on the gateway's HTTP connection manager.
fn hcm() -> Value {
    json!({"context": "GATEWAY", "listener": {"filterChain": {"filter": {"name": HCM}}}})
}

/// Match on one HTTP filter of the gateway's HTTP connection manager.
fn http_filter(name: &str) -> Value {
    json!({"context": "GATEWAY", "listener": {"filterChain": {"filter": {
        "name": HCM, "subFilter": {"name": name}}}}})
}

/// Decodes the EnvoyFilters built from a higress-config object.
pub fn decoded_envoy_filters(object: &ConfigObject) -> Vec<ConfigObject> {
    let Spec::HigressConfig(config) = &object.spec else {
        return Vec::new();
    };
    envoy_filters(config, &object.metadata.namespace)
        .into_iter()
        .filter_map(|doc| match decode(&doc, &DecodeOptions::default()) {
            Decoded::Object { object, .. } => Some(object),
            // The documents are built by admitpilot itself; one that does not decode is a defect
            // the higress golden tests catch, and is skipped rather than half-applied.
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use admitpilot_model::decode::DecodeOptions;
    use admitpilot_model::higress_config::{McpServer, RedisConfig, SseServer, Tracing, Zipkin};
    use admitpilot_validate::validate_document;

    fn names(filters: &[Value]) -> Vec<&str> {
        filters
            .iter()
            .map(|f| f["metadata"]["name"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn defaults_give_gzip_and_global_option() {
        let filters = envoy_filters(&HigressConfig::default(), "higress-system");
        assert_eq!(names(&filters), ["higress-config-gzip", "global-option"]);
    }

    #[test]
    fn every_item_in_higress_order() {
        let config = HigressConfig {
            tracing: Some(Tracing {
                enable: true,
                zipkin: Some(Zipkin {
                    service: "z".into(),
                    port: "9411".into(),
                }),
                ..Tracing::default()
            }),
            gzip: None,
            mcp_server: Some(McpServer {
                enable: true,
                redis: Some(RedisConfig::default()),
                servers: vec![SseServer::default()],
                ..McpServer::default()
            }),
            ..HigressConfig::default()
        };
        assert_eq!(
            names(&envoy_filters(&config, "ns")),
            [
                "higress-config-tracing",
                "higress-config-gzip",
                "global-option"
            ],
            "the MCP filters need the contrib golang filter"
        );
        let filters = higress_envoy_filters(&config, "ns");
        assert_eq!(
            names(&filters),
            [
                "higress-config-tracing",
                "higress-config-gzip",
                "global-option",
                "higress-config-mcp-server",
                "higress-config-mcp-server-server"
            ]
        );
        for filter in &filters {
            assert_eq!(filter["metadata"]["namespace"], "ns");
            let report = validate_document(filter, &DecodeOptions::default());
            let errors: Vec<&str> = report.errors().map(|f| f.message.as_str()).collect();
            if filter["metadata"]["name"]
                .as_str()
                .unwrap()
                .starts_with("higress-config-mcp-server")
            {
                // The golang filter is an Envoy contrib extension: its config type is not in the descriptor
                // pool, so only that reference may be reported.
                assert_eq!(errors.len(), 1, "{errors:?}");
                assert!(errors[0].contains("golang.v3alpha.Config"), "{errors:?}");
            } else {
                assert!(errors.is_empty(), "{errors:?}\n{filter}");
            }
        }
    }

    #[test]
    fn quotes_stay_inside_values() {
        let mut config = HigressConfig::default();
        config.gzip.as_mut().unwrap().content_type = vec!["text/\"odd\\".into()];
        let filters = envoy_filters(&config, "ns");
        let types = &filters[0]["spec"]["configPatches"][0]["patch"]["value"]["typed_config"]
            ["response_direction_config"]["common_config"]["content_type"];
        assert_eq!(types, &json!(["text/\"odd\\"]));
    }
}

#[cfg(test)]
mod proto_tests {
    use prost_reflect::{DeserializeOptions, DynamicMessage};
    use serde_json::{json, Value};

    use super::higress_envoy_filters;
    use admitpilot_envoy_proto::pool;
    use admitpilot_model::higress_config::{decode_configmap, MCP_FILTER_CONFIG_TYPE as GOLANG};

    /// The Envoy message an EnvoyFilter patch value of `apply_to` must be.
    fn message_for(apply_to: &str) -> &'static str {
        match apply_to {
            "NETWORK_FILTER" => "envoy.config.listener.v3.Filter",
            "HTTP_FILTER" => {
                "envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter"
            }
            "ROUTE_CONFIGURATION" => "envoy.config.route.v3.RouteConfiguration",
            "HTTP_ROUTE" => "envoy.config.route.v3.Route",
            "LISTENER" => "envoy.config.listener.v3.Listener",
            "CLUSTER" => "envoy.config.cluster.v3.Cluster",
            "EXTENSION_CONFIG" => "envoy.config.core.v3.TypedExtensionConfig",
            other => panic!("unexpected applyTo {other}"),
        }
    }

    /// Every patch value of every item decodes strictly (unknown fields rejected) as its Envoy message.
    #[test]
    fn patch_values_are_valid_envoy_messages() {
        let higress = "tracing:\n  enable: true\n  skywalking: {service: sky, port: 11800}\n\
            downstream: {routeTimeout: 30}\naddXRealIpHeader: true\ndisableXEnvoyHeaders: true\n\
            mcpServer:\n  enable: true\n  redis: {address: 'r:6379'}\n  rate_limit: {limit: 1, white_list: [a]}\n\
            \x20 match_list: [{match_rule_type: prefix, match_rule_path: /m}]\n\
            \x20 servers: [{name: s, path: /s, type: t, config: {k: v}}]\n";
        let decoded = decode_configmap(json!({"data": {"higress": higress}}).as_object().unwrap());
        assert!(decoded.findings.is_empty(), "{:?}", decoded.findings);
        let mut variants = vec![decoded.config.clone()];
        let mut other_tracers = decoded.config.clone();
        let tracing = other_tracers.tracing.as_mut().unwrap();
        tracing.skywalking = None;
        tracing.zipkin = Some(admitpilot_model::higress_config::Zipkin {
            service: "z".into(),
            port: "9411".into(),
        });
        variants.push(other_tracers.clone());
        let tracing = other_tracers.tracing.as_mut().unwrap();
        tracing.zipkin = None;
        tracing.opentelemetry = Some(admitpilot_model::higress_config::OpenTelemetry {
            service: "o".into(),
            port: "4317".into(),
        });
        variants.push(other_tracers);
        let options = DeserializeOptions::new().deny_unknown_fields(true);
        let mut checked = 0;
        for config in &variants {
            for filter in higress_envoy_filters(config, "ns") {
                for patch in filter["spec"]["configPatches"].as_array().unwrap() {
                    let apply_to = patch["applyTo"].as_str().unwrap();
                    let descriptor = pool().get_message_by_name(message_for(apply_to)).unwrap();
                    let value: &Value = &patch["patch"]["value"];
                    // The golang filter is an Envoy contrib extension, absent from the descriptor pool
                    // (and from upstream Envoy builds): only the ECDS wrapper can be checked.
                    if value["typed_config"]["@type"] == format!("type.googleapis.com/{GOLANG}") {
                        assert!(pool().get_message_by_name(GOLANG).is_none());
                        assert!(value["name"]
                            .as_str()
                            .unwrap()
                            .starts_with("golang-filter-"));
                        continue;
                    }
                    let result =
                        DynamicMessage::deserialize_with_options(descriptor, value, &options);
                    assert!(
                        result.is_ok(),
                        "{} {apply_to}: {:?}\n{value}",
                        filter["metadata"]["name"],
                        result.err()
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked >= 20, "only {checked} patches checked");
    }

    /// Why gzip deviates from Higress: Envoy's gzip compressor has `chunk_size` and no `check_size`.
    #[test]
    fn envoy_gzip_has_chunk_size_not_check_size() {
        let gzip = pool()
            .get_message_by_name("envoy.extensions.compression.gzip.compressor.v3.Gzip")
            .unwrap();
        assert!(gzip.get_field_by_name("chunk_size").is_some());
        assert!(gzip.get_field_by_name("check_size").is_none());
    }
}
