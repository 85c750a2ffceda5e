//! The translator (pure): walks a [`Snapshot`] through the translate modules for one [`Proxy`], call by call,
//! keeping what it built (routes per VirtualService, clusters, virtual hosts) so the next call redoes only what
//! changed; yields the proxy's [`GatewayResources`]. [`translate`] is the one-shot form.

use std::cell::OnceCell;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;

use admitpilot_model::{ConfigObject, Kind, ObjectKey, Snapshot, Spec};

use super::cache::{ClusterInputs, Inputs, VirtualServices};
use super::gateway::{BoundServer, ServerKind};
use super::listener::{Chain, ChainAction};
use super::policy::Policies;
use super::route::Env;
use super::route_table::{visible, RouteTable, TableInputs};
use super::services::Registry;
use super::types::{ClusterRef, GatewayResources, Options, Proxy, RebuiltHosts};
use super::{
    cluster, dangling, deprecated, envoy_filter, gateway, gateway_api, higress, ingress, listener,
    naming, route, secret, telemetry,
};

/// Above this many VirtualServices changed since the last call, route tables are built whole rather than updated.
const MAX_UPDATED: usize = 64;

impl Default for Options {
    fn default() -> Self {
        Options {
            domain_suffix: naming::DEFAULT_DOMAIN_SUFFIX.into(),
            gateway_controller: admitpilot_model::gateway_api::DEFAULT_CONTROLLER_NAME.into(),
            ingress: admitpilot_model::ingress::IngressOptions::default(),
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
/// - per route configuration, a route table (`route_table`): the routes of each VirtualService bound to it per
///   gateway (invalidated by its delegates, Services, ServiceEntries and DestinationRules) and which hosts they go
///   to. A call finds the VirtualServices that changed since the last one (a pointer comparison per VirtualService)
///   and updates only the hosts they touch;
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
    /// The VirtualServices of the last call.
    virtual_services: VirtualServices,
    /// What each route configuration of `out` was built from, by name.
    pub(super) tables: HashMap<String, RouteTable>,
    /// What the clusters in `out` were built from; `None` when they must be rebuilt.
    clusters: Option<ClusterInputs>,
    /// The higress-config object and the EnvoyFilters built from it.
    higress: Option<(Arc<ConfigObject>, Vec<ConfigObject>)>,
    /// What the EnvoyFilters changed in `out`.
    touched: envoy_filter::Touched,
    /// Virtual hosts the last call built anew; `None` when any may differ from the call before (EnvoyFilters
    /// patched route configurations or clusters).
    rebuilt: Option<RebuiltHosts>,
    /// Whether the last call kept the clusters and load assignments of the call before.
    clusters_reused: bool,
    /// The Istio objects synthesized from Gateway API objects by the last call.
    gateway_api: gateway_api::Converted,
    /// The Istio objects synthesized from Ingresses by the last call, and the Secrets those Ingresses name.
    ingress: ingress::Converted,
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
    /// Keys of the VirtualServices added, changed or removed since the last call; `None` when unknown or too many.
    changed: Option<Vec<ObjectKey>>,
    /// VirtualServices visible to the proxy namespace, in Istio order (built when first needed).
    virtual_services: OnceCell<Vec<&'a Arc<ConfigObject>>>,
    /// The TLS Secrets (namespace, name) of the Ingresses the proxy serves.
    ingress_secrets: &'a BTreeSet<(String, String)>,
}

/// What one call accumulates while it walks the gateway servers.
#[derive(Default)]
struct Pass {
    route_configs: Vec<RouteConfiguration>,
    /// The table of each route configuration built.
    tables: HashMap<String, RouteTable>,
    /// Route configurations of the last output whose virtual hosts may be reused.
    previous: HashMap<String, RouteConfiguration>,
    /// Clusters named by routes that services may not define.
    referenced: BTreeSet<ClusterRef>,
    /// Secrets the servers terminate TLS with.
    credentials: BTreeSet<String>,
    /// Virtual hosts built anew rather than reused.
    rebuilt: RebuiltHosts,
}

impl<'a> Context<'a> {
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
            ingress: self.ingress_secrets,
        }
    }

    /// What route tables read.
    fn table_inputs(&self) -> TableInputs<'_> {
        TableInputs {
            snapshot: self.snapshot,
            env: self.env(),
            defined: &self.defined,
            proxy_namespace: &self.proxy.namespace,
        }
    }

    /// The VirtualServices visible to the proxy namespace, in Istio order.
    fn virtual_services(&self) -> &[&'a Arc<ConfigObject>] {
        self.virtual_services.get_or_init(|| {
            let mut virtual_services: Vec<&Arc<ConfigObject>> = self
                .snapshot
                .of_kind(Kind::VirtualService)
                .filter(|object| visible(object, &self.proxy.namespace).is_some())
                .collect();
            virtual_services.sort_by(|a, b| gateway::istio_order(a, b));
            virtual_services
        })
    }
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
        // Gateway API objects are served as the Istio objects they convert to (`gateway_api`).
        let converted = self.gateway_api.apply(snapshot, proxy, &self.options);
        let snapshot = converted.as_ref().unwrap_or(snapshot);
        // So are Ingresses (`ingress`).
        let converted = self.ingress.apply(snapshot, proxy, &self.options);
        let snapshot = converted.as_ref().unwrap_or(snapshot);
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
        let changed = self.virtual_services.update(snapshot, MAX_UPDATED);
        if self.registry.is_none() || services_changed || rules_changed {
            self.tables.clear();
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
        let ingress_secrets = self.ingress.secrets.clone();
        let cx = Context {
            snapshot,
            proxy,
            ingress_secrets: &ingress_secrets,
            registry,
            policies,
            defined: Arc::clone(&self.defined),
            domain_suffix: &domain_suffix,
            changed,
            virtual_services: OnceCell::new(),
        };
        let previous = std::mem::take(&mut self.out);
        let mut pass = Pass::default();
        // EnvoyFilter patches to routes or clusters (which decide which routes answer 503) may change any
        // virtual host; then no virtual host counts as unchanged.
        let patched_before = self.touched.route_configs || self.touched.clusters;
        if !self.touched.route_configs {
            pass.previous = previous
                .route_configs
                .into_iter()
                .map(|config| (config.name.clone(), config))
                .collect();
        }
        let mut out = GatewayResources::default();
        let authz = listener::gateway_filters(snapshot, proxy, &cx.registry);
        let access_logs = telemetry::access_logs(snapshot, proxy, &cx.registry);
        let shared = listener::Shared {
            authz: &authz,
            access_logs: &access_logs,
            trusted_hops: proxy.trusted_proxies,
            path_normalization: snapshot.mesh_settings().path_normalization,
        };
        for (port, servers) in gateway::servers_by_port(snapshot, proxy) {
            let chains = self.port_chains(&cx, port, &servers, &mut pass);
            if !chains.is_empty() {
                out.listeners
                    .push(listener::listener(port, chains, &shared));
            }
        }
        out.route_configs = pass.route_configs;
        self.tables = pass.tables;
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

    /// The virtual hosts the last [`Translator::translate`] built anew; every other virtual host of its output is
    /// the one of the call before, unchanged. `None` when that does not hold (EnvoyFilters patched route
    /// configurations or clusters), or before the first call.
    pub fn rebuilt_virtual_hosts(&self) -> Option<&RebuiltHosts> {
        self.rebuilt.as_ref()
    }

    /// The position of the virtual host `name` in the route configuration `route_config` of the last output, when
    /// [`Translator::rebuilt_virtual_hosts`] is known (no EnvoyFilter patched route configurations or clusters).
    pub fn virtual_host_position(&self, route_config: &str, name: &str) -> Option<usize> {
        self.rebuilt.as_ref()?;
        self.tables.get(route_config)?.position_of(name)
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
            root_namespace: snapshot.mesh_settings().root_namespace().to_string(),
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
                        cx.virtual_services(),
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
                        cx.virtual_services(),
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

    /// Builds one route configuration from the HTTP(S) servers that share it: updates its route table with the
    /// VirtualServices that changed and rebuilds only the virtual hosts they touch, or builds the table whole
    /// (reusing the routes and virtual hosts of the old one that did not change).
    fn route_config(
        &mut self,
        cx: &Context<'_>,
        name: String,
        port: u32,
        servers: &[&BoundServer],
        pass: &mut Pass,
    ) -> RouteConfiguration {
        let inputs = cx.table_inputs();
        // The answered hosts were added after the table's own virtual hosts: the table gets its own back.
        let previous = pass.previous.remove(&name).map(|config| {
            let mut virtual_hosts = config.virtual_hosts;
            virtual_hosts.retain(|vhost| !vhost.name.starts_with(route::ANSWER));
            virtual_hosts
        });
        let old = self.tables.remove(&name);
        let (table, virtual_hosts) = match (old, &cx.changed) {
            (Some(mut table), Some(changed)) if table.serves(servers) => match previous {
                Some(mut virtual_hosts) if table.matches(&virtual_hosts) => {
                    table.update(
                        &inputs,
                        changed,
                        &name,
                        Some(&mut virtual_hosts),
                        &mut pass.rebuilt,
                    );
                    (table, virtual_hosts)
                }
                _ => {
                    table.update(&inputs, changed, &name, None, &mut pass.rebuilt);
                    let virtual_hosts = table.assemble(&name, None, &mut pass.rebuilt);
                    (table, virtual_hosts)
                }
            },
            (old, _) => {
                let table =
                    RouteTable::build(&inputs, port, servers, cx.virtual_services(), old.as_ref());
                let virtual_hosts =
                    table.assemble(&name, old.as_ref().zip(previous), &mut pass.rebuilt);
                (table, virtual_hosts)
            }
        };
        pass.referenced.extend(table.undefined().cloned());
        pass.tables.insert(name.clone(), table);
        let mut virtual_hosts = virtual_hosts;
        for server in servers {
            add_answered_hosts(&mut virtual_hosts, server, port);
        }
        route::route_configuration(name, virtual_hosts)
    }
}

/// Adds a virtual host for each host name a server of a route configuration answers with a fixed status (a Gateway
/// API HTTPS listener's 421s, an HTTP listener's own host name), unless a virtual host already has that domain (the
/// blackhole's `*`, a route's host name, an earlier server's answer).
fn add_answered_hosts(
    virtual_hosts: &mut Vec<envoy_types::pb::envoy::config::route::v3::VirtualHost>,
    server: &BoundServer,
    port: u32,
) {
    let Some(spec) = server.server() else {
        return;
    };
    for answered in &spec.answered_hosts {
        let taken = virtual_hosts
            .iter()
            .any(|vhost| vhost.domains.contains(&answered.host));
        if !taken {
            virtual_hosts.push(route::answering_host(&answered.host, port, answered.status));
        }
    }
}
