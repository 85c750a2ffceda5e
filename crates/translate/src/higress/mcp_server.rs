//! mcpServer → `higress-config-mcp-server` (+ `higress-config-mcp-server-server`): takes the stored
//! [`McpServer`] item, yields (when enabled) the MCP session golang filter and, when servers are listed, the MCP
//! server golang filter. Both are delivered through ECDS: an HTTP_FILTER patch referencing the filter by name
//! and an EXTENSION_CONFIG patch carrying its config.
//!
//! A Redis `passwordSecret` becomes the placeholder `${secret.<namespace>/<name>.<key>}`, as in Higress; the
//! layer that serves the config resolves it from the Secret. Match rules Higress derives from McpBridge
//! registries are not added here.
//!
//! The golang HTTP filter is an Envoy contrib extension: serving these filters needs a contrib Envoy build with
//! Higress's `golang-filter.so`, and its config type ([`MCP_FILTER_CONFIG_TYPE`]) is not in the descriptor pool
//! of `envoy_proto`, so [`super::envoy_filters`] leaves them out (see there).

use serde_json::{json, Map, Value};

use super::{document, http_filter, patch, CORS, ROUTER};
use admitpilot_model::higress_config::{McpServer, RedisConfig, MCP_FILTER_CONFIG_TYPE};

/// Name of the session EnvoyFilter; the server EnvoyFilter adds `-server`.
const NAME: &str = "higress-config-mcp-server";
/// Where the golang filter library lives in the gateway image.
const LIBRARY_PATH: &str = "/var/lib/istio/envoy/golang-filter.so";

/// Builds the MCP EnvoyFilters (none when disabled).
pub(super) fn envoy_filters(m: &McpServer, namespace: &str) -> Vec<Value> {
    if !m.enable {
        return Vec::new();
    }
    let mut out = vec![ecds_filter(
        NAME,
        namespace,
        "golang-filter-mcp-session",
        CORS,
        "INSERT_AFTER",
        session_config(m, namespace),
    )];
    if !m.servers.is_empty() {
        out.push(ecds_filter(
            &format!("{NAME}-server"),
            namespace,
            "golang-filter-mcp-server",
            ROUTER,
            "INSERT_BEFORE",
            server_config(m),
        ));
    }
    out
}

/// An EnvoyFilter that places filter `filter` next to `anchor` and serves its config over ECDS.
fn ecds_filter(
    name: &str,
    namespace: &str,
    filter: &str,
    anchor: &str,
    operation: &str,
    typed_config: Value,
) -> Value {
    document(
        name,
        namespace,
        vec![
            patch(
                "HTTP_FILTER",
                Some(http_filter(anchor)),
                operation,
                json!({"name": filter, "config_discovery": {
                    "config_source": {"ads": {}},
                    "type_urls": [format!("type.googleapis.com/{MCP_FILTER_CONFIG_TYPE}")],
                }}),
            ),
            patch(
                "EXTENSION_CONFIG",
                None,
                "ADD",
                json!({"name": filter, "typed_config": typed_config}),
            ),
        ],
    )
}

/// A golang filter config for plugin `plugin` with `value` as its TypedStruct.
fn golang_config(plugin: &str, value: Value) -> Value {
    json!({
        "@type": format!("type.googleapis.com/{MCP_FILTER_CONFIG_TYPE}"),
        "library_id": plugin,
        "library_path": LIBRARY_PATH,
        "plugin_name": plugin,
        "plugin_config": {"@type": "type.googleapis.com/xds.type.v3.TypedStruct", "value": value},
    })
}

/// The mcp-session plugin config.
fn session_config(m: &McpServer, namespace: &str) -> Value {
    let match_list: Vec<Value> = m
        .match_list
        .iter()
        .map(|rule| {
            json!({
                "match_rule_domain": rule.match_rule_domain,
                "match_rule_path": rule.match_rule_path,
                "match_rule_type": rule.match_rule_type,
                "upstream_type": rule.upstream_type,
                "enable_path_rewrite": rule.enable_path_rewrite,
                "path_rewrite_prefix": rule.path_rewrite_prefix,
            })
        })
        .collect();
    let redis = m.redis.as_ref().map_or(Value::Null, |redis| {
        json!({
            "address": redis.address,
            "username": redis.username,
            "password": password(redis, namespace),
            "db": redis.db,
        })
    });
    let rate_limit = m.rate_limit.as_ref().map_or(Value::Null, |limit| {
        json!({"limit": limit.limit, "window": limit.window, "white_list": limit.white_list})
    });
    golang_config(
        "mcp-session",
        json!({
            "redis": redis,
            "rate_limit": rate_limit,
            "sse_path_suffix": m.sse_path_suffix,
            "match_list": match_list,
            "enable_user_level_server": m.enable_user_level_server,
        }),
    )
}

/// The Redis password, or the Secret placeholder when a complete `passwordSecret` is given.
fn password(redis: &RedisConfig, namespace: &str) -> String {
    match &redis.password_secret {
        Some(secret) if !secret.name.is_empty() && !secret.key.is_empty() => {
            let ns = if secret.namespace.is_empty() {
                namespace
            } else {
                &secret.namespace
            };
            if ns.is_empty() {
                format!("${{secret.{}.{}}}", secret.name, secret.key)
            } else {
                format!("${{secret.{ns}/{}.{}}}", secret.name, secret.key)
            }
        }
        _ => redis.password.clone(),
    }
}

/// The mcp-server plugin config: `domain_list` and `config` only when non-empty.
fn server_config(m: &McpServer) -> Value {
    let servers: Vec<Value> = m
        .servers
        .iter()
        .map(|server| {
            let mut out = Map::new();
            out.insert("name".into(), server.name.clone().into());
            out.insert("path".into(), server.path.clone().into());
            out.insert("type".into(), server.server_type.clone().into());
            if !server.domain_list.is_empty() {
                out.insert("domain_list".into(), json!(server.domain_list));
            }
            if !server.config.is_empty() {
                out.insert("config".into(), Value::Object(server.config.clone()));
            }
            Value::Object(out)
        })
        .collect();
    golang_config("mcp-server", json!({"servers": servers}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use admitpilot_model::higress_config::SecretKeyReference;

    #[test]
    fn disabled_or_serverless() {
        assert!(envoy_filters(&McpServer::default(), "ns").is_empty());
        let enabled = McpServer {
            enable: true,
            ..McpServer::default()
        };
        assert_eq!(envoy_filters(&enabled, "ns").len(), 1);
    }

    #[test]
    fn secret_placeholder_falls_back_to_the_password() {
        let mut redis = RedisConfig {
            password: "plain".into(),
            password_secret: Some(SecretKeyReference {
                namespace: String::new(),
                name: "creds".into(),
                key: String::new(),
            }),
            ..RedisConfig::default()
        };
        assert_eq!(password(&redis, "ns"), "plain");
        redis.password_secret.as_mut().unwrap().key = "pw".into();
        assert_eq!(password(&redis, "ns"), "${secret.ns/creds.pw}");
        assert_eq!(password(&redis, ""), "${secret.creds.pw}");
    }
}
