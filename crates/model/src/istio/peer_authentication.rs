//! Istio `PeerAuthentication` spec (security.istio.io v1/v1beta1): takes the `spec` JSON, yields the mTLS modes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::proxy_config::TypeWorkloadSelector;

/// The `spec` of a PeerAuthentication: the mutual TLS mode for workloads, optionally per port.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PeerAuthentication {
    /// Workloads the policy applies to; absent means the whole namespace (or mesh, in the root namespace).
    pub selector: Option<TypeWorkloadSelector>,
    /// The mTLS mode for all ports.
    pub mtls: Option<MutualTls>,
    /// Per-port mTLS modes, keyed by port number; needs a selector with labels.
    pub port_level_mtls: Option<BTreeMap<u32, MutualTls>>,
}

/// A mutual TLS setting.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MutualTls {
    /// The mode; UNSET inherits from the parent policy.
    pub mode: MtlsMode,
}

/// Mutual TLS modes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum MtlsMode {
    /// Inherit from the parent policy (PERMISSIVE at the top).
    #[default]
    Unset,
    /// Plain text only.
    Disable,
    /// Accept both plain text and mTLS.
    Permissive,
    /// mTLS only.
    Strict,
}
