//! McpBridge rules: takes a decoded higress McpBridge spec and its metadata, records findings with field paths.

use crate::model::{higress::McpBridge, Findings, ObjectMeta};

/// Validates one McpBridge (rules still to be written).
pub fn validate(_spec: &McpBridge, _meta: &ObjectMeta, _out: &mut Findings) {}
