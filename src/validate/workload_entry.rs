//! WorkloadEntry rules: takes a decoded istio WorkloadEntry spec and its metadata, records findings with field paths.

use crate::model::{istio::WorkloadEntry, Findings, ObjectMeta};

/// Validates one WorkloadEntry (rules still to be written).
pub fn validate(_spec: &WorkloadEntry, _meta: &ObjectMeta, _out: &mut Findings) {}
