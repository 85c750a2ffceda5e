//! Istio `Sidecar` spec: takes Kubernetes camelCase JSON, yields the ingress/egress listeners and outbound policy of
//! a workload's proxy. Also defines [`WorkloadSelector`] (`labels`), the networking selector form.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::destination_rule::ConnectionPoolSettings;
use super::gateway::{Port, ServerTlsSettings};
use super::virtual_service::Destination;

/// A workload selector in the networking form (`labels`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WorkloadSelector {
    /// Labels a workload must carry.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// The `spec` of a Sidecar.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Sidecar {
    /// Workloads this applies to; none means the whole namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload_selector: Option<WorkloadSelector>,
    /// Inbound listeners.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ingress: Vec<IstioIngressListener>,
    /// Outbound listeners.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub egress: Vec<IstioEgressListener>,
    /// Default inbound connection pool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inbound_connection_pool: Option<Box<ConnectionPoolSettings>>,
    /// Policy for unknown outbound destinations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outbound_traffic_policy: Option<Box<OutboundTrafficPolicy>>,
}

/// How traffic reaches a listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CaptureMode {
    /// Environment default.
    Default,
    /// iptables redirection.
    Iptables,
    /// No capture.
    None,
}

/// An inbound listener.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct IstioIngressListener {
    /// Port (required).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<Port>,
    /// Bind address.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub bind: String,
    /// Capture mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture_mode: Option<CaptureMode>,
    /// Where traffic is forwarded (`127.0.0.1:port` or `unix://`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub default_endpoint: String,
    /// TLS termination for the listener.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<ServerTlsSettings>,
    /// Connection pool for this listener.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connection_pool: Option<ConnectionPoolSettings>,
}

/// An outbound listener.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct IstioEgressListener {
    /// Port; none for the catch-all listener.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<Port>,
    /// Bind address.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub bind: String,
    /// Capture mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture_mode: Option<CaptureMode>,
    /// Reachable services as `ns/host` (required).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
}

/// Outbound traffic mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum OutboundTrafficMode {
    /// Only registered services are reachable.
    RegistryOnly,
    /// Unknown destinations pass through.
    AllowAny,
}

/// Outbound traffic policy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OutboundTrafficPolicy {
    /// Mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<OutboundTrafficMode>,
    /// Proxy for unknown destinations (ALLOW_ANY only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub egress_proxy: Option<Destination>,
}
