//! Shared `istio.type.v1beta1` messages used by the security, telemetry and extensions kinds: takes nothing,
//! defines the policy target reference, port selector and workload mode types (the `matchLabels` selector of the
//! same package is [`super::proxy_config::TypeWorkloadSelector`]).

use serde::{Deserialize, Serialize};

/// Names the resource a policy attaches to (`targetRef` / `targetRefs[]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PolicyTargetReference {
    /// API group of the target; empty means the core group.
    pub group: String,
    /// Kind of the target (`Service`, `ServiceEntry`, `Gateway`, `GatewayClass`).
    pub kind: String,
    /// Name of the target.
    pub name: String,
    /// Namespace of the target; must be empty (cross-namespace references are not supported).
    pub namespace: String,
}

/// Selects one port by number.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PortSelector {
    /// Port number; required, 1..65535.
    pub number: Option<u32>,
}

/// Which side of a connection a plugin or filter applies to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum WorkloadMode {
    /// Not specified (both sides).
    #[default]
    #[serde(rename = "UNDEFINED")]
    Undefined,
    /// Outbound traffic only.
    #[serde(rename = "CLIENT")]
    Client,
    /// Inbound traffic only.
    #[serde(rename = "SERVER")]
    Server,
    /// Both directions.
    #[serde(rename = "CLIENT_AND_SERVER")]
    ClientAndServer,
}
