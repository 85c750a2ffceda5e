//! WasmPlugin rules: takes a decoded istio WasmPlugin spec and its metadata, records findings with field paths.

use crate::model::{istio::WasmPlugin, Findings, ObjectMeta};

/// Validates one WasmPlugin (rules still to be written).
pub fn validate(_spec: &WasmPlugin, _meta: &ObjectMeta, _out: &mut Findings) {}
