//! State-of-the-world ADS protocol: takes `DiscoveryRequest`s and group configurations, yields
//! `DiscoveryResponse`s. Per type: subscription (legacy/explicit wildcard or names), nonce, sent and ACKed
//! versions. Versions are content hashes of the response, so an unchanged response is never resent and a NACKed
//! one is not resent until the content changes.

use std::collections::BTreeSet;
use std::time::Instant;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use envoy_types::pb::google::protobuf::Any;

use super::metrics::{Api, XdsMetrics};
use super::resources::{set_version, GroupConfig, ResourceType};
use super::status::{unix_now, ConnectionHandle, NackStatus};
use super::stream::Protocol;

/// Explicit wildcard subscription name.
pub(crate) const WILDCARD: &str = "*";

#[derive(Debug, Default)]
struct TypeState {
    /// The client has asked for this type at least once.
    requested: bool,
    wildcard: bool,
    names: BTreeSet<String>,
    last_nonce: Option<String>,
    sent_version: Option<String>,
    sent_at: Option<Instant>,
    acked_version: Option<String>,
    /// Answer the next request even if nothing changed (a cluster/listener update re-creates Envoy's EDS/RDS
    /// watches, which must be answered to finish warming).
    always_respond: bool,
}

impl TypeState {
    /// Applies the names of a request; returns whether the subscription grew.
    fn subscribe(&mut self, kind: ResourceType, names: &[String]) -> bool {
        let first = !self.requested;
        self.requested = true;
        if names.is_empty() {
            // Legacy wildcard: an empty first request for LDS/CDS, kept while requests stay empty.
            let wildcard =
                self.wildcard && self.names.is_empty() || first && kind.wildcard_by_default();
            let grew = wildcard && !self.wildcard;
            self.wildcard = wildcard;
            self.names.clear();
            return grew;
        }
        let wildcard = names.iter().any(|n| n == WILDCARD);
        let new: BTreeSet<String> = names.iter().filter(|n| *n != WILDCARD).cloned().collect();
        let grew = (wildcard && !self.wildcard) || new.difference(&self.names).next().is_some();
        self.wildcard = wildcard;
        self.names = new;
        grew
    }
}

/// SotW state of one stream.
pub(crate) struct SotwStream {
    types: [TypeState; 6],
    nonce: u64,
    connection: ConnectionHandle,
    name: String,
    metrics: XdsMetrics,
}

impl SotwStream {
    fn response(&mut self, kind: ResourceType, config: &GroupConfig) -> DiscoveryResponse {
        let state = &self.types[kind.index()];
        let all = config.of(kind);
        let (version, resources): (String, Vec<Any>) = if state.wildcard {
            (
                all.version.clone(),
                all.by_name.values().map(|e| e.any.clone()).collect(),
            )
        } else {
            let chosen: Vec<_> = state
                .names
                .iter()
                .filter_map(|name| all.by_name.get(name.as_str()))
                .collect();
            (
                set_version(chosen.iter().map(|e| (&*e.name, &*e.version))),
                chosen.iter().map(|e| e.any.clone()).collect(),
            )
        };
        self.nonce += 1;
        let nonce = self.nonce.to_string();
        let count = resources.len();
        let state = &mut self.types[kind.index()];
        state.last_nonce = Some(nonce.clone());
        state.sent_version = Some(version.clone());
        state.sent_at = Some(Instant::now());
        state.always_respond = false;
        match kind {
            ResourceType::Cluster => {
                self.types[ResourceType::Endpoint.index()].always_respond = true
            }
            ResourceType::Listener => self.types[ResourceType::Route.index()].always_respond = true,
            _ => {}
        }
        self.connection
            .set_snapshot_version(config.snapshot_version);
        self.connection.update(kind, |status| {
            status.sent_version = Some(version.clone());
            status.sent_nonce = Some(nonce.clone());
            status.resources = count;
        });
        self.metrics.pushed(kind);
        DiscoveryResponse {
            version_info: version,
            resources,
            type_url: kind.type_url(),
            nonce,
            ..Default::default()
        }
    }

    /// The version the current subscription would get now.
    fn desired_version(&self, kind: ResourceType, config: &GroupConfig) -> String {
        let state = &self.types[kind.index()];
        let all = config.of(kind);
        if state.wildcard {
            return all.version.clone();
        }
        set_version(
            state
                .names
                .iter()
                .filter_map(|name| all.by_name.get(name.as_str()))
                .map(|e| (&*e.name, &*e.version)),
        )
    }
}

impl Protocol for SotwStream {
    type Request = DiscoveryRequest;
    type Response = DiscoveryResponse;
    const API: Api = Api::Sotw;

    fn node(request: &DiscoveryRequest) -> Option<&Node> {
        request.node.as_ref()
    }

    fn new(connection: ConnectionHandle, metrics: XdsMetrics) -> Self {
        let name = connection.name();
        SotwStream {
            types: Default::default(),
            nonce: 0,
            connection,
            name,
            metrics,
        }
    }

    fn on_request(
        &mut self,
        request: DiscoveryRequest,
        config: &GroupConfig,
    ) -> Vec<DiscoveryResponse> {
        let Some(kind) = ResourceType::from_type_url(&request.type_url) else {
            tracing::debug!(proxy = %self.name, type_url = %request.type_url, "ignoring request for an unserved type");
            return Vec::new();
        };
        let state = &mut self.types[kind.index()];
        let answered = !request.response_nonce.is_empty();
        // A nonce we never sent on this stream means the client reconnected: treat as a fresh request.
        let initial = !answered || state.last_nonce.is_none();
        if !initial && state.last_nonce.as_deref() != Some(request.response_nonce.as_str()) {
            self.metrics.stale_nonce();
            tracing::debug!(proxy = %self.name, %kind, nonce = %request.response_nonce, "ignoring request with a stale nonce");
            return Vec::new();
        }
        if !initial {
            if let Some(error) = &request.error_detail {
                let rejected = state.sent_version.clone().unwrap_or_default();
                tracing::warn!(
                    proxy = %self.name,
                    %kind,
                    version = %rejected,
                    error = %error.message,
                    "proxy rejected xDS update; it keeps its last accepted configuration"
                );
                self.metrics.nacked(kind);
                state.subscribe(kind, &request.resource_names);
                let nack = NackStatus {
                    version: rejected,
                    message: error.message.clone(),
                    resources: Vec::new(),
                    at_unix: unix_now(),
                };
                self.connection
                    .update(kind, |status| status.last_nack = Some(nack));
                return Vec::new();
            }
            state.acked_version = state.sent_version.clone();
            if let Some(sent_at) = state.sent_at.take() {
                self.metrics.acked(kind, sent_at.elapsed().as_secs_f64());
            }
            let acked = state.acked_version.clone();
            self.connection
                .update(kind, |status| status.acked_version = acked);
        }
        let grew = state.subscribe(kind, &request.resource_names);
        let (wildcard, subscribed) = (state.wildcard, state.names.len());
        self.connection.update(kind, |status| {
            status.wildcard = wildcard;
            status.subscribed = subscribed;
        });
        let state = &mut self.types[kind.index()];
        let force = initial || grew || state.always_respond;
        let sent = state.sent_version.clone();
        let changed = sent.as_deref() != Some(&self.desired_version(kind, config));
        if force || changed {
            vec![self.response(kind, config)]
        } else {
            Vec::new()
        }
    }

    fn on_push(&mut self, config: &GroupConfig) -> Vec<DiscoveryResponse> {
        let mut out = Vec::new();
        for kind in ResourceType::PUSH_ORDER {
            let state = &self.types[kind.index()];
            if !state.requested || state.last_nonce.is_none() {
                continue;
            }
            if state.sent_version.as_deref() == Some(&self.desired_version(kind, config)) {
                continue;
            }
            out.push(self.response(kind, config));
            self.metrics
                .push_latency(kind, config.published.elapsed().as_secs_f64());
        }
        self.connection
            .set_snapshot_version(config.snapshot_version);
        out
    }
}
