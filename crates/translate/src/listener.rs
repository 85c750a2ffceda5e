//! Listeners (pure): takes the filter chains planned for one gateway port, the gateway's authorization filters and
//! access logs, yields the Envoy `Listener`, with Istio's HTTP connection manager (RDS over ADS, Istio's gateway HTTP filter
//! order, authorization first) and TCP proxies (network authorization first).

use std::collections::BTreeSet;
use std::sync::Arc;

use envoy_types::pb::envoy::config::accesslog::v3::AccessLog;
use envoy_types::pb::envoy::config::core::v3::TrafficDirection;
use envoy_types::pb::envoy::config::core::v3::{transport_socket, TransportSocket};
use envoy_types::pb::envoy::config::listener::v3::{
    filter, listener_filter, Filter, FilterChain, FilterChainMatch, Listener, ListenerFilter,
};
use envoy_types::pb::envoy::extensions::filters::http::cors::v3::Cors;
use envoy_types::pb::envoy::extensions::filters::http::fault::v3::HttpFault;
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::listener::tls_inspector::v3::TlsInspector;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    http_connection_manager, http_filter, HttpConnectionManager, HttpFilter, Rds,
};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{tcp_proxy, TcpProxy};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::DownstreamTlsContext;
use envoy_types::pb::google::protobuf::BoolValue;

use super::authn::{self, JwksUpstream};
use super::authz;
use super::envoy::{ads, any, millis, socket_address, TLS_TRANSPORT};
use super::ext_authz;
use super::gateway::{self, BoundServer};
use super::naming;
use super::route::{self, Env, Scope};
use super::services::Registry;
use super::types::{ClusterRef, Proxy};
use admitpilot_model::istio::virtual_service::RouteDestination;
use admitpilot_model::istio::VirtualService;
use admitpilot_model::mesh_config::PathNormalization;
use admitpilot_model::{ConfigObject, Snapshot};

/// Name of the HTTP connection manager network filter.
pub const HCM: &str = "envoy.filters.network.http_connection_manager";
/// Name of the TCP proxy network filter.
pub const TCP_PROXY: &str = "envoy.filters.network.tcp_proxy";
/// Name of the TLS inspector listener filter.
pub const TLS_INSPECTOR: &str = "envoy.filters.listener.tls_inspector";
/// Istio gateway HTTP filters, in Istio's order, minus the istio-proxy-only ones Envoy does not ship.
pub const HTTP_FILTERS: [&str; 3] = [
    "envoy.filters.http.cors",
    "envoy.filters.http.fault",
    "envoy.filters.http.router",
];

/// What a filter chain does with the connection.
#[derive(Debug, Clone, PartialEq)]
pub enum ChainAction {
    /// HTTP connection manager fetching the named route configuration over RDS.
    Http {
        /// RDS route configuration name.
        route_config: String,
    },
    /// TCP proxy to weighted clusters (`(cluster, weight)`; one entry means a plain cluster).
    Tcp {
        /// Destinations.
        clusters: Vec<(String, u32)>,
    },
    /// No destination: a chain without filters, so Envoy closes every connection it accepts (the SNI of a
    /// TLSRoute whose backends are all invalid: the spec has its connections rejected, not refused).
    Close,
}

/// One planned filter chain of a gateway listener.
#[derive(Debug, Clone, PartialEq)]
pub struct Chain {
    /// SNI names the chain matches; empty matches any (or no) SNI.
    pub server_names: Vec<String>,
    /// Downstream TLS termination, when the server terminates TLS.
    pub tls: Option<DownstreamTlsContext>,
    /// The network filter.
    pub action: ChainAction,
}

/// The authentication and authorization filters of one gateway, in Istio's order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GatewayAuthz {
    /// For HTTP connection managers, before the other HTTP filters.
    pub http: Vec<HttpFilter>,
    /// For TCP and TLS-passthrough filter chains, before the TCP proxy.
    pub tcp: Vec<Filter>,
    /// The servers the JWT filter fetches keys from (`jwksUri`), which need clusters.
    pub jwks: Vec<JwksUpstream>,
}

/// The authorization filters for the policies of `proxy` (none when no policy applies): CUSTOM ones
/// ([`ext_authz`]), then the JWT filter ([`authn`]), then RBAC ([`authz`]); `registry` resolves the services of
/// CUSTOM policies' extension providers.
pub fn gateway_filters(snapshot: &Snapshot, proxy: &Proxy, registry: &Registry) -> GatewayAuthz {
    let policies = authz::gateway_policies(snapshot, proxy);
    let custom = ext_authz::custom_filters(
        &policies,
        snapshot.mesh_config(),
        registry,
        &proxy.namespace,
    );
    let mut out = GatewayAuthz {
        http: custom.http,
        tcp: custom.tcp,
        ..GatewayAuthz::default()
    };
    // Authentication comes before authorization.
    if let Some(authn) = authn::jwt_filter(snapshot, proxy) {
        out.http.push(authn.filter);
        out.jwks = authn.upstreams;
    }
    let (http, tcp) = authz::rbac_filters(&policies);
    out.http.extend(http);
    out.tcp.extend(tcp);
    out
}

/// What every filter chain of a gateway's listeners shares.
#[derive(Debug, Clone, Copy)]
pub struct Shared<'a> {
    /// Authentication and authorization filters.
    pub authz: &'a GatewayAuthz,
    /// Access logs of every HTTP connection manager and TCP proxy.
    pub access_logs: &'a [AccessLog],
    /// Proxies in front of the gateway appending to `X-Forwarded-For` (`xff_num_trusted_hops`).
    pub trusted_hops: u32,
    /// The mesh config's `pathNormalization`.
    pub path_normalization: PathNormalization,
}

/// Builds the listener `0.0.0.0_<port>` from its chains. Chains claiming an SNI name (or the catch-all)
/// already claimed by an earlier chain lose that name, as Istio keeps the first server on conflicts;
/// a chain left with nothing to match is dropped.
pub fn listener(port: u32, chains: Vec<Chain>, shared: &Shared<'_>) -> Listener {
    let name = naming::listener(port);
    let mut claimed: Vec<String> = Vec::new();
    let mut catch_all = false;
    let mut filter_chains = Vec::new();
    let mut needs_inspector = false;
    for chain in chains {
        let server_names = if chain.server_names.is_empty() {
            if catch_all {
                continue;
            }
            catch_all = true;
            Vec::new()
        } else {
            let fresh: Vec<String> = chain
                .server_names
                .iter()
                .filter(|n| !claimed.contains(n))
                .cloned()
                .collect();
            if fresh.is_empty() {
                continue;
            }
            claimed.extend(fresh.iter().cloned());
            fresh
        };
        needs_inspector |= !server_names.is_empty() || chain.tls.is_some();
        filter_chains.push(filter_chain(
            port,
            server_names,
            chain.tls,
            chain.action,
            shared,
        ));
    }
    let listener_filters = if needs_inspector {
        vec![ListenerFilter {
            name: TLS_INSPECTOR.into(),
            config_type: Some(listener_filter::ConfigType::TypedConfig(any(
                TlsInspector::default(),
            ))),
            ..Default::default()
        }]
    } else {
        Vec::new()
    };
    Listener {
        name,
        address: Some(socket_address("0.0.0.0", port)),
        filter_chains,
        listener_filters,
        traffic_direction: TrafficDirection::Outbound as i32,
        ..Default::default()
    }
}

fn filter_chain(
    port: u32,
    server_names: Vec<String>,
    tls: Option<DownstreamTlsContext>,
    action: ChainAction,
    shared: &Shared<'_>,
) -> FilterChain {
    let filters = match action {
        ChainAction::Http { route_config } => {
            vec![http_connection_manager(port, &route_config, shared)]
        }
        ChainAction::Tcp { clusters } => {
            let mut filters = shared.authz.tcp.clone();
            filters.push(tcp_proxy(&clusters, shared.access_logs));
            filters
        }
        ChainAction::Close => Vec::new(),
    };
    let filter_chain_match = (!server_names.is_empty()).then(|| FilterChainMatch {
        server_names,
        ..Default::default()
    });
    FilterChain {
        filter_chain_match,
        filters,
        transport_socket: tls.map(|context| TransportSocket {
            name: TLS_TRANSPORT.into(),
            config_type: Some(transport_socket::ConfigType::TypedConfig(any(context))),
        }),
        ..Default::default()
    }
}

/// Builds the HTTP connection manager Istio puts on gateway listeners, with routes from RDS; the authorization
/// filters run first, as Istio's authorization phase comes before the other filters; the access logs are written
/// for every request; the client address is taken `trusted_hops` back in `X-Forwarded-For`; paths are normalized
/// as the mesh config's `pathNormalization` says ([`path_normalization`]).
pub fn http_connection_manager(port: u32, route_config: &str, shared: &Shared<'_>) -> Filter {
    let http_filters = shared
        .authz
        .http
        .iter()
        .cloned()
        .chain(HTTP_FILTERS.iter().map(|name| HttpFilter {
            name: (*name).to_string(),
            config_type: Some(http_filter::ConfigType::TypedConfig(match *name {
                "envoy.filters.http.cors" => any(Cors::default()),
                "envoy.filters.http.fault" => any(HttpFault::default()),
                _ => any(Router::default()),
            })),
            ..Default::default()
        }))
        .collect();
    let mut hcm = HttpConnectionManager {
        stat_prefix: format!("outbound_0.0.0.0_{port}"),
        codec_type: http_connection_manager::CodecType::Auto as i32,
        http_filters,
        use_remote_address: Some(BoolValue { value: true }),
        forward_client_cert_details: http_connection_manager::ForwardClientCertDetails::SanitizeSet
            as i32,
        upgrade_configs: vec![http_connection_manager::UpgradeConfig {
            upgrade_type: "websocket".into(),
            ..Default::default()
        }],
        stream_idle_timeout: Some(millis(0)),
        server_name: "istio-envoy".into(),
        access_log: shared.access_logs.to_vec(),
        xff_num_trusted_hops: shared.trusted_hops,
        route_specifier: Some(http_connection_manager::RouteSpecifier::Rds(Rds {
            config_source: Some(ads()),
            route_config_name: route_config.to_string(),
        })),
        ..Default::default()
    };
    path_normalization(&mut hcm, shared.path_normalization);
    Filter {
        name: HCM.into(),
        config_type: Some(filter::ConfigType::TypedConfig(any(hcm))),
    }
}

/// Sets how the connection manager normalizes paths, before routes and policies see them. Mirrors the
/// normalization switch of Istio's `buildHTTPConnectionManager` (pilot/pkg/networking/core/listener_builder.go):
/// `NONE` leaves paths as sent; `BASE` (and unset) normalizes them (RFC 3986: dot segments, percent-decoded
/// unreserved characters); `MERGE_SLASHES` also merges repeated slashes; `DECODE_AND_MERGE_SLASHES` also decodes
/// `%2F` and `%5C` first and forwards the decoded path. Escaped slashes are otherwise kept as sent.
fn path_normalization(hcm: &mut HttpConnectionManager, mode: PathNormalization) {
    use http_connection_manager::PathWithEscapedSlashesAction as Escaped;
    let (normalize, merge_slashes, escaped) = match mode {
        PathNormalization::None => (false, false, Escaped::KeepUnchanged),
        PathNormalization::Default | PathNormalization::Base => {
            (true, false, Escaped::KeepUnchanged)
        }
        PathNormalization::MergeSlashes => (true, true, Escaped::KeepUnchanged),
        PathNormalization::DecodeAndMergeSlashes => (true, true, Escaped::UnescapeAndForward),
    };
    hcm.normalize_path = Some(BoolValue { value: normalize });
    hcm.merge_slashes = merge_slashes;
    hcm.path_with_escaped_slashes_action = escaped as i32;
}

/// Builds a TCP proxy to one cluster or to weighted clusters, writing `access_logs` for every connection; the stat
/// prefix is the (first) cluster name.
pub fn tcp_proxy(clusters: &[(String, u32)], access_logs: &[AccessLog]) -> Filter {
    let specifier = match clusters {
        [(cluster, _)] => tcp_proxy::ClusterSpecifier::Cluster(cluster.clone()),
        _ => tcp_proxy::ClusterSpecifier::WeightedClusters(tcp_proxy::WeightedCluster {
            clusters: clusters
                .iter()
                .map(
                    |(name, weight)| tcp_proxy::weighted_cluster::ClusterWeight {
                        name: name.clone(),
                        weight: *weight,
                        ..Default::default()
                    },
                )
                .collect(),
        }),
    };
    let proxy = TcpProxy {
        stat_prefix: clusters
            .first()
            .map(|(name, _)| name.clone())
            .unwrap_or_default(),
        cluster_specifier: Some(specifier),
        access_log: access_logs.to_vec(),
        ..Default::default()
    };
    Filter {
        name: TCP_PROXY.into(),
        config_type: Some(filter::ConfigType::TypedConfig(any(proxy))),
    }
}

/// One SNI filter chain per TLS route match of the VirtualServices bound to a passthrough server.
pub(crate) fn passthrough_chains(
    virtual_services: &[&Arc<ConfigObject>],
    env: &Env<'_>,
    server: &BoundServer,
    referenced: &mut BTreeSet<ClusterRef>,
) -> Vec<Chain> {
    let scope = Scope {
        port: server.port,
        gateway_namespace: server.namespace(),
        gateway_name: server.name(),
    };
    let mut chains = Vec::new();
    for (vs, ns) in bound_virtual_services(virtual_services, &scope) {
        for rule in &vs.tls {
            for m in &rule.matches {
                if m.port.is_some_and(|p| p != server.port)
                    || (!m.gateways.is_empty() && !route::binds_gateway(&m.gateways, ns, &scope))
                {
                    continue;
                }
                let mut names = gateway::server_vs_hosts(server, ns, &m.sni_hosts);
                if names.iter().any(|n| n == "*") {
                    names.clear();
                }
                names.sort();
                if names.is_empty() && !m.sni_hosts.iter().any(|h| h == "*") {
                    continue;
                }
                // A rule without destinations comes only from a TLSRoute whose backends are all invalid (Istio
                // validation requires one): its connections are closed.
                let action = if rule.route.is_empty() {
                    ChainAction::Close
                } else {
                    let clusters = weighted_clusters(env, &rule.route, ns, server.port, referenced);
                    if clusters.is_empty() {
                        continue;
                    }
                    ChainAction::Tcp { clusters }
                };
                chains.push(Chain {
                    server_names: names,
                    tls: None,
                    action,
                });
            }
        }
    }
    chains
}

/// The destinations of the first TCP route (VirtualService order, then rule order) that applies to a
/// TCP server.
pub(crate) fn tcp_destinations(
    virtual_services: &[&Arc<ConfigObject>],
    env: &Env<'_>,
    server: &BoundServer,
    referenced: &mut BTreeSet<ClusterRef>,
) -> Option<Vec<(String, u32)>> {
    let scope = Scope {
        port: server.port,
        gateway_namespace: server.namespace(),
        gateway_name: server.name(),
    };
    for (vs, ns) in bound_virtual_services(virtual_services, &scope) {
        for rule in &vs.tcp {
            let applies = rule.matches.is_empty()
                || rule.matches.iter().any(|m| {
                    m.port.is_none_or(|p| p == server.port)
                        && (m.gateways.is_empty() || route::binds_gateway(&m.gateways, ns, &scope))
                });
            if !applies {
                continue;
            }
            let clusters = weighted_clusters(env, &rule.route, ns, server.port, referenced);
            if !clusters.is_empty() {
                return Some(clusters);
            }
        }
    }
    None
}

/// Returns the VirtualServices bound to a server's gateway, with their namespace.
fn bound_virtual_services<'a>(
    virtual_services: &'a [&'a Arc<ConfigObject>],
    scope: &'a Scope<'_>,
) -> impl Iterator<Item = (&'a VirtualService, &'a str)> + 'a {
    virtual_services.iter().filter_map(move |object| {
        let vs = route::vs_spec(object)?;
        let ns = object.metadata.namespace.as_str();
        route::binds_gateway(&vs.gateways, ns, scope).then_some((vs, ns))
    })
}

/// The clusters and weights of a TCP or TLS route's destinations; adds each cluster to `referenced`.
fn weighted_clusters(
    env: &Env<'_>,
    destinations: &[RouteDestination],
    namespace: &str,
    port: u32,
    referenced: &mut BTreeSet<ClusterRef>,
) -> Vec<(String, u32)> {
    route::weighted(
        destinations
            .iter()
            .map(|d| (d.destination.as_ref(), d.weight)),
        namespace,
        port,
        env,
    )
    .into_iter()
    .map(|(c, w, _)| {
        let name = c.name();
        referenced.insert(c);
        (name, w)
    })
    .collect()
}
