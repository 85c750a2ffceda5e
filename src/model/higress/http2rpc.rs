//! Higress `Http2Rpc` spec (placeholder until the typed fields land).

use serde::{Deserialize, Serialize};

/// The `spec` of a Http2Rpc (fields still to be typed).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Http2Rpc {}
