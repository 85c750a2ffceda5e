//! The ADS gRPC server: takes a listener, optional TLS/mTLS files and a shutdown signal, serves
//! `StreamAggregatedResources` (SotW) and `DeltaAggregatedResources` with raised message limits and HTTP/2
//! keepalive, and ends every stream on shutdown.

use std::convert::Infallible;
use std::future::{ready, Future, Ready};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic::body::Body;
use tonic::server::NamedService;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Certificate, Identity, Server, ServerTlsConfig};

use super::cache::{ConfigCache, TranslateFn};
use super::delta::DeltaStream;
use super::metrics::XdsMetrics;
use super::sotw::SotwStream;
use super::status::StatusRegistry;
use super::stream::{AdsCall, Protocol, Shared};
use super::wire;
use super::Error;
use crate::model::Snapshot;

/// Largest request accepted (NACK details and Delta `initial_resource_versions` can be big).
pub const MAX_REQUEST_BYTES: usize = 64 * 1024 * 1024;
/// Largest response sent.
pub const MAX_RESPONSE_BYTES: usize = 256 * 1024 * 1024;
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(30);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long shutdown waits for connections to drain after every stream has ended.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

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
            cache: ConfigCache::new(snapshots, translate, metrics.clone()),
            status: Arc::new(StatusRegistry::default()),
            metrics,
        }
    }

    /// Connected streams and their sync state (what `/debug/syncz` shows).
    pub fn status(&self) -> Arc<StatusRegistry> {
        self.status.clone()
    }

    /// The proxy groups with connected streams now (the webhook checks changes against them).
    pub fn connected_groups(&self) -> Vec<crate::translate::Proxy> {
        self.cache.connected_groups()
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
    ) -> Result<(), Error> {
        let (stop, stopped) = watch::channel(false);
        let shared = Shared {
            cache: self.cache.clone(),
            status: self.status.clone(),
            metrics: self.metrics.clone(),
            max_response_bytes: MAX_RESPONSE_BYTES,
        };
        let dispatcher = tokio::spawn(self.cache.clone().run(stopped));
        let cache = self.cache.clone();
        let mut builder = Server::builder()
            .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
            .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT));
        if let Some(files) = tls {
            builder = builder
                .tls_config(tls_config(files).await?)
                .map_err(Error::Tls)?;
        }
        let service = Ads { shared };
        let mut stopping = stop.subscribe();
        let serving = builder.add_service(service).serve_with_incoming_shutdown(
            // Set per connection here: the builder's `tcp_nodelay` only applies to listeners tonic binds itself,
            // and Nagle's algorithm with delayed ACKs stalls small xDS responses by ~40 ms.
            TcpIncoming::from(listener).with_nodelay(Some(true)),
            async move {
                shutdown.await;
                stop.send_replace(true);
                // Every joined call follows its group's channel: closing them ends the calls.
                cache.close();
            },
        );
        // Streams end at shutdown; connections whose clients stopped reading get SHUTDOWN_GRACE to drain.
        let result = tokio::select! {
            result = serving => result.map_err(Error::Serve),
            _ = async {
                let _ = stopping.wait_for(|stopped| *stopped).await;
                tokio::time::sleep(SHUTDOWN_GRACE).await;
            } => {
                tracing::warn!("closing xDS connections that did not drain within {SHUTDOWN_GRACE:?}");
                Ok(())
            }
        };
        dispatcher.abort();
        result
    }
}

async fn read(path: &Path) -> Result<Vec<u8>, Error> {
    tokio::fs::read(path).await.map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })
}

async fn tls_config(files: &TlsFiles) -> Result<ServerTlsConfig, Error> {
    let identity = Identity::from_pem(read(&files.cert).await?, read(&files.key).await?);
    let mut config = ServerTlsConfig::new().identity(identity);
    if let Some(ca) = &files.client_ca {
        config = config.client_ca_root(Certificate::from_pem(read(ca).await?));
    }
    Ok(config)
}

/// The ADS gRPC service: routes the two ADS methods to their stream drivers; the responses are built by
/// [`super::wire`] from the groups' shared encoded resources.
#[derive(Clone)]
struct Ads {
    shared: Shared,
}

/// gRPC path of `StreamAggregatedResources` (SotW).
const SOTW_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";
/// gRPC path of `DeltaAggregatedResources`.
const DELTA_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources";

impl NamedService for Ads {
    const NAME: &'static str = "envoy.service.discovery.v3.AggregatedDiscoveryService";
}

impl Ads {
    fn start<P: Protocol>(&self, request: hyper::Request<Body>) -> hyper::Response<Body> {
        let inbound = wire::requests::<P::Request>(request, MAX_REQUEST_BYTES);
        wire::response(AdsCall::<P>::new(inbound, self.shared.clone()))
    }
}

impl tower::Service<hyper::Request<Body>> for Ads {
    type Response = hyper::Response<Body>;
    type Error = Infallible;
    type Future = Ready<Result<hyper::Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: hyper::Request<Body>) -> Self::Future {
        match request.uri().path() {
            SOTW_PATH => ready(Ok(self.start::<SotwStream>(request))),
            DELTA_PATH => ready(Ok(self.start::<DeltaStream>(request))),
            path => wire::unimplemented(path),
        }
    }
}
