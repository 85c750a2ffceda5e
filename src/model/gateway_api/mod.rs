//! Kubernetes Gateway API kinds (gateway.networking.k8s.io, v1.6): typed specs of GatewayClass, Gateway,
//! HTTPRoute, GRPCRoute, ReferenceGrant, TLSRoute, TCPRoute, BackendTLSPolicy and ListenerSet, one file per kind
//! (TLSRoute and TCPRoute share one shape), the types they share, the CRDs' schemas with their defaults, and
//! which listeners a route attaches to ([`attachment`]).

pub mod attachment;
pub mod backend_tls_policy;
pub mod common;
pub mod gateway;
pub mod grpc_route;
pub mod http_route;
pub mod listener_set;
pub mod reference_grant;
pub mod schema;
pub mod tls_route;

pub use backend_tls_policy::BackendTlsPolicy;
pub use gateway::{Gateway, GatewayClass};
pub use grpc_route::GrpcRoute;
pub use http_route::HttpRoute;
pub use listener_set::ListenerSet;
pub use reference_grant::ReferenceGrant;
pub use tls_route::StreamRoute;

/// The API group of every Gateway API kind.
pub const GROUP: &str = crate::model::istio::types::GATEWAY_API_GROUP;

/// The controller name admitpilot answers to by default (a GatewayClass naming it is admitpilot's).
pub const DEFAULT_CONTROLLER_NAME: &str = "admitpilot.io/gateway-controller";

/// What attachment and status read of an HTTP-like route (HTTPRoute or GRPCRoute), whatever its kind.
#[derive(Debug, Clone)]
pub struct HttpLikeRoute<'a> {
    /// `HTTPRoute` or `GRPCRoute`.
    pub kind: &'static str,
    /// Its parent references.
    pub parent_refs: &'a [common::ParentReference],
    /// Its host names.
    pub hostnames: &'a [String],
    /// The backendRefs of every rule, in order.
    pub backend_refs: Vec<&'a common::BackendRef>,
}

/// `object` read as an HTTP-like route, when it is an HTTPRoute or a GRPCRoute.
pub fn http_like_route(object: &crate::model::ConfigObject) -> Option<HttpLikeRoute<'_>> {
    use crate::model::Spec;
    match &object.spec {
        Spec::HttpRoute(route) => Some(HttpLikeRoute {
            kind: "HTTPRoute",
            parent_refs: &route.parent_refs,
            hostnames: &route.hostnames,
            backend_refs: route.rules.iter().flat_map(|r| &r.backend_refs).collect(),
        }),
        Spec::GrpcRoute(route) => Some(HttpLikeRoute {
            kind: "GRPCRoute",
            parent_refs: &route.parent_refs,
            hostnames: &route.hostnames,
            backend_refs: route.rules.iter().flat_map(|r| &r.backend_refs).collect(),
        }),
        _ => None,
    }
}

/// The HTTP-like route kinds ([`http_like_route`]).
pub const HTTP_LIKE_ROUTE_KINDS: [crate::model::Kind; 2] =
    [crate::model::Kind::HttpRoute, crate::model::Kind::GrpcRoute];
