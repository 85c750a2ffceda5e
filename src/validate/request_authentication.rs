//! RequestAuthentication rules: takes a decoded istio RequestAuthentication spec and its metadata, records findings with field paths.

use crate::model::{istio::RequestAuthentication, Findings, ObjectMeta};

/// Validates one RequestAuthentication (rules still to be written).
pub fn validate(_spec: &RequestAuthentication, _meta: &ObjectMeta, _out: &mut Findings) {}
