//! Istio `WorkloadEntry` spec: takes Kubernetes camelCase JSON, yields one non-Kubernetes workload (address,
//! ports, labels). ServiceEntry endpoints and WorkloadGroup templates use the same struct.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The `spec` of a WorkloadEntry (also a ServiceEntry endpoint).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WorkloadEntry {
    /// IP, host name or `unix://` path.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub address: String,
    /// Service port name → workload port.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub ports: BTreeMap<String, u32>,
    /// Workload labels.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Network the workload is on.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub network: String,
    /// Locality (`region/zone/subzone`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub locality: String,
    /// Load-balancing weight.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
    /// Service account of the workload.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub service_account: String,
}
