//! `GRPCRoute` spec (gateway.networking.k8s.io v1): takes the defaulted `spec` JSON, yields parent references,
//! hostnames and rules matching gRPC services and methods.

use serde::{Deserialize, Serialize};

use super::common::{BackendRef, HttpRouteFilter, MatchType, ParentReference, ValueMatch};

/// The `spec` of a GRPCRoute.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GrpcRoute {
    /// Gateways (or listeners) the route attaches to.
    pub parent_refs: Vec<ParentReference>,
    /// Host names the route serves.
    pub hostnames: Vec<String>,
    /// Rules.
    pub rules: Vec<GrpcRouteRule>,
}

/// `GRPCRouteRule`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GrpcRouteRule {
    /// Optional rule name.
    pub name: Option<String>,
    /// Matches, ORed; none matches every request.
    pub matches: Vec<GrpcRouteMatch>,
    /// Filters.
    pub filters: Vec<HttpRouteFilter>,
    /// Backends.
    pub backend_refs: Vec<BackendRef>,
    /// Session persistence (not translated).
    pub session_persistence: Option<serde_json::Value>,
}

/// `GRPCRouteMatch`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GrpcRouteMatch {
    /// Service and method.
    pub method: Option<GrpcMethodMatch>,
    /// Header matches.
    pub headers: Vec<ValueMatch>,
}

/// `GRPCMethodMatch`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GrpcMethodMatch {
    /// How to match.
    #[serde(rename = "type")]
    pub match_type: MatchType,
    /// Fully qualified service (`pkg.Service`).
    pub service: Option<String>,
    /// Method name.
    pub method: Option<String>,
}
