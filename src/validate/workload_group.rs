//! WorkloadGroup rules: takes a decoded istio WorkloadGroup spec and its metadata, records findings with field paths.

use crate::model::{istio::WorkloadGroup, Findings, ObjectMeta};

/// Validates one WorkloadGroup (rules still to be written).
pub fn validate(_spec: &WorkloadGroup, _meta: &ObjectMeta, _out: &mut Findings) {}
