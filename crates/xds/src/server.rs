//! The ADS gRPC server: takes one or more listeners, each with its transport (plaintext, or TLS with a reloadable
//! certificate) and its [`CallPolicy`], and a shutdown signal; serves `StreamAggregatedResources` (SotW) and
//! `DeltaAggregatedResources` with raised message limits and HTTP/2 keepalive, admits each call
//! ([`super::auth`]) before its first response, and ends every stream on shutdown.

use std::convert::Infallible;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use rustls::ServerConfig;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;
use tokio_stream::wrappers::ReceiverStream;
use tonic::body::Body;
use tonic::server::NamedService;
use tonic::transport::Server;
use tonic::Status;

use super::auth::{bearer, CallPolicy};
use super::cache::{ConfigCache, TranslateFn};
use super::connection::{self, ConnectionLimits, ConnectionState};
use super::delta::DeltaStream;
use super::metrics::XdsMetrics;
use super::sotw::SotwStream;
use super::status::StatusRegistry;
use super::stream::{AdsCall, Caller, Protocol, Shared};
use super::wire::{self, RequestBudget};
use super::Error;
use admitpilot_model::Snapshot;
use admitpilot_serving::tls::{self as certs, CertStore};

/// Largest request accepted: gRPC's default receive limit, which istiod keeps. Envoy's requests are small (a node,
/// a type and resource names: a few KiB); the large ones are a Delta reconnect's `initial_resource_versions` (about
/// 100 bytes a resource, so some 40,000 resources) and a NACK's error text, which is cut to
/// [`super::stream::MAX_NACK_DETAIL_BYTES`] anyway.
pub const MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;
/// Largest response sent.
pub const MAX_RESPONSE_BYTES: usize = 256 * 1024 * 1024;
/// Most bytes of unfinished requests held for all streams together (each stream's is under
/// [`MAX_REQUEST_BYTES`]): past it a stream that sends a split message is ended, so no number of connections and
/// streams can make the server hold more.
pub const MAX_BUFFERED_REQUEST_BYTES: usize = 128 * 1024 * 1024;
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

impl TlsFiles {
    /// The certificate and key, as the reloader watches them.
    pub fn pair(&self) -> certs::TlsFiles {
        certs::TlsFiles {
            cert: self.cert.clone(),
            key: self.key.clone(),
        }
    }

    /// The rustls configuration serving whatever `store` holds (TLS 1.2+, HTTP/2), requiring client
    /// certificates from `client_ca` when set.
    pub fn server_config(&self, store: Arc<CertStore>) -> Result<Arc<ServerConfig>, Error> {
        let ca = match &self.client_ca {
            Some(path) => Some((path.as_path(), read(path)?)),
            None => None,
        };
        certs::grpc_server_config(store, ca.as_ref().map(|(p, pem)| (*p, pem.as_slice())))
            .map_err(Error::Certificate)
    }

    /// Loads the files once (no reloading) into a server configuration.
    pub fn load(&self) -> Result<Arc<ServerConfig>, Error> {
        let (key, _) = certs::load_files(&self.pair()).map_err(Error::Certificate)?;
        self.server_config(CertStore::new(key))
    }
}

/// One listening socket of the xDS server and how its calls are served.
pub struct Endpoint {
    /// The bound listener.
    pub listener: TcpListener,
    /// TLS (certificate possibly reloaded by its [`CertStore`]); plaintext when `None`.
    pub tls: Option<Arc<ServerConfig>>,
    /// Who may call, and which secrets they get.
    pub policy: CallPolicy,
    /// How many connections and calls it holds, and for how long.
    pub limits: ConnectionLimits,
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
    pub fn connected_groups(&self) -> Vec<admitpilot_translate::Proxy> {
        self.cache.connected_groups()
    }

    /// The objects the push guard leaves out, per connected proxy group, with what Envoy would reject.
    pub fn held_back(
        &self,
    ) -> Vec<(
        admitpilot_translate::Proxy,
        admitpilot_model::ObjectKey,
        String,
    )> {
        self.cache.held_back()
    }

    /// The `/debug/syncz` router, to be merged into the admin server.
    pub fn router(&self) -> axum::Router {
        self.status.router()
    }

    /// Serves ADS on one `listener` that verifies nobody and sends no `kubernetes://` secret, over TLS when
    /// `tls` is given (loaded once), until `shutdown` resolves. See [`XdsServer::serve_endpoints`].
    pub async fn serve(
        self,
        listener: TcpListener,
        tls: Option<&TlsFiles>,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), Error> {
        let tls = tls.map(TlsFiles::load).transpose()?;
        let endpoint = Endpoint {
            listener,
            tls,
            policy: CallPolicy::Open {
                serve_secrets: false,
            },
            limits: ConnectionLimits::default(),
        };
        self.serve_endpoints(vec![endpoint], shutdown).await
    }

    /// Serves ADS on every endpoint until `shutdown` resolves, then ends every stream and returns once the
    /// connections are closed.
    pub async fn serve_endpoints(
        self,
        endpoints: Vec<Endpoint>,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), Error> {
        let (stop, stopped) = watch::channel(false);
        let shared = Shared {
            cache: self.cache.clone(),
            status: self.status.clone(),
            metrics: self.metrics.clone(),
            max_response_bytes: MAX_RESPONSE_BYTES,
            buffered: RequestBudget::new(MAX_BUFFERED_REQUEST_BYTES, self.metrics.clone()),
        };
        let dispatcher = tokio::spawn(self.cache.clone().run(stopped.clone()));
        let cache = self.cache.clone();
        let servers = endpoints.into_iter().map(|endpoint| {
            let mut stopping = stopped.clone();
            serve_endpoint(shared.clone(), endpoint, async move {
                let _ = stopping.wait_for(|stopped| *stopped).await;
            })
        });
        let serving = futures::future::try_join_all(servers);
        // Streams end at shutdown; connections whose clients stopped reading get SHUTDOWN_GRACE to drain.
        let result = tokio::select! {
            result = serving => result.map(|_| ()),
            _ = async {
                shutdown.await;
                stop.send_replace(true);
                // Every joined call follows its group's channel: closing them ends the calls.
                cache.close();
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

/// Serves one endpoint until `signal` resolves.
async fn serve_endpoint(
    shared: Shared,
    endpoint: Endpoint,
    signal: impl Future<Output = ()> + Send,
) -> Result<(), Error> {
    let limits = endpoint.limits;
    let metrics = shared.metrics.clone();
    let service = Ads {
        shared,
        policy: Arc::new(endpoint.policy),
    };
    // HTTP/2 refuses calls past one more than the limit; that one is refused by `Ads` with a status, a log
    // line and a metric.
    let max_streams = u32::try_from(limits.max_streams.saturating_add(1)).unwrap_or(u32::MAX);
    let mut builder = Server::builder()
        .http2_keepalive_interval(Some(KEEPALIVE_INTERVAL))
        .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
        .max_concurrent_streams(Some(max_streams));
    let router = builder.add_service(service);
    // Nagle's algorithm with delayed ACKs stalls small xDS responses by ~40 ms: `incoming` sets TCP_NODELAY.
    let result =
        match endpoint.tls {
            None => {
                let (incoming, accepting) =
                    connection::incoming(endpoint.listener, limits, metrics, |tcp| async move {
                        Ok(tcp)
                    });
                let result = router
                    .serve_with_incoming_shutdown(ReceiverStream::new(incoming), signal)
                    .await;
                accepting.abort();
                result
            }
            Some(config) => {
                let acceptor = TlsAcceptor::from(config);
                let (incoming, accepting) =
                    connection::incoming(endpoint.listener, limits, metrics, move |tcp| {
                        acceptor.accept(tcp)
                    });
                let result = router
                    .serve_with_incoming_shutdown(ReceiverStream::new(incoming), signal)
                    .await;
                accepting.abort();
                result
            }
        };
    result.map_err(Error::Serve)
}

fn read(path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// The ADS gRPC service: routes the two ADS methods to their stream drivers; the responses are built by
/// [`super::wire`] from the groups' shared encoded resources.
#[derive(Clone)]
struct Ads {
    shared: Shared,
    policy: Arc<CallPolicy>,
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
    /// Takes a call slot on the connection, verifies the caller from its metadata, then serves the call (which
    /// is admitted on its first request).
    async fn start<P: Protocol>(self, request: hyper::Request<Body>) -> hyper::Response<Body> {
        let metrics = &self.shared.metrics;
        // Only the parts are held across the checks (the body is not `Sync`).
        let (parts, body) = request.into_parts();
        let connection = parts.extensions.get::<ConnectionState>().cloned();
        let slot = match &connection {
            Some(connection) => match connection.open_stream() {
                Some(slot) => Some(slot),
                None => {
                    return Status::resource_exhausted(
                        "too many xDS calls open on this connection; open another connection",
                    )
                    .into_http()
                }
            },
            None => None,
        };
        let identity = match self.policy.authenticate(&parts.headers, metrics).await {
            Ok(identity) => identity,
            Err(status) => return status.into_http(),
        };
        if let Some(connection) = &connection {
            connection.authenticated();
        }
        let token = bearer(&parts.headers).map(str::to_owned);
        let request = hyper::Request::from_parts(parts, body);
        let inbound =
            wire::requests::<P::Request>(request, MAX_REQUEST_BYTES, self.shared.buffered.clone());
        wire::response(AdsCall::<P>::new(
            inbound,
            self.shared,
            Arc::clone(&self.policy),
            Caller {
                identity,
                token,
                slot,
            },
        ))
    }
}

type Answer = Pin<Box<dyn Future<Output = Result<hyper::Response<Body>, Infallible>> + Send>>;

impl tower::Service<hyper::Request<Body>> for Ads {
    type Response = hyper::Response<Body>;
    type Error = Infallible;
    type Future = Answer;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: hyper::Request<Body>) -> Self::Future {
        let ads = self.clone();
        match request.uri().path() {
            SOTW_PATH => Box::pin(async move { Ok(ads.start::<SotwStream>(request).await) }),
            DELTA_PATH => Box::pin(async move { Ok(ads.start::<DeltaStream>(request).await) }),
            path => Box::pin(wire::unimplemented(path)),
        }
    }
}
