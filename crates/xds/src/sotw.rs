//! State-of-the-world ADS protocol: takes `DiscoveryRequest`s and group configurations, yields encoded
//! `DiscoveryResponse`s built from the group's shared resource bytes. Per type: subscription (legacy/explicit
//! wildcard or names), nonce, sent and ACKed versions. Versions are content hashes of the response, so an
//! unchanged response is never resent, and a NACKed one is resent when its content changes or when a type it
//! depends on ([`ResourceType::depends_on`]) is pushed: a listener rejected for naming a cluster not yet sent
//! passes once that cluster arrives.
//!
//! Names the group does not have are remembered and answered with the resources that do exist: SotW has no
//! way to say "does not exist" (Envoy waits for its `initial_fetch_timeout` on a missing EDS/RDS resource),
//! and a resource that appears later is pushed as soon as it exists.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};

use super::metrics::Api;
use super::names::NameSet;
use super::resources::{
    set_version, version_string, Encoded, GroupConfig, ResourceType, TypeResources, TypeSet,
};
use super::status::Version;
use super::stream::{parse_nonce, Protocol, StreamBase};
use super::wire::{encode_message, WireMessage};

/// Explicit wildcard subscription name.
pub(crate) const WILDCARD: &str = "*";

/// Field number of `resources` in `DiscoveryResponse`.
const RESOURCES_TAG: u32 = 2;

#[derive(Debug, Default)]
struct TypeState {
    /// The client has asked for this type at least once.
    requested: bool,
    wildcard: bool,
    /// Subscribed names; the group's own `Arc`s where the resource exists (and its whole list when the
    /// client asks for every name).
    names: NameSet,
    /// Nonce of the last response (0: none yet).
    last_nonce: u64,
    sent_version: Option<u64>,
    sent_at: Option<Instant>,
    /// Answer the next request even if nothing changed (a cluster/listener update re-creates Envoy's EDS/RDS
    /// watches, which must be answered to finish warming).
    always_respond: bool,
    /// The client rejected the last response: it is sent again when something it depends on changes.
    nacked: bool,
}

impl TypeState {
    /// Applies the names of a request; returns whether the subscription grew.
    fn subscribe(&mut self, kind: ResourceType, names: &[String], all: &TypeResources) -> bool {
        let first = !self.requested;
        self.requested = true;
        if names.is_empty() {
            // Legacy wildcard: an empty first request for LDS/CDS, kept while requests stay empty.
            let wildcard =
                self.wildcard && self.names.is_empty() || first && kind.wildcard_by_default();
            let grew = wildcard && !self.wildcard;
            self.wildcard = wildcard;
            self.names = NameSet::default();
            return grew;
        }
        let wildcard = names.iter().any(|n| n == WILDCARD);
        let new: Vec<Arc<str>> = names
            .iter()
            .filter(|n| *n != WILDCARD)
            .map(|name| match all.shared_name(name) {
                Some(shared) => shared,
                None => self
                    .names
                    .find(name)
                    .cloned()
                    .unwrap_or_else(|| Arc::from(name.as_str())),
            })
            .collect();
        let new = NameSet::new(new, all);
        let grew =
            (wildcard && !self.wildcard) || new.iter().any(|name| !self.names.contains(name));
        self.wildcard = wildcard;
        self.names = new;
        grew
    }

    /// The resources the subscription gets now, in name order, and their version.
    fn chosen<'a>(&self, all: &'a TypeResources) -> (Vec<&'a Encoded>, u64) {
        if self.wildcard {
            return (all.by_name.values().map(|e| &**e).collect(), all.version);
        }
        let chosen: Vec<&Encoded> = self
            .names
            .iter()
            .filter_map(|name| all.by_name.get(name).map(|e| &**e))
            .collect();
        let version = if chosen.len() == all.by_name.len() {
            all.version
        } else {
            set_version(chosen.iter().copied())
        };
        (chosen, version)
    }

    /// The version the subscription would get now.
    fn desired_version(&self, all: &TypeResources) -> u64 {
        if self.wildcard {
            all.version
        } else {
            self.chosen(all).1
        }
    }
}

/// SotW state of one stream.
pub(crate) struct SotwStream {
    /// Per type of the stream's family, indexed by [`ResourceType::index`].
    types: Vec<TypeState>,
    base: StreamBase,
}

impl SotwStream {
    fn response(&mut self, kind: ResourceType, config: &GroupConfig) -> WireMessage {
        let all = config.of(kind);
        let (chosen, version) = self.types[kind.index()].chosen(all);
        let nonce = self.base.next_nonce();
        let header = DiscoveryResponse {
            version_info: version_string(version),
            type_url: kind.type_url().to_string(),
            nonce: nonce.to_string(),
            ..Default::default()
        };
        let fields: Vec<(&[u8], &Bytes)> = chosen.iter().map(|e| (&[][..], &e.any)).collect();
        let message = encode_message(&header, RESOURCES_TAG, &fields);
        let count = chosen.len();
        let state = &mut self.types[kind.index()];
        state.last_nonce = nonce;
        state.sent_version = Some(version);
        state.sent_at = Some(Instant::now());
        state.always_respond = false;
        state.nacked = false;
        match kind {
            ResourceType::Cluster => {
                self.types[ResourceType::Endpoint.index()].always_respond = true
            }
            ResourceType::Listener => self.types[ResourceType::Route.index()].always_respond = true,
            _ => {}
        }
        self.base.sent(
            kind,
            config.snapshot_version,
            Version::Hash(version),
            nonce,
            count,
        );
        message
    }
}

impl Protocol for SotwStream {
    type Request = DiscoveryRequest;
    const API: Api = Api::Sotw;

    fn node(request: &DiscoveryRequest) -> Option<&Node> {
        request.node.as_ref()
    }

    fn type_url(request: &DiscoveryRequest) -> &str {
        &request.type_url
    }

    fn new(base: StreamBase) -> Self {
        SotwStream {
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
        let header = DiscoveryResponse {
            type_url: type_url.to_string(),
            nonce: self.base.next_nonce().to_string(),
            ..Default::default()
        };
        Some(encode_message(&header, RESOURCES_TAG, &[]))
    }

    fn on_request(
        &mut self,
        kind: ResourceType,
        request: DiscoveryRequest,
        config: &GroupConfig,
    ) -> Vec<WireMessage> {
        let all = config.of(kind);
        let state = &mut self.types[kind.index()];
        let answered = !request.response_nonce.is_empty();
        // A nonce we never sent on this stream means the client reconnected: treat as a fresh request.
        let initial = !answered || state.last_nonce == 0;
        if !initial && parse_nonce(&request.response_nonce) != Some(state.last_nonce) {
            self.base.stale(kind, &request.response_nonce);
            return Vec::new();
        }
        if !initial {
            let sent = Version::Hash(state.sent_version.unwrap_or_default());
            if let Some(error) = &request.error_detail {
                state.nacked = true;
                state.subscribe(kind, &request.resource_names, all);
                self.base.nacked(kind, sent, &error.message, Vec::new());
                return Vec::new();
            }
            self.base.acked(kind, state.sent_at.take(), sent);
        }
        let grew = state.subscribe(kind, &request.resource_names, all);
        self.base
            .subscribed(kind, state.wildcard, state.names.len());
        if !state.wildcard && state.names.is_empty() {
            // The client dropped every name (its clusters or listeners went): Envoy ignores a response for a type
            // it no longer watches, and never acknowledges it. Nothing to answer.
            state.always_respond = false;
            return Vec::new();
        }
        let force = initial || grew || state.always_respond;
        if force || state.sent_version != Some(state.desired_version(all)) {
            vec![self.response(kind, config)]
        } else {
            Vec::new()
        }
    }

    fn on_push(&mut self, config: &GroupConfig) -> Vec<WireMessage> {
        let mut out = Vec::new();
        // The types just sent.
        let mut sent = TypeSet::default();
        for &kind in self.base.family.types() {
            let state = &self.types[kind.index()];
            if !state.requested || state.last_nonce == 0 {
                continue;
            }
            // A rejected response is retried, unchanged, once something it depends on was just sent.
            let retry = state.nacked && sent.contains_any(kind.depends_on());
            if !retry && state.sent_version == Some(state.desired_version(config.of(kind))) {
                continue;
            }
            // None of the names asked for exists any more (their clusters or listeners went with this push): in
            // SotW an absent EDS/RDS/SDS resource is not removed, and Envoy, which drops those watches, ignores
            // such a response without ever acknowledging it. Nothing is sent; the client asks again if it needs.
            if !retry && !state.wildcard && state.chosen(config.of(kind)).0.is_empty() {
                continue;
            }
            sent.insert(kind);
            out.push(self.response(kind, config));
            self.base
                .metrics
                .push_latency(kind, config.published.elapsed().as_secs_f64());
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
    use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
    use prost::Message;

    fn stream() -> SotwStream {
        let registry = Arc::new(super::super::status::StatusRegistry::default());
        let identity = super::super::node::NodeIdentity {
            id: "gw".into(),
            proxy: Default::default(),
        };
        SotwStream::new(StreamBase::new(
            registry.open(&identity, Api::Sotw, Family::Envoy),
            Default::default(),
            Family::Envoy,
        ))
    }

    #[test]
    fn a_rejected_listener_is_resent_when_clusters_change() {
        let config = super::super::resources::clusters_and_listener;
        let mut stream = stream();
        let request = |kind: ResourceType, nonce: &str, error: Option<&str>| DiscoveryRequest {
            type_url: kind.type_url().into(),
            response_nonce: nonce.into(),
            error_detail: error.map(|message| envoy_types::pb::google::rpc::Status {
                message: message.into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let before = config(&["a"]);
        assert_eq!(
            stream
                .on_request(
                    ResourceType::Cluster,
                    request(ResourceType::Cluster, "", None),
                    &before
                )
                .len(),
            1
        );
        assert_eq!(
            stream
                .on_request(
                    ResourceType::Listener,
                    request(ResourceType::Listener, "", None),
                    &before
                )
                .len(),
            1
        );
        stream.on_request(
            ResourceType::Cluster,
            request(ResourceType::Cluster, "1", None),
            &before,
        );
        let nack = request(ResourceType::Listener, "2", Some("unknown cluster 'b'"));
        assert!(stream
            .on_request(ResourceType::Listener, nack, &before)
            .is_empty());

        // The listener is unchanged, but the cluster it needed now exists: both go out, clusters first.
        let after = config(&["a", "b"]);
        let types: Vec<String> = stream
            .on_push(&after)
            .iter()
            .map(|m| {
                DiscoveryResponse::decode(&m.to_vec()[5..])
                    .unwrap()
                    .type_url
            })
            .collect();
        assert_eq!(
            types,
            [
                ResourceType::Cluster.type_url(),
                ResourceType::Listener.type_url()
            ]
        );
        // Accepted or not, it is not sent again while nothing changes.
        assert!(stream.on_push(&after).is_empty());
    }

    #[test]
    fn response_bytes_decode_as_a_discovery_response() {
        let resources = GatewayResources {
            endpoints: vec![
                ClusterLoadAssignment {
                    cluster_name: "a".into(),
                    ..Default::default()
                },
                ClusterLoadAssignment {
                    cluster_name: "b".repeat(4000),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let config = GroupConfig::encode(&resources, 1, Instant::now(), None);
        let mut stream = stream();
        let request = DiscoveryRequest {
            type_url: ResourceType::Endpoint.type_url().into(),
            resource_names: vec!["a".into(), "b".repeat(4000), "missing".into()],
            ..Default::default()
        };
        let out = stream.on_request(ResourceType::Endpoint, request, &config);
        assert_eq!(out.len(), 1);
        let bytes = out[0].to_vec();
        assert_eq!(bytes[0], 0);
        let len = u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]) as usize;
        assert_eq!(len + 5, bytes.len());
        let response = DiscoveryResponse::decode(&bytes[5..]).unwrap();
        assert_eq!(response.nonce, "1");
        assert_eq!(response.resources.len(), 2);
        assert_eq!(
            response.version_info,
            version_string(config.of(ResourceType::Endpoint).version)
        );
        let names: Vec<String> = response
            .resources
            .iter()
            .map(|any| {
                ClusterLoadAssignment::decode(any.value.as_slice())
                    .unwrap()
                    .cluster_name
            })
            .collect();
        assert_eq!(names, ["a".to_string(), "b".repeat(4000)]);
    }
}
