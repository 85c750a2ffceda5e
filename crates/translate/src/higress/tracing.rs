//! tracing → `higress-config-tracing`: takes the stored [`Tracing`] item, yields its EnvoyFilter (only when
//! tracing is enabled and a tracer is configured): the tracer on every gateway HTTP connection manager with a span
//! per upstream request (`spawn_upstream_span`), and HTTP/2 towards gRPC collectors (SkyWalking, OpenTelemetry).

use serde_json::{json, Value};

use super::{document, hcm, patch, HCM, HCM_TYPE};
use admitpilot_model::higress_config::Tracing;

/// Name of the EnvoyFilter.
const NAME: &str = "higress-config-tracing";

/// Builds the tracing EnvoyFilter, or `None` when tracing is off or no tracer is set.
///
/// Deviation: Higress stores the item through a JSON round trip that drops a zero `sampling` (`omitempty`) and
/// restores the default 100; admitpilot samples what was written, so `sampling: 0` means 0 %.
pub(super) fn envoy_filter(t: &Tracing, namespace: &str) -> Option<Value> {
    if !t.enable {
        return None;
    }
    let provider = provider(t, namespace)?;
    // Higress sets the router's `start_child_span` and Zipkin's `split_spans_for_request`, both deprecated in
    // Envoy 1.40 in favour of the connection manager's `spawn_upstream_span`, which does the same: a span for each
    // upstream request, child of the gateway's span.
    let mut patches = vec![patch(
        "NETWORK_FILTER",
        Some(hcm()),
        "MERGE",
        json!({"name": HCM, "typed_config": {
            "@type": HCM_TYPE,
            "tracing": {
                "provider": provider,
                "random_sampling": {"value": one_decimal(t.sampling)},
                "spawn_upstream_span": true,
            },
        }}),
    )];
    let grpc_collectors = [
        t.skywalking.as_ref().map(|s| (&s.port, &s.service)),
        t.opentelemetry.as_ref().map(|o| (&o.port, &o.service)),
    ];
    for (port, service) in grpc_collectors.into_iter().flatten() {
        patches.push(http2_to_collector(&cluster_name(port, service)));
    }
    Some(document(NAME, namespace, patches))
}

/// The tracer provider. Higress checks SkyWalking, then Zipkin, then OpenTelemetry and the last one set wins
/// (validation allows exactly one when tracing is enabled).
fn provider(t: &Tracing, namespace: &str) -> Option<Value> {
    let timeout = grpc_timeout(t.timeout);
    let service_name = format!("higress-gateway.{namespace}");
    let mut provider = None;
    if let Some(sky) = &t.skywalking {
        provider = Some(json!({"name": "envoy.tracers.skywalking", "typed_config": {
            "@type": "type.googleapis.com/envoy.config.trace.v3.SkyWalkingConfig",
            "client_config": {"service_name": service_name, "backend_token": sky.access_token},
            "grpc_service": {
                "envoy_grpc": {"cluster_name": cluster_name(&sky.port, &sky.service)},
                "timeout": timeout,
            },
        }}));
    }
    if let Some(zipkin) = &t.zipkin {
        provider = Some(json!({"name": "envoy.tracers.zipkin", "typed_config": {
            "@type": "type.googleapis.com/envoy.config.trace.v3.ZipkinConfig",
            "collector_cluster": cluster_name(&zipkin.port, &zipkin.service),
            "collector_endpoint": "/api/v2/spans",
            "collector_hostname": "higress-gateway",
            "collector_endpoint_version": "HTTP_JSON",
        }}));
    }
    if let Some(otel) = &t.opentelemetry {
        provider = Some(
            json!({"name": "envoy.tracers.opentelemetry", "typed_config": {
                "@type": "type.googleapis.com/envoy.config.trace.v3.OpenTelemetryConfig",
                "service_name": service_name,
                "grpc_service": {
                    "envoy_grpc": {"cluster_name": cluster_name(&otel.port, &otel.service)},
                    "timeout": timeout,
                },
            }}),
        );
    }
    provider
}

/// The Istio-style cluster of a collector service.
fn cluster_name(port: &str, service: &str) -> String {
    format!("outbound|{port}||{service}")
}

/// A millisecond timeout as a protobuf Duration string, computed in `float32` with three decimals as Higress
/// does (`500` → `"0.500s"`).
fn grpc_timeout(millis: i32) -> String {
    #[allow(clippy::cast_precision_loss)]
    let seconds = millis as f32 / 1000.0;
    format!("{seconds:.3}s")
}

/// The sampling percentage rounded to one decimal, as Higress's `%.1f` writes it.
fn one_decimal(value: f64) -> f64 {
    format!("{value:.1}").parse().unwrap_or(value)
}

/// Forces HTTP/2 on the cluster of a gRPC collector.
fn http2_to_collector(cluster: &str) -> Value {
    patch(
        "CLUSTER",
        Some(json!({"context": "GATEWAY", "cluster": {"name": cluster}})),
        "MERGE",
        json!({"typed_extension_protocol_options": {
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                "explicit_http_config": {"http2_protocol_options": {}},
            },
        }}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use admitpilot_model::higress_config::{OpenTelemetry, Skywalking};

    #[test]
    fn formats_numbers_like_higress() {
        assert_eq!(grpc_timeout(500), "0.500s");
        assert_eq!(grpc_timeout(1500), "1.500s");
        assert_eq!(grpc_timeout(1), "0.001s");
        assert_eq!(one_decimal(33.33), 33.3);
        assert_eq!(one_decimal(100.0), 100.0);
    }

    #[test]
    fn nothing_without_enable_or_tracer() {
        assert_eq!(envoy_filter(&Tracing::default(), "ns"), None);
        let enabled = Tracing {
            enable: true,
            ..Tracing::default()
        };
        assert_eq!(envoy_filter(&enabled, "ns"), None);
    }

    #[test]
    fn last_tracer_wins_and_grpc_collectors_get_http2() {
        let t = Tracing {
            enable: true,
            sampling: 0.0,
            skywalking: Some(Skywalking {
                service: "sky".into(),
                port: "11800".into(),
                access_token: String::new(),
            }),
            opentelemetry: Some(OpenTelemetry {
                service: "otel".into(),
                port: "4317".into(),
            }),
            ..Tracing::default()
        };
        let filter = envoy_filter(&t, "ns").unwrap();
        let patches = filter["spec"]["configPatches"].as_array().unwrap();
        assert_eq!(patches.len(), 3);
        let tracing = &patches[0]["patch"]["value"]["typed_config"]["tracing"];
        assert_eq!(tracing["provider"]["name"], "envoy.tracers.opentelemetry");
        assert_eq!(tracing["random_sampling"]["value"], 0.0);
        assert_eq!(tracing["spawn_upstream_span"], true);
        assert_eq!(
            patches[1]["match"]["cluster"]["name"],
            "outbound|11800||sky"
        );
        assert_eq!(
            patches[2]["match"]["cluster"]["name"],
            "outbound|4317||otel"
        );
    }
}
