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
pub mod parameters;
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
pub const GROUP: &str = crate::istio::types::GATEWAY_API_GROUP;

/// The spec's tie-break between objects (routes, ListenerSets, policies): the oldest first, then by
/// `namespace/name`.
pub fn oldest_first(a: &crate::ConfigObject, b: &crate::ConfigObject) -> std::cmp::Ordering {
    let key = |o: &crate::ConfigObject| {
        (
            o.metadata.creation_timestamp.clone(),
            o.metadata.namespace.clone(),
            o.metadata.name.clone(),
        )
    };
    key(a).cmp(&key(b))
}

/// The controller name admitpilot answers to by default (a GatewayClass naming it is admitpilot's).
pub const DEFAULT_CONTROLLER_NAME: &str = "admitpilot.io/gateway-controller";

/// The label admitpilot's provisioner puts on the objects it makes for a Gateway (value [`PROVISIONER`]).
pub const PROVISIONED_LABEL: &str = "app.kubernetes.io/managed-by";
/// The value of [`PROVISIONED_LABEL`] on provisioned objects.
pub const PROVISIONER: &str = "admitpilot-provisioner";

/// What attachment and status read of a route, whatever its kind.
#[derive(Debug, Clone)]
pub struct RouteView<'a> {
    /// `HTTPRoute`, `GRPCRoute`, `TLSRoute` or `TCPRoute`.
    pub kind: &'static str,
    /// Its parent references.
    pub parent_refs: &'a [common::ParentReference],
    /// Its host names (none for a TCPRoute).
    pub hostnames: &'a [String],
    /// The backendRefs of every rule, in order.
    pub backend_refs: Vec<&'a common::BackendRef>,
}

/// `object` read as a route, when it is one of the [`ROUTE_KINDS`].
pub fn route_view(object: &crate::ConfigObject) -> Option<RouteView<'_>> {
    use crate::Spec;
    let (kind, parent_refs, hostnames, backend_refs) = match &object.spec {
        Spec::HttpRoute(r) => (
            "HTTPRoute",
            &r.parent_refs,
            &r.hostnames,
            r.rules.iter().flat_map(|r| &r.backend_refs).collect(),
        ),
        Spec::GrpcRoute(r) => (
            "GRPCRoute",
            &r.parent_refs,
            &r.hostnames,
            r.rules.iter().flat_map(|r| &r.backend_refs).collect(),
        ),
        Spec::TlsRoute(r) => (
            "TLSRoute",
            &r.parent_refs,
            &r.hostnames,
            r.rules.iter().flat_map(|r| &r.backend_refs).collect(),
        ),
        Spec::TcpRoute(r) => (
            "TCPRoute",
            &r.parent_refs,
            &r.hostnames,
            r.rules.iter().flat_map(|r| &r.backend_refs).collect(),
        ),
        _ => return None,
    };
    Some(RouteView {
        kind,
        parent_refs,
        hostnames,
        backend_refs,
    })
}

/// The route kinds admitpilot serves ([`route_view`]).
pub const ROUTE_KINDS: [crate::Kind; 4] = [
    crate::Kind::HttpRoute,
    crate::Kind::GrpcRoute,
    crate::Kind::TlsRoute,
    crate::Kind::TcpRoute,
];
