//! Route tables (pure): what one route configuration of a [`super::Translator`]'s output is built from, kept between
//! calls so that a change costs what it touches. A [`RouteTable`] holds the VirtualServices bound to the
//! configuration's servers (each with the hosts every server gives it and its routes per gateway) and, per host in
//! host order, the routes of each of those VirtualServices in Istio order.
//!
//! The translator hands a table the VirtualServices that changed since its last call ([`RouteTable::update`]): each
//! is unlinked from the hosts it had and linked to those it has now, in the configuration's virtual hosts too, and
//! only the virtual hosts of those hosts are rebuilt, in place. A table is built whole ([`RouteTable::build`]) when
//! its servers, the services or the DestinationRules changed, or too many VirtualServices did; it then keeps the
//! routes of the VirtualServices that did not change, and the virtual hosts whose routes are all kept
//! ([`RouteTable::assemble`]).

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use envoy_types::pb::envoy::config::route::v3::VirtualHost;

use super::gateway::{self, BoundServer, ServerKind};
use super::naming;
use super::route::{self, Env, HttpRoutes, Scope};
use super::types::{ClusterRef, FastMap, RebuiltHosts};
use admitpilot_model::istio::VirtualService;
use admitpilot_model::{ConfigObject, Kind, ObjectKey, Snapshot};

/// What building routes reads besides the VirtualServices.
pub(super) struct TableInputs<'a> {
    /// The snapshot (for delegates).
    pub snapshot: &'a Snapshot,
    /// Services, DestinationRules and the domain suffix.
    pub env: Env<'a>,
    /// Names of the clusters the services define.
    pub defined: &'a HashSet<String>,
    /// Namespace of the proxy (VirtualServices not exported to it are left out).
    pub proxy_namespace: &'a str,
}

/// The VirtualService of `object` if it is one and exported to `proxy_namespace`.
pub(super) fn visible<'o>(
    object: &'o ConfigObject,
    proxy_namespace: &str,
) -> Option<&'o VirtualService> {
    route::vs_spec(object).filter(|vs| {
        vs.export_to.is_empty()
            || vs.export_to.iter().any(|e| {
                e == "*"
                    || e == proxy_namespace
                    || (e == "." && object.metadata.namespace == proxy_namespace)
            })
    })
}

/// What one route configuration is built from (see the module docs).
#[derive(Debug)]
pub(super) struct RouteTable {
    port: u32,
    /// The HTTP(S) servers that share the configuration, in order.
    servers: Vec<BoundServer>,
    /// The VirtualServices bound to a server, by key.
    members: FastMap<ObjectKey, Member>,
    /// Keys of the members whose routes read delegates.
    delegating: BTreeSet<ObjectKey>,
    /// Every host of the configuration, sorted; one virtual host each.
    hosts: Vec<HostEntry>,
    /// Clusters the members' routes name that no service defines, with how many routes (per gateway) name each.
    undefined: BTreeMap<ClusterRef, usize>,
}

/// A VirtualService bound to some server of a table.
#[derive(Debug)]
struct Member {
    object: Arc<ConfigObject>,
    /// The delegates its routes were built from, as found (`None` when missing).
    delegates: Vec<Option<Arc<ConfigObject>>>,
    /// Its routes for each gateway whose servers give it hosts.
    scopes: Vec<ScopeRoutes>,
    /// The hosts each server gives it (a host once, on the first server that gives it).
    bindings: Vec<Binding>,
}

/// The routes of a VirtualService as bound to one gateway (on the table's port).
#[derive(Debug, Clone)]
struct ScopeRoutes {
    /// The Gateway; its namespace and name are the scope.
    gateway: Arc<ConfigObject>,
    routes: Arc<HttpRoutes>,
    /// The clusters the routes name that no service defines.
    undefined: Vec<ClusterRef>,
}

#[derive(Debug)]
struct Binding {
    /// Index of the server in the table.
    server: usize,
    hosts: Vec<String>,
    /// Index of the routes in the member's scopes.
    scope: usize,
}

/// One host of a table: whether a redirecting server names it, and the routes bound to it.
#[derive(Debug)]
struct HostEntry {
    host: String,
    /// A server redirecting to HTTPS lists the host.
    server_redirect: bool,
    /// Sorted by server, then by the VirtualService's Istio order.
    sources: Vec<Source>,
}

#[derive(Debug)]
struct Source {
    server: usize,
    object: Arc<ConfigObject>,
    routes: Arc<HttpRoutes>,
}

impl HostEntry {
    fn new(host: String) -> Self {
        HostEntry {
            host,
            server_redirect: false,
            sources: Vec::new(),
        }
    }
}

/// Whether two lists hold the same objects (by address), or the same ones missing.
fn same_objects(a: &[Option<Arc<ConfigObject>>], b: &[Option<Arc<ConfigObject>>]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|pair| match pair {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        })
}

/// Whether two Gateways are the same scope (namespace and name).
fn same_gateway(a: &ConfigObject, b: &ConfigObject) -> bool {
    a.metadata.namespace == b.metadata.namespace && a.metadata.name == b.metadata.name
}

/// Whether a server redirects plain HTTP to HTTPS.
fn redirects(server: &BoundServer) -> bool {
    server.kind == ServerKind::Http && server.tls().and_then(|t| t.https_redirect).unwrap_or(false)
}

impl ScopeRoutes {
    /// Translates the routes of `vs` (in `namespace`) for `scope`, the scope of `gateway`.
    fn translate(
        cx: &TableInputs<'_>,
        vs: &VirtualService,
        namespace: &str,
        scope: &Scope<'_>,
        gateway: &Arc<ConfigObject>,
    ) -> Self {
        let snapshot = cx.snapshot;
        let lookup = move |ns: &str, name: &str| {
            snapshot
                .get(&ObjectKey::new(Kind::VirtualService, ns, name))
                .and_then(|o| route::vs_spec(o))
        };
        let routes = route::http_routes(vs, namespace, scope, &cx.env, &lookup);
        let undefined = routes
            .clusters
            .iter()
            .filter(|c| !cx.defined.contains(&c.name()))
            .cloned()
            .collect();
        ScopeRoutes {
            gateway: Arc::clone(gateway),
            routes: Arc::new(routes),
            undefined,
        }
    }
}

impl Member {
    /// `object` as bound to `servers` on `port`, or `None` when it is not a VirtualService the proxy sees or no
    /// server gives it a host. Keeps the routes of `old` (the same VirtualService in the last call) when the object
    /// and its delegates are the same.
    fn bind(
        cx: &TableInputs<'_>,
        servers: &[BoundServer],
        port: u32,
        object: &Arc<ConfigObject>,
        old: Option<&Member>,
    ) -> Option<Member> {
        let vs = visible(object, cx.proxy_namespace)?;
        let namespace = object.metadata.namespace.as_str();
        let mut resolved: Option<Vec<String>> = None;
        let mut delegates: Option<Vec<Option<Arc<ConfigObject>>>> = None;
        let mut scopes: Vec<ScopeRoutes> = Vec::new();
        let mut bindings: Vec<Binding> = Vec::new();
        for (index, server) in servers.iter().enumerate() {
            let scope = Scope {
                port,
                gateway_namespace: server.namespace(),
                gateway_name: server.name(),
            };
            if !route::binds_gateway(&vs.gateways, namespace, &scope) {
                continue;
            }
            let resolved = resolved.get_or_insert_with(|| {
                vs.hosts
                    .iter()
                    .map(|h| naming::resolve_short_name(h, namespace, cx.env.domain_suffix))
                    .collect()
            });
            let mut hosts = gateway::server_vs_hosts(server, namespace, resolved);
            if hosts.is_empty() {
                continue;
            }
            let found = scopes
                .iter()
                .position(|s| same_gateway(&s.gateway, &server.gateway));
            let scope_index = match found {
                Some(found) => found,
                None => {
                    let delegates = delegates
                        .get_or_insert_with(|| route::delegate_objects(cx.snapshot, vs, namespace));
                    let kept = old
                        .filter(|old| {
                            Arc::ptr_eq(&old.object, object)
                                && same_objects(&old.delegates, delegates)
                        })
                        .and_then(|old| {
                            old.scopes
                                .iter()
                                .find(|s| same_gateway(&s.gateway, &server.gateway))
                        });
                    scopes.push(match kept {
                        Some(kept) => kept.clone(),
                        None => ScopeRoutes::translate(cx, vs, namespace, &scope, &server.gateway),
                    });
                    scopes.len() - 1
                }
            };
            // One server yields each host of a VirtualService once; servers sharing the configuration may yield it
            // again, and the first one keeps it.
            if servers.len() > 1 {
                hosts.retain(|h| !bindings.iter().any(|b| b.hosts.contains(h)));
            }
            if !hosts.is_empty() {
                bindings.push(Binding {
                    server: index,
                    hosts,
                    scope: scope_index,
                });
            }
        }
        if scopes.is_empty() {
            return None;
        }
        Some(Member {
            object: Arc::clone(object),
            delegates: delegates.unwrap_or_default(),
            scopes,
            bindings,
        })
    }

    /// Each (server, host, routes) the member gives its table.
    fn sources(&self) -> impl Iterator<Item = (usize, &String, &Arc<HttpRoutes>)> + '_ {
        self.bindings.iter().flat_map(move |binding| {
            let routes = &self.scopes[binding.scope].routes;
            binding
                .hosts
                .iter()
                .map(move |host| (binding.server, host, routes))
        })
    }
}

impl RouteTable {
    /// Builds the table of the configuration `servers` share on `port` from every VirtualService the proxy sees, in
    /// Istio order, keeping the routes of `old`'s members that did not change.
    pub(super) fn build(
        cx: &TableInputs<'_>,
        port: u32,
        servers: &[&BoundServer],
        virtual_services: &[&Arc<ConfigObject>],
        old: Option<&RouteTable>,
    ) -> Self {
        let servers: Vec<BoundServer> = servers.iter().map(|s| (*s).clone()).collect();
        let mut hosts: BTreeMap<String, HostEntry> = BTreeMap::new();
        for server in servers.iter().filter(|s| redirects(s)) {
            for host in server.server().into_iter().flat_map(|s| s.hosts.iter()) {
                let (_, host) = gateway::split_server_host(host, server.namespace());
                hosts
                    .entry(host.to_string())
                    .or_insert_with(|| HostEntry::new(host.to_string()))
                    .server_redirect = true;
            }
        }
        let mut table = RouteTable {
            port,
            servers,
            members: FastMap::default(),
            delegating: BTreeSet::new(),
            hosts: Vec::new(),
            undefined: BTreeMap::new(),
        };
        for object in virtual_services {
            let key = object.key();
            let old = old.and_then(|old| old.members.get(&key));
            let Some(member) = Member::bind(cx, &table.servers, port, object, old) else {
                continue;
            };
            for (server, host, routes) in member.sources() {
                hosts
                    .entry(host.clone())
                    .or_insert_with(|| HostEntry::new(host.clone()))
                    .sources
                    .push(Source {
                        server,
                        object: Arc::clone(object),
                        routes: Arc::clone(routes),
                    });
            }
            table.admit(key, member);
        }
        table.hosts = hosts
            .into_values()
            .map(|mut entry| {
                // Pushed in Istio order; a stable sort puts the first server's first.
                entry.sources.sort_by_key(|s| s.server);
                entry
            })
            .collect();
        table
    }

    /// Whether the table was built for these servers (the same Gateway objects and servers).
    pub(super) fn serves(&self, servers: &[&BoundServer]) -> bool {
        self.servers.len() == servers.len()
            && self.servers.iter().zip(servers).all(|(a, b)| {
                Arc::ptr_eq(&a.gateway, &b.gateway)
                    && a.index == b.index
                    && a.port == b.port
                    && a.kind == b.kind
            })
    }

    /// Whether `virtual_hosts` (the configuration last assembled from this table) has one virtual host per host, or
    /// the blackhole when there is none.
    pub(super) fn matches(&self, virtual_hosts: &[VirtualHost]) -> bool {
        virtual_hosts.len() == self.hosts.len().max(1)
    }

    /// The position of the virtual host `name` in the configuration as last assembled from this table.
    pub(super) fn position_of(&self, name: &str) -> Option<usize> {
        let (host, port) = name.rsplit_once(':')?;
        if port.parse::<u32>().ok()? != self.port {
            return None;
        }
        if self.hosts.is_empty() {
            return (host == route::BLACKHOLE).then_some(0);
        }
        self.position(host).ok()
    }

    /// The clusters the routes name that no service defines.
    pub(super) fn undefined(&self) -> impl Iterator<Item = &ClusterRef> + '_ {
        self.undefined.keys()
    }

    /// Applies the VirtualServices of `changed` (added, changed or removed since the last call) and those whose
    /// delegates changed; when `virtual_hosts` is given (the configuration `name` as last assembled, see
    /// [`RouteTable::matches`]), updates it in place, rebuilding only the virtual hosts of the hosts they had or
    /// have, and records those in `rebuilt`.
    pub(super) fn update(
        &mut self,
        cx: &TableInputs<'_>,
        changed: &[ObjectKey],
        name: &str,
        mut virtual_hosts: Option<&mut Vec<VirtualHost>>,
        rebuilt: &mut RebuiltHosts,
    ) {
        if self.hosts.is_empty() {
            // The blackhole.
            if let Some(virtual_hosts) = virtual_hosts.as_deref_mut() {
                virtual_hosts.clear();
            }
        }
        let mut affected: Vec<ObjectKey> = changed.to_vec();
        if !changed.is_empty() {
            // Delegates are VirtualServices: they change only when some VirtualService does.
            affected.extend(
                self.delegating
                    .iter()
                    .filter(|key| {
                        self.members.get(*key).is_none_or(|member| {
                            let now = route::vs_spec(&member.object).map(|vs| {
                                route::delegate_objects(
                                    cx.snapshot,
                                    vs,
                                    &member.object.metadata.namespace,
                                )
                            });
                            !now.is_some_and(|now| same_objects(&member.delegates, &now))
                        })
                    })
                    .cloned(),
            );
            affected.sort();
            affected.dedup();
        }
        let mut dirty: Vec<String> = Vec::new();
        for key in affected {
            let old = self.members.remove(&key);
            self.delegating.remove(&key);
            let new = cx.snapshot.get(&key).and_then(|object| {
                Member::bind(cx, &self.servers, self.port, object, old.as_ref())
            });
            if let Some(old) = old {
                self.unlink(&old, &mut dirty);
            }
            if let Some(new) = new {
                self.link(&new, virtual_hosts.as_deref_mut(), &mut dirty);
                self.admit(key, new);
            }
        }
        dirty.sort();
        dirty.dedup();
        // Hosts left without routes go (only now, so that a VirtualService changed in place keeps its hosts where
        // they are rather than moving every later one out and back).
        dirty.retain(|host| {
            let Ok(at) = self.position(host) else {
                return false;
            };
            let entry = &self.hosts[at];
            if !entry.sources.is_empty() || entry.server_redirect {
                return true;
            }
            self.hosts.remove(at);
            if let Some(virtual_hosts) = virtual_hosts.as_deref_mut() {
                virtual_hosts.remove(at);
            }
            false
        });
        let Some(virtual_hosts) = virtual_hosts else {
            return;
        };
        if self.hosts.is_empty() {
            virtual_hosts.push(route::blackhole(self.port));
            rebuilt.insert(name, 0, &virtual_hosts[0].name);
            return;
        }
        for host in dirty {
            let Ok(at) = self.position(&host) else {
                continue;
            };
            let vhost = self.virtual_host(&self.hosts[at]);
            rebuilt.insert(name, at, &vhost.name);
            virtual_hosts[at] = vhost;
        }
    }

    /// The virtual hosts of the configuration `name`, reusing those of `old` (the table they were assembled from,
    /// and the virtual hosts) whose routes are the same objects; records the others in `rebuilt`.
    pub(super) fn assemble(
        &self,
        name: &str,
        old: Option<(&RouteTable, Vec<VirtualHost>)>,
        rebuilt: &mut RebuiltHosts,
    ) -> Vec<VirtualHost> {
        if self.hosts.is_empty() {
            let vhost = route::blackhole(self.port);
            rebuilt.insert(name, 0, &vhost.name);
            return vec![vhost];
        }
        // Both lists are sorted by host: one merge walk pairs them.
        let mut previous = old
            .filter(|(table, virtual_hosts)| {
                !table.hosts.is_empty() && table.matches(virtual_hosts)
            })
            .map(|(table, virtual_hosts)| {
                table
                    .hosts
                    .iter()
                    .map(move |entry| (table, entry))
                    .zip(virtual_hosts)
            })
            .into_iter()
            .flatten()
            .peekable();
        let mut virtual_hosts = Vec::with_capacity(self.hosts.len());
        for (at, entry) in self.hosts.iter().enumerate() {
            while previous
                .next_if(|((_, old), _)| old.host < entry.host)
                .is_some()
            {}
            let kept = previous.next_if(|((table, old), _)| {
                old.host == entry.host
                    && table.redirect(old) == self.redirect(entry)
                    && old.sources.len() == entry.sources.len()
                    && old
                        .sources
                        .iter()
                        .zip(&entry.sources)
                        .all(|(a, b)| Arc::ptr_eq(&a.routes, &b.routes))
            });
            virtual_hosts.push(match kept {
                Some((_, vhost)) => vhost,
                None => {
                    let vhost = self.virtual_host(entry);
                    rebuilt.insert(name, at, &vhost.name);
                    vhost
                }
            });
        }
        virtual_hosts
    }

    /// Number of VirtualServices bound.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.members.len()
    }

    fn admit(&mut self, key: ObjectKey, member: Member) {
        for scope in &member.scopes {
            for cluster in &scope.undefined {
                *self.undefined.entry(cluster.clone()).or_default() += 1;
            }
        }
        if !member.delegates.is_empty() {
            self.delegating.insert(key.clone());
        }
        self.members.insert(key, member);
    }

    fn position(&self, host: &str) -> Result<usize, usize> {
        self.hosts
            .binary_search_by(|entry| entry.host.as_str().cmp(host))
    }

    /// Adds the member's routes to its hosts (and a placeholder virtual host per new host to `virtual_hosts`).
    fn link(
        &mut self,
        member: &Member,
        mut virtual_hosts: Option<&mut Vec<VirtualHost>>,
        dirty: &mut Vec<String>,
    ) {
        for (server, host, routes) in member.sources() {
            let at = match self.position(host) {
                Ok(at) => at,
                Err(at) => {
                    self.hosts.insert(at, HostEntry::new(host.clone()));
                    if let Some(virtual_hosts) = virtual_hosts.as_deref_mut() {
                        virtual_hosts.insert(at, VirtualHost::default());
                    }
                    at
                }
            };
            let sources = &mut self.hosts[at].sources;
            let before = |s: &Source| {
                s.server < server
                    || (s.server == server
                        && gateway::istio_order(&s.object, &member.object) == Ordering::Less)
            };
            let position = sources.partition_point(before);
            sources.insert(
                position,
                Source {
                    server,
                    object: Arc::clone(&member.object),
                    routes: Arc::clone(routes),
                },
            );
            dirty.push(host.clone());
        }
    }

    /// Takes the member's routes off its hosts (adding them to `dirty`; [`RouteTable::update`] drops those left
    /// without routes), and its clusters off the undefined ones.
    fn unlink(&mut self, member: &Member, dirty: &mut Vec<String>) {
        for (server, host, _) in member.sources() {
            let Ok(at) = self.position(host) else {
                continue;
            };
            self.hosts[at]
                .sources
                .retain(|s| !(s.server == server && Arc::ptr_eq(&s.object, &member.object)));
            dirty.push(host.clone());
        }
        for scope in &member.scopes {
            for cluster in &scope.undefined {
                if let Some(count) = self.undefined.get_mut(cluster) {
                    *count -= 1;
                    if *count == 0 {
                        self.undefined.remove(cluster);
                    }
                }
            }
        }
    }

    /// Whether the virtual host of `entry` requires TLS.
    fn redirect(&self, entry: &HostEntry) -> bool {
        entry.server_redirect
            || entry
                .sources
                .iter()
                .any(|s| self.servers.get(s.server).is_some_and(redirects))
    }

    fn virtual_host(&self, entry: &HostEntry) -> VirtualHost {
        route::virtual_host(
            &entry.host,
            self.redirect(entry),
            entry.sources.iter().map(|s| s.routes.as_ref()),
            self.port,
        )
    }
}
