//! VirtualService rules: takes a decoded istio VirtualService spec and its metadata, records findings with field paths.

use crate::model::{istio::VirtualService, Findings, ObjectMeta};

/// Validates one VirtualService (rules still to be written).
pub fn validate(_spec: &VirtualService, _meta: &ObjectMeta, _out: &mut Findings) {}
