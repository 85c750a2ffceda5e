//! Istio `ProxyConfig` spec (networking.istio.io/v1beta1): takes Kubernetes camelCase JSON, yields per-workload
//! proxy settings. Also defines [`TypeWorkloadSelector`] (`matchLabels`), the selector of `istio.type.v1beta1`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A workload selector in the `istio.type.v1beta1` form (`matchLabels`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TypeWorkloadSelector {
    /// Labels a workload must carry.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
}

/// The `spec` of a ProxyConfig.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProxyConfig {
    /// Workloads this config applies to; none means the whole namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selector: Option<TypeWorkloadSelector>,
    /// Worker threads (0 = one per core).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<i32>,
    /// Extra environment variables for the proxy.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub environment_variables: BTreeMap<String, String>,
    /// Proxy image flavour.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<ProxyImage>,
}

/// The proxy image flavour.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProxyImage {
    /// `default`, `debug` or `distroless`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub image_type: String,
}
