//! The `mcpServer` item of higress-config: takes nothing, defines [`McpServer`] and its parts (Redis, rate
//! limit, SSE servers, match rules) with Higress's defaults (`NewDefaultMcpServer`: disabled, no servers).
//! JSON names are Higress's own mix of snake_case and camelCase (`passwordSecret`).

use serde_json::{Map, Value};

use super::gojson::go_struct;

/// Protobuf type of the MCP filters' config: Envoy's golang HTTP filter, a contrib extension that upstream
/// Envoy builds (and admitpilot's descriptor set) do not include.
pub const MCP_FILTER_CONFIG_TYPE: &str = "envoy.extensions.filters.http.golang.v3alpha.Config";

go_struct! {
    /// `mcpServer`: the MCP session and server golang filters.
    #[derive(Default)]
    pub struct McpServer as "McpServer" {
        /// Turns the MCP filters on.
        pub enable: bool => "enable",
        /// Redis used for sessions.
        pub redis: Option<RedisConfig> => "redis",
        /// Suffix appended to SSE paths.
        pub sse_path_suffix: String => "sse_path_suffix",
        /// Built-in MCP servers.
        pub servers: Vec<SseServer> => "servers",
        /// Request match rules.
        pub match_list: Vec<MatchRule> => "match_list",
        /// Per-user servers (needs Redis).
        pub enable_user_level_server: bool => "enable_user_level_server",
        /// Rate limit.
        pub rate_limit: Option<RateLimit> => "rate_limit",
    }
}

go_struct! {
    /// `mcpServer.redis`.
    #[derive(Default)]
    pub struct RedisConfig as "RedisConfig" {
        /// `host:port`.
        pub address: String => "address",
        /// User name.
        pub username: String => "username",
        /// Password (ignored when `passwordSecret` names a Secret key).
        pub password: String => "password",
        /// Secret holding the password.
        pub password_secret: Option<SecretKeyReference> => "passwordSecret",
        /// Database index.
        pub db: i64 => "db",
    }
}

go_struct! {
    /// A key of a Kubernetes Secret.
    #[derive(Default)]
    pub struct SecretKeyReference as "SecretKeyReference" {
        /// Namespace (default: the Higress namespace).
        pub namespace: String => "namespace",
        /// Secret name.
        pub name: String => "name",
        /// Key inside the Secret's data.
        pub key: String => "key",
    }
}

go_struct! {
    /// `mcpServer.rate_limit`.
    #[derive(Default)]
    pub struct RateLimit as "MCPRatelimitConfig" {
        /// Requests per window.
        pub limit: i64 => "limit",
        /// Window, seconds.
        pub window: i64 => "window",
        /// Users exempt from the limit.
        pub white_list: Vec<String> => "white_list",
    }
}

go_struct! {
    /// One entry of `mcpServer.servers`.
    #[derive(Default)]
    pub struct SseServer as "SSEServer" {
        /// Server name.
        pub name: String => "name",
        /// Mount path.
        pub path: String => "path",
        /// Server implementation type.
        pub server_type: String => "type",
        /// Free-form implementation config.
        pub config: Map<String, Value> => "config",
        /// Domains served.
        pub domain_list: Vec<String> => "domain_list",
    }
}

go_struct! {
    /// One entry of `mcpServer.match_list`.
    #[derive(Default)]
    pub struct MatchRule as "MatchRule" {
        /// Domain pattern.
        pub match_rule_domain: String => "match_rule_domain",
        /// Path pattern.
        pub match_rule_path: String => "match_rule_path",
        /// `exact`, `prefix`, `suffix`, `contains` or `regex`.
        pub match_rule_type: String => "match_rule_type",
        /// `rest` (default), `sse` or `streamable`.
        pub upstream_type: String => "upstream_type",
        /// Rewrite the request path (SSE upstreams only).
        pub enable_path_rewrite: bool => "enable_path_rewrite",
        /// Prefix the path is rewritten to.
        pub path_rewrite_prefix: String => "path_rewrite_prefix",
    }
}
