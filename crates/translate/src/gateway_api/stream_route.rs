//! TLSRoutes and TCPRoutes as Istio TLS and TCP routes (pure): takes the stream routes attached to one TLS or
//! TCP listener and yields the routes of the VirtualService that serves them. On a TLS `Passthrough` listener each
//! TLSRoute rule becomes a TLS route matching the route's host names as SNI (the connection goes on encrypted,
//! as istiod converts TLSRoute); on a TCP listener each rule becomes a TCP route and the first with a valid backend
//! takes the connections (the spec leaves several TCPRoutes on one listener to implementations; istiod also takes
//! the first); on a TLS listener that terminates, each TLSRoute's rules become TCP routes of its own server,
//! chosen by SNI (`super::terminated_tls`). Routes go oldest first, then by namespace/name.
//! On a Passthrough listener, a TLSRoute rule without a valid backend keeps its SNI match with no destination, so
//! Envoy accepts and closes its connections (the spec: "the connection MUST be rejected"; the conformance suite
//! expects a reset or close after the handshake starts, not a refused connection); behind a terminating listener
//! such a route, and a TCP rule without a valid backend, is left out.

use std::sync::Arc;

use super::backends;
use admitpilot_model::gateway_api::common::BackendRef;
use admitpilot_model::gateway_api::{oldest_first, StreamRoute};
use admitpilot_model::istio::virtual_service::{
    L4MatchAttributes, RouteDestination, TcpRoute, TlsMatchAttributes, TlsRoute,
};
use admitpilot_model::{ConfigObject, Snapshot};

/// A TLSRoute or TCPRoute attached to a listener, with the host names it serves there.
#[derive(Debug, Clone)]
pub struct AttachedStream<'a> {
    /// The route object.
    pub object: &'a Arc<ConfigObject>,
    /// Its spec.
    pub route: &'a StreamRoute,
    /// The SNI names it serves on the listener (the hostname intersection; `*` for every name).
    pub hosts: Vec<String>,
}

/// Oldest first, then namespace/name (the spec's tie-break between routes).
fn sort(attached: &mut [AttachedStream<'_>]) {
    attached.sort_by(|a, b| oldest_first(a.object, b.object));
}

/// The weighted destinations of a rule's valid backends (weight 0 ones left out).
fn destinations(
    snapshot: &Snapshot,
    attached: &AttachedStream<'_>,
    backend_refs: &[BackendRef],
    domain_suffix: &str,
) -> Vec<RouteDestination> {
    let kind = attached.object.kind().info().kind;
    let namespace = attached.object.metadata.namespace.as_str();
    backend_refs
        .iter()
        .filter(|b| b.weight() > 0)
        .filter_map(|b| {
            let destination = backends::destination(snapshot, b, (kind, namespace), domain_suffix)?;
            Some(RouteDestination {
                destination: Some(destination),
                weight: Some(b.weight()),
            })
        })
        .collect()
}

/// One `T` per rule, routes in order, built by `make` from the route and the destinations; rules without a valid
/// backend only when `keep_invalid` (with no destinations).
fn per_rule<T>(
    snapshot: &Snapshot,
    mut attached: Vec<AttachedStream<'_>>,
    (domain_suffix, keep_invalid): (&str, bool),
    make: impl Fn(&AttachedStream<'_>, Vec<RouteDestination>) -> T,
) -> Vec<T> {
    sort(&mut attached);
    let mut out = Vec::new();
    for a in &attached {
        for rule in &a.route.rules {
            let route = destinations(snapshot, a, &rule.backend_refs, domain_suffix);
            if keep_invalid || !route.is_empty() {
                out.push(make(a, route));
            }
        }
    }
    out
}

/// The TLS routes of a `Passthrough` listener on `port`: one per rule, matching the route's SNI names (without
/// destinations when no backend of the rule is valid).
pub fn tls_routes(
    snapshot: &Snapshot,
    attached: Vec<AttachedStream<'_>>,
    port: u32,
    domain_suffix: &str,
) -> Vec<TlsRoute> {
    per_rule(snapshot, attached, (domain_suffix, true), |a, route| {
        TlsRoute {
            matches: vec![TlsMatchAttributes {
                sni_hosts: a.hosts.clone(),
                port: Some(port),
                ..TlsMatchAttributes::default()
            }],
            route,
        }
    })
}

/// The TCP routes of a TCP listener (or of one TLSRoute on a TLS listener that terminates) on `port`: one per
/// rule.
pub fn tcp_routes(
    snapshot: &Snapshot,
    attached: Vec<AttachedStream<'_>>,
    port: u32,
    domain_suffix: &str,
) -> Vec<TcpRoute> {
    per_rule(snapshot, attached, (domain_suffix, false), |_, route| {
        TcpRoute {
            matches: vec![L4MatchAttributes {
                port: Some(port),
                ..L4MatchAttributes::default()
            }],
            route,
        }
    })
}
