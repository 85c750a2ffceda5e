//! Effect check (pure): what a config change does to the gateways. Takes the live snapshot, a candidate object and
//! the proxy groups to check; translates the config with the candidate in place for each group and yields, per
//! group, what Envoy would reject when it loads what changed ([`check_changed`]) and what would not take effect
//! (references to clusters the group does not get, see [`super::dangling`]).
//!
//! [`check_changed`] applies the checks Envoy applies on load to every changed listener, cluster and virtual host:
//! its protoc-gen-validate rules, unique virtual host names and domains in a route configuration, one listener
//! per address, and distinct filter chain matches in a listener. Costs grow with what changed, not with the whole
//! config: unchanged resources are skipped by comparing them with the live output, and duplicates are found
//! with hash sets, not pairwise.
//!
//! The webhook denies a change that any gateway would reject ([`EffectChecker`]); the push path holds back the
//! resources [`check_changed`] rejects, so a change that got past the webhook is never sent.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::listener::v3::{filter, Listener};
use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, VirtualHost};
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    http_filter, HttpConnectionManager,
};
use prost::{Message, Name};

use super::dangling::LeftOut;
use super::types::{FastMap, FastSet, GatewayResources, Options, Proxy, RebuiltHosts};
use super::Translator;
use admitpilot_envoy_proto::{to_dynamic, validate_message};
use admitpilot_model::{ConfigObject, Kind, ObjectKey, Snapshot, Spec};
use imbl::ordmap::DiffItem;

/// Something Envoy would reject when loading a resource.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rejection {
    /// The resource, e.g. `listener 0.0.0.0_80`, `cluster outbound|80||web.shop.svc.cluster.local`.
    pub resource: String,
    /// The field path inside it (proto names), e.g. `virtual_hosts[2].routes[0].timeout`.
    pub path: String,
    /// What Envoy requires, with the rule.
    pub message: String,
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}: {}", self.resource, self.message)
        } else {
            write!(f, "{}: {}: {}", self.resource, self.path, self.message)
        }
    }
}

/// What a change does to one proxy group.
#[derive(Debug, Clone, PartialEq)]
pub struct GatewayEffect {
    /// The group.
    pub proxy: Proxy,
    /// What Envoy would reject.
    pub rejections: Vec<Rejection>,
    /// References to clusters the group does not get that the change adds (they will not take effect).
    pub left_out: Vec<LeftOut>,
}

/// Shows a proxy group as `namespace {label=value,…}`.
pub fn describe_proxy(proxy: &Proxy) -> String {
    format!("{} {}", proxy.namespace, describe_labels(proxy))
}

/// Shows a proxy group's labels as `{label=value,…}`.
pub fn describe_labels(proxy: &Proxy) -> String {
    let labels: Vec<String> = proxy
        .labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    format!("{{{}}}", labels.join(","))
}

/// The live snapshot with `object` added or replacing the object of the same key.
pub fn candidate(live: &Snapshot, object: Arc<ConfigObject>) -> Snapshot {
    let mut candidate = live.clone();
    candidate.objects.insert(object.key(), object);
    candidate
}

/// The live snapshot without the object of `key`.
pub fn candidate_without(live: &Snapshot, key: &ObjectKey) -> Snapshot {
    let mut candidate = live.clone();
    candidate.objects.remove(key);
    candidate
}

/// The namespace of the Ingress gateway checked when no gateway is connected (Higress's `higress-system`).
pub const INGRESS_GATEWAY_NAMESPACE: &str = "higress-system";

/// The proxy groups the Gateways of `snapshot` select: each Gateway's selector, in the Gateway's namespace, each
/// Gateway API Gateway's pods (labelled with its name, in its namespace) and, when there are Ingresses, the Ingress
/// gateway (`options.ingress.gateway_selector`, in [`INGRESS_GATEWAY_NAMESPACE`]).
pub fn gateway_proxies(snapshot: &Snapshot, options: &Options) -> Vec<Proxy> {
    let gateway_api = snapshot
        .of_kind(Kind::KubernetesGateway)
        .map(|object| Proxy {
            namespace: object.metadata.namespace.clone(),
            labels: [(
                super::types::GATEWAY_NAME_LABEL.to_string(),
                object.metadata.name.clone(),
            )]
            .into(),
            ..Default::default()
        });
    let mut proxies: Vec<Proxy> = snapshot
        .of_kind(Kind::Gateway)
        .filter_map(|object| match &object.spec {
            Spec::Gateway(gateway) => Some(Proxy {
                namespace: object.metadata.namespace.clone(),
                labels: gateway.selector.clone(),
                ..Default::default()
            }),
            _ => None,
        })
        .chain(gateway_api)
        .collect();
    // The Ingress gateway (Higress's runs in `higress-system`), when there are Ingresses.
    if snapshot.of_kind(Kind::Ingress).next().is_some() {
        proxies.push(Proxy {
            namespace: INGRESS_GATEWAY_NAMESPACE.into(),
            labels: options.ingress.gateway_selector.clone(),
            ..Default::default()
        });
    }
    proxies.sort();
    proxies.dedup();
    proxies
}

/// Checks every resource of `after` that differs from `before` the way Envoy does when it loads it.
pub fn check_changed(before: &GatewayResources, after: &GatewayResources) -> Vec<Rejection> {
    check_changed_among(before, after, None).rejections
}

/// A virtual host: (route configuration name, virtual host name).
type VhostKey = (String, String);

/// What is known of `before` and `after` beyond the two outputs, so that comparing them costs what changed.
struct Known<'a> {
    /// Per route configuration of `after`: the positions of the virtual hosts that may differ from `before`'s, in
    /// ascending order; every other virtual host is the same in both outputs. Virtual host names are unique within
    /// each configuration of `after` (as the translator's output has them when no EnvoyFilter patched it).
    positions: &'a FastMap<String, Vec<usize>>,
    /// Where each name and domain of `before`'s route configurations is.
    index: &'a RouteIndex,
    /// The clusters are the same in both outputs.
    same_clusters: bool,
}

/// What [`check_changed_among`] found.
#[derive(Debug, Default)]
struct Checked {
    rejections: Vec<Rejection>,
    /// The virtual hosts of `after` that differ from `before`'s.
    differing: HashSet<VhostKey>,
    /// Whether the clusters differ.
    clusters_differ: bool,
}

/// [`check_changed`], skipping what `known` says is unchanged.
fn check_changed_among(
    before: &GatewayResources,
    after: &GatewayResources,
    known: Option<&Known<'_>>,
) -> Checked {
    let mut checked = Checked::default();
    let out = &mut checked.rejections;
    let old_listeners: HashMap<&str, &Listener> = before
        .listeners
        .iter()
        .map(|l| (l.name.as_str(), l))
        .collect();
    // The first listener seen on each address, and whether it changed.
    let mut addresses: HashMap<Vec<u8>, (&str, bool)> = HashMap::new();
    for listener in &after.listeners {
        let changed = old_listeners.get(listener.name.as_str()) != Some(&listener);
        let resource = format!("listener {}", listener.name);
        if let Some(address) = &listener.address {
            match addresses.get(&address.encode_to_vec()) {
                None => {
                    addresses.insert(address.encode_to_vec(), (&listener.name, changed));
                }
                // Blame the change: the listener that is new or changed, not the one already serving.
                Some(&(other, _)) if changed => out.push(rejection(
                    &resource,
                    "address",
                    format!("listener {other} already listens on this address"),
                )),
                Some(&(other, true)) => out.push(rejection(
                    &format!("listener {other}"),
                    "address",
                    format!("listener {} already listens on this address", listener.name),
                )),
                Some(_) => {}
            }
        }
        if changed {
            check_message(listener, &resource, "", out);
            check_filter_chain_matches(listener, &resource, out);
            check_router_is_last(listener, &resource, out);
        }
    }
    if !known.is_some_and(|k| k.same_clusters) {
        let old_clusters: HashMap<&str, &Cluster> = before
            .clusters
            .iter()
            .map(|c| (c.name.as_str(), c))
            .collect();
        for cluster in &after.clusters {
            if old_clusters.get(cluster.name.as_str()) != Some(&cluster) {
                checked.clusters_differ = true;
                check_message(cluster, &format!("cluster {}", cluster.name), "", out);
            }
        }
        checked.clusters_differ |= before.clusters.len() != after.clusters.len();
    }
    let old_routes: HashMap<&str, &RouteConfiguration> = before
        .route_configs
        .iter()
        .map(|r| (r.name.as_str(), r))
        .collect();
    for config in &after.route_configs {
        let old = old_routes.get(config.name.as_str()).copied();
        match (old, known) {
            (Some(old), Some(known)) => {
                check_route_config_among(config, old, known, out, &mut checked.differing)
            }
            // An equal configuration (the common case) is skipped whole.
            _ if old == Some(config) => {}
            _ => check_route_config(config, old, out, &mut checked.differing),
        }
    }
    out.sort();
    out.dedup();
    checked
}

/// The push path's guard: checks what changed from `last` (what the proxy group was last given) to `out` with
/// [`check_changed`], and puts back the last version of every rejected listener, cluster and route configuration
/// (or leaves it out when there was none). Returns the rejections.
pub fn hold_back(out: &mut GatewayResources, last: &GatewayResources) -> Vec<Rejection> {
    let rejections = check_changed(last, out);
    restore_rejected(out, last, &rejections);
    rejections
}

/// Puts back the last version of every listener, cluster and route configuration of `out` that `rejections`
/// name (or leaves it out when `last` has none).
pub fn restore_rejected(
    out: &mut GatewayResources,
    last: &GatewayResources,
    rejections: &[Rejection],
) {
    if rejections.is_empty() {
        return;
    }
    let rejected: HashSet<&str> = rejections.iter().map(|r| r.resource.as_str()).collect();
    restore(
        &mut out.listeners,
        &last.listeners,
        |l| format!("listener {}", l.name),
        &rejected,
    );
    restore(
        &mut out.clusters,
        &last.clusters,
        |c| format!("cluster {}", c.name),
        &rejected,
    );
    restore(
        &mut out.route_configs,
        &last.route_configs,
        |r| format!("route {}", r.name),
        &rejected,
    );
}

/// Replaces each item whose resource name is in `rejected` by its namesake in `last`, or drops it.
fn restore<T: Clone>(
    items: &mut Vec<T>,
    last: &[T],
    resource: impl Fn(&T) -> String,
    rejected: &HashSet<&str>,
) {
    let old: HashMap<String, &T> = last.iter().map(|item| (resource(item), item)).collect();
    let mut kept = Vec::with_capacity(items.len());
    for item in items.drain(..) {
        let name = resource(&item);
        if !rejected.contains(name.as_str()) {
            kept.push(item);
        } else if let Some(previous) = old.get(&name) {
            kept.push((*previous).clone());
        }
    }
    *items = kept;
}

fn rejection(resource: &str, path: &str, message: String) -> Rejection {
    Rejection {
        resource: resource.to_string(),
        path: path.to_string(),
        message,
    }
}

/// protoc-gen-validate rules of one message; `prefix` is its path inside the resource.
fn check_message<M: Message + Name>(
    message: &M,
    resource: &str,
    prefix: &str,
    out: &mut Vec<Rejection>,
) {
    let dynamic = match to_dynamic(message) {
        Ok(dynamic) => dynamic,
        Err(error) => {
            out.push(rejection(resource, prefix, error.to_string()));
            return;
        }
    };
    for violation in validate_message(&dynamic) {
        let path = match (prefix.is_empty(), violation.path.is_empty()) {
            (true, _) => violation.path.clone(),
            (false, true) => prefix.to_string(),
            (false, false) => format!("{prefix}.{}", violation.path),
        };
        let message = format!("{} (Envoy rule {})", violation.message, violation.rule);
        out.push(rejection(resource, &path, message));
    }
}

/// Envoy rejects a listener two of whose filter chains have the same match.
fn check_filter_chain_matches(listener: &Listener, resource: &str, out: &mut Vec<Rejection>) {
    let mut seen: HashMap<Vec<u8>, usize> = HashMap::new();
    for (index, chain) in listener.filter_chains.iter().enumerate() {
        let key = chain
            .filter_chain_match
            .as_ref()
            .map(Message::encode_to_vec)
            .unwrap_or_default();
        if let Some(first) = seen.insert(key, index) {
            out.push(rejection(
                resource,
                &format!("filter_chains[{index}].filter_chain_match"),
                format!(
                    "the same match as filter_chains[{first}] (Envoy requires distinct matches)"
                ),
            ));
        }
    }
}

/// Envoy rejects an HTTP connection manager whose router (a terminal filter) is not its last HTTP filter
/// (`terminal filter named … must be the last filter in a http filter chain`), e.g. after an EnvoyFilter `ADD`
/// appended a filter behind it (found by tests/e2e/envoy_generated.rs).
fn check_router_is_last(listener: &Listener, resource: &str, out: &mut Vec<Rejection>) {
    let chains = listener
        .filter_chains
        .iter()
        .enumerate()
        .map(|(i, chain)| (format!("filter_chains[{i}]"), chain))
        .chain(
            listener
                .default_filter_chain
                .iter()
                .map(|chain| ("default_filter_chain".to_string(), chain)),
        );
    for (chain_path, chain) in chains {
        for (f, network_filter) in chain.filters.iter().enumerate() {
            let Some(filter::ConfigType::TypedConfig(any)) = &network_filter.config_type else {
                continue;
            };
            if any.type_url != HttpConnectionManager::type_url() {
                continue;
            }
            let Ok(hcm) = HttpConnectionManager::decode(any.value.as_slice()) else {
                continue;
            };
            let last = hcm.http_filters.len().saturating_sub(1);
            for (i, http) in hcm.http_filters.iter().enumerate() {
                let router = match &http.config_type {
                    Some(http_filter::ConfigType::TypedConfig(config)) => {
                        config.type_url == Router::type_url()
                    }
                    _ => http.name == "envoy.filters.http.router",
                };
                if router && i != last {
                    out.push(rejection(
                        resource,
                        &format!("{chain_path}.filters[{f}].typed_config.http_filters[{i}]"),
                        format!(
                            "terminal filter named {} of type envoy.filters.http.router must be the last filter in a \
                             http filter chain (filters follow it)",
                            http.name
                        ),
                    ));
                }
            }
        }
    }
}

/// The changed virtual hosts of a route configuration (those that differ go to `differing`), and the uniqueness of
/// names and domains over all of them.
fn check_route_config(
    config: &RouteConfiguration,
    old: Option<&RouteConfiguration>,
    out: &mut Vec<Rejection>,
    differing: &mut HashSet<VhostKey>,
) {
    let resource = format!("route {}", config.name);
    let old_hosts: HashMap<&str, &VirtualHost> = old
        .map(|o| {
            o.virtual_hosts
                .iter()
                .map(|h| (h.name.as_str(), h))
                .collect()
        })
        .unwrap_or_default();
    let mut names = HashSet::new();
    let mut domains: HashMap<&str, &str> = HashMap::new();
    for (index, host) in config.virtual_hosts.iter().enumerate() {
        if !names.insert(host.name.as_str()) {
            out.push(name_used_twice(&resource, index, host));
        }
        for domain in &host.domains {
            if let Some(other) = domains.insert(domain.as_str(), host.name.as_str()) {
                out.push(domain_used_twice(&resource, index, domain, other));
            }
        }
        if old_hosts.get(host.name.as_str()) != Some(&host) {
            check_host(&resource, index, host, out);
            differing.insert((config.name.clone(), host.name.clone()));
        }
    }
}

/// [`check_route_config`] of a configuration in which only the virtual hosts at the positions `known` gives may differ
/// from `old`: costs what those hosts hold. A domain the candidates share with another virtual host is reported; a
/// conflict among unchanged virtual hosts is not this change's.
fn check_route_config_among(
    config: &RouteConfiguration,
    old: &RouteConfiguration,
    known: &Known<'_>,
    out: &mut Vec<Rejection>,
    differing: &mut HashSet<VhostKey>,
) {
    let Some(positions) = known.positions.get(&config.name) else {
        return;
    };
    let candidates: Vec<usize> = positions
        .iter()
        .copied()
        .filter(|&position| position < config.virtual_hosts.len())
        .collect();
    if candidates.is_empty() {
        return;
    }
    let wanted: FastSet<&str> = candidates
        .iter()
        .map(|&position| config.virtual_hosts[position].name.as_str())
        .collect();
    let resource = format!("route {}", config.name);
    let index = known.index.get(&config.name);
    let mut domains: FastMap<&str, &str> = FastMap::default();
    // (candidate position, domain, unchanged virtual host that had the domain in `old`).
    let mut suspects: Vec<(usize, &str, &str)> = Vec::new();
    for &position in &candidates {
        let host = &config.virtual_hosts[position];
        let previous = index
            .and_then(|i| i.names.get(host.name.as_str()))
            .and_then(|&i| old.virtual_hosts.get(i));
        if previous != Some(host) {
            check_host(&resource, position, host, out);
            differing.insert((config.name.clone(), host.name.clone()));
        }
        for domain in &host.domains {
            if let Some(other) = domains.insert(domain.as_str(), host.name.as_str()) {
                out.push(domain_used_twice(&resource, position, domain, other));
            }
            let holders = index.and_then(|i| i.domains.get(domain.as_str()));
            for &holder in holders.into_iter().flatten() {
                let Some(other) = old.virtual_hosts.get(holder) else {
                    continue;
                };
                if other.name != host.name && !wanted.contains(other.name.as_str()) {
                    suspects.push((position, domain.as_str(), other.name.as_str()));
                }
            }
        }
    }
    if suspects.is_empty() {
        return;
    }
    // An unchanged virtual host is in `config` as it was in `old`, if it is still there.
    let names: FastSet<&str> = suspects.iter().map(|&(_, _, name)| name).collect();
    let present: FastSet<&str> = config
        .virtual_hosts
        .iter()
        .map(|h| h.name.as_str())
        .filter(|name| names.contains(name))
        .collect();
    for (position, domain, other) in suspects {
        if present.contains(other) {
            out.push(domain_used_twice(&resource, position, domain, other));
        }
    }
}

fn name_used_twice(resource: &str, index: usize, host: &VirtualHost) -> Rejection {
    rejection(
        resource,
        &format!("virtual_hosts[{index}].name"),
        format!("virtual host name {:?} is used twice", host.name),
    )
}

fn domain_used_twice(resource: &str, index: usize, domain: &str, other: &str) -> Rejection {
    rejection(
        resource,
        &format!("virtual_hosts[{index}].domains"),
        format!(
            "domain {domain:?} is also in virtual host {other:?} (Envoy requires unique domains)"
        ),
    )
}

fn check_host(resource: &str, index: usize, host: &VirtualHost, out: &mut Vec<Rejection>) {
    check_message(host, resource, &format!("virtual_hosts[{index}]"), out);
}

/// The positions, per route configuration of `translator`'s last output, of the virtual hosts that may differ from the
/// live output: those it rebuilt and those that differed after the call before (`differing`), wherever they are now.
fn changed_positions(
    translator: &Translator,
    rebuilt: &RebuiltHosts,
    differing: &HashSet<VhostKey>,
) -> FastMap<String, Vec<usize>> {
    let mut positions: FastMap<String, Vec<usize>> = FastMap::default();
    let found = differing.iter().filter_map(|(config, vhost)| {
        translator
            .virtual_host_position(config, vhost)
            .map(|position| (config.as_str(), position))
    });
    for (config, position) in rebuilt.iter().map(|(c, p, _)| (c, p)).chain(found) {
        match positions.get_mut(config) {
            Some(list) => list.push(position),
            None => {
                positions.insert(config.to_string(), vec![position]);
            }
        }
    }
    for list in positions.values_mut() {
        list.sort_unstable();
        list.dedup();
    }
    positions
}

/// Where each virtual host name and domain of an output's route configurations is, by configuration name.
type RouteIndex = FastMap<String, ConfigIndex>;

/// Positions of the virtual hosts of one route configuration, by name and by domain.
#[derive(Debug, Default)]
struct ConfigIndex {
    names: FastMap<String, usize>,
    domains: FastMap<String, Vec<usize>>,
}

fn route_index(resources: &GatewayResources) -> RouteIndex {
    resources
        .route_configs
        .iter()
        .map(|config| {
            let mut index = ConfigIndex::default();
            for (position, host) in config.virtual_hosts.iter().enumerate() {
                index.names.entry(host.name.clone()).or_insert(position);
                for domain in &host.domains {
                    index
                        .domains
                        .entry(domain.clone())
                        .or_default()
                        .push(position);
                }
            }
            (config.name.clone(), index)
        })
        .collect()
}

/// Checks candidate changes against every known proxy group, translating incrementally: one translator per group,
/// kept warm on the live snapshot. Safe to share between threads; checks of one group run one at a time.
#[derive(Debug, Default)]
pub struct EffectChecker {
    options: Options,
    groups: Mutex<HashMap<Proxy, Arc<Mutex<GroupState>>>>,
}

#[derive(Debug, Default)]
struct GroupState {
    translator: Translator,
    /// Version of the live snapshot `live` was translated from.
    live_version: Option<u64>,
    live: GatewayResources,
    /// Where the names and domains of `live`'s route configurations are.
    live_index: RouteIndex,
    /// Virtual hosts of the translator's last output that differ from `live`'s.
    differing: HashSet<VhostKey>,
    /// Whether the clusters of the translator's last output differ from `live`'s.
    clusters_differ: bool,
}

impl EffectChecker {
    /// A checker translating with `options`.
    pub fn new(options: Options) -> Self {
        EffectChecker {
            options,
            groups: Mutex::default(),
        }
    }

    /// What putting `object` into `live` does to each proxy group: the groups the Gateways of the candidate
    /// select, plus `connected`. Only groups with something to report are returned.
    pub fn check(
        &self,
        live: &Snapshot,
        object: Arc<ConfigObject>,
        connected: &[Proxy],
    ) -> Vec<GatewayEffect> {
        self.check_candidate(live, &candidate(live, object), connected)
    }

    /// [`EffectChecker::check`] of a candidate already built with [`candidate`].
    pub fn check_candidate(
        &self,
        live: &Snapshot,
        candidate: &Snapshot,
        connected: &[Proxy],
    ) -> Vec<GatewayEffect> {
        let mut proxies = gateway_proxies(candidate, &self.options);
        proxies.extend(connected.iter().cloned());
        proxies.sort();
        proxies.dedup();
        self.check_groups(live, candidate, proxies)
    }

    /// The objects of `next` (added, changed or removed since `live`) that, each alone applied to `live`, make
    /// `proxy`'s gateway reject a resource, with what it would reject: the webhook's check, object by object,
    /// for changes that did not pass the webhook. `None` when more than `limit` objects changed (each costs one
    /// incremental translation).
    pub fn culprits(
        &self,
        live: &Snapshot,
        next: &Snapshot,
        proxy: &Proxy,
        limit: usize,
    ) -> Option<Vec<(ObjectKey, Vec<Rejection>)>> {
        let changes: Vec<(&ObjectKey, Option<&Arc<ConfigObject>>)> = live
            .objects
            .diff(&next.objects)
            .take(limit + 1)
            .map(|item| match item {
                DiffItem::Add(key, object) => (key, Some(object)),
                DiffItem::Update {
                    new: (key, object), ..
                } => (key, Some(object)),
                DiffItem::Remove(key, _) => (key, None),
            })
            .collect();
        if changes.len() > limit {
            return None;
        }
        let mut found = Vec::new();
        for (key, object) in changes {
            let candidate = match object {
                Some(object) => candidate(live, Arc::clone(object)),
                None => candidate_without(live, key),
            };
            let rejections: Vec<Rejection> = self
                .check_groups(live, &candidate, vec![proxy.clone()])
                .into_iter()
                .flat_map(|effect| effect.rejections)
                .collect();
            if !rejections.is_empty() {
                found.push((key.clone(), rejections));
            }
        }
        Some(found)
    }

    /// What `candidate` does to each of `proxies` compared with `live`.
    fn check_groups(
        &self,
        live: &Snapshot,
        candidate: &Snapshot,
        proxies: Vec<Proxy>,
    ) -> Vec<GatewayEffect> {
        let mut effects = Vec::new();
        for proxy in proxies {
            let group = self.group(&proxy);
            let mut state = group.lock().unwrap_or_else(PoisonError::into_inner);
            if state.live_version != Some(live.version) {
                state.live = state.translator.translate(live, &proxy).clone();
                state.live_index = route_index(&state.live);
                state.live_version = Some(live.version);
                state.differing.clear();
                state.clusters_differ = false;
            }
            let GroupState {
                translator,
                live,
                live_index,
                differing,
                clusters_differ,
                ..
            } = &mut *state;
            translator.translate(candidate, &proxy);
            // A virtual host differs from live only if this call rebuilt it or it differed after the last one;
            // the same holds for the clusters.
            let positions = translator
                .rebuilt_virtual_hosts()
                .map(|rebuilt| changed_positions(translator, rebuilt, differing));
            let same_clusters = translator.reused_clusters() && !*clusters_differ;
            let known = positions.as_ref().map(|positions| Known {
                positions,
                index: live_index,
                same_clusters,
            });
            let after = translator.output();
            let checked = check_changed_among(live, after, known.as_ref());
            let rejections = checked.rejections;
            *differing = checked.differing;
            *clusters_differ = if same_clusters {
                false
            } else {
                checked.clusters_differ
            };
            let left_out: Vec<LeftOut> = after
                .left_out
                .iter()
                .filter(|item| !live.left_out.contains(item))
                .cloned()
                .collect();
            if !rejections.is_empty() || !left_out.is_empty() {
                effects.push(GatewayEffect {
                    proxy,
                    rejections,
                    left_out,
                });
            }
        }
        effects
    }

    fn group(&self, proxy: &Proxy) -> Arc<Mutex<GroupState>> {
        let mut groups = self.groups.lock().unwrap_or_else(PoisonError::into_inner);
        groups
            .entry(proxy.clone())
            .or_insert_with(|| {
                Arc::new(Mutex::new(GroupState {
                    translator: Translator::new(self.options.clone()),
                    ..GroupState::default()
                }))
            })
            .clone()
    }
}

/// Groups effects by what they say, for messages: each rejection with the groups it applies to.
pub fn rejections_by_message(effects: &[GatewayEffect]) -> BTreeMap<String, Vec<String>> {
    let mut by_message: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for effect in effects {
        for rejection in &effect.rejections {
            by_message
                .entry(rejection.to_string())
                .or_default()
                .push(describe_proxy(&effect.proxy));
        }
    }
    by_message
}

#[cfg(test)]
mod tests {
    use super::*;
    use admitpilot_model::decode::test_object as object;
    use serde_json::json;

    fn live() -> Snapshot {
        let gateway = object(
            json!({"apiVersion": "networking.istio.io/v1", "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": "istio-system"},
            "spec": {"selector": {"istio": "ingressgateway"}, "servers": [
                {"port": {"number": 80, "name": "http", "protocol": "HTTP"}, "hosts": ["*"]}]}}),
        );
        let mut snapshot = Snapshot {
            version: 7,
            ..Snapshot::default()
        };
        snapshot.objects.insert(gateway.key(), gateway);
        snapshot
    }

    fn vs(prefix: &str) -> Arc<ConfigObject> {
        object(
            json!({"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
            "metadata": {"name": "api", "namespace": "istio-system"},
            "spec": {"hosts": ["*"], "gateways": ["gw"], "http": [{"match": [{"uri": {"prefix": prefix}}],
                "route": [{"destination": {"host": "web.shop.svc.cluster.local"}}]}]}}),
        )
    }

    #[test]
    fn a_change_envoy_accepts_has_no_effect_to_report() {
        let checker = EffectChecker::default();
        assert_eq!(checker.check(&live(), vs("/api"), &[]), Vec::new());
        // Checked again against the same live snapshot (the translator now holds the first candidate).
        assert_eq!(checker.check(&live(), vs("/v2"), &[]), Vec::new());
    }

    /// An EnvoyFilter adding a second listener on the Gateway's address.
    fn duplicate_listener() -> Arc<ConfigObject> {
        object(
            json!({"apiVersion": "networking.istio.io/v1alpha3", "kind": "EnvoyFilter",
            "metadata": {"name": "extra", "namespace": "istio-system"},
            "spec": {"configPatches": [{"applyTo": "LISTENER", "match": {"context": "GATEWAY"},
                "patch": {"operation": "ADD", "value": {"name": "extra", "address": {"socket_address":
                    {"address": "0.0.0.0", "port_value": 80}}, "filter_chains": [{"filters": [
                    {"name": "envoy.filters.network.tcp_proxy", "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy",
                        "stat_prefix": "t", "cluster": "BlackHoleCluster"}}]}]}}}]}}),
        )
    }

    #[test]
    fn a_second_listener_on_the_same_address_is_rejected_for_the_selected_gateway() {
        let effects = EffectChecker::default().check(&live(), duplicate_listener(), &[]);
        assert_eq!(effects.len(), 1, "{effects:?}");
        assert_eq!(
            describe_proxy(&effects[0].proxy),
            "istio-system {istio=ingressgateway}"
        );
        let rejection = &effects[0].rejections[0];
        assert_eq!(rejection.path, "address");
        assert!(
            rejection
                .message
                .contains("already listens on this address"),
            "{rejection}"
        );
    }

    /// The push path's search: of two changes, only the one that breaks the gateway alone is named.
    #[test]
    fn culprits_are_the_changed_objects_that_break_the_gateway_alone() {
        let base = live();
        let mut next = base.clone();
        next.version = 8;
        let good = vs("/api");
        next.objects.insert(good.key(), good);
        let bad = duplicate_listener();
        next.objects.insert(bad.key(), Arc::clone(&bad));
        let proxy = gateway_proxies(&base, &Options::default()).remove(0);
        let checker = EffectChecker::default();
        let found = checker.culprits(&base, &next, &proxy, 8).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, bad.key());
        assert_eq!(found[0].1[0].path, "address");
        // More changes than the limit: no search.
        assert_eq!(checker.culprits(&base, &next, &proxy, 1), None);
    }

    #[test]
    fn changed_resources_are_checked_with_envoys_rules_and_unchanged_ones_are_not() {
        let before = GatewayResources {
            clusters: vec![Cluster {
                name: "old".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut after = before.clone();
        // Unchanged (even though it breaks a rule): not checked again.
        assert!(check_changed(&before, &after).is_empty());
        after.clusters.push(Cluster {
            name: String::new(),
            connect_timeout: Some(envoy_types::pb::google::protobuf::Duration {
                seconds: -1,
                nanos: 0,
            }),
            ..Default::default()
        });
        let rejections = check_changed(&before, &after);
        assert!(
            rejections
                .iter()
                .any(|r| r.resource == "cluster " && r.path == "connect_timeout"),
            "{rejections:?}"
        );
    }

    #[test]
    fn the_push_path_keeps_the_last_version_of_a_rejected_resource() {
        let good = Cluster {
            name: "web".into(),
            ..Default::default()
        };
        let last = GatewayResources {
            clusters: vec![good.clone()],
            ..Default::default()
        };
        let bad = |name: &str| Cluster {
            name: name.into(),
            connect_timeout: Some(envoy_types::pb::google::protobuf::Duration {
                seconds: -1,
                nanos: 0,
            }),
            ..Default::default()
        };
        let mut out = GatewayResources {
            clusters: vec![bad("new"), bad("web")],
            ..Default::default()
        };
        let rejections = hold_back(&mut out, &last);
        assert_eq!(rejections.len(), 2, "{rejections:?}");
        assert_eq!(out.clusters, [good]);
    }

    #[test]
    fn a_duplicate_address_is_blamed_on_the_new_listener_whatever_the_order() {
        use envoy_types::pb::envoy::config::core::v3::{
            address, socket_address, Address, SocketAddress,
        };
        let listener = |name: &str| Listener {
            name: name.into(),
            address: Some(Address {
                address: Some(address::Address::SocketAddress(SocketAddress {
                    address: "0.0.0.0".into(),
                    port_specifier: Some(socket_address::PortSpecifier::PortValue(80)),
                    ..Default::default()
                })),
            }),
            ..Default::default()
        };
        let before = GatewayResources {
            listeners: vec![listener("serving")],
            ..Default::default()
        };
        for order in [["added", "serving"], ["serving", "added"]] {
            let after = GatewayResources {
                listeners: order.iter().map(|name| listener(name)).collect(),
                ..Default::default()
            };
            let rejections = check_changed(&before, &after);
            assert_eq!(rejections.len(), 1, "{rejections:?}");
            assert_eq!(rejections[0].resource, "listener added");
        }
    }

    /// The incremental check sees a candidate's conflict with an unchanged virtual host that is still there, and
    /// with another candidate, but not one with a virtual host the change removed; it looks only at the positions it
    /// is given.
    #[test]
    fn candidates_are_checked_against_the_unchanged_virtual_hosts_still_present() {
        let host = |name: &str, domain: &str| VirtualHost {
            name: name.into(),
            domains: vec![domain.into()],
            ..Default::default()
        };
        let config = |hosts: Vec<VirtualHost>| GatewayResources {
            route_configs: vec![RouteConfiguration {
                name: "http.80".into(),
                virtual_hosts: hosts,
                ..Default::default()
            }],
            ..Default::default()
        };
        let before = config(vec![host("a", "a.example.com"), host("b", "b.example.com")]);
        let index = route_index(&before);
        let check = |after: &GatewayResources, changed: &[usize]| {
            let positions: FastMap<String, Vec<usize>> =
                [("http.80".to_string(), changed.to_vec())]
                    .into_iter()
                    .collect();
            let known = Known {
                positions: &positions,
                index: &index,
                same_clusters: true,
            };
            check_changed_among(&before, after, Some(&known))
        };
        // `c` takes a's domain while `a` stays: rejected, blamed on `c`.
        let after = config(vec![
            host("a", "a.example.com"),
            host("b", "b.example.com"),
            host("c", "a.example.com"),
        ]);
        let checked = check(&after, &[2]);
        assert_eq!(checked.rejections.len(), 1, "{:?}", checked.rejections);
        assert_eq!(checked.rejections[0].path, "virtual_hosts[2].domains");
        assert!(checked.rejections[0].message.contains("\"a\""));
        assert!(checked.differing.contains(&("http.80".into(), "c".into())));
        // The same domain, but `a` is gone: accepted.
        let after = config(vec![host("b", "b.example.com"), host("c", "a.example.com")]);
        assert_eq!(check(&after, &[1]).rejections, Vec::new());
        // Two candidates with one domain, and a changed one that takes a domain nobody has.
        let after = config(vec![
            host("a", "a.example.com"),
            host("b", "e.example.com"),
            host("c", "c.example.com"),
            host("d", "c.example.com"),
        ]);
        let checked = check(&after, &[1, 2, 3]);
        let paths: Vec<&str> = checked.rejections.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(paths, ["virtual_hosts[3].domains"], "{paths:?}");
        assert!(checked.differing.contains(&("http.80".into(), "b".into())));
    }

    #[test]
    fn duplicate_domains_in_a_route_configuration_are_rejected() {
        let host = |name: &str| VirtualHost {
            name: name.into(),
            domains: vec!["a.example.com".into()],
            ..Default::default()
        };
        let after = GatewayResources {
            route_configs: vec![RouteConfiguration {
                name: "http.80".into(),
                virtual_hosts: vec![host("a"), host("b")],
                ..Default::default()
            }],
            ..Default::default()
        };
        let rejections = check_changed(&GatewayResources::default(), &after);
        assert_eq!(rejections.len(), 1, "{rejections:?}");
        assert_eq!(rejections[0].path, "virtual_hosts[1].domains");
    }
}
