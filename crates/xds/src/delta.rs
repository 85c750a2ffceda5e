//! Incremental (Delta) ADS protocol: takes `DeltaDiscoveryRequest`s and group configurations, yields encoded
//! `DeltaDiscoveryResponse`s carrying only changed resources (the group's shared bytes) and
//! `removed_resources`. Tracks per stream and type the subscription, the version of every resource the client
//! holds (seeded from `initial_resource_versions` on reconnect), in-flight nonces and per-resource rejections,
//! so a NACKed resource is not resent until it changes or a type it depends on
//! ([`ResourceType::depends_on`]) is pushed.
//!
//! A resource subscribed to by name that the group does not have is listed in `removed_resources` (the xDS way
//! of saying "does not exist", so the client need not wait for a timeout), once per subscription; if it
//! appears later it is sent like any other change.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse,
};

use super::metrics::Api;
use super::names::NameSet;
use super::resources::{parse_version, Encoded, GroupConfig, ResourceType, TypeResources, TypeSet};
use super::sotw::WILDCARD;
use super::status::Version;
use super::stream::{parse_nonce, Protocol, StreamBase};
use super::wire::{encode_message, WireMessage};

/// Unanswered responses remembered per type; older ones count as stale when answered.
const MAX_IN_FLIGHT: usize = 16;

/// After this many insertions at once, a per-stream map is rebuilt: entries inserted one by one leave B-tree
/// nodes about half full, while a map built from a sorted iterator packs them (about 40% less memory).
const COMPACT_AFTER: usize = 16;

/// Field number of `resources` in `DeltaDiscoveryResponse`.
const RESOURCES_TAG: u32 = 2;

/// What the server believes the client has for one subscribed resource name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Held {
    /// This version (sent by us, or announced in `initial_resource_versions`).
    Version(u64),
    /// Unknown: the client rejected what we sent, or announced a version we did not issue. Never equal to a
    /// real version, so the resource is resent when it changes and reported removed when it goes away.
    Unknown,
    /// The client was told the resource does not exist.
    Absent,
}

/// What the client holds of one type, by name: the versions it has, and the names marked [`Held::Unknown`]
/// or [`Held::Absent`] (each name in at most one of the two). When the client holds exactly the group's
/// resources, which is the steady state, `versions` is the group's own map and the stream stores no copy.
#[derive(Debug, Default)]
struct HeldMap {
    versions: Arc<BTreeMap<Arc<str>, u64>>,
    marks: BTreeMap<Arc<str>, Held>,
}

impl HeldMap {
    fn get(&self, name: &str) -> Option<Held> {
        match self.versions.get(name) {
            Some(hash) => Some(Held::Version(*hash)),
            None => self.marks.get(name).copied(),
        }
    }

    fn contains(&self, name: &str) -> bool {
        self.versions.contains_key(name) || self.marks.contains_key(name)
    }

    /// Records `held` for `name`; returns what was held before.
    fn insert(&mut self, name: Arc<str>, held: Held) -> Option<Held> {
        let before = self.remove(&name);
        match held {
            Held::Version(hash) => {
                Arc::make_mut(&mut self.versions).insert(name, hash);
            }
            mark => {
                self.marks.insert(name, mark);
            }
        }
        before
    }

    fn remove(&mut self, name: &str) -> Option<Held> {
        if self.versions.contains_key(name) {
            Arc::make_mut(&mut self.versions)
                .remove(name)
                .map(Held::Version)
        } else {
            self.marks.remove(name)
        }
    }

    /// Keeps only the names `keep` accepts (the shared versions map is copied only if one goes).
    fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        if !self.versions.keys().all(|name| keep(name)) {
            Arc::make_mut(&mut self.versions).retain(|name, _| keep(name));
        }
        self.marks.retain(|name, _| keep(name));
    }

    /// Every name with what is held for it (versions first, then marks).
    fn iter(&self) -> impl Iterator<Item = (&Arc<str>, Held)> {
        let versions = self
            .versions
            .iter()
            .map(|(name, hash)| (name, Held::Version(*hash)));
        versions.chain(self.marks.iter().map(|(name, held)| (name, *held)))
    }

    /// Resources the client holds (not counting names it was told do not exist).
    fn count(&self) -> usize {
        self.versions.len() + self.marks.values().filter(|h| **h != Held::Absent).count()
    }

    /// After many insertions: shares the group's versions map if this one is equal to it, else packs it.
    fn settle(&mut self, all: &TypeResources, inserted: usize) {
        if Arc::ptr_eq(&self.versions, &all.hashes) {
            return;
        }
        if *self.versions == *all.hashes {
            self.versions = all.hashes.clone();
        } else if inserted > COMPACT_AFTER {
            let packed = Arc::make_mut(&mut self.versions);
            *packed = std::mem::take(packed).into_iter().collect();
        }
    }
}

#[derive(Debug)]
struct InFlight {
    nonce: u64,
    sent_at: Instant,
    /// Snapshot version of the response.
    version: u64,
    /// Resources it carried: name and content hash.
    resources: Vec<(Arc<str>, u64)>,
}

#[derive(Debug, Default)]
struct TypeState {
    requested: bool,
    wildcard: bool,
    /// Names subscribed explicitly; the group's own `Arc`s where the resource exists.
    names: NameSet,
    /// What the client holds.
    held: HeldMap,
    /// Versions (content hashes) the client rejected, by name.
    rejected: BTreeMap<Arc<str>, u64>,
    in_flight: VecDeque<InFlight>,
}

fn shared_name(all: &TypeResources, name: &str) -> Arc<str> {
    all.shared_name(name).unwrap_or_else(|| Arc::from(name))
}

impl TypeState {
    fn subscribed(&self, name: &str) -> bool {
        self.wildcard || self.names.contains(name)
    }

    fn apply_subscriptions(
        &mut self,
        kind: ResourceType,
        request: &DeltaDiscoveryRequest,
        all: &TypeResources,
    ) {
        let first = !self.requested;
        self.requested = true;
        if first {
            for (name, version) in &request.initial_resource_versions {
                let held = parse_version(version).map_or(Held::Unknown, Held::Version);
                self.held.insert(shared_name(all, name), held);
            }
            self.held
                .settle(all, request.initial_resource_versions.len());
            if request.resource_names_subscribe.is_empty() && kind.wildcard_by_default() {
                self.wildcard = true;
            }
        }
        let mut names: Vec<Arc<str>> = self.names.iter().cloned().collect();
        for name in &request.resource_names_subscribe {
            if name == WILDCARD {
                self.wildcard = true;
            } else if !self.names.contains(name) {
                names.push(shared_name(all, name));
                if !request.initial_resource_versions.contains_key(name) && !self.wildcard {
                    // A (re)subscribed resource must be sent again, whatever the client held before.
                    self.held.remove(name);
                }
            }
        }
        let unsubscribed: BTreeSet<&str> = request
            .resource_names_unsubscribe
            .iter()
            .map(String::as_str)
            .collect();
        if unsubscribed.contains(WILDCARD) {
            self.wildcard = false;
        }
        if !unsubscribed.is_empty() {
            names.retain(|name| !unsubscribed.contains(&**name));
            for name in &unsubscribed {
                if self.held.get(name) == Some(Held::Absent) {
                    self.held.remove(name);
                }
            }
        }
        self.names = NameSet::new(names, all);
        if !self.wildcard {
            let names = &self.names;
            self.held.retain(|name| names.contains(name));
            self.rejected.retain(|name, _| names.contains(name));
        }
    }

    /// Subscribed names the client may hold or has not been told about that the group does not have.
    fn missing(&self, all: &TypeResources) -> BTreeSet<Arc<str>> {
        let mut missing: BTreeSet<Arc<str>> = self
            .held
            .iter()
            .filter(|(name, held)| {
                *held != Held::Absent && self.subscribed(name) && !all.by_name.contains_key(*name)
            })
            .map(|(name, _)| name.clone())
            .collect();
        missing.extend(
            self.names
                .iter()
                .filter(|name| !all.by_name.contains_key(*name) && !self.held.contains(name))
                .cloned(),
        );
        missing
    }
}

/// Delta state of one stream.
pub(crate) struct DeltaStream {
    /// Per type of the stream's family, indexed by [`ResourceType::index`].
    types: Vec<TypeState>,
    base: StreamBase,
}

impl DeltaStream {
    /// Builds the response that brings the client up to `config`, or `None` when it is already there
    /// (unless `always`).
    fn diff(
        &mut self,
        kind: ResourceType,
        config: &GroupConfig,
        always: bool,
    ) -> Option<WireMessage> {
        let all = config.of(kind);
        let state = &mut self.types[kind.index()];
        let stale = |entry: &&Encoded| {
            state.held.get(&entry.name) != Some(Held::Version(entry.hash))
                && state.rejected.get(&entry.name) != Some(&entry.hash)
        };
        let changed: Vec<&Encoded> = if state.wildcard {
            all.by_name.values().map(|e| &**e).filter(stale).collect()
        } else {
            state
                .names
                .iter()
                .filter_map(|name| all.by_name.get(name).map(|e| &**e))
                .filter(stale)
                .collect()
        };
        let removed = state.missing(all);
        if changed.is_empty() && removed.is_empty() && !always {
            return None;
        }
        let mut added = 0;
        for entry in &changed {
            if state
                .held
                .insert(entry.name.clone(), Held::Version(entry.hash))
                .is_none()
            {
                added += 1;
            }
            state.rejected.remove(&entry.name);
        }
        let changed_clusters: Vec<Arc<str>> = match kind {
            ResourceType::Cluster => changed.iter().map(|e| e.name.clone()).collect(),
            _ => Vec::new(),
        };
        for name in &removed {
            state.rejected.remove(name);
            if state.names.contains(name) {
                state.held.insert(name.clone(), Held::Absent);
            } else {
                state.held.remove(name);
            }
        }
        state.held.settle(all, added);
        let nonce = self.base.next_nonce();
        let version = config.snapshot_version;
        state.in_flight.push_back(InFlight {
            nonce,
            sent_at: Instant::now(),
            version,
            resources: changed.iter().map(|e| (e.name.clone(), e.hash)).collect(),
        });
        if state.in_flight.len() > MAX_IN_FLIGHT {
            state.in_flight.pop_front();
        }
        let held = state.held.count();
        let header = DeltaDiscoveryResponse {
            system_version_info: version.to_string(),
            type_url: kind.type_url().to_string(),
            removed_resources: removed.iter().map(|name| name.to_string()).collect(),
            nonce: nonce.to_string(),
            ..Default::default()
        };
        let fields: Vec<(&[u8], &Bytes)> = changed
            .iter()
            .map(|e| (&e.delta_head[..], &e.any))
            .collect();
        let message = encode_message(&header, RESOURCES_TAG, &fields);
        self.base
            .sent(kind, version, Version::Snapshot(version), nonce, held);
        self.resend_endpoints_of(&changed_clusters);
        Some(message)
    }

    /// Marks the endpoints of clusters just sent as to be sent again, changed or not. Envoy keeps an added or
    /// updated EDS cluster warming until a `ClusterLoadAssignment` for it arrives, and over Delta it does not
    /// subscribe again to a name it already holds, so without this a cluster-only change would wait for
    /// `initial_fetch_timeout` (15 s by default). The next Endpoint diff (same push, right after CDS) carries them.
    fn resend_endpoints_of(&mut self, clusters: &[Arc<str>]) {
        let endpoints = &mut self.types[ResourceType::Endpoint.index()];
        for cluster in clusters {
            if let Some(Held::Version(_)) = endpoints.held.get(cluster) {
                endpoints.held.insert(cluster.clone(), Held::Unknown);
            }
        }
    }

    /// Records the client's answer to one of our responses.
    fn answer(&mut self, kind: ResourceType, request: &DeltaDiscoveryRequest) {
        let state = &mut self.types[kind.index()];
        let answered = parse_nonce(&request.response_nonce)
            .and_then(|nonce| state.in_flight.iter().position(|f| f.nonce == nonce))
            .and_then(|position| state.in_flight.remove(position));
        let Some(answered) = answered else {
            self.base.stale(kind, &request.response_nonce);
            return;
        };
        if state.in_flight.is_empty() {
            // An idle stream keeps no buffer for responses it is not waiting on.
            state.in_flight = VecDeque::new();
        }
        let Some(error) = &request.error_detail else {
            self.base.acked(
                kind,
                Some(answered.sent_at),
                Version::Snapshot(answered.version),
            );
            return;
        };
        for (name, hash) in &answered.resources {
            if state.held.get(name) == Some(Held::Version(*hash)) {
                state.held.insert(name.clone(), Held::Unknown);
            }
            state.rejected.insert(name.clone(), *hash);
        }
        let names = answered
            .resources
            .iter()
            .map(|(name, _)| name.to_string())
            .collect();
        self.base.nacked(
            kind,
            Version::Snapshot(answered.version),
            &error.message,
            names,
        );
    }
}

impl Protocol for DeltaStream {
    type Request = DeltaDiscoveryRequest;
    const API: Api = Api::Delta;

    fn node(request: &DeltaDiscoveryRequest) -> Option<&Node> {
        request.node.as_ref()
    }

    fn type_url(request: &DeltaDiscoveryRequest) -> &str {
        &request.type_url
    }

    fn new(base: StreamBase) -> Self {
        DeltaStream {
            types: base.family.per_type(),
            base,
        }
    }

    fn base(&self) -> &StreamBase {
        &self.base
    }

    fn unserved(&mut self, type_url: &str) -> Option<WireMessage> {
        if !self.base.first_unserved(type_url) {
            return None;
        }
        let header = DeltaDiscoveryResponse {
            type_url: type_url.to_string(),
            nonce: self.base.next_nonce().to_string(),
            ..Default::default()
        };
        Some(encode_message(&header, RESOURCES_TAG, &[]))
    }

    fn on_request(
        &mut self,
        kind: ResourceType,
        request: DeltaDiscoveryRequest,
        config: &GroupConfig,
    ) -> Vec<WireMessage> {
        if !request.response_nonce.is_empty() {
            self.answer(kind, &request);
        }
        let first = !self.types[kind.index()].requested;
        let changes_subscription = first
            || !request.resource_names_subscribe.is_empty()
            || !request.resource_names_unsubscribe.is_empty();
        if !changes_subscription {
            return Vec::new();
        }
        let state = &mut self.types[kind.index()];
        state.apply_subscriptions(kind, &request, config.of(kind));
        self.base
            .subscribed(kind, state.wildcard, state.names.len());
        let mut out: Vec<WireMessage> = self.diff(kind, config, first).into_iter().collect();
        if kind == ResourceType::Cluster && self.types[ResourceType::Endpoint.index()].requested {
            out.extend(self.diff(ResourceType::Endpoint, config, false));
        }
        out
    }

    fn on_push(&mut self, config: &GroupConfig) -> Vec<WireMessage> {
        let mut out = Vec::new();
        // The types just sent.
        let mut sent = TypeSet::default();
        for &kind in self.base.family.types() {
            let state = &mut self.types[kind.index()];
            if !state.requested {
                continue;
            }
            if sent.contains_any(kind.depends_on()) {
                // Rejected resources are retried, unchanged, once something they depend on was just sent.
                state.rejected.clear();
            }
            if let Some(response) = self.diff(kind, config, false) {
                sent.insert(kind);
                out.push(response);
                self.base
                    .metrics
                    .push_latency(kind, config.published.elapsed().as_secs_f64());
            }
        }
        self.base
            .connection
            .set_snapshot_version(config.snapshot_version);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::resources::Family;
    use super::*;
    use admitpilot_translate::GatewayResources;
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use envoy_types::pb::google::rpc::Status as RpcStatus;

    // A configuration with these clusters (and one listener, which these tests leave alone).
    use super::super::resources::clusters_and_listener as config;

    fn stream() -> DeltaStream {
        let registry = Arc::new(super::super::status::StatusRegistry::default());
        let identity = super::super::node::NodeIdentity {
            id: "gw".into(),
            proxy: Default::default(),
        };
        DeltaStream::new(StreamBase::new(
            registry.open(&identity, Api::Delta, Family::Envoy),
            Default::default(),
            Family::Envoy,
        ))
    }

    fn request(nonce: &str, error: Option<&str>) -> DeltaDiscoveryRequest {
        DeltaDiscoveryRequest {
            type_url: ResourceType::Cluster.type_url().into(),
            response_nonce: nonce.into(),
            error_detail: error.map(|message| RpcStatus {
                message: message.into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// Decodes the type URL and resource names of a Delta response.
    fn decoded(message: &WireMessage) -> (String, Vec<String>) {
        use prost::Message;
        let bytes = message.to_vec();
        let response = DeltaDiscoveryResponse::decode(&bytes[5..]).unwrap();
        let names = response.resources.iter().map(|r| r.name.clone()).collect();
        (response.type_url, names)
    }

    #[test]
    fn a_cluster_only_change_resends_its_unchanged_endpoints_after_the_cluster() {
        use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
        let config = |timeout_secs: i64| {
            let resources = GatewayResources {
                clusters: ["a", "b"]
                    .iter()
                    .map(|name| Cluster {
                        name: name.to_string(),
                        connect_timeout: Some(envoy_types::pb::google::protobuf::Duration {
                            seconds: if *name == "a" { timeout_secs } else { 1 },
                            nanos: 0,
                        }),
                        ..Default::default()
                    })
                    .collect(),
                endpoints: ["a", "b"]
                    .iter()
                    .map(|name| ClusterLoadAssignment {
                        cluster_name: name.to_string(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            };
            GroupConfig::encode(&resources, 1, Instant::now(), None)
        };
        let before = config(1);
        let mut stream = stream();
        assert_eq!(
            stream
                .on_request(ResourceType::Cluster, request("", None), &before)
                .len(),
            1
        );
        let endpoints = DeltaDiscoveryRequest {
            type_url: ResourceType::Endpoint.type_url().into(),
            resource_names_subscribe: vec!["a".into(), "b".into()],
            ..Default::default()
        };
        stream.on_request(ResourceType::Endpoint, endpoints, &before);

        // Only cluster "a" changes; its endpoints are the same, yet they follow it in the same push.
        let after = config(2);
        let pushed: Vec<_> = stream.on_push(&after).iter().map(decoded).collect();
        assert_eq!(
            pushed,
            [
                (
                    ResourceType::Cluster.type_url().to_string(),
                    vec!["a".to_string()]
                ),
                (
                    ResourceType::Endpoint.type_url().to_string(),
                    vec!["a".to_string()]
                ),
            ]
        );
        // Nothing changed since: nothing more is sent.
        assert!(stream.on_push(&after).is_empty());
    }

    #[test]
    fn a_rejected_listener_is_resent_when_clusters_change() {
        let listeners = |nonce: &str, error: Option<&str>| DeltaDiscoveryRequest {
            type_url: ResourceType::Listener.type_url().into(),
            ..request(nonce, error)
        };
        let before = config(&["a"]);
        let mut stream = stream();
        stream.on_request(ResourceType::Cluster, request("", None), &before);
        assert_eq!(
            stream
                .on_request(ResourceType::Listener, listeners("", None), &before)
                .len(),
            1
        );
        stream.on_request(ResourceType::Cluster, request("1", None), &before);
        stream.on_request(
            ResourceType::Listener,
            listeners("2", Some("unknown cluster 'b'")),
            &before,
        );
        // Nothing changed: the rejected listener is not resent.
        assert!(stream.on_push(&before).is_empty());

        // The listener is unchanged, but the cluster it needed now exists: it goes out after the cluster.
        let after = config(&["a", "b"]);
        let pushed: Vec<_> = stream.on_push(&after).iter().map(decoded).collect();
        assert_eq!(
            pushed,
            [
                (
                    ResourceType::Cluster.type_url().to_string(),
                    vec!["b".to_string()]
                ),
                (
                    ResourceType::Listener.type_url().to_string(),
                    vec!["http".to_string()]
                ),
            ]
        );
        assert!(stream.on_push(&after).is_empty());
    }

    #[test]
    fn a_stream_holding_everything_shares_the_groups_version_map_until_it_differs() {
        let config = config(&["a", "b"]);
        let all = config.of(ResourceType::Cluster);
        let mut stream = stream();
        let sent = stream.on_request(ResourceType::Cluster, request("", None), &config);
        assert_eq!(sent.len(), 1);
        let held = &stream.types[ResourceType::Cluster.index()].held;
        assert!(Arc::ptr_eq(&held.versions, &all.hashes));
        assert_eq!(held.count(), 2);

        // A NACK marks what the response carried as unknown: the stream now keeps its own record.
        stream.on_request(ResourceType::Cluster, request("1", Some("bad")), &config);
        let held = &stream.types[ResourceType::Cluster.index()].held;
        assert!(!Arc::ptr_eq(&held.versions, &all.hashes));
        assert_eq!(held.get("a"), Some(Held::Unknown));
        assert_eq!(held.count(), 2);
    }
}
