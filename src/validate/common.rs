//! Shared validation primitives (hosts, ports, durations, regexes, labels, metadata): take values, record findings.

use crate::model::{Findings, Kind, ObjectMeta};

/// Checks metadata rules every Istio kind shares (Istio's `validateMetadata`).
pub fn validate_metadata(_kind: Kind, _meta: &ObjectMeta, _out: &mut Findings) {}
