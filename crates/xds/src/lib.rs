//! xDS server: takes the store's snapshot channel and a translate function, serves the translated Envoy
//! resources to gateways over ADS (SotW and Delta, tonic), and the validated config itself as Istio collections to
//! MCP subscribers on the same port ([`mcp`]); tracks ACK/NACK per stream, exports metrics and `/debug/syncz`.
//!
//! What a stream's first request asks for decides what it is ([`resources::Family`]): an Envoy type
//! (`type.googleapis.com/…`) makes it a gateway, which follows its proxy group; an Istio collection
//! (`networking.istio.io/v1/VirtualService`) or any other `group/version/Kind` (istiod opens with
//! `core/v1alpha1/MeshConfig`) an MCP subscriber, which follows the one MCP feed every subscriber shares. Both run
//! the same SotW and Delta state machines over their family's types; a type the stream does not serve is answered
//! once with none of it (istiod counts a type as synced only once answered), never silently dropped.
//!
//! Every port is bounded ([`connection`]): connections per port, calls per connection, pre-authentication and
//! idle timeouts, the size of a request and of all unfinished requests together, and how much of a NACK is kept.
//!
//! Proxies are grouped by [`admitpilot_translate::Proxy`] (namespace + labels, see [`node`]); each snapshot is
//! translated once per group ([`cache`]), encoded with content-hash versions ([`resources`]) and pushed to each
//! stream by its protocol state machine ([`sotw`], [`delta`]) in warming order: CDS, EDS, SDS, ECDS, LDS, RDS.
//!
//! The rules both protocols keep, from Envoy's xDS protocol documentation (eventual consistency, warming):
//! - **Make before break**: a push sends the types in the order above, so a cluster exists before the
//!   endpoints, listeners and routes that use it, and a listener before its routes.
//! - **An added or changed EDS cluster is followed by its endpoints**, changed or not: Envoy keeps it warming
//!   until a `ClusterLoadAssignment` arrives. Over SotW, Envoy asks for EDS again after such a cluster and the
//!   next EDS request is always answered; over Delta, Envoy does not subscribe again to a name it holds, so the
//!   server resends the endpoints of every cluster it has just sent, in the same push.
//! - **Likewise for listeners and routes** (SotW): the RDS request that follows a listener update is answered.
//! - **A rejected (NACKed) resource is not resent unchanged**, except once a type it depends on
//!   ([`resources::ResourceType::depends_on`]) is pushed: a listener rejected for naming a cluster not yet sent
//!   passes when that cluster arrives. The NACK is recorded per proxy and type (`/debug/syncz`, and
//!   `admitpilot_xds_nacks_total{type}`), and the proxy keeps what it last accepted.
//! - **A name the group does not have** is answered as absent (Delta `removed_resources`) or left out (SotW).
//! - **Nothing names what is not sent**: translation output is closed before it is encoded
//!   ([`admitpilot_translate::dangling`]): a listener, route, tracer, access log or filter naming a cluster the group
//!   does not get is left out, held back or answered with 503, logged with the object to blame, and counted in
//!   `admitpilot_xds_left_out_features_total{effect}`.
//! - **Nothing Envoy would reject is sent**: each changed listener, cluster and route configuration is checked
//!   as Envoy checks it on load ([`admitpilot_translate::effect`], the webhook's check); a rejected one keeps the
//!   version last sent ([`cache`]), logged and counted in `admitpilot_xds_held_back_resources_total`.

pub mod auth;
pub mod cache;
pub mod connection;
mod delta;
mod mcp;
pub mod metrics;
mod names;
pub mod node;
pub mod resources;
mod server;
mod sotw;
pub mod status;
mod stream;
mod wire;

use std::path::PathBuf;

pub use auth::{CallPolicy, KubeAuth};
pub use cache::TranslateFn;
pub use connection::ConnectionLimits;
pub use metrics::XdsMetrics;
pub use server::{
    Endpoint, TlsFiles, XdsServer, MAX_BUFFERED_REQUEST_BYTES, MAX_REQUEST_BYTES,
    MAX_RESPONSE_BYTES, SHUTDOWN_GRACE,
};

/// Why the xDS server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A TLS file could not be read.
    #[error("cannot read xDS TLS file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The TLS files do not form a usable server configuration.
    #[error("invalid xDS TLS configuration: {0}")]
    Certificate(#[source] admitpilot_serving::tls::Error),
    /// The gRPC server failed.
    #[error("xDS server failed: {0}")]
    Serve(#[source] tonic::transport::Error),
}

/// The result of this module's fallible functions.
pub type Result<T, E = Error> = std::result::Result<T, E>;
