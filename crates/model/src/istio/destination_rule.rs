//! Istio `DestinationRule` spec: takes Kubernetes camelCase JSON, yields typed traffic policies (load balancing,
//! connection pools, outlier detection, client TLS, tunnels) and subsets. Sidecar reuses
//! [`ConnectionPoolSettings`]; the TLS and load-balancer types are used by the translation.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::proxy_config::TypeWorkloadSelector;
use super::virtual_service::PortSelector;

/// The `spec` of a DestinationRule.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DestinationRule {
    /// Service host name the rule applies to (required).
    pub host: String,
    /// Policy for all ports and subsets (boxed: it is large).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traffic_policy: Option<Box<TrafficPolicy>>,
    /// Named subsets (versions) of the service.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subsets: Vec<Subset>,
    /// Namespaces this rule is visible to.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub export_to: Vec<String>,
    /// Workloads (by `matchLabels`) the rule applies to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload_selector: Option<TypeWorkloadSelector>,
}

/// Traffic policy for a host, subset or port.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TrafficPolicy {
    /// Load balancing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_balancer: Option<LoadBalancerSettings>,
    /// Connection pool limits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connection_pool: Option<ConnectionPoolSettings>,
    /// Outlier detection (passive health checking).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outlier_detection: Option<OutlierDetection>,
    /// Upstream TLS.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<ClientTlsSettings>,
    /// Per-port overrides.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub port_level_settings: Vec<PortTrafficPolicy>,
    /// HTTP CONNECT/POST tunnelling.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tunnel: Option<TunnelSettings>,
    /// PROXY protocol towards the upstream.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy_protocol: Option<ProxyProtocol>,
    /// Retry budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_budget: Option<RetryBudget>,
}

/// Traffic policy for one port.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PortTrafficPolicy {
    /// The port (required).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<PortSelector>,
    /// Load balancing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_balancer: Option<LoadBalancerSettings>,
    /// Connection pool limits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connection_pool: Option<ConnectionPoolSettings>,
    /// Outlier detection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outlier_detection: Option<OutlierDetection>,
    /// Upstream TLS.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<ClientTlsSettings>,
}

/// Tunnel settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TunnelSettings {
    /// `CONNECT` (default) or `POST`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub protocol: String,
    /// Host to tunnel to (required).
    pub target_host: String,
    /// Port to tunnel to (required).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_port: Option<u32>,
}

/// PROXY protocol version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProxyProtocolVersion {
    /// Version 1 (text).
    V1,
    /// Version 2 (binary).
    V2,
}

/// PROXY protocol settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProxyProtocol {
    /// Version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<ProxyProtocolVersion>,
}

/// Retry budget.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RetryBudget {
    /// Percentage of active requests that may be retries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percent: Option<f64>,
    /// Minimum concurrent retries allowed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_retry_concurrency: Option<u32>,
    /// Interval the budget is computed over.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_interval: Option<String>,
}

/// A named subset of service endpoints.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Subset {
    /// Subset name (required, DNS label).
    pub name: String,
    /// Endpoint labels selecting the subset.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Policy overriding the rule-level one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traffic_policy: Option<TrafficPolicy>,
}

/// Simple load-balancing algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SimpleLb {
    /// Default (least request).
    Unspecified,
    /// Deprecated alias of LEAST_REQUEST.
    LeastConn,
    /// Random.
    Random,
    /// Forward to the original destination.
    Passthrough,
    /// Round robin.
    RoundRobin,
    /// Least request.
    LeastRequest,
}

/// Load-balancer settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LoadBalancerSettings {
    /// Simple algorithm (oneof with `consistentHash`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub simple: Option<SimpleLb>,
    /// Consistent hashing (oneof with `simple`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consistent_hash: Option<ConsistentHashLb>,
    /// Locality-weighted load balancing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub locality_lb_setting: Option<LocalityLoadBalancerSetting>,
    /// Zone-aware load balancing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone_aware_lb_setting: Option<ZoneAwareLoadBalancerSetting>,
    /// Deprecated slow-start window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warmup_duration_secs: Option<String>,
    /// Slow-start configuration.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warmup: Option<WarmupConfiguration>,
}

/// Consistent-hash load balancing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsistentHashLb {
    /// Hash on this header (hash-key oneof).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_header_name: Option<String>,
    /// Hash on this cookie (hash-key oneof).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_cookie: Option<HttpCookie>,
    /// Hash on the source IP (hash-key oneof).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub use_source_ip: Option<bool>,
    /// Hash on this query parameter (hash-key oneof).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_query_parameter_name: Option<String>,
    /// Ring hash (algorithm oneof).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ring_hash: Option<RingHash>,
    /// Maglev (algorithm oneof).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub maglev: Option<MagLev>,
    /// Deprecated ring size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub minimum_ring_size: Option<u64>,
}

/// Ring-hash settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RingHash {
    /// Minimum ring size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub minimum_ring_size: Option<u64>,
}

/// Maglev settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MagLev {
    /// Lookup table size (prime).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table_size: Option<u64>,
}

/// Hash-cookie settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpCookie {
    /// Cookie name (required).
    pub name: String,
    /// Cookie path.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub path: String,
    /// Cookie lifetime.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl: Option<String>,
    /// Extra cookie attributes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub attributes: Vec<CookieAttribute>,
}

/// One cookie attribute.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CookieAttribute {
    /// Attribute name (required).
    pub name: String,
    /// Attribute value.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub value: String,
}

/// Slow-start settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WarmupConfiguration {
    /// Warmup window (required).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    /// Minimum initial weight percentage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub minimum_percent: Option<f64>,
    /// Ramp curve aggression.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aggression: Option<f64>,
}

/// Connection-pool settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConnectionPoolSettings {
    /// TCP limits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpSettings>,
    /// HTTP limits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpSettings>,
}

/// TCP connection-pool settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TcpSettings {
    /// Maximum connections.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_connections: Option<i32>,
    /// Connect timeout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connect_timeout: Option<String>,
    /// TCP keepalive.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_keepalive: Option<TcpKeepalive>,
    /// Maximum connection lifetime.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_connection_duration: Option<String>,
    /// Idle timeout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_timeout: Option<String>,
}

/// TCP keepalive settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TcpKeepalive {
    /// Probe count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probes: Option<u32>,
    /// Idle time before probing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    /// Probe interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
}

/// HTTP/2 upgrade policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum H2UpgradePolicy {
    /// Mesh default.
    Default,
    /// Keep HTTP/1.1.
    DoNotUpgrade,
    /// Upgrade to HTTP/2.
    Upgrade,
}

/// HTTP connection-pool settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpSettings {
    /// Maximum pending HTTP/1 requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http1_max_pending_requests: Option<i32>,
    /// Maximum active HTTP/2 requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http2_max_requests: Option<i32>,
    /// Requests per connection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_requests_per_connection: Option<i32>,
    /// Maximum outstanding retries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_retries: Option<i32>,
    /// Idle timeout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_timeout: Option<String>,
    /// HTTP/2 upgrade policy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub h2_upgrade_policy: Option<H2UpgradePolicy>,
    /// Use the downstream protocol upstream.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub use_client_protocol: Option<bool>,
    /// Maximum concurrent streams per HTTP/2 connection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_concurrent_streams: Option<i32>,
    /// HTTP/2 keepalive.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http2_keep_alive: Option<ConnectionKeepalive>,
}

/// HTTP/2 PING keepalive.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConnectionKeepalive {
    /// PING interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
    /// PING timeout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
}

/// Outlier detection.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OutlierDetection {
    /// Deprecated: consecutive 5xx/gateway errors.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consecutive_errors: Option<i32>,
    /// Count local-origin errors separately.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub split_external_local_origin_errors: Option<bool>,
    /// Consecutive local-origin failures before ejection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consecutive_local_origin_failures: Option<u32>,
    /// Consecutive gateway errors before ejection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consecutive_gateway_errors: Option<u32>,
    /// Consecutive 5xx errors before ejection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consecutive_5xx_errors: Option<u32>,
    /// Analysis interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
    /// Minimum ejection duration.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_ejection_time: Option<String>,
    /// Maximum percentage of hosts ejected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_ejection_percent: Option<i32>,
    /// Minimum healthy percentage for detection to stay on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_health_percent: Option<i32>,
    /// HTTP status codes counted as errors.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub outlier_detection_http_error_codes: Vec<u32>,
}

/// Upstream TLS mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ClientTlsMode {
    /// Plain text.
    Disable,
    /// TLS, server authenticated.
    Simple,
    /// Mutual TLS with given certificates.
    Mutual,
    /// Mutual TLS with Istio certificates.
    IstioMutual,
}

/// Upstream (client-side) TLS settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClientTlsSettings {
    /// TLS mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<ClientTlsMode>,
    /// Client certificate file.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub client_certificate: String,
    /// Private key file.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub private_key: String,
    /// CA bundle file.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub ca_certificates: String,
    /// Secret holding the credentials.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub credential_name: String,
    /// Accepted server SANs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subject_alt_names: Vec<String>,
    /// SNI to send.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub sni: String,
    /// Skip server certificate verification.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub insecure_skip_verify: Option<bool>,
    /// CRL file.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub ca_crl: String,
    /// A credential (a `credentialName`-style Secret name) whose certificate and key are presented to the server,
    /// whatever the mode: not an Istio field, never read from a document; the Gateway API conversion sets it from
    /// the Gateway's `spec.tls.backend.clientCertificateRef` on the TLS a BackendTLSPolicy asks for.
    #[serde(skip)]
    pub presented_credential: String,
}

/// Locality-weighted load balancing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LocalityLoadBalancerSetting {
    /// Traffic distribution per source locality.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub distribute: Vec<LocalityDistribute>,
    /// Failover between regions.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failover: Vec<LocalityFailover>,
    /// Label keys ordering failover priority.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failover_priority: Vec<String>,
    /// Enables locality load balancing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// Weighted distribution from one locality.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LocalityDistribute {
    /// Source locality (`region/zone/subzone`, wildcards allowed).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub from: String,
    /// Destination locality → weight.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub to: BTreeMap<String, u32>,
}

/// Failover from one region to another.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LocalityFailover {
    /// Source region.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub from: String,
    /// Failover region.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub to: String,
}

/// Zone-aware load balancing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ZoneAwareLoadBalancerSetting {
    /// Enables zone-aware routing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Failover between regions.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failover: Vec<LocalityFailover>,
    /// Label keys ordering failover priority.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failover_priority: Vec<String>,
    /// Minimum cluster size for zone-aware routing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_cluster_size: Option<u64>,
}
