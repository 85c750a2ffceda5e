//! Higress `McpBridge` spec (placeholder until the typed fields land).

use serde::{Deserialize, Serialize};

/// The `spec` of a McpBridge (fields still to be typed).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct McpBridge {}
