//! ProxyConfig rules: takes a decoded istio ProxyConfig spec and its metadata, records findings with field paths.

use crate::model::{istio::ProxyConfig, Findings, ObjectMeta};

/// Validates one ProxyConfig (rules still to be written).
pub fn validate(_spec: &ProxyConfig, _meta: &ObjectMeta, _out: &mut Findings) {}
