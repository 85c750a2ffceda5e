//! Telemetry rules: takes a decoded istio Telemetry spec and its metadata, records findings with field paths.

use crate::model::{istio::Telemetry, Findings, ObjectMeta};

/// Validates one Telemetry (rules still to be written).
pub fn validate(_spec: &Telemetry, _meta: &ObjectMeta, _out: &mut Findings) {}
