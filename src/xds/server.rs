//! The ADS gRPC server: takes a listener, optional TLS/mTLS files and a shutdown signal, serves
//! `StreamAggregatedResources` (SotW) and `DeltaAggregatedResources` with raised message limits and HTTP/2
//! keepalive, and ends every stream on shutdown.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::{
    AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tokio_stream::Stream;
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};
use tonic::{Request, Response, Status, Streaming};

use super::cache::{ConfigCache, TranslateFn};
use super::delta::DeltaStream;
use super::metrics::XdsMetrics;
use super::sotw::SotwStream;
use super::status::StatusRegistry;
use super::stream::{drive, Protocol, Shared, RESPONSE_BUFFER};
use super::XdsError;
use crate::model::Snapshot;

/// Largest request accepted (NACK details and Delta `initial_resource_versions` can be big).
pub const MAX_REQUEST_BYTES: usize = 64 * 1024 * 1024;
/// Largest response sent.
pub const MAX_RESPONSE_BYTES: usize = 256 * 1024 * 1024;
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(30);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// PEM files for serving xDS over TLS; with `client_ca`, clients must present a certificate it signed (mTLS).
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// Server certificate chain.
    pub cert: PathBuf,
    /// Server private key.
    pub key: PathBuf,
    /// CA that client certificates must chain to.
    pub client_ca: Option<PathBuf>,
}

/// The xDS server: configuration cache, stream status and metrics.
#[derive(Debug, Clone)]
pub struct XdsServer {
    cache: Arc<ConfigCache>,
    status: Arc<StatusRegistry>,
    metrics: XdsMetrics,
}

impl XdsServer {
    /// Creates a server reading snapshots from `snapshots` and translating them with `translate`.
    pub fn new(
        snapshots: watch::Receiver<Arc<Snapshot>>,
        translate: TranslateFn,
        metrics: XdsMetrics,
    ) -> Self {
        XdsServer {
            cache: ConfigCache::new(snapshots, translate),
            status: Arc::new(StatusRegistry::default()),
            metrics,
        }
    }

    /// Connected streams and their sync state (what `/debug/syncz` shows).
    pub fn status(&self) -> Arc<StatusRegistry> {
        self.status.clone()
    }

    /// The `/debug/syncz` router, to be merged into the admin server.
    pub fn router(&self) -> axum::Router {
        self.status.router()
    }

    /// Serves ADS on `listener` until `shutdown` resolves, then ends every stream and returns once the
    /// connections are closed.
    pub async fn serve(
        self,
        listener: TcpListener,
        tls: Option<&TlsFiles>,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), XdsError> {
        let (stop, stopped) = watch::channel(false);
        let shared = Shared {
            cache: self.cache.clone(),
            status: self.status.clone(),
            metrics: self.metrics.clone(),
            shutdown: stopped.clone(),
        };
        let dispatcher = tokio::spawn(self.cache.clone().run(stopped));
        let mut builder = Server::builder()
            .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
            .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
            .tcp_nodelay(true);
        if let Some(files) = tls {
            builder = builder
                .tls_config(tls_config(files).await?)
                .map_err(XdsError::Tls)?;
        }
        let service = AggregatedDiscoveryServiceServer::new(Ads { shared })
            .max_decoding_message_size(MAX_REQUEST_BYTES)
            .max_encoding_message_size(MAX_RESPONSE_BYTES);
        let result = builder
            .add_service(service)
            .serve_with_incoming_shutdown(TcpListenerStream::new(listener), async move {
                shutdown.await;
                stop.send_replace(true);
            })
            .await
            .map_err(XdsError::Serve);
        dispatcher.abort();
        result
    }
}

async fn read(path: &Path) -> Result<Vec<u8>, XdsError> {
    tokio::fs::read(path)
        .await
        .map_err(|source| XdsError::Read {
            path: path.to_path_buf(),
            source,
        })
}

async fn tls_config(files: &TlsFiles) -> Result<ServerTlsConfig, XdsError> {
    let identity = Identity::from_pem(read(&files.cert).await?, read(&files.key).await?);
    let mut config = ServerTlsConfig::new().identity(identity);
    if let Some(ca) = &files.client_ca {
        config = config.client_ca_root(Certificate::from_pem(read(ca).await?));
    }
    Ok(config)
}

struct Ads {
    shared: Shared,
}

type ResponseStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

impl Ads {
    fn start<P: Protocol>(
        &self,
        inbound: Streaming<P::Request>,
    ) -> Response<ResponseStream<P::Response>> {
        let (tx, rx) = mpsc::channel(RESPONSE_BUFFER);
        tokio::spawn(drive::<P>(inbound, tx, self.shared.clone()));
        Response::new(Box::pin(ReceiverStream::new(rx)))
    }
}

#[tonic::async_trait]
impl AggregatedDiscoveryService for Ads {
    type StreamAggregatedResourcesStream = ResponseStream<DiscoveryResponse>;
    type DeltaAggregatedResourcesStream = ResponseStream<DeltaDiscoveryResponse>;

    async fn stream_aggregated_resources(
        &self,
        request: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<Self::StreamAggregatedResourcesStream>, Status> {
        Ok(self.start::<SotwStream>(request.into_inner()))
    }

    async fn delta_aggregated_resources(
        &self,
        request: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<Self::DeltaAggregatedResourcesStream>, Status> {
        Ok(self.start::<DeltaStream>(request.into_inner()))
    }
}
