//! EnvoyFilter rules: takes a decoded istio EnvoyFilter spec and its metadata, records findings with field paths.

use crate::model::{istio::EnvoyFilter, Findings, ObjectMeta};

/// Validates one EnvoyFilter (rules still to be written).
pub fn validate(_spec: &EnvoyFilter, _meta: &ObjectMeta, _out: &mut Findings) {}
