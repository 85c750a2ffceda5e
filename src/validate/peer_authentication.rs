//! PeerAuthentication rules: takes a decoded istio PeerAuthentication spec and its metadata, records findings with field paths.

use crate::model::{istio::PeerAuthentication, Findings, ObjectMeta};

/// Validates one PeerAuthentication (rules still to be written).
pub fn validate(_spec: &PeerAuthentication, _meta: &ObjectMeta, _out: &mut Findings) {}
