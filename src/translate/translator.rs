//! The translator (pure): walks a [`Snapshot`] through the translate modules for one [`Proxy`], call by call,
//! keeping what it built (routes per VirtualService, clusters, virtual hosts) so the next call redoes only what
//! changed; yields the proxy's [`GatewayResources`]. [`translate`] is the one-shot form.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;

use crate::model::{ConfigObject, Kind, Snapshot, Spec};

use super::cache::{CachedRoutes, ClusterInputs, Inputs};
use super::gateway::{BoundServer, ServerKind};
use super::listener::{Chain, ChainAction};
use super::policy::Policies;
use super::route::{Env, HttpRoutes, Scope, VhostPlan};
use super::services::Registry;
use super::types::{ClusterRef, GatewayResources, Options, Proxy};
use super::{
    cluster, dangling, deprecated, envoy_filter, gateway, higress, listener, naming, route, secret,
    telemetry,
};

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
    let mut translator = Translator::new(Options::default());
    translator.translate(snapshot, proxy);
    translator.into_resources()
}

/// A translator that reuses its earlier work between calls; use one per proxy group. It keeps, and
/// rebuilds only when what they were built from changed (objects compared by address):
/// - the service registry (Services, ServiceEntries, EndpointSlices, WorkloadEntries) and the
///   DestinationRule policies;
/// - the routes of each VirtualService per gateway and port (invalidated by its delegates, Services,
///   ServiceEntries and DestinationRules);
/// - each virtual host of its last output (rebuilt when the routes of one of its VirtualServices are);
/// - the clusters and load assignments of its last output;
/// - the EnvoyFilters built from higress-config.
///
/// A route configuration or cluster list an EnvoyFilter patched is rebuilt on the next call, and a call
/// for a different proxy starts from scratch. The output equals [`translate`]'s for the same input.
#[derive(Debug, Default)]
pub struct Translator {
    options: Options,
    proxy: Option<Proxy>,
    /// Number of the current call.
    call: u64,
    /// Services and ServiceEntries the registry and the cached routes were built from.
    services: Inputs,
    /// EndpointSlices and WorkloadEntries the registry was built from.
    endpoints: Inputs,
    /// DestinationRules the policies and the cached routes were built from.
    rules: Inputs,
    registry: Option<Arc<Registry>>,
    policies: Option<Arc<Policies>>,
    /// Names of the clusters the services define, for `registry` and `policies`.
    defined: Arc<HashSet<String>>,
    /// Cached routes by VirtualService address.
    pub(super) routes: HashMap<usize, Vec<CachedRoutes>>,
    /// Plans of the virtual hosts of each route configuration in `out`, in the same order.
    plans: HashMap<String, Vec<VhostPlan>>,
    /// What the clusters in `out` were built from; `None` when they must be rebuilt.
    clusters: Option<ClusterInputs>,
    /// The higress-config object and the EnvoyFilters built from it.
    higress: Option<(Arc<ConfigObject>, Vec<ConfigObject>)>,
    /// What the EnvoyFilters changed in `out`.
    touched: envoy_filter::Touched,
    /// Virtual hosts (route configuration, name) the last call built anew; `None` when any may differ from the
    /// call before (EnvoyFilters patched route configurations or clusters).
    rebuilt: Option<HashSet<(String, String)>>,
    /// Whether the last call kept the clusters and load assignments of the call before.
    clusters_reused: bool,
    /// The last output.
    out: GatewayResources,
}

/// Everything translation reads for one call.
struct Context<'a> {
    snapshot: &'a Snapshot,
    proxy: &'a Proxy,
    registry: Arc<Registry>,
    policies: Arc<Policies>,
    /// Names of the clusters the services define.
    defined: Arc<HashSet<String>>,
    domain_suffix: &'a str,
    /// VirtualServices visible to the proxy namespace, in Istio order.
    virtual_services: Vec<&'a Arc<ConfigObject>>,
}

/// What one call accumulates while it walks the gateway servers.
#[derive(Default)]
struct Pass {
    route_configs: Vec<RouteConfiguration>,
    /// Plans of the virtual hosts of each route configuration built.
    plans: HashMap<String, Vec<VhostPlan>>,
    /// Route configurations of the last output whose virtual hosts may be reused, with their plans.
    previous: HashMap<String, (RouteConfiguration, Vec<VhostPlan>)>,
    /// Clusters named by routes that services may not define.
    referenced: BTreeSet<ClusterRef>,
    /// Secrets the servers terminate TLS with.
    credentials: BTreeSet<String>,
    /// Virtual hosts (route configuration, name) built anew rather than reused.
    rebuilt: HashSet<(String, String)>,
}

impl Context<'_> {
    /// What routes depend on besides their VirtualService.
    fn env(&self) -> Env<'_> {
        Env {
            registry: &self.registry,
            policies: &self.policies,
            domain_suffix: self.domain_suffix,
        }
    }

    /// The Secrets this proxy's servers and clusters may read.
    fn secrets(&self) -> secret::SecretsOf<'_> {
        secret::SecretsOf {
            snapshot: self.snapshot,
            namespace: &self.proxy.namespace,
        }
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

    /// Returns the last output, consuming the translator.
    pub fn into_resources(self) -> GatewayResources {
        self.out
    }

    /// The output of the last [`Translator::translate`].
    pub fn output(&self) -> &GatewayResources {
        &self.out
    }

    /// Translates the snapshot for one proxy and returns the resources (kept for reuse by the next call).
    pub fn translate(&mut self, snapshot: &Snapshot, proxy: &Proxy) -> &GatewayResources {
        if self.proxy.as_ref() != Some(proxy) {
            *self = Translator {
                options: std::mem::take(&mut self.options),
                proxy: Some(proxy.clone()),
                ..Default::default()
            };
        }
        self.call += 1;
        let services_changed = self
            .services
            .update(snapshot, &[Kind::Service, Kind::ServiceEntry]);
        let endpoints_changed = self
            .endpoints
            .update(snapshot, &[Kind::EndpointSlice, Kind::WorkloadEntry]);
        let rules_changed = self.rules.update(snapshot, &[Kind::DestinationRule]);
        let domain_suffix = self.options.domain_suffix.clone();
        let registry = match &self.registry {
            Some(registry) if !services_changed && !endpoints_changed => Arc::clone(registry),
            _ => Arc::new(Registry::build(snapshot, &domain_suffix)),
        };
        let policies = match &self.policies {
            Some(policies) if !rules_changed => Arc::clone(policies),
            _ => Arc::new(Policies::build(snapshot, proxy, &domain_suffix)),
        };
        if self.registry.is_none() || services_changed || endpoints_changed || rules_changed {
            self.clusters = None;
        }
        if self.registry.is_none() || services_changed || rules_changed {
            self.routes.clear();
            let mut defined = HashSet::new();
            cluster::for_each_service_cluster(
                &registry,
                &policies,
                &proxy.namespace,
                |_, _, _, r| {
                    defined.insert(r.name());
                },
            );
            self.defined = Arc::new(defined);
        }
        self.registry = Some(Arc::clone(&registry));
        self.policies = Some(Arc::clone(&policies));
        let mut virtual_services: Vec<&Arc<ConfigObject>> = snapshot
            .of_kind(Kind::VirtualService)
            .filter(|object| {
                route::vs_spec(object).is_some_and(|vs| {
                    exported_to(&vs.export_to, &object.metadata.namespace, &proxy.namespace)
                })
            })
            .collect();
        virtual_services.sort_by(|a, b| gateway::istio_order(a, b));
        let cx = Context {
            snapshot,
            proxy,
            registry,
            policies,
            defined: Arc::clone(&self.defined),
            domain_suffix: &domain_suffix,
            virtual_services,
        };
        let previous = std::mem::take(&mut self.out);
        let mut pass = Pass::default();
        // EnvoyFilter patches to routes or clusters (which decide which routes answer 503) may change any
        // virtual host; then no virtual host counts as unchanged.
        let patched_before = self.touched.route_configs || self.touched.clusters;
        if !self.touched.route_configs {
            let mut plans = std::mem::take(&mut self.plans);
            pass.previous = previous
                .route_configs
                .into_iter()
                .filter_map(|config| {
                    let plan = plans.remove(&config.name)?;
                    Some((config.name.clone(), (config, plan)))
                })
                .collect();
        }
        let mut out = GatewayResources::default();
        let authz =
            listener::gateway_filters(snapshot, proxy, &self.options.root_namespaces, &cx.registry);
        let access_logs =
            telemetry::access_logs(snapshot, proxy, &self.options.root_namespaces, &cx.registry);
        let shared = listener::Shared {
            authz: &authz,
            access_logs: &access_logs,
            trusted_hops: proxy.trusted_proxies,
        };
        for (port, servers) in gateway::servers_by_port(snapshot, proxy) {
            let chains = self.port_chains(&cx, port, &servers, &mut pass);
            if !chains.is_empty() {
                out.listeners
                    .push(listener::listener(port, chains, &shared));
            }
        }
        let call = self.call;
        self.routes.retain(|_, entries| {
            entries.retain(|entry| entry.call == call);
            !entries.is_empty()
        });
        out.route_configs = pass.route_configs;
        self.plans = pass.plans;
        let mut credentials = pass.credentials;
        let extra: BTreeSet<ClusterRef> = pass
            .referenced
            .into_iter()
            .filter(|r| !cx.defined.contains(&r.name()))
            .collect();
        let mut clusters_reused = false;
        match &self.clusters {
            Some(inputs)
                if inputs.extra == extra && inputs.jwks == authz.jwks && !self.touched.clusters =>
            {
                out.clusters = previous.clusters;
                out.endpoints = previous.endpoints;
                clusters_reused = true;
            }
            _ => {
                let cluster_credentials = cluster::build_clusters(
                    &cx.registry,
                    &cx.policies,
                    &proxy.namespace,
                    &cx.defined,
                    &extra,
                    &authz.jwks,
                    &mut out,
                );
                self.clusters = Some(ClusterInputs {
                    extra,
                    jwks: authz.jwks,
                    credentials: cluster_credentials,
                });
            }
        }
        if let Some(inputs) = &self.clusters {
            credentials.extend(inputs.credentials.iter().cloned());
        }
        out.secrets = secret::build_secrets(cx.secrets(), &credentials);
        self.touched = self.apply_envoy_filters(snapshot, proxy, &mut out);
        self.clusters_reused = clusters_reused && !patched_before && !self.touched.clusters;
        let patched = patched_before || self.touched.route_configs || self.touched.clusters;
        self.rebuilt = (!patched).then_some(std::mem::take(&mut pass.rebuilt));
        // Reused virtual hosts were upgraded, and (with the same clusters) closed, by the call before.
        deprecated::upgrade(&mut out, self.rebuilt.as_ref());
        let already = self
            .rebuilt
            .as_ref()
            .filter(|_| clusters_reused)
            .map(|rebuilt| dangling::AlreadyClosed {
                rebuilt,
                previous: &previous.left_out,
            });
        out.left_out = dangling::close(&mut out, &previous.listeners, already);
        dangling::blame(&mut out.left_out, snapshot);
        out.listeners.retain(|l| !l.filter_chains.is_empty());
        out.listeners.sort_by(|a, b| a.name.cmp(&b.name));
        out.route_configs.sort_by(|a, b| a.name.cmp(&b.name));
        out.secrets.sort_by(|a, b| a.name.cmp(&b.name));
        out.extension_configs.sort_by(|a, b| a.name.cmp(&b.name));
        self.out = out;
        &self.out
    }

    /// The virtual hosts (route configuration name, virtual host name) the last [`Translator::translate`] built
    /// anew; every other virtual host of its output is the one of the call before, unchanged. `None` when that
    /// does not hold (EnvoyFilters patched route configurations or clusters), or before the first call.
    pub fn rebuilt_virtual_hosts(&self) -> Option<&HashSet<(String, String)>> {
        self.rebuilt.as_ref()
    }

    /// Whether the clusters and load assignments of the last [`Translator::translate`]'s output are the call
    /// before's, unchanged (false when EnvoyFilters patched clusters, or before the first call).
    pub fn reused_clusters(&self) -> bool {
        self.clusters_reused
    }

    /// Applies the EnvoyFilters built from higress-config, then the user's EnvoyFilters, with the patch
    /// engine (which orders them by priority, root namespace and age). Returns what they changed.
    fn apply_envoy_filters(
        &mut self,
        snapshot: &Snapshot,
        proxy: &Proxy,
        out: &mut GatewayResources,
    ) -> envoy_filter::Touched {
        let config = snapshot
            .of_kind(Kind::HigressConfig)
            .find(|object| matches!(object.spec, Spec::HigressConfig(_)));
        let cached = matches!((config, &self.higress),
            (Some(object), Some((held, _))) if Arc::ptr_eq(object, held));
        if !cached {
            self.higress =
                config.map(|object| (Arc::clone(object), higress::decoded_envoy_filters(object)));
        }
        let higress = self
            .higress
            .as_ref()
            .map(|(_, filters)| filters.as_slice())
            .unwrap_or_default();
        let user = snapshot.of_kind(Kind::EnvoyFilter).map(Arc::as_ref);
        let filters: Vec<&ConfigObject> = higress.iter().chain(user).collect();
        if filters.is_empty() {
            return envoy_filter::Touched::default();
        }
        let options = envoy_filter::PatchOptions {
            root_namespaces: self.options.root_namespaces.clone(),
            ..Default::default()
        };
        envoy_filter::apply(out, &filters, proxy, &options)
    }

    /// Builds the filter chains of one port (and the route configurations they use).
    fn port_chains(
        &mut self,
        cx: &Context<'_>,
        port: u32,
        servers: &[BoundServer],
        pass: &mut Pass,
    ) -> Vec<Chain> {
        let mut chains = Vec::new();
        let http: Vec<&BoundServer> = servers
            .iter()
            .filter(|s| s.kind == ServerKind::Http)
            .collect();
        if !http.is_empty() {
            let name = naming::http_route_config(port);
            let config = self.route_config(cx, name.clone(), port, &http, pass);
            pass.route_configs.push(config);
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
                    if !secret::credentials_present(cx.secrets(), tls) {
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
                    if pass.route_configs.iter().any(|rc| rc.name == name) {
                        continue;
                    }
                    let config = self.route_config(cx, name.clone(), port, &[server], pass);
                    pass.route_configs.push(config);
                    pass.credentials
                        .extend(gateway::credentials(tls).certificates);
                    pass.credentials.extend(gateway::credentials(tls).ca);
                    chains.push(Chain {
                        server_names: gateway::server_names(server),
                        tls: Some(gateway::downstream_tls(tls, true)),
                        action: ChainAction::Http { route_config: name },
                    });
                }
                ServerKind::Passthrough => {
                    chains.extend(listener::passthrough_chains(
                        &cx.virtual_services,
                        &cx.env(),
                        server,
                        &mut pass.referenced,
                    ));
                }
                ServerKind::Tcp => {
                    let terminated = match tls {
                        Some(tls) if secret::credentials_present(cx.secrets(), tls) => {
                            pass.credentials
                                .extend(gateway::credentials(tls).certificates);
                            pass.credentials.extend(gateway::credentials(tls).ca);
                            Some(gateway::downstream_tls(tls, false))
                        }
                        Some(_) => continue,
                        None => None,
                    };
                    if let Some(clusters) = listener::tcp_destinations(
                        &cx.virtual_services,
                        &cx.env(),
                        server,
                        &mut pass.referenced,
                    ) {
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

    /// Builds one route configuration from the HTTP(S) servers that share it, reusing the virtual hosts
    /// of the last output whose plan is unchanged.
    fn route_config(
        &mut self,
        cx: &Context<'_>,
        name: String,
        port: u32,
        servers: &[&BoundServer],
        pass: &mut Pass,
    ) -> RouteConfiguration {
        let mut vhosts: BTreeMap<String, (Vec<Arc<HttpRoutes>>, bool)> = BTreeMap::new();
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
                let Some(vs) = route::vs_spec(object) else {
                    continue;
                };
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
                let routes = self.vs_routes(cx, object, &scope, &mut pass.referenced);
                for host in hosts {
                    // One server yields each host of a VirtualService once; servers sharing the route
                    // configuration may yield it again.
                    if servers.len() > 1
                        && !seen.insert((host.clone(), Arc::as_ptr(object) as usize))
                    {
                        continue;
                    }
                    let entry = vhosts.entry(host).or_default();
                    entry.0.push(Arc::clone(&routes));
                    entry.1 |= redirect;
                }
            }
        }
        let plans: Vec<VhostPlan> = vhosts
            .into_iter()
            .map(|(host, (sources, redirect))| VhostPlan {
                host,
                redirect,
                sources,
            })
            .collect();
        let previous = pass.previous.remove(&name);
        let config = route::route_configuration(&name, port, &plans, previous, &mut pass.rebuilt);
        pass.plans.insert(name, plans);
        config
    }

    /// Returns the routes of a VirtualService in a scope, from the cache when the object and its delegates
    /// are unchanged, and adds the clusters they name that no service defines to `referenced`.
    fn vs_routes(
        &mut self,
        cx: &Context<'_>,
        object: &Arc<ConfigObject>,
        scope: &Scope<'_>,
        referenced: &mut BTreeSet<ClusterRef>,
    ) -> Arc<HttpRoutes> {
        let Some(vs) = route::vs_spec(object) else {
            return Arc::default();
        };
        let delegates = route::delegate_objects(cx.snapshot, vs, &object.metadata.namespace);
        let call = self.call;
        let entries = self.routes.entry(Arc::as_ptr(object) as usize).or_default();
        if let Some(cached) = entries.iter_mut().find(|c| c.is_for(object, scope)) {
            if cached.has_delegates(&delegates) {
                cached.call = call;
                referenced.extend(cached.undefined.iter().cloned());
                return Arc::clone(&cached.routes);
            }
        }
        let env = cx.env();
        let snapshot = cx.snapshot;
        let lookup = move |ns: &str, name: &str| {
            snapshot
                .get(&crate::model::ObjectKey::new(
                    Kind::VirtualService,
                    ns,
                    name,
                ))
                .and_then(|o| route::vs_spec(o))
        };
        let routes = Arc::new(route::http_routes(
            vs,
            &object.metadata.namespace,
            scope,
            &env,
            &lookup,
        ));
        let undefined: Vec<ClusterRef> = routes
            .clusters
            .iter()
            .filter(|c| !cx.defined.contains(&c.name()))
            .cloned()
            .collect();
        referenced.extend(undefined.iter().cloned());
        entries.retain(|c| !c.is_for(object, scope));
        entries.push(CachedRoutes {
            object: Arc::clone(object),
            gateway_namespace: scope.gateway_namespace.to_string(),
            gateway_name: scope.gateway_name.to_string(),
            port: scope.port,
            delegates,
            routes: Arc::clone(&routes),
            undefined,
            call,
        });
        routes
    }
}
