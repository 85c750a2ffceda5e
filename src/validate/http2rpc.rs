//! Http2Rpc rules: takes a decoded higress Http2Rpc spec and its metadata, records findings with field paths.

use crate::model::{higress::Http2Rpc, Findings, ObjectMeta};

/// Validates one Http2Rpc (rules still to be written).
pub fn validate(_spec: &Http2Rpc, _meta: &ObjectMeta, _out: &mut Findings) {}
