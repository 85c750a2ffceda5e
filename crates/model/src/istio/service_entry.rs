//! Istio `ServiceEntry` spec: takes Kubernetes camelCase JSON, yields a service added to the registry (hosts,
//! addresses, ports, resolution, endpoints or workload selector).

use serde::{Deserialize, Serialize};

use super::gateway::Port;
use super::sidecar::WorkloadSelector;
use super::workload_entry::WorkloadEntry;

/// Whether the service is inside or outside the mesh.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Location {
    /// Outside the mesh (no mTLS).
    MeshExternal,
    /// Part of the mesh.
    MeshInternal,
}

/// How endpoint addresses are found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Resolution {
    /// Use the connection's original destination.
    None,
    /// Use the listed endpoint IPs.
    Static,
    /// Resolve host names by DNS (all addresses).
    Dns,
    /// Resolve host names by DNS (first address).
    DnsRoundRobin,
    /// Resolve wildcard hosts per request.
    DynamicDns,
}

/// The `spec` of a ServiceEntry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ServiceEntry {
    /// Host names (required).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// Virtual IPs or CIDRs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<String>,
    /// Service ports.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<Port>,
    /// Mesh location.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<Location>,
    /// Resolution mode (default NONE).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolution: Option<Resolution>,
    /// Static endpoints (exclusive with `workloadSelector`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<WorkloadEntry>,
    /// Selects WorkloadEntries and pods as endpoints.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload_selector: Option<WorkloadSelector>,
    /// Namespaces this entry is visible to.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub export_to: Vec<String>,
    /// Accepted server SANs.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subject_alt_names: Vec<String>,
}
