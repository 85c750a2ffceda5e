//! xDS server: takes the store's snapshot channel and a translate function, serves the translated Envoy
//! resources to gateways over ADS (SotW and Delta, tonic), tracks ACK/NACK per proxy, exports metrics and
//! `/debug/syncz`.
//!
//! Proxies are grouped by [`crate::translate::Proxy`] (namespace + labels, see [`node`]); each snapshot is
//! translated once per group ([`cache`]), encoded with content-hash versions ([`resources`]) and pushed to each
//! stream by its protocol state machine ([`sotw`], [`delta`]) in warming order: CDS, EDS, SDS, ECDS, LDS, RDS.

pub mod cache;
mod delta;
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

pub use cache::TranslateFn;
pub use metrics::XdsMetrics;
pub use server::{TlsFiles, XdsServer, MAX_REQUEST_BYTES, MAX_RESPONSE_BYTES, SHUTDOWN_GRACE};

/// Why the xDS server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum XdsError {
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
    Tls(#[source] tonic::transport::Error),
    /// The gRPC server failed.
    #[error("xDS server failed: {0}")]
    Serve(#[source] tonic::transport::Error),
}
