//! Gateway rules: takes a decoded istio Gateway spec and its metadata, records findings with field paths.

use crate::model::{istio::Gateway, Findings, ObjectMeta};

/// Validates one Gateway (rules still to be written).
pub fn validate(_spec: &Gateway, _meta: &ObjectMeta, _out: &mut Findings) {}
