//! The higress-config ConfigMap (placeholder until the item model lands): takes the ConfigMap's fields and
//! yields the decoded [`HigressConfig`] plus findings.

use serde::Serialize;
use serde_json::Value;

use super::Finding;

/// The decoded `higress` key of the higress-config ConfigMap.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HigressConfig {}

/// The result of decoding the ConfigMap.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DecodedConfigMap {
    /// The config, defaults applied.
    pub config: HigressConfig,
    /// Decode findings.
    pub findings: Vec<Finding>,
}

/// Decodes the ConfigMap's top-level fields (`data.higress`, `data.mesh`).
pub fn decode_configmap(_fields: &serde_json::Map<String, Value>) -> DecodedConfigMap {
    DecodedConfigMap::default()
}
