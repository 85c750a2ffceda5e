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
//! [`Translator`] keeps the routes of each VirtualService between calls, keyed by the object's `Arc`, so a
//! change to one VirtualService re-translates only that one.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::TypedExtensionConfig;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::config::route::v3::{
    route as envoy_route, route_match, virtual_host, DirectResponseAction, Route,
    RouteConfiguration, RouteMatch, VirtualHost,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret;
use envoy_types::pb::google::protobuf::BoolValue;

use crate::model::decode::{decode, DecodeOptions, Decoded};
use crate::model::istio::VirtualService;
use crate::model::{ConfigObject, Kind, Snapshot, Spec};

pub mod cluster;
pub mod envoy;
pub mod envoy_filter;
pub mod gateway;
pub mod higress;
pub mod listener;
pub mod naming;
pub mod output;
pub mod policy;
pub mod route;
pub mod secret;
pub mod services;

use gateway::{BoundServer, ServerKind};
use listener::{Chain, ChainAction};
use policy::Policies;
use route::{ClusterRef, Env, HttpRoutes, Scope};
use services::Registry;

/// A gateway proxy as the control plane sees it (parsed from the Envoy node by the xDS server).
/// Proxies with equal `namespace` and `labels` receive identical resources.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Proxy {
    /// Namespace the gateway pod runs in (node metadata `NAMESPACE`, else from the node id).
    pub namespace: String,
    /// Pod labels (node metadata `LABELS`); Gateways select proxies by these.
    pub labels: BTreeMap<String, String>,
}

/// Every Envoy resource one proxy group receives, each list sorted by resource name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GatewayResources {
    /// LDS.
    pub listeners: Vec<Listener>,
    /// RDS.
    pub route_configs: Vec<RouteConfiguration>,
    /// CDS.
    pub clusters: Vec<Cluster>,
    /// EDS.
    pub endpoints: Vec<ClusterLoadAssignment>,
    /// SDS.
    pub secrets: Vec<Secret>,
    /// ECDS, when EnvoyFilters use EXTENSION_CONFIG.
    pub extension_configs: Vec<TypedExtensionConfig>,
}

/// Translation settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// DNS suffix of Kubernetes Services (`cluster.local`).
    pub domain_suffix: String,
    /// Namespaces whose EnvoyFilters apply to every proxy: Istio's root namespace and Higress's namespace.
    pub root_namespaces: Vec<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            domain_suffix: naming::DEFAULT_DOMAIN_SUFFIX.into(),
            root_namespaces: vec!["istio-system".into(), "higress-system".into()],
        }
    }
}

/// Translates the snapshot for one proxy, without reusing earlier work.
pub fn translate(snapshot: &Snapshot, proxy: &Proxy) -> GatewayResources {
    Translator::new(Options::default()).translate(snapshot, proxy)
}

/// Cached routes of one VirtualService in one scope.
#[derive(Debug)]
struct CachedRoutes {
    /// Pins the object so its address is not reused while cached.
    _object: Arc<ConfigObject>,
    /// Delegates consulted, as found (`None` when missing).
    delegates: Vec<Option<Arc<ConfigObject>>>,
    /// The translated routes.
    routes: Arc<HttpRoutes>,
}

/// Cache key: VirtualService address, gateway namespace/name, port.
type RouteKey = (usize, String, String, u32);

/// A translator that reuses the routes of unchanged VirtualServices between calls. Use one per proxy
/// group: a call for a different proxy, or a snapshot whose Services, ServiceEntries or DestinationRules
/// changed, starts from an empty cache.
#[derive(Debug, Default)]
pub struct Translator {
    options: Options,
    /// Identity of what routes depend on besides their VirtualService.
    environment: Vec<usize>,
    proxy: Option<Proxy>,
    routes: HashMap<RouteKey, CachedRoutes>,
}

/// Everything translation reads for one call.
struct Context<'a> {
    snapshot: &'a Snapshot,
    proxy: &'a Proxy,
    registry: Registry,
    policies: Policies,
    domain_suffix: &'a str,
    /// VirtualServices visible to the proxy namespace, in Istio order.
    virtual_services: Vec<&'a Arc<ConfigObject>>,
}

fn vs_spec(object: &ConfigObject) -> Option<&VirtualService> {
    match &object.spec {
        Spec::VirtualService(vs) => Some(vs),
        _ => None,
    }
}

fn exported_to(export_to: &[String], own: &str, namespace: &str) -> bool {
    export_to.is_empty()
        || export_to
            .iter()
            .any(|e| e == "*" || e == namespace || (e == "." && own == namespace))
}

impl Translator {
    /// Creates a translator with empty caches.
    pub fn new(options: Options) -> Self {
        Translator {
            options,
            ..Default::default()
        }
    }

    /// Translates the snapshot for one proxy.
    pub fn translate(&mut self, snapshot: &Snapshot, proxy: &Proxy) -> GatewayResources {
        let environment: Vec<usize> = [Kind::Service, Kind::ServiceEntry, Kind::DestinationRule]
            .into_iter()
            .flat_map(|kind| snapshot.of_kind(kind).map(|o| Arc::as_ptr(o) as usize))
            .collect();
        if environment != self.environment || self.proxy.as_ref() != Some(proxy) {
            self.routes.clear();
            self.environment = environment;
            self.proxy = Some(proxy.clone());
        }
        let domain_suffix = self.options.domain_suffix.clone();
        let mut virtual_services: Vec<&Arc<ConfigObject>> = snapshot
            .of_kind(Kind::VirtualService)
            .filter(|object| {
                vs_spec(object).is_some_and(|vs| {
                    exported_to(&vs.export_to, &object.metadata.namespace, &proxy.namespace)
                })
            })
            .collect();
        virtual_services.sort_by(|a, b| gateway::istio_order(a, b));
        let cx = Context {
            snapshot,
            proxy,
            registry: Registry::build(snapshot, &domain_suffix),
            policies: Policies::build(snapshot, proxy, &domain_suffix),
            domain_suffix: &domain_suffix,
            virtual_services,
        };
        let mut used = HashSet::new();
        let mut out = GatewayResources::default();
        let mut referenced: BTreeSet<ClusterRef> = BTreeSet::new();
        let mut credentials: BTreeSet<String> = BTreeSet::new();
        for (port, servers) in gateway::servers_by_port(snapshot, proxy) {
            let chains = self.port_chains(
                &cx,
                port,
                &servers,
                &mut out.route_configs,
                &mut referenced,
                &mut credentials,
                &mut used,
            );
            if !chains.is_empty() {
                out.listeners.push(listener::listener(port, chains));
            }
        }
        self.routes.retain(|key, _| used.contains(key));
        build_clusters(&cx, &referenced, &mut out, &mut credentials);
        out.secrets = build_secrets(&cx, &credentials);
        self.apply_envoy_filters(snapshot, proxy, &mut out);
        out.listeners.retain(|l| !l.filter_chains.is_empty());
        out.listeners.sort_by(|a, b| a.name.cmp(&b.name));
        out.route_configs.sort_by(|a, b| a.name.cmp(&b.name));
        out.clusters.sort_by(|a, b| a.name.cmp(&b.name));
        out.endpoints
            .sort_by(|a, b| a.cluster_name.cmp(&b.cluster_name));
        out.secrets.sort_by(|a, b| a.name.cmp(&b.name));
        out.extension_configs.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Applies the EnvoyFilters built from higress-config, then the user's EnvoyFilters, with the patch
    /// engine (which orders them by priority, root namespace and age).
    fn apply_envoy_filters(&self, snapshot: &Snapshot, proxy: &Proxy, out: &mut GatewayResources) {
        let higress: Vec<ConfigObject> = snapshot
            .of_kind(Kind::HigressConfig)
            .filter_map(|object| match &object.spec {
                Spec::HigressConfig(config) => Some((object.metadata.namespace.as_str(), config)),
                _ => None,
            })
            .take(1)
            .flat_map(|(namespace, config)| higress::envoy_filters(config, namespace))
            .filter_map(|doc| match decode(&doc, &DecodeOptions::default()) {
                Decoded::Object { object, .. } => Some(object),
                // The documents are built by admitpilot itself; one that does not decode is a defect
                // the higress golden tests catch, and is skipped rather than half-applied.
                _ => None,
            })
            .collect();
        let user = snapshot.of_kind(Kind::EnvoyFilter).map(Arc::as_ref);
        let filters: Vec<&ConfigObject> = higress.iter().chain(user).collect();
        if filters.is_empty() {
            return;
        }
        let options = envoy_filter::PatchOptions {
            root_namespaces: self.options.root_namespaces.clone(),
            ..Default::default()
        };
        envoy_filter::apply(out, &filters, proxy, &options);
    }

    /// Builds the filter chains of one port (and the route configurations they use).
    #[allow(clippy::too_many_arguments)]
    fn port_chains(
        &mut self,
        cx: &Context<'_>,
        port: u32,
        servers: &[BoundServer],
        route_configs: &mut Vec<RouteConfiguration>,
        referenced: &mut BTreeSet<ClusterRef>,
        credentials: &mut BTreeSet<String>,
        used: &mut HashSet<RouteKey>,
    ) -> Vec<Chain> {
        let mut chains = Vec::new();
        let http: Vec<&BoundServer> = servers
            .iter()
            .filter(|s| s.kind == ServerKind::Http)
            .collect();
        if !http.is_empty() {
            let name = naming::http_route_config(port);
            route_configs.push(self.route_config(cx, name.clone(), port, &http, referenced, used));
            chains.push(Chain {
                server_names: Vec::new(),
                tls: None,
                action: ChainAction::Http { route_config: name },
            });
        }
        for server in servers {
            let (Some(spec), tls) = (server.server(), server.tls()) else {
                continue;
            };
            match server.kind {
                ServerKind::Http => {}
                ServerKind::Https => {
                    let Some(tls) = tls else { continue };
                    if !credentials_present(cx, tls) {
                        continue;
                    }
                    let port_name = spec
                        .port
                        .as_ref()
                        .map(|p| p.name.as_str())
                        .unwrap_or_default();
                    let name = naming::https_route_config(
                        port,
                        port_name,
                        server.name(),
                        server.namespace(),
                    );
                    if route_configs.iter().any(|rc| rc.name == name) {
                        continue;
                    }
                    route_configs.push(self.route_config(
                        cx,
                        name.clone(),
                        port,
                        &[server],
                        referenced,
                        used,
                    ));
                    credentials.extend(gateway::credentials(tls).certificates);
                    credentials.extend(gateway::credentials(tls).ca);
                    chains.push(Chain {
                        server_names: gateway::server_names(server),
                        tls: Some(gateway::downstream_tls(tls, true)),
                        action: ChainAction::Http { route_config: name },
                    });
                }
                ServerKind::Passthrough => {
                    chains.extend(passthrough_chains(cx, server, referenced));
                }
                ServerKind::Tcp => {
                    let terminated = match tls {
                        Some(tls) if credentials_present(cx, tls) => {
                            credentials.extend(gateway::credentials(tls).certificates);
                            credentials.extend(gateway::credentials(tls).ca);
                            Some(gateway::downstream_tls(tls, false))
                        }
                        Some(_) => continue,
                        None => None,
                    };
                    if let Some(clusters) = tcp_destinations(cx, server, referenced) {
                        chains.push(Chain {
                            server_names: if terminated.is_some() {
                                gateway::server_names(server)
                            } else {
                                Vec::new()
                            },
                            tls: terminated,
                            action: ChainAction::Tcp { clusters },
                        });
                    }
                }
            }
        }
        chains
    }

    /// Builds one route configuration from the HTTP(S) servers that share it.
    fn route_config(
        &mut self,
        cx: &Context<'_>,
        name: String,
        port: u32,
        servers: &[&BoundServer],
        referenced: &mut BTreeSet<ClusterRef>,
        used: &mut HashSet<RouteKey>,
    ) -> RouteConfiguration {
        let mut vhosts: BTreeMap<String, (Vec<Route>, bool)> = BTreeMap::new();
        let mut seen: HashSet<(String, usize)> = HashSet::new();
        for server in servers {
            let redirect = server.kind == ServerKind::Http
                && server.tls().and_then(|t| t.https_redirect).unwrap_or(false);
            if redirect {
                for host in server.server().into_iter().flat_map(|s| s.hosts.iter()) {
                    let (_, host) = gateway::split_server_host(host, server.namespace());
                    vhosts.entry(host.to_string()).or_default().1 = true;
                }
            }
            let scope = Scope {
                port,
                gateway_namespace: server.namespace(),
                gateway_name: server.name(),
            };
            for object in &cx.virtual_services {
                let Some(vs) = vs_spec(object) else { continue };
                let ns = object.metadata.namespace.as_str();
                if !route::binds_gateway(&vs.gateways, ns, &scope) {
                    continue;
                }
                let resolved: Vec<String> = vs
                    .hosts
                    .iter()
                    .map(|h| naming::resolve_short_name(h, ns, cx.domain_suffix))
                    .collect();
                let hosts = gateway::server_vs_hosts(server, ns, &resolved);
                if hosts.is_empty() {
                    continue;
                }
                let routes = self.vs_routes(cx, object, &scope, used);
                referenced.extend(routes.clusters.iter().cloned());
                for host in hosts {
                    if !seen.insert((host.clone(), Arc::as_ptr(object) as usize)) {
                        continue;
                    }
                    let entry = vhosts.entry(host).or_default();
                    entry.0.extend(routes.routes.iter().cloned());
                    entry.1 |= redirect;
                }
            }
        }
        let mut virtual_hosts: Vec<VirtualHost> = vhosts
            .into_iter()
            .map(|(host, (mut routes, redirect))| {
                // Istio keeps rule order but moves catch-all routes behind the others.
                let (specific, catch_all): (Vec<Route>, Vec<Route>) =
                    routes.drain(..).partition(|r| !route::is_catch_all(r));
                VirtualHost {
                    name: naming::virtual_host(&host, port),
                    domains: if host == "*" {
                        vec!["*".into()]
                    } else {
                        vec![host.clone(), format!("{host}:*")]
                    },
                    routes: specific.into_iter().chain(catch_all).collect(),
                    require_tls: if redirect {
                        virtual_host::TlsRequirementType::All as i32
                    } else {
                        virtual_host::TlsRequirementType::None as i32
                    },
                    include_request_attempt_count: true,
                    ..Default::default()
                }
            })
            .collect();
        if virtual_hosts.is_empty() {
            virtual_hosts.push(blackhole(port));
        }
        RouteConfiguration {
            name,
            virtual_hosts,
            validate_clusters: Some(BoolValue { value: false }),
            ..Default::default()
        }
    }

    /// Returns the routes of a VirtualService in a scope, from the cache when the object and its delegates
    /// are unchanged.
    fn vs_routes(
        &mut self,
        cx: &Context<'_>,
        object: &Arc<ConfigObject>,
        scope: &Scope<'_>,
        used: &mut HashSet<RouteKey>,
    ) -> Arc<HttpRoutes> {
        let key: RouteKey = (
            Arc::as_ptr(object) as usize,
            scope.gateway_namespace.to_string(),
            scope.gateway_name.to_string(),
            scope.port,
        );
        used.insert(key.clone());
        let Some(vs) = vs_spec(object) else {
            return Arc::default();
        };
        let delegates: Vec<Option<Arc<ConfigObject>>> = vs
            .http
            .iter()
            .filter_map(|r| r.delegate.as_ref())
            .map(|d| {
                let ns = if d.namespace.is_empty() {
                    object.metadata.namespace.as_str()
                } else {
                    d.namespace.as_str()
                };
                cx.snapshot
                    .get(&crate::model::ObjectKey::new(
                        Kind::VirtualService,
                        ns,
                        &d.name,
                    ))
                    .cloned()
            })
            .collect();
        if let Some(cached) = self.routes.get(&key) {
            let same = cached.delegates.len() == delegates.len()
                && cached
                    .delegates
                    .iter()
                    .zip(&delegates)
                    .all(|(a, b)| match (a, b) {
                        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                        (None, None) => true,
                        _ => false,
                    });
            if same {
                return Arc::clone(&cached.routes);
            }
        }
        let env = Env {
            registry: &cx.registry,
            policies: &cx.policies,
            domain_suffix: cx.domain_suffix,
        };
        let snapshot = cx.snapshot;
        let lookup = move |ns: &str, name: &str| {
            snapshot
                .get(&crate::model::ObjectKey::new(
                    Kind::VirtualService,
                    ns,
                    name,
                ))
                .and_then(|o| vs_spec(o))
        };
        let routes = Arc::new(route::http_routes(
            vs,
            &object.metadata.namespace,
            scope,
            &env,
            &lookup,
        ));
        self.routes.insert(
            key,
            CachedRoutes {
                _object: Arc::clone(object),
                delegates,
                routes: Arc::clone(&routes),
            },
        );
        routes
    }
}

/// Istio's answer for a port without any virtual host: 404 for everything.
fn blackhole(port: u32) -> VirtualHost {
    VirtualHost {
        name: format!("blackhole:{port}"),
        domains: vec!["*".into()],
        routes: vec![Route {
            name: "block_all".into(),
            r#match: Some(RouteMatch {
                path_specifier: Some(route_match::PathSpecifier::Prefix("/".into())),
                ..Default::default()
            }),
            action: Some(envoy_route::Action::DirectResponse(DirectResponseAction {
                status: 404,
                ..Default::default()
            })),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn kube_secret<'s>(
    cx: &'s Context<'_>,
    name: &str,
) -> Option<&'s k8s_openapi::api::core::v1::Secret> {
    cx.snapshot
        .get(&crate::model::ObjectKey::new(
            Kind::Secret,
            cx.proxy.namespace.as_str(),
            name,
        ))
        .and_then(|o| match &o.spec {
            Spec::Secret(s) => Some(s.as_ref()),
            _ => None,
        })
}

/// Tells whether every Secret a terminating server names exists with the keys it needs.
fn credentials_present(
    cx: &Context<'_>,
    tls: &crate::model::istio::gateway::ServerTlsSettings,
) -> bool {
    let creds = gateway::credentials(tls);
    creds
        .certificates
        .iter()
        .all(|name| kube_secret(cx, name).is_some_and(|s| secret::certificate(name, s).is_some()))
        && creds.ca.iter().all(|name| ca_secret(cx, name).is_some())
}

fn ca_secret(cx: &Context<'_>, name: &str) -> Option<Secret> {
    let separate = kube_secret(cx, &format!("{name}-cacert"));
    match kube_secret(cx, name) {
        Some(s) => secret::ca_bundle(name, s, separate),
        None => separate.and_then(|s| secret::ca_bundle(name, s, None)),
    }
}

/// Builds the SDS secrets for the credentials in use (certificate and, when present, CA bundle).
fn build_secrets(cx: &Context<'_>, credentials: &BTreeSet<String>) -> Vec<Secret> {
    let mut out = Vec::new();
    for name in credentials {
        if let Some(s) = kube_secret(cx, name).and_then(|s| secret::certificate(name, s)) {
            out.push(s);
        }
        if let Some(ca) = ca_secret(cx, name) {
            out.push(ca);
        }
    }
    out
}

/// Returns the VirtualServices bound to a server's gateway, with their namespace.
fn bound_virtual_services<'a>(
    cx: &'a Context<'_>,
    scope: &'a Scope<'_>,
) -> impl Iterator<Item = (&'a VirtualService, &'a str)> + 'a {
    cx.virtual_services.iter().filter_map(move |object| {
        let vs = vs_spec(object)?;
        let ns = object.metadata.namespace.as_str();
        route::binds_gateway(&vs.gateways, ns, scope).then_some((vs, ns))
    })
}

fn weighted_clusters(
    cx: &Context<'_>,
    destinations: &[crate::model::istio::virtual_service::RouteDestination],
    namespace: &str,
    port: u32,
    referenced: &mut BTreeSet<ClusterRef>,
) -> Vec<(String, u32)> {
    let env = Env {
        registry: &cx.registry,
        policies: &cx.policies,
        domain_suffix: cx.domain_suffix,
    };
    route::weighted(
        destinations
            .iter()
            .map(|d| (d.destination.as_ref(), d.weight)),
        namespace,
        port,
        &env,
    )
    .into_iter()
    .map(|(c, w, _)| {
        let name = c.name();
        referenced.insert(c);
        (name, w)
    })
    .collect()
}

/// One SNI filter chain per TLS route match of the VirtualServices bound to a passthrough server.
fn passthrough_chains(
    cx: &Context<'_>,
    server: &BoundServer,
    referenced: &mut BTreeSet<ClusterRef>,
) -> Vec<Chain> {
    let scope = Scope {
        port: server.port,
        gateway_namespace: server.namespace(),
        gateway_name: server.name(),
    };
    let mut chains = Vec::new();
    for (vs, ns) in bound_virtual_services(cx, &scope) {
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
                let clusters = weighted_clusters(cx, &rule.route, ns, server.port, referenced);
                if clusters.is_empty()
                    || (names.is_empty() && !m.sni_hosts.iter().any(|h| h == "*"))
                {
                    continue;
                }
                chains.push(Chain {
                    server_names: names,
                    tls: None,
                    action: ChainAction::Tcp { clusters },
                });
            }
        }
    }
    chains
}

/// The destinations of the first TCP route (VirtualService order, then rule order) that applies to a
/// TCP server.
fn tcp_destinations(
    cx: &Context<'_>,
    server: &BoundServer,
    referenced: &mut BTreeSet<ClusterRef>,
) -> Option<Vec<(String, u32)>> {
    let scope = Scope {
        port: server.port,
        gateway_namespace: server.namespace(),
        gateway_name: server.name(),
    };
    for (vs, ns) in bound_virtual_services(cx, &scope) {
        for rule in &vs.tcp {
            let applies = rule.matches.is_empty()
                || rule.matches.iter().any(|m| {
                    m.port.is_none_or(|p| p == server.port)
                        && (m.gateways.is_empty() || route::binds_gateway(&m.gateways, ns, &scope))
                });
            if !applies {
                continue;
            }
            let clusters = weighted_clusters(cx, &rule.route, ns, server.port, referenced);
            if !clusters.is_empty() {
                return Some(clusters);
            }
        }
    }
    None
}

/// Builds the clusters of every visible service port (and DestinationRule subset) plus an empty EDS
/// cluster for each referenced cluster no service defines.
fn build_clusters(
    cx: &Context<'_>,
    referenced: &BTreeSet<ClusterRef>,
    out: &mut GatewayResources,
    credentials: &mut BTreeSet<String>,
) {
    let mut names: HashSet<String> = HashSet::new();
    for service in cx.registry.services.values() {
        if !service.visible_to(&cx.proxy.namespace) {
            continue;
        }
        let subsets = cx.policies.subsets(&service.hostname, &service.namespace);
        for port in &service.ports {
            let endpoints = service
                .endpoints
                .get(&port.number)
                .map(Vec::as_slice)
                .unwrap_or_default();
            let mut variants: Vec<(String, Vec<cluster::Endpoint>)> =
                vec![(String::new(), endpoints.to_vec())];
            variants.extend(subsets.iter().map(|subset| {
                (
                    subset.name.clone(),
                    endpoints
                        .iter()
                        .filter(|e| policy::subset_selects(subset, &e.labels))
                        .cloned()
                        .collect(),
                )
            }));
            for (subset, members) in variants {
                let reference = ClusterRef {
                    host: service.hostname.clone(),
                    port: port.number,
                    subset,
                };
                let name = reference.name();
                let mut c = cluster::cluster(&name, service.discovery, &members);
                credentials.extend(cx.policies.apply(
                    &mut c,
                    &reference,
                    &service.namespace,
                    &port.protocol,
                ));
                if c.eds_cluster_config.is_some() {
                    out.endpoints
                        .push(cluster::load_assignment(&name, &members));
                }
                out.clusters.push(c);
                names.insert(name);
            }
        }
    }
    for reference in referenced {
        let name = reference.name();
        if names.insert(name.clone()) {
            out.clusters
                .push(cluster::cluster(&name, cluster::Discovery::Eds, &[]));
            out.endpoints.push(cluster::load_assignment(&name, &[]));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    fn object(doc: Value) -> Arc<ConfigObject> {
        match decode(&doc, &DecodeOptions::default()) {
            Decoded::Object { object, .. } => Arc::new(object),
            other => panic!("test document does not decode: {other:?}"),
        }
    }

    fn vs(name: &str, prefix: &str, delegate: Option<&str>) -> Arc<ConfigObject> {
        let rule = match delegate {
            Some(d) => json!({"match": [{"uri": {"prefix": prefix}}], "delegate": {"name": d}}),
            None => json!({"match": [{"uri": {"prefix": prefix}}],
                           "route": [{"destination": {"host": "web"}}]}),
        };
        object(json!({
            "apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
            "metadata": {"name": name, "namespace": "apps"},
            "spec": {"hosts": [format!("{name}.example.com")], "gateways": ["istio-system/gw"],
                     "http": [rule]}
        }))
    }

    fn delegate(name: &str, prefix: &str) -> Arc<ConfigObject> {
        object(json!({
            "apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
            "metadata": {"name": name, "namespace": "apps"},
            "spec": {"http": [{"match": [{"uri": {"prefix": prefix}}],
                               "route": [{"destination": {"host": "web"}}]}]}
        }))
    }

    fn snapshot(objects: Vec<Arc<ConfigObject>>) -> Snapshot {
        let gateway = object(json!({
            "apiVersion": "networking.istio.io/v1", "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": "istio-system"},
            "spec": {"selector": {"istio": "ingressgateway"},
                     "servers": [{"port": {"number": 80, "name": "http", "protocol": "HTTP"},
                                  "hosts": ["*"]}]}
        }));
        Snapshot {
            version: 1,
            objects: std::iter::once(gateway)
                .chain(objects)
                .map(|o| (o.key(), o))
                .collect(),
        }
    }

    fn proxy() -> Proxy {
        Proxy {
            namespace: "istio-system".into(),
            labels: [("istio".to_string(), "ingressgateway".to_string())].into(),
        }
    }

    #[test]
    fn cached_translation_equals_fresh_translation_after_changes() {
        let mut translator = Translator::new(Options::default());
        let first = snapshot(vec![vs("a", "/a", None), vs("b", "/b", None)]);
        assert_eq!(
            translator.translate(&first, &proxy()),
            translate(&first, &proxy())
        );
        let mut second = first.clone();
        let edited = vs("a", "/a2", None);
        second.objects.insert(edited.key(), edited);
        let incremental = translator.translate(&second, &proxy());
        assert_eq!(incremental, translate(&second, &proxy()));
        let paths = format!("{:?}", incremental.route_configs);
        assert!(paths.contains("/a2") && !paths.contains("\"/a\""));
        assert_eq!(translator.routes.len(), 2, "stale entries are evicted");
    }

    #[test]
    fn delegate_change_invalidates_the_root() {
        let mut translator = Translator::new(Options::default());
        let first = snapshot(vec![
            vs("root", "/x", Some("child")),
            delegate("child", "/x/1"),
        ]);
        translator.translate(&first, &proxy());
        let mut second = first.clone();
        let edited = delegate("child", "/x/2");
        second.objects.insert(edited.key(), edited);
        let out = translator.translate(&second, &proxy());
        assert_eq!(out, translate(&second, &proxy()));
        assert!(format!("{:?}", out.route_configs).contains("/x/2"));
    }

    #[test]
    fn unknown_destinations_get_an_empty_cluster() {
        let out = translate(&snapshot(vec![vs("a", "/a", None)]), &proxy());
        let name = "outbound|80||web.apps.svc.cluster.local";
        assert!(out.clusters.iter().any(|c| c.name == name));
        let cla = out.endpoints.iter().find(|e| e.cluster_name == name);
        assert!(cla.is_some_and(|e| e.endpoints.is_empty()));
    }

    #[test]
    fn unselected_proxy_gets_nothing() {
        let other = Proxy {
            namespace: "istio-system".into(),
            labels: [("app".to_string(), "other".to_string())].into(),
        };
        let out = translate(&snapshot(vec![vs("a", "/a", None)]), &other);
        assert!(out.listeners.is_empty() && out.route_configs.is_empty());
    }
}
