//! The Envoy bootstrap of a provisioned gateway (pure): takes the gateway's namespace, service account and Gateway
//! name and the [`Settings`], and yields the bootstrap (JSON, which Envoy reads as YAML): its node (namespace,
//! service account and the [`GATEWAY_NAME_LABEL`] label admitpilot selects the Gateway's config by; the node id
//! comes from `--service-node`), ADS over gRPC with TLS to admitpilot's xDS port trusting [`CA_PATH`] and presenting
//! the projected token read from [`TOKEN_PATH`] on every (re)connect (`envoy.grpc_credentials.file_based_metadata`),
//! and a static readiness listener on [`READINESS_PORT`] answering `/healthz/ready` from Envoy's admin `/ready`.

use serde_json::{json, Value};

use crate::{Settings, GATEWAY_NAME_LABEL, READINESS_PORT};

/// Where the bootstrap ConfigMap is mounted.
pub const CONFIG_DIR: &str = "/etc/envoy";
/// The bootstrap file (key [`BOOTSTRAP_KEY`] of the ConfigMap).
pub const BOOTSTRAP_PATH: &str = "/etc/envoy/envoy.yaml";
/// The key of the bootstrap in the ConfigMap.
pub const BOOTSTRAP_KEY: &str = "envoy.yaml";
/// The CA of admitpilot's xDS port (key [`CA_KEY`] of the same ConfigMap).
pub const CA_PATH: &str = "/etc/envoy/ca.crt";
/// The key of the CA in the ConfigMap.
pub const CA_KEY: &str = "ca.crt";
/// Where the projected service-account token is mounted.
pub const TOKEN_DIR: &str = "/var/run/secrets/admitpilot";
/// The projected service-account token.
pub const TOKEN_PATH: &str = "/var/run/secrets/admitpilot/token";
/// Envoy's admin port, on 127.0.0.1 only.
pub const ADMIN_PORT: u16 = 15000;

/// The bootstrap of the proxies of Gateway `gateway` in `namespace`, running as `service_account`.
pub fn bootstrap(
    namespace: &str,
    service_account: &str,
    gateway: &str,
    settings: &Settings,
) -> String {
    let typed = |kind: &str, rest: Value| {
        let mut value = json!({ "@type": format!("type.googleapis.com/{kind}") });
        if let (Some(out), Value::Object(rest)) = (value.as_object_mut(), rest) {
            out.extend(rest);
        }
        value
    };
    let bootstrap = json!({
        "node": {
            "cluster": format!("{gateway}.{namespace}"),
            "metadata": {
                "NAMESPACE": namespace,
                "SERVICE_ACCOUNT": service_account,
                "LABELS": { GATEWAY_NAME_LABEL: gateway },
            },
        },
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": ADMIN_PORT}}},
        "dynamic_resources": {
            "ads_config": {
                "api_type": "DELTA_GRPC",
                "transport_api_version": "V3",
                "set_node_on_first_message_only": true,
                "grpc_services": [{"google_grpc": {
                    "target_uri": settings.xds_address,
                    "stat_prefix": "xds",
                    "credentials_factory_name": "envoy.grpc_credentials.file_based_metadata",
                    "channel_credentials": {"ssl_credentials": {"root_certs": {"filename": CA_PATH}}},
                    "call_credentials": [{"from_plugin": {
                        "name": "envoy.grpc_credentials.file_based_metadata",
                        "typed_config": typed("envoy.config.grpc_credential.v3.FileBasedMetadataConfig", json!({
                            "secret_data": {"filename": TOKEN_PATH},
                            "header_prefix": "Bearer ",
                        })),
                    }}],
                    "channel_args": {"args": {
                        "grpc.http2.max_pings_without_data": {"int_value": 0},
                        "grpc.keepalive_time_ms": {"int_value": 30000},
                        "grpc.keepalive_timeout_ms": {"int_value": 10000},
                    }},
                }}],
            },
            "lds_config": {"ads": {}, "resource_api_version": "V3"},
            "cds_config": {"ads": {}, "resource_api_version": "V3"},
        },
        "static_resources": {
            "listeners": [{
                "name": "readiness",
                "address": {"socket_address": {"address": "0.0.0.0", "port_value": READINESS_PORT}},
                "filter_chains": [{"filters": [{
                    "name": "envoy.filters.network.http_connection_manager",
                    "typed_config": typed(
                        "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                        json!({
                            "stat_prefix": "readiness",
                            "route_config": {"virtual_hosts": [{
                                "name": "readiness",
                                "domains": ["*"],
                                "routes": [{
                                    "match": {"path": "/healthz/ready"},
                                    "route": {"cluster": "envoy-admin", "prefix_rewrite": "/ready"},
                                }],
                            }]},
                            "http_filters": [{
                                "name": "envoy.filters.http.router",
                                "typed_config": typed("envoy.extensions.filters.http.router.v3.Router", json!({})),
                            }],
                        }),
                    ),
                }]}],
            }],
            "clusters": [{
                "name": "envoy-admin",
                "type": "STATIC",
                "connect_timeout": "1s",
                "load_assignment": {
                    "cluster_name": "envoy-admin",
                    "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {
                        "address": "127.0.0.1", "port_value": ADMIN_PORT,
                    }}}}]}],
                },
            }],
        },
    });
    // A `Value` always serializes.
    serde_json::to_string_pretty(&bootstrap).unwrap_or_default()
}
