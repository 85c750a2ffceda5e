//! Cluster references that Envoy resolves when it loads a config (pure): takes an encoded `Any`, yields the
//! names of the clusters it names in fields Envoy looks up at load time (gRPC services, tracer collectors, HTTP
//! services), searching nested messages, lists, maps and nested `Any`s. A listener whose filters name a cluster
//! Envoy does not have is rejected whole.

use envoy_types::pb::google::protobuf::Any;
use prost_reflect::{DynamicMessage, ReflectMessage, Value};

use super::pool;

/// `(message, field)` pairs whose string value names a cluster that must exist when Envoy loads the config.
const CLUSTER_FIELDS: &[(&str, &str)] = &[
    ("envoy.config.core.v3.GrpcService.EnvoyGrpc", "cluster_name"),
    ("envoy.config.core.v3.HttpUri", "cluster"),
    ("envoy.config.trace.v3.ZipkinConfig", "collector_cluster"),
    ("envoy.config.trace.v3.DatadogConfig", "collector_cluster"),
];

/// Deepest nesting followed (messages and `Any`s); Envoy's own configs stay far below it.
const MAX_DEPTH: usize = 32;

/// The clusters `any` names in fields Envoy resolves at load time, in field-number order. An `Any` of a type the
/// descriptors do not know, or that does not decode, names none.
pub fn clusters_named(any: &Any) -> Vec<String> {
    let mut found = Vec::new();
    if let Some(message) = decode_any(&any.type_url, &any.value) {
        collect(&message, 0, &mut found);
    }
    found
}

fn decode_any(type_url: &str, value: &[u8]) -> Option<DynamicMessage> {
    let name = type_url.rsplit('/').next()?;
    let descriptor = pool().get_message_by_name(name)?;
    DynamicMessage::decode(descriptor, value).ok()
}

fn collect(message: &DynamicMessage, depth: usize, found: &mut Vec<String>) {
    if depth > MAX_DEPTH {
        return;
    }
    let descriptor = message.descriptor();
    if descriptor.full_name() == "google.protobuf.Any" {
        let type_url = message.get_field_by_name("type_url");
        let value = message.get_field_by_name("value");
        if let (Some(Value::String(type_url)), Some(Value::Bytes(value))) =
            (type_url.as_deref(), value.as_deref())
        {
            if let Some(inner) = decode_any(type_url, value) {
                collect(&inner, depth + 1, found);
            }
        }
        return;
    }
    for (field, value) in message.fields() {
        let named = CLUSTER_FIELDS
            .iter()
            .any(|(m, f)| *m == descriptor.full_name() && *f == field.name());
        if named {
            if let Value::String(cluster) = value {
                found.push(cluster.clone());
            }
            continue;
        }
        collect_value(value, depth, found);
    }
}

fn collect_value(value: &Value, depth: usize, found: &mut Vec<String>) {
    match value {
        Value::Message(inner) => collect(inner, depth + 1, found),
        Value::List(items) => {
            for item in items {
                collect_value(item, depth, found);
            }
        }
        Value::Map(entries) => {
            for item in entries.values() {
                collect_value(item, depth, found);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::from_json;

    fn packed(type_name: &str, json: serde_json::Value) -> Any {
        use prost::Message;
        let message = from_json(type_name, &json).expect("valid JSON for the type");
        Any {
            type_url: format!("type.googleapis.com/{type_name}"),
            value: message.encode_to_vec(),
        }
    }

    #[test]
    fn finds_tracer_collectors_and_grpc_services_inside_nested_anys() {
        let hcm = packed(
            "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
            serde_json::json!({
                "stat_prefix": "http",
                "tracing": {"provider": {"name": "envoy.tracers.zipkin", "typed_config": {
                    "@type": "type.googleapis.com/envoy.config.trace.v3.ZipkinConfig",
                    "collector_cluster": "zipkin", "collector_endpoint": "/api/v2/spans",
                    "collector_endpoint_version": "HTTP_JSON"}}},
                "http_filters": [{"name": "envoy.filters.http.ext_authz", "typed_config": {
                    "@type": "type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthz",
                    "grpc_service": {"envoy_grpc": {"cluster_name": "authz"}}}}],
            }),
        );
        assert_eq!(clusters_named(&hcm), ["authz", "zipkin"]);
    }

    #[test]
    fn unknown_or_undecodable_types_name_nothing() {
        let unknown = Any {
            type_url: "type.googleapis.com/example.Unknown".into(),
            value: vec![1, 2, 3],
        };
        assert!(clusters_named(&unknown).is_empty());
        let broken = Any {
            type_url: "type.googleapis.com/envoy.config.trace.v3.ZipkinConfig".into(),
            value: vec![0xff, 0xff],
        };
        assert!(clusters_named(&broken).is_empty());
    }
}
