//! Incremental (Delta) ADS protocol: takes `DeltaDiscoveryRequest`s and group configurations, yields
//! `DeltaDiscoveryResponse`s carrying only changed resources and `removed_resources`. Tracks per stream and type
//! the subscription, the version of every resource the client holds (seeded from `initial_resource_versions`
//! on reconnect), in-flight nonces and per-resource rejections, so a NACKed resource is not resent until it
//! changes.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, Resource,
};

use super::metrics::{Api, XdsMetrics};
use super::resources::{GroupConfig, ResourceType};
use super::sotw::WILDCARD;
use super::status::{unix_now, ConnectionHandle, NackStatus};
use super::stream::Protocol;

/// Unanswered responses remembered per type; older ones count as stale when answered.
const MAX_IN_FLIGHT: usize = 16;

/// Version recorded for a resource whose state on the client is unknown (after a NACK): never equal to a real
/// version, so it is resent when it changes and reported removed when it goes away.
const UNKNOWN: &str = "";

#[derive(Debug)]
struct InFlight {
    nonce: String,
    sent_at: Instant,
    version: String,
    resources: Vec<(Arc<str>, Arc<str>)>,
}

#[derive(Debug, Default)]
struct TypeState {
    requested: bool,
    wildcard: bool,
    names: BTreeSet<String>,
    /// What the client holds: name → version.
    held: BTreeMap<Arc<str>, Arc<str>>,
    /// Versions the client rejected: name → version.
    rejected: BTreeMap<Arc<str>, Arc<str>>,
    in_flight: VecDeque<InFlight>,
}

impl TypeState {
    fn subscribed(&self, name: &str) -> bool {
        self.wildcard || self.names.contains(name)
    }

    fn apply_subscriptions(&mut self, kind: ResourceType, request: &DeltaDiscoveryRequest) {
        let first = !self.requested;
        self.requested = true;
        if first {
            for (name, version) in &request.initial_resource_versions {
                self.held
                    .insert(Arc::from(name.as_str()), Arc::from(version.as_str()));
            }
            if request.resource_names_subscribe.is_empty() && kind.wildcard_by_default() {
                self.wildcard = true;
            }
        }
        for name in &request.resource_names_subscribe {
            if name == WILDCARD {
                self.wildcard = true;
            } else if self.names.insert(name.clone())
                && !request.initial_resource_versions.contains_key(name)
                && !self.wildcard
            {
                // A (re)subscribed resource must be sent again, whatever the client held before.
                self.held.remove(name.as_str());
            }
        }
        for name in &request.resource_names_unsubscribe {
            if name == WILDCARD {
                self.wildcard = false;
            } else {
                self.names.remove(name);
            }
        }
        if !self.wildcard {
            let names = &self.names;
            self.held.retain(|name, _| names.contains(&**name));
            self.rejected.retain(|name, _| names.contains(&**name));
        }
    }
}

/// Delta state of one stream.
pub(crate) struct DeltaStream {
    types: [TypeState; 6],
    nonce: u64,
    connection: ConnectionHandle,
    name: String,
    metrics: XdsMetrics,
}

impl DeltaStream {
    /// Builds the response that brings the client up to `config`, or `None` when it is already there
    /// (unless `always`).
    fn diff(
        &mut self,
        kind: ResourceType,
        config: &GroupConfig,
        always: bool,
    ) -> Option<DeltaDiscoveryResponse> {
        let all = config.of(kind);
        let state = &mut self.types[kind.index()];
        let mut resources = Vec::new();
        let mut sent = Vec::new();
        let mut consider = |entry: &Arc<super::resources::Encoded>| {
            let version = &entry.version;
            if state.held.get(&entry.name) == Some(version)
                || state.rejected.get(&entry.name) == Some(version)
            {
                return;
            }
            sent.push((entry.name.clone(), version.clone()));
            resources.push(Resource {
                name: entry.name.to_string(),
                version: version.to_string(),
                resource: Some(entry.any.clone()),
                ..Default::default()
            });
        };
        if state.wildcard {
            all.by_name.values().for_each(&mut consider);
        } else {
            state
                .names
                .iter()
                .filter_map(|name| all.by_name.get(name.as_str()))
                .for_each(&mut consider);
        }
        let removed: Vec<Arc<str>> = state
            .held
            .keys()
            .filter(|name| state.subscribed(name) && !all.by_name.contains_key(*name))
            .cloned()
            .collect();
        if resources.is_empty() && removed.is_empty() && !always {
            return None;
        }
        for (name, version) in &sent {
            state.held.insert(name.clone(), version.clone());
            state.rejected.remove(name);
        }
        for name in &removed {
            state.held.remove(name);
            state.rejected.remove(name);
        }
        self.nonce += 1;
        let nonce = self.nonce.to_string();
        let version = config.snapshot_version.to_string();
        state.in_flight.push_back(InFlight {
            nonce: nonce.clone(),
            sent_at: Instant::now(),
            version: version.clone(),
            resources: sent,
        });
        if state.in_flight.len() > MAX_IN_FLIGHT {
            state.in_flight.pop_front();
        }
        let held = state.held.len();
        self.connection
            .set_snapshot_version(config.snapshot_version);
        self.connection.update(kind, |status| {
            status.sent_version = Some(version.clone());
            status.sent_nonce = Some(nonce.clone());
            status.resources = held;
        });
        self.metrics.pushed(kind);
        Some(DeltaDiscoveryResponse {
            system_version_info: version,
            resources,
            type_url: kind.type_url(),
            removed_resources: removed.iter().map(|name| name.to_string()).collect(),
            nonce,
            ..Default::default()
        })
    }

    /// Records the client's answer to one of our responses.
    fn answer(&mut self, kind: ResourceType, request: &DeltaDiscoveryRequest) {
        let state = &mut self.types[kind.index()];
        let Some(position) = state
            .in_flight
            .iter()
            .position(|f| f.nonce == request.response_nonce)
        else {
            self.metrics.stale_nonce();
            tracing::debug!(proxy = %self.name, %kind, nonce = %request.response_nonce, "ignoring answer to an unknown nonce");
            return;
        };
        let Some(answered) = state.in_flight.remove(position) else {
            return;
        };
        match &request.error_detail {
            None => {
                self.metrics
                    .acked(kind, answered.sent_at.elapsed().as_secs_f64());
                self.connection.update(kind, |status| {
                    status.acked_version = Some(answered.version);
                });
            }
            Some(error) => {
                let unknown: Arc<str> = Arc::from(UNKNOWN);
                for (name, version) in &answered.resources {
                    if state.held.get(name) == Some(version) {
                        state.held.insert(name.clone(), unknown.clone());
                    }
                    state.rejected.insert(name.clone(), version.clone());
                }
                let names: Vec<String> = answered
                    .resources
                    .iter()
                    .map(|(n, _)| n.to_string())
                    .collect();
                tracing::warn!(
                    proxy = %self.name,
                    %kind,
                    version = %answered.version,
                    resources = ?names,
                    error = %error.message,
                    "proxy rejected xDS update; it keeps its last accepted configuration"
                );
                self.metrics.nacked(kind);
                let nack = NackStatus {
                    version: answered.version,
                    message: error.message.clone(),
                    resources: names,
                    at_unix: unix_now(),
                };
                self.connection
                    .update(kind, |status| status.last_nack = Some(nack));
            }
        }
    }
}

impl Protocol for DeltaStream {
    type Request = DeltaDiscoveryRequest;
    type Response = DeltaDiscoveryResponse;
    const API: Api = Api::Delta;

    fn node(request: &DeltaDiscoveryRequest) -> Option<&Node> {
        request.node.as_ref()
    }

    fn new(connection: ConnectionHandle, metrics: XdsMetrics) -> Self {
        let name = connection.name();
        DeltaStream {
            types: Default::default(),
            nonce: 0,
            connection,
            name,
            metrics,
        }
    }

    fn on_request(
        &mut self,
        request: DeltaDiscoveryRequest,
        config: &GroupConfig,
    ) -> Vec<DeltaDiscoveryResponse> {
        let Some(kind) = ResourceType::from_type_url(&request.type_url) else {
            tracing::debug!(proxy = %self.name, type_url = %request.type_url, "ignoring request for an unserved type");
            return Vec::new();
        };
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
        state.apply_subscriptions(kind, &request);
        let (wildcard, subscribed) = (state.wildcard, state.names.len());
        self.connection.update(kind, |status| {
            status.wildcard = wildcard;
            status.subscribed = subscribed;
        });
        self.diff(kind, config, first).into_iter().collect()
    }

    fn on_push(&mut self, config: &GroupConfig) -> Vec<DeltaDiscoveryResponse> {
        let mut out = Vec::new();
        for kind in ResourceType::PUSH_ORDER {
            if !self.types[kind.index()].requested {
                continue;
            }
            if let Some(response) = self.diff(kind, config, false) {
                out.push(response);
                self.metrics
                    .push_latency(kind, config.published.elapsed().as_secs_f64());
            }
        }
        self.connection
            .set_snapshot_version(config.snapshot_version);
        out
    }
}
