//! Sidecar rules: takes a decoded istio Sidecar spec and its metadata, records findings with field paths.

use crate::model::{istio::Sidecar, Findings, ObjectMeta};

/// Validates one Sidecar (rules still to be written).
pub fn validate(_spec: &Sidecar, _meta: &ObjectMeta, _out: &mut Findings) {}
