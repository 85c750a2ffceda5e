//! DestinationRule rules: takes a decoded istio DestinationRule spec and its metadata, records findings with field paths.

use crate::model::{istio::DestinationRule, Findings, ObjectMeta};

/// Validates one DestinationRule (rules still to be written).
pub fn validate(_spec: &DestinationRule, _meta: &ObjectMeta, _out: &mut Findings) {}
