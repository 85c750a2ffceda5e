//! Sync status: stream handlers record what they sent, what was ACKed and the last NACK per type; this module
//! keeps that per connected proxy and serves it as JSON on `/debug/syncz` (an axum router for the admin port).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::{Serialize, Serializer};

use super::metrics::Api;
use super::node::NodeIdentity;
use super::resources::{version_string, Family, ResourceType};
use admitpilot_status::programmed::ConnectedGateway;

/// A response version, kept as a number and shown as the client sees it: a SotW version is the response's
/// content hash in 16 hex digits, a Delta version the snapshot version in decimal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// Content hash of a SotW response.
    Hash(u64),
    /// Snapshot version of a Delta response.
    Snapshot(u64),
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Version::Hash(hash) => f.write_str(&version_string(*hash)),
            Version::Snapshot(version) => write!(f, "{version}"),
        }
    }
}

impl Serialize for Version {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// What one connection has been sent and has acknowledged for one resource type. Numbers only (no strings
/// per stream): thousands of streams each keep one per type.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct TypeStatus {
    /// Version of the last response sent.
    pub sent_version: Option<Version>,
    /// Nonce of the last response sent.
    pub sent_nonce: Option<u64>,
    /// Version of the last response the client ACKed.
    pub acked_version: Option<Version>,
    /// Resources the client holds according to the server (ACKed or in flight).
    pub resources: usize,
    /// The client subscribed to every resource of this type.
    pub wildcard: bool,
    /// Resource names the client subscribed to explicitly.
    pub subscribed: usize,
    /// Rejections on this stream so far.
    pub nacks: u64,
    /// The last rejection, if any.
    pub last_nack: Option<Box<NackStatus>>,
}

/// A rejected response.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct NackStatus {
    /// Version that was rejected.
    pub version: Version,
    /// The client's error message.
    pub message: String,
    /// Rejected resource names (Delta only; empty for SotW).
    pub resources: Vec<String>,
    /// Seconds since the Unix epoch.
    pub at_unix: u64,
}

/// One connected proxy stream.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ConnectionStatus {
    /// Server-assigned connection id (`<node id>-<n>`).
    pub connection: String,
    /// The node id the client sent.
    pub node_id: String,
    /// Group namespace.
    pub namespace: String,
    /// Group labels.
    pub labels: BTreeMap<String, String>,
    /// `sotw` or `delta`.
    pub api: &'static str,
    /// `envoy` (a gateway, served its proxy group's Envoy resources) or `mcp` (an MCP subscriber, served
    /// Istio collections).
    pub subscriber: &'static str,
    /// Seconds since the Unix epoch.
    pub connected_unix: u64,
    /// Snapshot version of the proxy group's configuration last considered for this stream.
    pub snapshot_version: u64,
    /// Per resource type (`cds`, `eds`, `lds`, `rds`, …; an MCP collection by its name).
    pub types: BTreeMap<&'static str, TypeStatus>,
}

impl ConnectionStatus {
    /// The config version this proxy holds all of: its snapshot version once every response sent was acknowledged
    /// (`None` while one is in flight or was rejected, or before the first).
    pub fn acked_snapshot(&self) -> Option<u64> {
        let mut sent = self
            .types
            .values()
            .filter(|t| t.sent_version.is_some())
            .peekable();
        sent.peek()?;
        sent.all(|t| t.acked_version == t.sent_version)
            .then_some(self.snapshot_version)
    }

    /// Envoy's error, when the last response of some type was rejected.
    pub fn rejection(&self) -> Option<&str> {
        self.types.values().find_map(|t| {
            t.last_nack
                .as_ref()
                .filter(|nack| Some(nack.version) == t.sent_version)
                .map(|nack| nack.message.as_str())
        })
    }
}

/// A live stream's status as kept: no connection name (it is built from the node id and registry id when
/// shown), and the per-type entries in a small vector (a stream has four to six), not a B-tree map, whose one
/// node is several times their size. [`LiveStatus::shown`] builds the [`ConnectionStatus`].
#[derive(Debug)]
struct LiveStatus {
    id: u64,
    node_id: String,
    namespace: String,
    labels: BTreeMap<String, String>,
    api: &'static str,
    subscriber: &'static str,
    connected_unix: u64,
    snapshot_version: u64,
    types: Vec<(&'static str, TypeStatus)>,
}

impl LiveStatus {
    fn name(&self) -> String {
        format!("{}-{}", self.node_id, self.id)
    }

    fn shown(&self) -> ConnectionStatus {
        ConnectionStatus {
            connection: self.name(),
            node_id: self.node_id.clone(),
            namespace: self.namespace.clone(),
            labels: self.labels.clone(),
            api: self.api,
            subscriber: self.subscriber,
            connected_unix: self.connected_unix,
            snapshot_version: self.snapshot_version,
            types: self.types.iter().cloned().collect(),
        }
    }
}

/// All connected streams, shared between the stream handlers and `/debug/syncz`.
#[derive(Debug, Default)]
pub struct StatusRegistry {
    next_id: AtomicU64,
    connections: Mutex<BTreeMap<u64, Arc<Mutex<LiveStatus>>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Seconds since the Unix epoch (0 if the clock is before it): the timestamps of the status views.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

impl StatusRegistry {
    /// Registers a new stream; it is removed when the returned handle drops.
    pub fn open(
        self: &Arc<Self>,
        identity: &NodeIdentity,
        api: Api,
        family: Family,
    ) -> ConnectionHandle {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let status = Arc::new(Mutex::new(LiveStatus {
            id,
            node_id: identity.id.clone(),
            namespace: identity.proxy.namespace.clone(),
            labels: identity.proxy.labels.clone(),
            api: api.as_str(),
            subscriber: family.as_str(),
            connected_unix: unix_now(),
            snapshot_version: 0,
            types: Vec::new(),
        }));
        lock(&self.connections).insert(id, status.clone());
        ConnectionHandle {
            registry: self.clone(),
            id,
            status,
        }
    }

    /// A copy of every connection's status, in connection order.
    pub fn list(&self) -> Vec<ConnectionStatus> {
        let connections: Vec<_> = lock(&self.connections).values().cloned().collect();
        connections.iter().map(|live| lock(live).shown()).collect()
    }

    /// The connected Envoy gateways, as the status writer reads them.
    pub fn list_gateways(&self) -> Vec<ConnectedGateway> {
        self.list()
            .into_iter()
            .filter(|c| c.subscriber == Family::Envoy.as_str())
            .map(|c| ConnectedGateway {
                acked_version: c.acked_snapshot(),
                rejected: c.rejection().map(str::to_string),
                node_id: c.node_id,
                namespace: c.namespace,
                labels: c.labels,
            })
            .collect()
    }

    /// The `/debug/syncz` route.
    pub fn router(self: &Arc<Self>) -> Router {
        Router::new()
            .route("/debug/syncz", get(syncz))
            .with_state(self.clone())
    }
}

async fn syncz(State(registry): State<Arc<StatusRegistry>>) -> Json<Vec<ConnectionStatus>> {
    Json(registry.list())
}

/// A stream's entry in the registry; updates go through it and dropping it removes the entry.
#[derive(Debug)]
pub struct ConnectionHandle {
    registry: Arc<StatusRegistry>,
    id: u64,
    status: Arc<Mutex<LiveStatus>>,
}

impl ConnectionHandle {
    /// The connection id (`<node id>-<n>`), used in logs.
    pub fn name(&self) -> String {
        lock(&self.status).name()
    }

    /// Records the snapshot version the stream last saw.
    pub fn set_snapshot_version(&self, version: u64) {
        lock(&self.status).snapshot_version = version;
    }

    /// Changes the status of one type.
    pub fn update(&self, kind: ResourceType, change: impl FnOnce(&mut TypeStatus)) {
        let mut status = lock(&self.status);
        let name = kind.short_name();
        let index = match status.types.iter().position(|(n, _)| *n == name) {
            Some(index) => index,
            None => {
                status.types.push((name, TypeStatus::default()));
                status.types.len() - 1
            }
        };
        change(&mut status.types[index].1);
    }
}

impl Drop for ConnectionHandle {
    fn drop(&mut self) {
        lock(&self.registry.connections).remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use admitpilot_translate::Proxy;

    #[test]
    fn handles_register_update_and_unregister() {
        let registry = Arc::new(StatusRegistry::default());
        let identity = NodeIdentity {
            id: "gw-1".into(),
            proxy: Proxy::default(),
        };
        let handle = registry.open(&identity, Api::Sotw, Family::Envoy);
        handle.update(ResourceType::Cluster, |t| {
            t.sent_version = Some(Version::Snapshot(7));
        });
        let list = registry.list();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].connection, "gw-1-0");
        assert_eq!(
            list[0].types["cds"].sent_version,
            Some(Version::Snapshot(7))
        );
        assert_eq!(
            serde_json::to_value(&list[0].types["cds"]).unwrap()["sent_version"],
            "7"
        );
        drop(handle);
        assert!(registry.list().is_empty());
    }
}
