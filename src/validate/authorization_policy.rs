//! AuthorizationPolicy rules: takes a decoded istio AuthorizationPolicy spec and its metadata, records findings with field paths.

use crate::model::{istio::AuthorizationPolicy, Findings, ObjectMeta};

/// Validates one AuthorizationPolicy (rules still to be written).
pub fn validate(_spec: &AuthorizationPolicy, _meta: &ObjectMeta, _out: &mut Findings) {}
