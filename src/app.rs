//! Composition root of `admitpilot serve`: takes a [`ServeConfig`], binds the listeners, starts every
//! subsystem as a task (webhook, certificate reloader, admin server) and stops them together on shutdown.
//!
//! Subsystems plug in through [`App`]: register metrics into [`App::registry_mut`], readiness conditions into
//! [`App::readiness`], admin routes with [`App::admin_route`], and add a `start_*` step to [`App::start`].

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::admin::{self, Readiness};
use crate::admission::effects::{GatewayCheck, LiveGatewayCheck, ReferenceCheck};
use crate::admission::metrics::WebhookMetrics;
use crate::admission::server::{serve_https, ServerLimits};
use crate::admission::{self, Webhook};
use crate::leader::LeaderConfig;
use crate::model::decode::DecodeOptions;
use crate::model::Snapshot;
use crate::provisioner::{self, ProvisionerConfig, ProvisionerMetrics};
use crate::source::refusals::Refusals;
use crate::source::{self, SourceMetrics, SourceSettings};
use crate::status::StatusScope;
use crate::status::Unready;
use crate::status_writer::{self, GatewayFeedback, StatusMetrics, StatusWriterConfig};
use crate::tls::{self, CertSource, CertStore};
use crate::xds::{
    self, CallPolicy, ConnectionLimits, Endpoint, KubeAuth, TlsFiles as XdsTlsFiles, TranslateFn,
    XdsMetrics, XdsServer,
};

/// Everything `serve` needs, built from the command line (or by tests directly).
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// The admission webhook.
    pub webhook: WebhookConfig,
    /// Address of the plain-HTTP admin server (`/metrics`, `/healthz`, `/readyz`).
    pub admin_addr: SocketAddr,
}

/// Settings of the HTTPS admission webhook.
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// Listen address.
    pub addr: SocketAddr,
    /// Serving certificate.
    pub cert: CertSource,
    /// How often certificate files are checked for changes.
    pub reload_interval: Duration,
    /// Where higress-config lives.
    pub decode: DecodeOptions,
    /// Connection and request limits.
    pub limits: ServerLimits,
    /// Adds the do-nothing `/noop` route (benchmarks only).
    pub bench_noop: bool,
    /// What to do with reference findings (when the process serves gateways).
    pub reference_check: ReferenceCheck,
}

/// Settings of the xDS (ADS) server.
#[derive(Debug, Clone)]
pub struct XdsConfig {
    /// Listen address (gRPC; plaintext unless `tls` is set).
    pub addr: SocketAddr,
    /// Serve over TLS (files reloaded when they change), and with a client CA over mTLS.
    pub tls: Option<XdsTlsFiles>,
    /// How callers on `addr` are verified.
    pub auth: XdsAuth,
    /// A second, plaintext listener that verifies nobody and never sends a `kubernetes://` secret (istiod's 15010).
    pub plaintext_addr: Option<SocketAddr>,
    /// How often the TLS files are checked for changes (besides file notifications).
    pub reload_interval: Duration,
    /// Connection and call limits of each xDS port.
    pub limits: ConnectionLimits,
}

/// How the xDS server verifies its callers on its main address.
#[derive(Debug, Clone)]
pub enum XdsAuth {
    /// Nobody is verified; `serve_secrets` sends `kubernetes://` secrets anyway (folder mode on a trusted machine).
    Open {
        /// Whether unverified callers get secrets.
        serve_secrets: bool,
    },
    /// Service-account tokens for `audience`, checked with TokenReview; secrets and the MCP feed authorized with
    /// SubjectAccessReview. Needs TLS.
    Token {
        /// The audience tokens must carry.
        audience: String,
        /// The API server to ask (`None`: in-cluster config, else `$KUBECONFIG` / `~/.kube/config`).
        kubeconfig: Option<PathBuf>,
        /// How often an open stream's token and access are checked again.
        recheck: Duration,
    },
}

/// Errors starting or running the server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A listener could not be bound.
    #[error("cannot listen for {what} on {addr}: {source}")]
    Bind {
        /// Which server.
        what: &'static str,
        /// The address.
        addr: SocketAddr,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The serving certificate could not be set up.
    #[error(transparent)]
    Tls(#[from] tls::Error),
    /// The admin server failed.
    #[error("admin server failed: {0}")]
    Admin(std::io::Error),
    /// The xDS server failed.
    #[error(transparent)]
    Xds(#[from] xds::Error),
    /// Authenticated xDS was asked for without TLS.
    #[error("authenticated xDS (--xds-auth=token, the default with --kube) needs --xds-tls-cert and --xds-tls-key: \
             service-account tokens are never accepted in plaintext. For a plaintext port without secrets add \
             --xds-plaintext-addr, or pass --xds-auth=none")]
    XdsAuthWithoutTls,
    /// A task stopped before shutdown was requested.
    #[error("{0} stopped unexpectedly")]
    EndedEarly(&'static str),
    /// A task panicked.
    #[error("a server task panicked: {0}")]
    Panicked(String),
    /// The Kubernetes client for the sources could not be built.
    #[error(transparent)]
    KubeClient(#[from] source::kubernetes::Error),
    /// A config source could not be started.
    #[error(transparent)]
    Sources(#[from] source::Error),
}

/// The result of this module's fallible functions.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Builder for the `serve` process.
pub struct App {
    config: ServeConfig,
    registry: Registry,
    readiness: Readiness,
    admin_routes: Vec<Router>,
    sources: Option<SourceSettings>,
    snapshot_feed: Option<watch::Receiver<Arc<Snapshot>>>,
    xds: Option<XdsSetup>,
    status_writer: Option<StatusWriterConfig>,
    provisioner: Option<ProvisionerConfig>,
    status_scope: Option<StatusScope>,
    leader: Option<LeaderConfig>,
}

/// The xDS server to start: where, and how it translates snapshots.
struct XdsSetup {
    config: XdsConfig,
    translate: TranslateFn,
}

/// A started process: the bound addresses, and the handle to stop it.
pub struct Running {
    /// Where the webhook listens.
    pub webhook_addr: SocketAddr,
    /// Where the admin server listens.
    pub admin_addr: SocketAddr,
    /// Where the xDS server listens, when started.
    pub xds_addr: Option<SocketAddr>,
    /// Where the plaintext xDS listener (no identity, no secrets) listens, when asked for.
    pub xds_plaintext_addr: Option<SocketAddr>,
    /// The CA file written in self-signed mode.
    pub self_signed_ca: Option<PathBuf>,
    /// The latest valid config snapshot, when config sources are configured.
    pub snapshots: Option<watch::Receiver<Arc<Snapshot>>>,
    stop: watch::Sender<bool>,
    tasks: JoinSet<Result<(), Error>>,
}

type Tasks = JoinSet<Result<(), Error>>;

impl App {
    /// Creates the builder; metrics register under the `admitpilot` prefix.
    pub fn new(config: ServeConfig) -> Self {
        App {
            config,
            registry: Registry::with_prefix("admitpilot"),
            readiness: Readiness::new(),
            admin_routes: Vec::new(),
            sources: None,
            snapshot_feed: None,
            xds: None,
            status_writer: None,
            provisioner: None,
            status_scope: None,
            leader: None,
        }
    }

    /// Adds the config sources (folder and/or Kubernetes); they feed the snapshot channel of [`Running`].
    pub fn sources(mut self, settings: SourceSettings) -> Self {
        self.sources = settings.any().then_some(settings);
        self
    }

    /// Uses `snapshots` as the config feed instead of starting sources (for embedding and tests).
    pub fn snapshots(mut self, snapshots: watch::Receiver<Arc<Snapshot>>) -> Self {
        self.snapshot_feed = Some(snapshots);
        self
    }

    /// Adds the xDS server: it serves `translate` of every snapshot the sources (or the feed given to
    /// [`App::snapshots`]) publish, and adds `/debug/syncz` to the admin server.
    pub fn xds(mut self, config: XdsConfig, translate: TranslateFn) -> Self {
        self.xds = Some(XdsSetup { config, translate });
        self
    }

    /// Competes for the leader Lease with a Kubernetes source ([`crate::leader`]): only the leader writes status and
    /// the last-good ConfigMap.
    pub fn leader(mut self, config: LeaderConfig) -> Self {
        self.leader = Some(config);
        self
    }

    /// Writes Gateway API status as the Lease's leader (with a Kubernetes source and the xDS server; see
    /// [`crate::status_writer`]).
    pub fn status_writer(mut self, config: StatusWriterConfig) -> Self {
        self.status_writer = Some(config);
        self
    }

    /// Provisions the proxies of Gateway API Gateways as the Lease's leader (with a Kubernetes source; see
    /// [`crate::provisioner`]).
    pub fn provisioner(mut self, config: ProvisionerConfig) -> Self {
        self.provisioner = Some(config);
        self
    }

    /// Shows, with the xDS server and config sources, the status of `scope`'s objects in `/debug/configz` as the
    /// gateways connected to this process give it ([`status_writer::local_view`]).
    pub fn status_view(mut self, scope: StatusScope) -> Self {
        self.status_scope = Some(scope);
        self
    }

    /// Gives access to the shared metrics registry, for subsystems to register into before [`App::start`].
    pub fn registry_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }

    /// Returns the readiness conditions, for subsystems to register theirs.
    pub fn readiness(&self) -> &Readiness {
        &self.readiness
    }

    /// Adds routes (such as `/debug/configz`) to the admin server.
    pub fn admin_route(mut self, router: Router) -> Self {
        self.admin_routes.push(router);
        self
    }

    /// Binds every listener and starts every task; returns once the process is serving.
    pub async fn start(mut self) -> Result<Running, Error> {
        let (stop, stopped_rx) = watch::channel(false);
        let mut tasks = Tasks::new();
        let mut kube_client = None;
        let mut leader = None;
        // Without sources (a snapshot feed), nothing is refused.
        let mut refusals = Refusals::default();
        // admitpilot's own namespace (the Lease's), whose service accounts may read `/debug/*` with a token.
        let own_namespace = self.leader.as_ref().map(|config| config.namespace.clone());
        let snapshots = match self.sources.take() {
            Some(settings) => {
                let started = start_sources(
                    settings,
                    self.leader.take(),
                    &mut self.registry,
                    &self.readiness,
                    &stopped_rx,
                    &mut tasks,
                )
                .await?;
                kube_client = started.kube_client;
                leader = started.leader;
                refusals = started.refusals;
                Some(started.snapshots)
            }
            None => self.snapshot_feed.clone(),
        };
        // Gateways whose provisioned proxies are not available (none without provisioning), for status.
        let (unready_tx, unready) = watch::channel(Arc::new(Unready::new()));
        if let (Some(config), Some(client), Some(snapshots), Some(leader)) =
            (self.provisioner.take(), &kube_client, &snapshots, &leader)
        {
            let deleted = Arc::new(tokio::sync::Notify::new());
            let availability = provisioner::watch_availability(
                client.clone(),
                config.namespaces.clone(),
                (unready_tx, Arc::clone(&deleted)),
                stopped_rx.clone(),
            );
            tasks.spawn(async move {
                availability.await;
                Ok(())
            });
            let provisioner = provisioner::run(
                client.clone(),
                config,
                (snapshots.clone(), deleted),
                ProvisionerMetrics::register(&mut self.registry),
                leader.clone(),
                stopped_rx.clone(),
            );
            tasks.spawn(async move {
                provisioner.await;
                Ok(())
            });
        }
        let webhook_metrics = WebhookMetrics::register(&mut self.registry);
        let mut xds_addr = None;
        let mut xds_plaintext_addr = None;
        let mut gateway_check = None;
        let mut configz_status = None;
        let mut debug_access = admin::DebugAccess::Loopback;
        let configz_snapshots = snapshots.clone().filter(|_| self.snapshot_feed.is_none());
        if let Some(setup) = self.xds.take() {
            // Without sources the xDS server serves an empty (loaded) snapshot until the process stops.
            let feed = snapshots.clone().unwrap_or_else(|| {
                let empty = Snapshot {
                    version: 1,
                    ..Snapshot::default()
                };
                watch::channel(Arc::new(empty)).1
            });
            let options = setup.translate.options().cloned();
            let server =
                start_xds(setup, feed, &mut self.registry, &stopped_rx, &mut tasks).await?;
            xds_addr = Some(server.addr);
            xds_plaintext_addr = server.plaintext_addr;
            self.admin_routes.push(server.syncz);
            if let (Some(auth), Some(namespace)) = (&server.auth, &own_namespace) {
                debug_access = admin::DebugAccess::LoopbackOrToken {
                    auth: Arc::clone(auth),
                    namespace: namespace.clone(),
                };
            }
            if let Some(scope) = self.status_scope.clone() {
                let xds = server.connected.clone();
                let view = status_writer::local_view(
                    scope,
                    GatewayFeedback {
                        connections: server.connected.status(),
                        held_back: Arc::new(move || xds.held_back()),
                    },
                    refusals.clone(),
                );
                configz_status = Some(view);
            }
            if let (Some(config), Some(client), Some(snapshots), Some(leader)) =
                (self.status_writer.take(), kube_client, &snapshots, leader)
            {
                let metrics = StatusMetrics::register(&mut self.registry);
                let xds = server.connected.clone();
                let gateways = GatewayFeedback {
                    connections: server.connected.status(),
                    held_back: Arc::new(move || xds.held_back()),
                };
                let writer = status_writer::run(
                    client,
                    config,
                    (snapshots.clone(), refusals.clone()),
                    (gateways, unready),
                    metrics,
                    leader,
                    stopped_rx.clone(),
                );
                tasks.spawn(async move {
                    writer.await;
                    Ok(())
                });
            }
            // The webhook checks what a change does to the gateways this process serves.
            if let (Some(options), Some(snapshots)) = (options, &snapshots) {
                let connected = server.connected;
                gateway_check = Some(Arc::new(LiveGatewayCheck::new(
                    options,
                    self.config.webhook.reference_check,
                    snapshots.clone(),
                    Arc::new(move || connected.connected_groups()),
                    webhook_metrics.clone(),
                )) as Arc<dyn GatewayCheck>);
            }
        }
        if let Some(snapshots) = configz_snapshots {
            self.admin_routes
                .push(admin::configz::router(snapshots, configz_status));
        }
        let webhook = start_webhook(
            &self.config.webhook,
            gateway_check,
            webhook_metrics,
            &self.readiness,
            &stopped_rx,
            &mut tasks,
        )
        .await?;
        let admin_router = admin::router(
            Arc::new(self.registry),
            self.readiness,
            debug_access,
            self.admin_routes,
        );
        let admin_addr = start_admin(
            self.config.admin_addr,
            admin_router,
            &stopped_rx,
            &mut tasks,
        )
        .await?;
        Ok(Running {
            webhook_addr: webhook.addr,
            admin_addr,
            xds_addr,
            xds_plaintext_addr,
            self_signed_ca: webhook.self_signed_ca,
            snapshots,
            stop,
            tasks,
        })
    }
}

impl Running {
    /// Runs until `signal` resolves (or a task fails), then shuts everything down.
    pub async fn run_until(mut self, signal: impl Future<Output = ()>) -> Result<(), Error> {
        let early = tokio::select! {
            _ = signal => None,
            Some(ended) = self.tasks.join_next() => Some(flatten(ended)),
        };
        let stopped = self.shutdown().await;
        match early {
            Some(Err(error)) => Err(error),
            Some(Ok(())) => Err(Error::EndedEarly("a server")),
            None => stopped,
        }
    }

    /// Stops accepting, lets open connections drain, and waits for every task.
    pub async fn shutdown(mut self) -> Result<(), Error> {
        // Receivers may be gone if their tasks already ended; nothing left to tell then.
        let _ = self.stop.send(true);
        let mut result = Ok(());
        while let Some(ended) = self.tasks.join_next().await {
            if let Err(error) = flatten(ended) {
                tracing::error!(%error, "task failed during shutdown");
                result = Err(error);
            }
        }
        result
    }
}

fn flatten(ended: Result<Result<(), Error>, tokio::task::JoinError>) -> Result<(), Error> {
    ended.map_err(|e| Error::Panicked(e.to_string()))?
}

/// Resolves when `stop` turns true (or its sender is dropped).
async fn stopped(mut stop: watch::Receiver<bool>) {
    // An error means the sender is gone: also a reason to stop.
    let _ = stop.wait_for(|stop| *stop).await;
}

async fn bind(what: &'static str, addr: SocketAddr) -> Result<TcpListener, Error> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Bind { what, addr, source })
}

fn local_addr(
    what: &'static str,
    listener: &TcpListener,
    addr: SocketAddr,
) -> Result<SocketAddr, Error> {
    listener
        .local_addr()
        .map_err(|source| Error::Bind { what, addr, source })
}

struct StartedWebhook {
    addr: SocketAddr,
    self_signed_ca: Option<PathBuf>,
}

async fn start_webhook(
    config: &WebhookConfig,
    gateway_check: Option<Arc<dyn GatewayCheck>>,
    metrics: WebhookMetrics,
    readiness: &Readiness,
    stop: &watch::Receiver<bool>,
    tasks: &mut Tasks,
) -> Result<StartedWebhook, Error> {
    let cert_loaded = readiness.register("certificate loaded");
    let (store, self_signed_ca) = load_certificate(config, &metrics, stop, tasks)?;
    cert_loaded.set(true);
    let tls = tls::server_config(store)?;
    let mut webhook = Webhook::new(config.decode.clone(), config.limits.max_body_bytes, metrics)
        .with_review_budget(config.limits.review_budget);
    if let Some(check) = gateway_check {
        webhook = webhook.with_gateway_check(check);
    }
    let router = admission::router(webhook, &config.limits, config.bench_noop);
    let listener = bind("the webhook", config.addr).await?;
    let addr = local_addr("the webhook", &listener, config.addr)?;
    let limits = config.limits.clone();
    let shutdown = stopped(stop.clone());
    tasks.spawn(async move {
        serve_https(listener, tls, router, limits, shutdown).await;
        Ok(())
    });
    tracing::info!(%addr, "admission webhook listening (HTTPS)");
    Ok(StartedWebhook {
        addr,
        self_signed_ca,
    })
}

/// Loads the serving certificate and, for files, starts the reloader task.
fn load_certificate(
    config: &WebhookConfig,
    metrics: &WebhookMetrics,
    stop: &watch::Receiver<bool>,
    tasks: &mut Tasks,
) -> Result<(Arc<CertStore>, Option<PathBuf>), Error> {
    match &config.cert {
        CertSource::Files(files) => {
            let (key, pair) = tls::load_files(files)?;
            let store = CertStore::new(key);
            let reloader = tls::watch_files(
                files.clone(),
                pair,
                store.clone(),
                config.reload_interval,
                tls::Reloading {
                    what: "webhook",
                    observe: {
                        let metrics = metrics.clone();
                        move |ok| metrics.observe_cert_reload(ok)
                    },
                },
                stopped(stop.clone()),
            );
            tasks.spawn(async move {
                reloader.await;
                Ok(())
            });
            Ok((store, None))
        }
        CertSource::SelfSigned { ca_out } => {
            let key = tls::self_signed(ca_out)?;
            tracing::warn!(
                ca = %ca_out.display(),
                "no --tls-cert/--tls-key: serving a self-signed certificate for localhost (local use only); its CA is in this file"
            );
            Ok((CertStore::new(key), Some(ca_out.clone())))
        }
    }
}

/// Starts the config sources; the "sources synced" readiness condition turns true after their initial sync.
async fn start_sources(
    settings: SourceSettings,
    leader_config: Option<LeaderConfig>,
    registry: &mut Registry,
    readiness: &Readiness,
    stop: &watch::Receiver<bool>,
    tasks: &mut Tasks,
) -> Result<StartedSources, Error> {
    let synced_condition = readiness.register("sources synced");
    let metrics = SourceMetrics::default();
    metrics.register(registry);
    let mut config = settings.resolve().await?;
    let kube_client = config.kube.as_ref().map(|kube| kube.client.clone());
    let mut leader = None;
    if let (Some(leader_config), Some(client)) = (leader_config, &kube_client) {
        let (sender, receiver) = watch::channel(false);
        let election = crate::leader::run(client.clone(), leader_config, sender, stop.clone());
        tasks.spawn(async move {
            election.await;
            Ok(())
        });
        config.leader = Some(receiver.clone());
        leader = Some(receiver);
    }
    let sources = source::start(config, metrics)?;
    let snapshots = sources.snapshots.clone();
    let refusals = sources.refusals.clone();
    let mut synced = sources.synced.clone();
    let shutdown = stopped(stop.clone());
    tasks.spawn(async move {
        tokio::pin!(shutdown);
        tokio::select! {
            () = &mut shutdown => {}
            ok = async { synced.wait_for(|synced| *synced).await.is_ok() } => {
                if ok {
                    synced_condition.set(true);
                    tracing::info!("config sources synced");
                }
                shutdown.await;
            }
        }
        // Dropping the sources stops their tasks.
        drop(sources);
        Ok(())
    });
    Ok(StartedSources {
        snapshots,
        refusals,
        kube_client,
        leader,
    })
}

/// Started config sources: their snapshots, and the Kubernetes client when one of them is the API server.
struct StartedSources {
    snapshots: watch::Receiver<Arc<Snapshot>>,
    /// The objects stored although validation refuses them (their status says why).
    refusals: Refusals,
    kube_client: Option<kube::Client>,
    /// True while this replica holds the leader Lease (with a Kubernetes source and [`App::leader`]).
    leader: Option<watch::Receiver<bool>>,
}

struct StartedXds {
    addr: SocketAddr,
    plaintext_addr: Option<SocketAddr>,
    /// `/debug/syncz`.
    syncz: Router,
    /// The server, to ask which proxy groups are connected.
    connected: XdsServer,
    /// The API-server checks of the authenticated port (which also guard `/debug/*`).
    auth: Option<Arc<KubeAuth>>,
}

/// Starts the xDS server task, and the reloader of its certificate.
async fn start_xds(
    setup: XdsSetup,
    snapshots: watch::Receiver<Arc<Snapshot>>,
    registry: &mut Registry,
    stop: &watch::Receiver<bool>,
    tasks: &mut Tasks,
) -> Result<StartedXds, Error> {
    let metrics = XdsMetrics::register(registry);
    let server = XdsServer::new(snapshots, setup.translate, metrics);
    let syncz = server.router();
    let config = setup.config;
    let policy = match &config.auth {
        XdsAuth::Open { serve_secrets } => {
            if *serve_secrets {
                tracing::warn!("--xds-unauthenticated-secrets: certificates and private keys go to any xDS client \
                                that asks (local use on a trusted machine only)");
            }
            CallPolicy::Open {
                serve_secrets: *serve_secrets,
            }
        }
        XdsAuth::Token {
            audience,
            kubeconfig,
            recheck,
        } => {
            if config.tls.is_none() {
                return Err(Error::XdsAuthWithoutTls);
            }
            let client = source::kubernetes::client(kubeconfig.as_deref()).await?;
            CallPolicy::Token(KubeAuth::with_recheck(client, audience.clone(), *recheck))
        }
    };
    let tls = match &config.tls {
        Some(files) => {
            let pair = files.pair();
            let (key, pem) = tls::load_files(&pair)?;
            let store = CertStore::new(key);
            let reloader = tls::watch_files(
                pair,
                pem,
                store.clone(),
                config.reload_interval,
                tls::Reloading {
                    what: "xDS",
                    observe: |_: bool| {},
                },
                stopped(stop.clone()),
            );
            tasks.spawn(async move {
                reloader.await;
                Ok(())
            });
            Some(files.server_config(store)?)
        }
        None => None,
    };
    let listener = bind("the xDS server", config.addr).await?;
    let addr = local_addr("the xDS server", &listener, config.addr)?;
    let auth = match &policy {
        CallPolicy::Token(auth) => Some(Arc::clone(auth)),
        CallPolicy::Open { .. } => None,
    };
    let authenticated = auth.is_some();
    let mut endpoints = vec![Endpoint {
        listener,
        tls: tls.clone(),
        policy,
        limits: config.limits,
    }];
    tracing::info!(%addr, tls = tls.is_some(), authenticated, "xDS server listening (gRPC ADS and MCP)");
    let mut plaintext_addr = None;
    if let Some(wanted) = config.plaintext_addr {
        let listener = bind("the plaintext xDS server", wanted).await?;
        let bound = local_addr("the plaintext xDS server", &listener, wanted)?;
        tracing::info!(addr = %bound, "plaintext xDS server listening (no identity, no secrets)");
        plaintext_addr = Some(bound);
        endpoints.push(Endpoint {
            listener,
            tls: None,
            policy: CallPolicy::Open {
                serve_secrets: false,
            },
            limits: config.limits,
        });
    }
    let shutdown = stopped(stop.clone());
    let connected = server.clone();
    tasks.spawn(async move {
        server
            .serve_endpoints(endpoints, shutdown)
            .await
            .map_err(Error::from)
    });
    Ok(StartedXds {
        addr,
        plaintext_addr,
        syncz,
        connected,
        auth,
    })
}

async fn start_admin(
    addr: SocketAddr,
    router: Router,
    stop: &watch::Receiver<bool>,
    tasks: &mut Tasks,
) -> Result<SocketAddr, Error> {
    let listener = bind("the admin server", addr).await?;
    let bound = local_addr("the admin server", &listener, addr)?;
    let shutdown = stopped(stop.clone());
    tasks.spawn(async move {
        admin::serve(listener, router, shutdown)
            .await
            .map_err(Error::Admin)
    });
    tracing::info!(addr = %bound, "admin server listening (HTTP)");
    Ok(bound)
}

/// Resolves on SIGTERM or ctrl-c (SIGINT).
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::error!(%error, "cannot listen for ctrl-c");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::error!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => tracing::info!("ctrl-c received; shutting down"),
        _ = terminate => tracing::info!("SIGTERM received; shutting down"),
    }
}
