//! Translation (pure): takes a valid [`Snapshot`] and one gateway [`Proxy`], yields the Envoy resources that proxy
//! must receive ([`GatewayResources`]). No I/O; the xDS server calls it, so does `admitpilot render`.
//!
//! Istio gateway semantics: Gateways select the proxy by labels; servers become one listener per port
//! (`0.0.0.0_<port>`); VirtualServices bound through `gateways:` become virtual hosts and routes; Services,
//! EndpointSlices and ServiceEntries become clusters and endpoints, shaped by DestinationRules.
//!
//! A destination naming an unknown service still gets its cluster (`outbound|<port>|<subset>|<host>`), an
//! EDS cluster without endpoints, so every route points at an existing cluster and Envoy answers 503 (no
//! healthy upstream) as Istio's gateway does for a missing cluster. An HTTPS server whose credential Secret
//! is missing (or lacks a key) is left out, so no listener waits for a secret that never comes.
//!
//! Not translated (documented deviations): a server's `bind` address (listeners always bind 0.0.0.0),
//! `AUTO_PASSTHROUGH` and `ISTIO_MUTUAL` servers and `ISTIO_MUTUAL` upstream TLS (they need mesh SNI
//! clusters and mesh certificates admitpilot does not issue), `sourceLabels`/`sourceNamespace` matches
//! (gateways have no source workload), redirect `derivePort` and retry `retryRemoteLocalities`. Subsets of Kubernetes Services select
//! endpoints by the labels of their EndpointSlice (see [`services`]).
//!
//! [`Translator`] keeps, per route configuration, the routes of each VirtualService bound to it (keyed by the
//! object's `Arc`) and the hosts they go to, so a change to one VirtualService re-translates only that one and
//! rebuilds only the virtual hosts of its hosts; finding what changed costs a pointer comparison per VirtualService.
//!
//! Where things live: [`types`] (the value types every module shares; imports nothing else of `translate`),
//! [`gateway`] (servers a proxy gets), [`listener`] (listeners, their filter chains and the gateway's authn/authz
//! filters), [`route`] (routes, virtual hosts and route configurations), [`cluster`] (every cluster and load
//! assignment), [`services`] (the service registry), [`policy`] (DestinationRules), [`secret`] (SDS),
//! [`authn`]/[`authz`]/[`ext_authz`] (RequestAuthentication, AuthorizationPolicy), [`telemetry`], [`envoy_filter`]
//! and [`higress`] (patches), [`selection`] (which gateways an Istio object applies to), [`gateway_api`] and [`ingress`] (converted into Istio
//! objects first, merged by [`synthesized`]), [`dangling`], [`deprecated`] and [`effect`] (checks on the output); `cache` holds what
//! the translator's cached parts were built from, `route_table` what each route configuration was built from;
//! `translator` walks a snapshot through them, call by call ([`Translator`], [`translate`]). No module imports one
//! that imports it back.

pub mod authn;
pub mod authz;
mod cache;
pub mod cluster;
pub mod dangling;
pub mod deprecated;
pub mod deprecated_filter_headers;
pub mod effect;
pub mod envoy;
pub mod envoy_filter;
pub mod ext_authz;
pub mod gateway;
pub mod gateway_api;
pub mod higress;
pub mod ingress;
pub mod listener;
pub mod naming;
pub mod output;
pub mod policy;
pub mod route;
mod route_table;
pub mod secret;
pub mod selection;
pub mod services;
pub mod synthesized;
pub mod telemetry;
mod translator;
pub mod types;

pub use translator::{translate, Translator};
pub use types::{ClusterRef, GatewayResources, Options, Proxy, RebuiltHosts};

#[cfg(test)]
mod tests;
