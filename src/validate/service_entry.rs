//! ServiceEntry rules: takes a decoded istio ServiceEntry spec and its metadata, records findings with field paths.

use crate::model::{istio::ServiceEntry, Findings, ObjectMeta};

/// Validates one ServiceEntry (rules still to be written).
pub fn validate(_spec: &ServiceEntry, _meta: &ObjectMeta, _out: &mut Findings) {}
