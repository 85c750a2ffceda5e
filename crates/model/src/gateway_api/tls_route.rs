//! `TLSRoute` and `TCPRoute` specs (gateway.networking.k8s.io v1, v1alpha2, v1alpha3): take the defaulted `spec`
//! JSON, yield parent references, SNI host names (TLS) and backends.

use serde::{Deserialize, Serialize};

use super::common::{BackendRef, ParentReference};

/// The `spec` of a TLSRoute or TCPRoute (a TCPRoute has no host names).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct StreamRoute {
    /// Gateways (or listeners) the route attaches to.
    pub parent_refs: Vec<ParentReference>,
    /// SNI host names (TLSRoute only).
    pub hostnames: Vec<String>,
    /// Rules (one in practice).
    pub rules: Vec<StreamRouteRule>,
}

/// `TLSRouteRule` / `TCPRouteRule`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct StreamRouteRule {
    /// Optional name.
    pub name: Option<String>,
    /// Backends, by weight.
    pub backend_refs: Vec<BackendRef>,
}
