//! Config sources: takes a local folder of YAML/JSON files, a Kubernetes API server and/or MCP-over-xDS servers
//! ([`mcp`]), validates every object
//! and yields [`SourceEvent`]s into the [`store::Store`], which keeps all valid objects and publishes debounced,
//! versioned [`Snapshot`](admitpilot_model::Snapshot)s on a `tokio::sync::watch` channel.
//!
//! ```text
//!  folder (notify) ──┐                       ┌──► watch::Receiver<Arc<Snapshot>> (xDS, /debug/configz)
//!  kube watchers ────┼─► SourceEvent ─► Store ┤
//!  MCP subscriber ───┘   (per scope)          └──► watch::Receiver<bool> "sources synced" (readiness)
//! ```
//!
//! Invalid objects never reach the store: each source validates with [`admitpilot_validate::validate_document`] and,
//! when an object that was valid before turns invalid, keeps its last good version in force. With a state
//! location (`--state-dir`, `--state-configmap`), those last good versions are persisted ([`state`]) and a
//! restarted replica falls back on them before its first snapshot.
//!
//! Timing: the store publishes once no event arrived for `debounce` (default 20 ms), and at the latest
//! `debounce_max` (default 250 ms) after the first unpublished change, so a steady stream of changes cannot starve
//! consumers. No snapshot is published before every source has finished its initial sync.

pub mod admit;
pub mod folder;
pub mod kubernetes;
pub mod last_good;
pub mod mcp;
pub mod metrics;
pub mod refusals;
pub mod state;
pub mod store;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use admitpilot_model::decode::DecodeOptions;
use admitpilot_model::{ConfigObject, ObjectKey, Snapshot};

pub use admit::AdmitOptions;
pub use metrics::SourceMetrics;
pub use state::StateLocation;
pub use store::{ScopedSender, Store, StoreConfig};

/// Default quiet period before a burst of changes is published.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(20);
/// Default upper bound on how long a change may wait for a quiet period.
pub const DEFAULT_DEBOUNCE_MAX: Duration = Duration::from_millis(250);
/// Namespace given to objects that do not name one.
pub const DEFAULT_NAMESPACE: &str = "default";

/// Names one producer of objects (one folder, one Kubernetes watcher); a resync replaces only what its scope owns.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Scope(pub Arc<str>);

impl Scope {
    /// Builds a scope from its display name.
    pub fn new(name: impl Into<Arc<str>>) -> Self {
        Scope(name.into())
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// One change a source reports; only valid objects (or last good versions) are ever sent.
#[derive(Debug, Clone)]
pub enum SourceEvent {
    /// Adds or replaces one object.
    Apply(Arc<ConfigObject>),
    /// Removes one object (a no-op when this scope does not hold it).
    Delete(ObjectKey),
    /// Replaces everything the scope holds with this list and marks the scope synced (initial sync or relist).
    Resync(Vec<Arc<ConfigObject>>),
}

/// Errors starting the sources.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The config folder could not be watched or read.
    #[error("config folder {path}: {source}")]
    Folder {
        /// The folder.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: folder::Error,
    },
    /// The Kubernetes client could not be built.
    #[error("kubernetes client: {0}")]
    Kube(#[from] ::kube::Error),
    /// The state location cannot be used.
    #[error("last-good state: {0}")]
    State(#[source] state::Error),
}

/// The result of this module's fallible functions.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything needed to start the sources.
#[derive(Debug, Clone)]
pub struct SourceConfig {
    /// `--config-dir`: a folder of YAML/JSON documents to load and watch.
    pub config_dir: Option<PathBuf>,
    /// `--kube`: watch a Kubernetes API server with this client and options.
    pub kube: Option<kubernetes::KubeConfig>,
    /// `--mcp-source`: MCP-over-xDS servers to subscribe to.
    pub mcp_sources: Vec<mcp::McpAddress>,
    /// `--mcp-source-ca`, `--mcp-source-token-file`: how those servers are connected to.
    pub mcp_auth: mcp::McpClientAuth,
    /// How documents are decoded and which namespace is the default.
    pub admit: AdmitOptions,
    /// Debounce window and maximum delay of the store.
    pub store: StoreConfig,
    /// Where last good versions of invalid objects are persisted; `None` keeps them in memory only.
    pub state: Option<StateLocation>,
    /// True while this replica leads ([`crate::leader`]): only then is the state written. `None`: always.
    pub leader: Option<tokio::sync::watch::Receiver<bool>>,
}

impl Default for SourceConfig {
    fn default() -> Self {
        SourceConfig {
            config_dir: None,
            kube: None,
            mcp_sources: Vec::new(),
            mcp_auth: mcp::McpClientAuth::default(),
            admit: AdmitOptions {
                decode: DecodeOptions::default(),
                default_namespace: DEFAULT_NAMESPACE.to_string(),
            },
            store: StoreConfig::default(),
            state: None,
            leader: None,
        }
    }
}

/// Source settings as the command line gives them (`--config-dir`, `--kube`, `--kubeconfig`,
/// `--watch-namespaces`, `--default-namespace`, `--debounce`, `--debounce-max`); [`SourceSettings::resolve`]
/// builds the Kubernetes client.
#[derive(Debug, Clone, Default)]
pub struct SourceSettings {
    /// Folder of YAML/JSON documents to load and watch.
    pub config_dir: Option<PathBuf>,
    /// Watch a Kubernetes API server (in-cluster config, `$KUBECONFIG`, or `kubeconfig`).
    pub kube: bool,
    /// Kubeconfig file to use instead of the in-cluster config (implies `kube`).
    pub kubeconfig: Option<PathBuf>,
    /// MCP-over-xDS servers to subscribe to.
    pub mcp_sources: Vec<mcp::McpAddress>,
    /// How they are connected to (TLS, token).
    pub mcp_auth: mcp::McpClientAuth,
    /// Namespaces to watch; empty means all.
    pub watch_namespaces: Vec<String>,
    /// `reportingInstance` of Events (the pod name).
    pub instance: Option<String>,
    /// Watch TLS Secrets in the watched namespaces (Kubernetes source only).
    pub tls_secrets: bool,
    /// Watch the ConfigMaps other objects reference (CA bundles, gateway parameters) in the watched namespaces
    /// (Kubernetes source only).
    pub referenced_configmaps: bool,
    /// Decoding and default namespace.
    pub admit: Option<AdmitOptions>,
    /// Debounce settings.
    pub store: StoreConfig,
    /// `--state-dir` / `--state-configmap`.
    pub state: Option<StateLocation>,
}

impl SourceSettings {
    /// Tells whether any source is configured.
    pub fn any(&self) -> bool {
        self.config_dir.is_some()
            || self.kube
            || self.kubeconfig.is_some()
            || !self.mcp_sources.is_empty()
    }

    /// Builds the [`SourceConfig`], creating the Kubernetes client when one is asked for.
    pub async fn resolve(self) -> Result<SourceConfig, kubernetes::Error> {
        let defaults = SourceConfig::default();
        let kube = if self.kube || self.kubeconfig.is_some() {
            let client = kubernetes::client(self.kubeconfig.as_deref()).await?;
            let mut kube = kubernetes::KubeConfig::new(client);
            kube.namespaces = self.watch_namespaces;
            kube.instance = self.instance;
            kube.tls_secrets = self.tls_secrets;
            kube.referenced_configmaps = self.referenced_configmaps;
            Some(kube)
        } else {
            None
        };
        Ok(SourceConfig {
            config_dir: self.config_dir,
            kube,
            mcp_sources: self.mcp_sources,
            mcp_auth: self.mcp_auth,
            admit: self.admit.unwrap_or(defaults.admit),
            store: self.store,
            state: self.state,
            leader: None,
        })
    }
}

/// Running sources: the snapshot channel, the readiness flag, and the tasks (stopped when this is dropped).
#[derive(Debug)]
pub struct Sources {
    /// The latest whole valid state; consumers `borrow_and_update()` after `changed()`.
    pub snapshots: watch::Receiver<Arc<Snapshot>>,
    /// True once every source finished its initial sync and the first snapshot is published.
    pub synced: watch::Receiver<bool>,
    /// Objects stored (in the cluster, in the folder) that validation refuses: their status says why.
    pub refusals: refusals::Refusals,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Sources {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Starts the configured sources and the store; metrics go to `metrics` (register it in the shared registry).
/// Must be called inside a Tokio runtime.
pub fn start(config: SourceConfig, metrics: SourceMetrics) -> Result<Sources, Error> {
    let store = Store::spawn(config.store, metrics.clone());
    let state = match config.state {
        Some(location) => {
            let client = config.kube.as_ref().map(|kube| kube.client.clone());
            if matches!(location, StateLocation::ConfigMap { .. }) && client.is_none() {
                return Err(Error::State(state::Error::NoClient));
            }
            state::State::new(location, client, config.admit.clone())
        }
        None => state::State::default(),
    };
    let held = last_good::HeldObjects::default();
    let refusals = refusals::Refusals::default();
    let mut tasks = Vec::new();
    if let Some(dir) = &config.config_dir {
        let sender = store.sender(folder::scope(dir));
        let task = folder::spawn(
            dir.clone(),
            config.admit.clone(),
            sender,
            metrics.clone(),
            state.clone(),
            held.clone(),
            refusals.clone(),
        )
        .map_err(|source| Error::Folder {
            path: dir.clone(),
            source,
        })?;
        tasks.push(task);
    }
    for address in config.mcp_sources {
        let sender = store.sender(mcp::scope(&address));
        tasks.push(mcp::spawn(
            address,
            config.mcp_auth.clone(),
            config.admit.clone(),
            sender,
            metrics.clone(),
            state.clone(),
            held.clone(),
        ));
    }
    if let Some(kube_config) = config.kube {
        tasks.extend(kubernetes::spawn(
            kube_config,
            config.admit.clone(),
            &store,
            metrics.clone(),
            state.clone(),
            held.clone(),
            refusals.clone(),
        ));
    }
    tasks.push(state.spawn_writer(held, store.synced(), metrics.clone(), config.leader.clone()));
    Ok(Sources {
        snapshots: store.subscribe(),
        synced: store.synced(),
        refusals,
        tasks,
    })
}
