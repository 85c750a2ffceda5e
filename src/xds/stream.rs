//! Stream driver shared by SotW and Delta: takes an inbound request stream, identifies the node from the first
//! request, joins its proxy group and feeds requests and group pushes to a protocol state machine, sending its
//! responses through a bounded channel (a slow client only ever blocks its own task).

use std::sync::Arc;

use envoy_types::pb::envoy::config::core::v3::Node;
use tokio::sync::{mpsc, watch};
use tonic::{Status, Streaming};

use super::cache::ConfigCache;
use super::metrics::{Api, XdsMetrics};
use super::node::NodeIdentity;
use super::resources::GroupConfig;
use super::status::{ConnectionHandle, StatusRegistry};

/// Responses buffered per stream before the stream task waits for the client to read.
pub(crate) const RESPONSE_BUFFER: usize = 8;

/// What a stream task needs from the server.
#[derive(Clone, Debug)]
pub(crate) struct Shared {
    pub cache: Arc<ConfigCache>,
    pub status: Arc<StatusRegistry>,
    pub metrics: XdsMetrics,
    pub shutdown: watch::Receiver<bool>,
}

/// A per-stream protocol state machine (SotW or Delta).
pub(crate) trait Protocol: Send + 'static {
    type Request: Send + 'static;
    type Response: Send + 'static;
    const API: Api;

    fn node(request: &Self::Request) -> Option<&Node>;
    fn new(connection: ConnectionHandle, metrics: XdsMetrics) -> Self;
    /// Handles one client request against the group's current configuration.
    fn on_request(&mut self, request: Self::Request, config: &GroupConfig) -> Vec<Self::Response>;
    /// Handles a new group configuration.
    fn on_push(&mut self, config: &GroupConfig) -> Vec<Self::Response>;
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

async fn send_all<T>(tx: &mpsc::Sender<Result<T, Status>>, responses: Vec<T>) -> bool {
    for response in responses {
        if tx.send(Ok(response)).await.is_err() {
            return false;
        }
    }
    true
}

/// Runs one stream until the client goes away, an error occurs or the server shuts down.
pub(crate) async fn drive<P: Protocol>(
    mut inbound: Streaming<P::Request>,
    tx: mpsc::Sender<Result<P::Response, Status>>,
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
        let _ = tx.send(Err(status)).await;
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
    let mut config = group.borrow_and_update().clone();
    let mut state = P::new(connection, shared.metrics.clone());
    let mut shutdown = shared.shutdown.clone();
    let mut responses = state.on_request(first, &config);
    loop {
        if !send_all(&tx, std::mem::take(&mut responses)).await {
            break;
        }
        tokio::select! {
            _ = shutdown.changed() => break,
            message = inbound.message() => match message {
                Ok(Some(request)) => responses = state.on_request(request, &config),
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
