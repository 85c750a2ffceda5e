//! Higress `McpBridge` spec (networking.higress.io v1): takes the `spec` JSON, yields the service registries
//! (Nacos, ZooKeeper, Consul, Eureka, static, DNS) and egress proxies the gateway discovers services from.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The `spec` of an McpBridge.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct McpBridge {
    /// Service registries.
    pub registries: Vec<RegistryConfig>,
    /// Egress proxies that registries' services may be reached through.
    pub proxies: Vec<ProxyConfig>,
}

/// One service registry. Services it yields are named `<service>.<name>.<type>` (static/DNS: `<name>.<type>`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RegistryConfig {
    /// Registry type: nacos, nacos2, nacos3, zookeeper, consul, eureka, static or dns; required.
    #[serde(rename = "type")]
    pub type_: String,
    /// Registry name, unique per type.
    pub name: String,
    /// Registry address; for `static` a comma-separated `ip:port` list, for `dns` a comma-separated domain list.
    pub domain: String,
    /// Registry port (the service port for static/DNS).
    pub port: Option<u32>,
    /// Nacos address server.
    pub nacos_address_server: String,
    /// Nacos access key.
    pub nacos_access_key: String,
    /// Nacos secret key.
    pub nacos_secret_key: String,
    /// Nacos namespace id.
    pub nacos_namespace_id: String,
    /// Nacos namespace.
    pub nacos_namespace: String,
    /// Nacos groups.
    pub nacos_groups: Vec<String>,
    /// Nacos refresh interval (nanoseconds).
    pub nacos_refresh_interval: Option<i64>,
    /// Consul namespace.
    pub consul_namespace: String,
    /// ZooKeeper service paths.
    pub zk_services_path: Vec<String>,
    /// Consul datacenter.
    pub consul_datacenter: String,
    /// Consul service tag.
    pub consul_service_tag: String,
    /// Consul refresh interval (nanoseconds).
    pub consul_refresh_interval: Option<i64>,
    /// Secret holding registry credentials (in the McpBridge's namespace).
    pub auth_secret_name: String,
    /// Protocol of the discovered services (static/DNS): http, https, http2, grpc, grpcs, tcp, dubbo…
    pub protocol: String,
    /// SNI for TLS to the discovered services.
    pub sni: String,
    /// Domains MCP servers are exported on.
    pub mcp_server_export_domains: Vec<String>,
    /// Base URL of exported MCP servers.
    pub mcp_server_base_url: String,
    /// Export MCP servers from this registry (Nacos 3).
    #[serde(rename = "enableMCPServer")]
    pub enable_mcp_server: Option<bool>,
    /// Scope exported MCP servers to `allowMcpServers`.
    pub enable_scope_mcp_servers: Option<bool>,
    /// MCP servers allowed when scoping is on.
    pub allow_mcp_servers: Vec<String>,
    /// Extra metadata per service.
    pub metadata: BTreeMap<String, InnerMap>,
    /// Name of an entry of `proxies` to reach this registry's service through (DNS registries only).
    pub proxy_name: String,
    /// Virtual ports for discovered services.
    pub vport: Option<VPort>,
}

/// A string map wrapper (`metadata.<key>.innerMap`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct InnerMap {
    /// The entries.
    pub inner_map: BTreeMap<String, String>,
}

/// Virtual ports exposed for discovered services instead of their real ports.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct VPort {
    /// Port used for services not listed in `services`.
    pub default: Option<u32>,
    /// Per-service ports.
    pub services: Vec<VPortService>,
}

/// A virtual port for one service.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct VPortService {
    /// Service name.
    pub name: String,
    /// Port number.
    pub value: Option<u32>,
}

/// An egress proxy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProxyConfig {
    /// Proxy type: http, https, socks4 or socks5 (only http is implemented); required.
    #[serde(rename = "type")]
    pub type_: String,
    /// Proxy name, referenced by `registries[].proxyName`; required and unique.
    pub name: String,
    /// Proxy address (IP or host name); required.
    pub server_address: String,
    /// Proxy port; required.
    pub server_port: Option<u32>,
    /// Local listener port (50001..50999); 0 or absent lets the controller choose one.
    pub listener_port: Option<u32>,
    /// Connect timeout in milliseconds (default 1200).
    pub connect_timeout: Option<u32>,
}
