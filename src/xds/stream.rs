//! Stream driver shared by SotW and Delta: takes an inbound request stream, identifies the node from the first
//! request, joins its proxy group and feeds requests and group pushes to a protocol state machine, queueing its
//! pre-encoded responses for the call's response body through a bounded channel (a slow client only ever
//! blocks its own task). Also the bookkeeping both protocols share: nonces, ACK/NACK metrics and status.

use std::sync::Arc;
use std::time::Instant;

use envoy_types::pb::envoy::config::core::v3::Node;
use prost::Message;
use tokio::sync::{mpsc, watch};
use tonic::{Status, Streaming};

use super::cache::ConfigCache;
use super::metrics::{Api, XdsMetrics};
use super::node::NodeIdentity;
use super::resources::{GroupConfig, ResourceType};
use super::status::{unix_now, ConnectionHandle, NackStatus, StatusRegistry};
use super::wire::{Outbound, WireMessage};

/// Responses buffered per stream before the stream task waits for the client to read.
pub(crate) const RESPONSE_BUFFER: usize = 8;

/// What a stream task needs from the server.
#[derive(Clone, Debug)]
pub(crate) struct Shared {
    pub cache: Arc<ConfigCache>,
    pub status: Arc<StatusRegistry>,
    pub metrics: XdsMetrics,
    pub shutdown: watch::Receiver<bool>,
    /// Largest response a stream may send.
    pub max_response_bytes: usize,
}

/// A per-stream protocol state machine (SotW or Delta).
pub(crate) trait Protocol: Send + 'static {
    type Request: Message + Default + Send + 'static;
    const API: Api;

    fn node(request: &Self::Request) -> Option<&Node>;
    fn type_url(request: &Self::Request) -> &str;
    fn new(base: StreamBase) -> Self;
    /// Handles one client request for a served type against the group's current configuration.
    fn on_request(
        &mut self,
        kind: ResourceType,
        request: Self::Request,
        config: &GroupConfig,
    ) -> Vec<WireMessage>;
    /// Handles a new group configuration.
    fn on_push(&mut self, config: &GroupConfig) -> Vec<WireMessage>;
}

/// What every protocol state machine keeps about its stream: identity for logs and status, metrics and the
/// nonce counter (nonces are decimal numbers, unique per stream).
pub(crate) struct StreamBase {
    pub connection: ConnectionHandle,
    pub name: String,
    pub metrics: XdsMetrics,
    nonce: u64,
}

impl StreamBase {
    /// The state of a new stream.
    pub fn new(connection: ConnectionHandle, metrics: XdsMetrics) -> Self {
        StreamBase {
            name: connection.name(),
            connection,
            metrics,
            nonce: 0,
        }
    }

    /// The nonce for the next response.
    pub fn next_nonce(&mut self) -> u64 {
        self.nonce += 1;
        self.nonce
    }

    /// Records a response sent: status (version, nonce, resources the client will hold) and metrics.
    pub fn sent(&self, kind: ResourceType, snapshot: u64, version: &str, nonce: u64, held: usize) {
        self.connection.set_snapshot_version(snapshot);
        self.connection.update(kind, |status| {
            status.sent_version = Some(version.to_string());
            status.sent_nonce = Some(nonce.to_string());
            status.resources = held;
        });
        self.metrics.pushed(kind);
    }

    /// Records the subscription of one type after a request changed it.
    pub fn subscribed(&self, kind: ResourceType, wildcard: bool, names: usize) {
        self.connection.update(kind, |status| {
            status.wildcard = wildcard;
            status.subscribed = names;
        });
    }

    /// Records an ACK of the response sent at `sent_at` carrying `version`.
    pub fn acked(&self, kind: ResourceType, sent_at: Option<Instant>, version: String) {
        if let Some(sent_at) = sent_at {
            self.metrics.acked(kind, sent_at.elapsed().as_secs_f64());
        }
        self.connection
            .update(kind, |status| status.acked_version = Some(version));
    }

    /// Records a NACK of `version` (`resources`: the rejected names, when the protocol knows them).
    pub fn nacked(
        &self,
        kind: ResourceType,
        version: String,
        message: &str,
        resources: Vec<String>,
    ) {
        tracing::warn!(
            proxy = %self.name,
            %kind,
            %version,
            ?resources,
            error = %message,
            "proxy rejected xDS update; it keeps its last accepted configuration"
        );
        self.metrics.nacked(kind);
        let nack = NackStatus {
            version,
            message: message.to_string(),
            resources,
            at_unix: unix_now(),
        };
        self.connection
            .update(kind, |status| status.last_nack = Some(Box::new(nack)));
    }

    /// Records a request answering a nonce this stream is not waiting for.
    pub fn stale(&self, kind: ResourceType, nonce: &str) {
        self.metrics.stale_nonce();
        tracing::debug!(proxy = %self.name, %kind, %nonce, "ignoring request with a stale or unknown nonce");
    }
}

/// Parses a nonce this server sent (`None` for anything else, which then matches no response).
pub(crate) fn parse_nonce(nonce: &str) -> Option<u64> {
    nonce.parse().ok()
}

struct OpenStream {
    metrics: XdsMetrics,
    api: Api,
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.metrics.stream_closed(self.api);
    }
}

/// Queues responses for the client; gives up when the client is gone or the server shuts down (a client that
/// stopped reading must not hold up shutdown). A response over the size limit ends the call with an error.
async fn send_all(
    tx: &mpsc::Sender<Outbound>,
    responses: Vec<WireMessage>,
    shutdown: &mut watch::Receiver<bool>,
    max_bytes: usize,
) -> bool {
    for response in responses {
        let len = response.len();
        let (outbound, last) = if len > max_bytes {
            let status = Status::resource_exhausted(format!(
                "xDS response of {len} bytes exceeds the limit of {max_bytes} bytes"
            ));
            tracing::error!(%status, "ending xDS stream");
            (Outbound::Fail(status), true)
        } else {
            (Outbound::Message(response), false)
        };
        tokio::select! {
            sent = tx.send(outbound) => if sent.is_err() || last { return false },
            _ = shutdown.changed() => return false,
        }
    }
    true
}

/// Hands a request to the state machine if it is for a served type.
fn handle<P: Protocol>(
    state: &mut P,
    request: P::Request,
    config: &GroupConfig,
    name: &str,
) -> Vec<WireMessage> {
    let Some(kind) = ResourceType::from_type_url(P::type_url(&request)) else {
        tracing::debug!(proxy = %name, type_url = %P::type_url(&request), "ignoring request for an unserved type");
        return Vec::new();
    };
    state.on_request(kind, request, config)
}

/// Runs one stream until the client goes away, an error occurs or the server shuts down.
pub(crate) async fn drive<P: Protocol>(
    mut inbound: Streaming<P::Request>,
    tx: mpsc::Sender<Outbound>,
    shared: Shared,
) {
    let first = match inbound.message().await {
        Ok(Some(request)) => request,
        Ok(None) => return,
        Err(status) => {
            tracing::debug!(%status, "xDS stream failed before its first request");
            return;
        }
    };
    let Some(node) = P::node(&first) else {
        let status =
            Status::invalid_argument("the first xDS request on a stream must carry a node");
        // The client may already be gone; nothing else to do.
        let _ = tx.send(Outbound::Fail(status)).await;
        return;
    };
    let identity = NodeIdentity::from_node(node);
    let connection = shared.status.open(&identity, P::API);
    let name = connection.name();
    shared.metrics.stream_opened(P::API);
    let _open = OpenStream {
        metrics: shared.metrics.clone(),
        api: P::API,
    };
    tracing::info!(
        proxy = %name,
        namespace = %identity.proxy.namespace,
        api = P::API.as_str(),
        "xDS stream opened"
    );
    let mut group = shared.cache.subscribe(&identity.proxy);
    drop(identity);
    let mut config = group.borrow_and_update().clone();
    let mut state = P::new(StreamBase::new(connection, shared.metrics.clone()));
    let mut shutdown = shared.shutdown.clone();
    let mut responses = handle(&mut state, first, &config, &name);
    loop {
        let batch = std::mem::take(&mut responses);
        if !send_all(&tx, batch, &mut shutdown, shared.max_response_bytes).await {
            break;
        }
        tokio::select! {
            _ = shutdown.changed() => break,
            message = inbound.message() => match message {
                Ok(Some(request)) => responses = handle(&mut state, request, &config, &name),
                Ok(None) => break,
                Err(status) => {
                    tracing::debug!(proxy = %name, %status, "xDS stream ended with an error");
                    break;
                }
            },
            changed = group.changed() => {
                if changed.is_err() {
                    break;
                }
                config = group.borrow_and_update().clone();
                responses = state.on_push(&config);
            }
        }
    }
    tracing::info!(proxy = %name, api = P::API.as_str(), "xDS stream closed");
}
