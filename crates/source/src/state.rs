//! Where last good versions are kept between runs (`--state-dir` or `--state-configmap`): takes the shared
//! [`HeldObjects`], yields the versions an earlier run persisted ([`State::loaded`], read once, before any source
//! admits an object) and a writer task that saves the current set whenever it changes.
//!
//! Rules:
//! * The writer starts saving once every source has synced, so a half-listed view never overwrites the state; it
//!   waits [`WRITE_QUIET`] after a change so a burst is one write.
//! * Several replicas may share one ConfigMap; with `serve --kube` only the holder of the leader Lease writes it
//!   ([`crate::leader`]). A write happens only when the view differs from what is stored (read, compare, replace
//!   with the read `resourceVersion`; a conflict reads again), so a new leader's first write is a no-op when the
//!   views agree. An entry left by a lagging writer is harmless (a persisted version is only used for an object
//!   that is invalid when admitpilot starts, and only when its `uid` is the same) and the next write removes it.
//! * A state that cannot be read at start is logged and treated as empty, except that a Kubernetes API that does
//!   not answer is retried (the watchers cannot sync without it either).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use tokio::sync::{watch, OnceCell};
use tokio::task::JoinHandle;

use super::kubernetes::{Backoff, RetryDelay};
use super::last_good::{decode, encode, Held, HeldObjects, MAX_STATE_BYTES};
use super::{AdmitOptions, SourceMetrics};

/// File name in `--state-dir`, and data key of the `--state-configmap`.
pub const STATE_KEY: &str = "last-good.json";
/// Quiet time after a change of the held set before it is written.
pub const WRITE_QUIET: Duration = Duration::from_millis(200);
/// Attempts of one write that keeps meeting a conflicting writer.
const WRITE_ATTEMPTS: usize = 5;

/// Where the state lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateLocation {
    /// `--state-dir`: the file [`STATE_KEY`] in this folder (created when missing).
    Dir(PathBuf),
    /// `--state-configmap NAMESPACE/NAME`: the data key [`STATE_KEY`] of this ConfigMap.
    ConfigMap {
        /// Namespace (admitpilot's own).
        namespace: String,
        /// Name.
        name: String,
    },
}

impl std::str::FromStr for StateLocation {
    type Err = String;

    /// Parses `NAMESPACE/NAME` as a ConfigMap location.
    fn from_str(text: &str) -> Result<Self, String> {
        match text.split_once('/') {
            Some((namespace, name)) if !namespace.is_empty() && !name.is_empty() => {
                Ok(StateLocation::ConfigMap {
                    namespace: namespace.to_string(),
                    name: name.to_string(),
                })
            }
            _ => Err(format!("expected NAMESPACE/NAME, got {text:?}")),
        }
    }
}

impl std::fmt::Display for StateLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StateLocation::Dir(dir) => write!(f, "{}", dir.join(STATE_KEY).display()),
            StateLocation::ConfigMap { namespace, name } => {
                write!(f, "ConfigMap {namespace}/{name} key {STATE_KEY}")
            }
        }
    }
}

/// Errors reading or writing the state.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The state file could not be read or written.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The Kubernetes API refused or did not answer.
    #[error("{0}")]
    Kube(#[from] kube::Error),
    /// A ConfigMap location without a Kubernetes client (`--state-configmap` needs `--kube`).
    #[error("a ConfigMap state needs the Kubernetes source (--kube)")]
    NoClient,
    /// Other writers kept changing the ConfigMap.
    #[error("the ConfigMap kept changing under the write")]
    Conflicts,
}

/// The result of this module's fallible functions.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The persisted state of one run: where it lives and what was loaded from it. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct State {
    location: Option<Arc<Backend>>,
    loaded: Arc<OnceCell<Arc<Held>>>,
}

struct Backend {
    location: StateLocation,
    client: Option<Client>,
    options: AdmitOptions,
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend")
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

impl State {
    /// A state at `location`; `client` is needed for a ConfigMap, `options` validate what is read back.
    pub fn new(location: StateLocation, client: Option<Client>, options: AdmitOptions) -> Self {
        State {
            location: Some(Arc::new(Backend {
                location,
                client,
                options,
            })),
            loaded: Arc::default(),
        }
    }

    /// Returns what an earlier run persisted (read on the first call; every later call waits for that read).
    pub async fn loaded(&self) -> Arc<Held> {
        self.loaded
            .get_or_init(|| async {
                match &self.location {
                    Some(backend) => Arc::new(backend.load().await),
                    None => Arc::default(),
                }
            })
            .await
            .clone()
    }

    /// Starts the writer: once `synced` is true, keeps the `last_good_*` gauges current and, with a location,
    /// saves the held set whenever it changes (a failed write is retried with backoff).
    /// With `leader`, only saves while it is true (the replica holds the leader Lease, see [`crate::leader`]).
    pub fn spawn_writer(
        &self,
        held: HeldObjects,
        synced: watch::Receiver<bool>,
        metrics: SourceMetrics,
        leader: Option<watch::Receiver<bool>>,
    ) -> JoinHandle<()> {
        tokio::spawn(write_changes(
            self.location.clone(),
            held,
            synced,
            metrics,
            leader,
        ))
    }
}

async fn write_changes(
    backend: Option<Arc<Backend>>,
    held: HeldObjects,
    mut synced: watch::Receiver<bool>,
    metrics: SourceMetrics,
    mut leader: Option<watch::Receiver<bool>>,
) {
    if synced.wait_for(|synced| *synced).await.is_err() {
        return;
    }
    let mut changed = held.subscribe();
    let mut written: Option<String> = None;
    let mut retry = RetryDelay::new(Backoff::default());
    loop {
        let all = held.all();
        metrics.last_good_held.set(gauge(all.len()));
        let mut failed = None;
        let leads = leader
            .as_mut()
            .is_none_or(|leader| *leader.borrow_and_update());
        if let (Some(backend), true) = (&backend, leads) {
            let encoded = encode(&all, MAX_STATE_BYTES);
            metrics.last_good_unsaved.set(gauge(encoded.left_out.len()));
            if !encoded.left_out.is_empty() {
                let left_out: Vec<String> =
                    encoded.left_out.iter().map(ToString::to_string).collect();
                tracing::error!(state = %backend.location, limit_bytes = MAX_STATE_BYTES, ?left_out,
                    "last good versions do not fit in the state; these are served but not persisted");
            }
            if written.as_deref() != Some(encoded.text.as_str()) {
                match backend.save(&encoded.text).await {
                    Ok(()) => {
                        tracing::info!(state = %backend.location,
                            objects = all.len() - encoded.left_out.len(), "last good versions persisted");
                        written = Some(encoded.text);
                        retry = RetryDelay::new(Backoff::default());
                    }
                    Err(error) => {
                        metrics.state_write_errors.inc();
                        let delay = retry.take();
                        tracing::error!(state = %backend.location, %error, retry_in = ?delay,
                            "cannot persist last good versions; retrying");
                        failed = Some(delay);
                    }
                }
            }
        }
        match failed {
            // Retry after the delay, or sooner when the set changes.
            Some(delay) => {
                if let Ok(Err(_)) = tokio::time::timeout(delay, changed.changed()).await {
                    return;
                }
            }
            None => {
                let leadership = async {
                    match leader.as_mut() {
                        Some(leader) => leader.changed().await.is_ok(),
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    result = changed.changed() => if result.is_err() { return },
                    // Becoming leader: write what is held now (another replica may have written before).
                    running = leadership => if !running { return } else { written = None },
                }
            }
        }
        // Let a burst of changes settle into one write.
        while tokio::time::timeout(WRITE_QUIET, changed.changed())
            .await
            .is_ok_and(|r| r.is_ok())
        {}
    }
}

fn gauge(count: usize) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

impl Backend {
    /// Reads and decodes the state; logs what was dropped. Never fails: an unreadable state counts as empty.
    async fn load(&self) -> Held {
        let text = match self.read_retrying().await {
            Ok(Some(text)) => text,
            Ok(None) => {
                tracing::info!(state = %self.location, "no persisted last good versions");
                return Held::new();
            }
            Err(error) => {
                tracing::error!(state = %self.location, %error,
                    "cannot read persisted last good versions; starting without them");
                return Held::new();
            }
        };
        match decode(&text, &self.options) {
            Ok((held, dropped)) => {
                for reason in dropped {
                    tracing::warn!(state = %self.location, %reason, "persisted last good version dropped");
                }
                tracing::info!(state = %self.location, objects = held.len(),
                    "persisted last good versions loaded");
                held
            }
            Err(error) => {
                tracing::error!(state = %self.location, %error,
                    "persisted last good versions unreadable; starting without them");
                Held::new()
            }
        }
    }

    /// Reads the text; a Kubernetes API that does not answer (or answers 5xx) is retried with backoff.
    async fn read_retrying(&self) -> Result<Option<String>, Error> {
        let mut retry = RetryDelay::new(Backoff::default());
        loop {
            match self.read().await {
                Err(Error::Kube(error)) if transient(&error) => {
                    let delay = retry.take();
                    tracing::warn!(state = %self.location, %error, retry_in = ?delay,
                        "cannot read persisted last good versions yet; retrying");
                    retry.wait(delay).await;
                }
                other => return other,
            }
        }
    }

    async fn read(&self) -> Result<Option<String>, Error> {
        match &self.location {
            StateLocation::Dir(dir) => match tokio::fs::read_to_string(dir.join(STATE_KEY)).await {
                Ok(text) => Ok(Some(text)),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(error) => Err(error.into()),
            },
            StateLocation::ConfigMap { namespace, name } => {
                let map = self.config_maps(namespace)?.get_opt(name).await?;
                Ok(map
                    .and_then(|m| m.data)
                    .and_then(|mut d| d.remove(STATE_KEY)))
            }
        }
    }

    /// Writes the text (a folder: a temporary file renamed over the old one).
    async fn save(&self, text: &str) -> Result<(), Error> {
        match &self.location {
            StateLocation::Dir(dir) => {
                tokio::fs::create_dir_all(dir).await?;
                let temporary = dir.join(format!(".{STATE_KEY}.tmp"));
                tokio::fs::write(&temporary, text).await?;
                tokio::fs::rename(&temporary, dir.join(STATE_KEY)).await?;
                Ok(())
            }
            StateLocation::ConfigMap { namespace, name } => {
                let api = self.config_maps(namespace)?;
                for _ in 0..WRITE_ATTEMPTS {
                    let result = match api.get_opt(name).await? {
                        Some(mut map) => {
                            let data = map.data.get_or_insert_with(Default::default);
                            if data.get(STATE_KEY).map(String::as_str) == Some(text) {
                                return Ok(());
                            }
                            data.insert(STATE_KEY.to_string(), text.to_string());
                            api.replace(name, &PostParams::default(), &map).await
                        }
                        None => {
                            let map = ConfigMap {
                                metadata: ObjectMeta {
                                    name: Some(name.clone()),
                                    namespace: Some(namespace.clone()),
                                    ..ObjectMeta::default()
                                },
                                data: Some([(STATE_KEY.to_string(), text.to_string())].into()),
                                ..ConfigMap::default()
                            };
                            api.create(&PostParams::default(), &map).await
                        }
                    };
                    match result {
                        Ok(_) => return Ok(()),
                        Err(kube::Error::Api(status)) if status.code == 409 => continue,
                        Err(error) => return Err(error.into()),
                    }
                }
                Err(Error::Conflicts)
            }
        }
    }

    fn config_maps(&self, namespace: &str) -> Result<Api<ConfigMap>, Error> {
        let client = self.client.clone().ok_or(Error::NoClient)?;
        Ok(Api::namespaced(client, namespace))
    }
}

/// An API error worth retrying: no answer, or a server-side failure.
fn transient(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => status.code >= 500 || status.code == 429,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::last_good::HeldObject;
    use crate::Scope;
    use admitpilot_model::decode::test_object;

    /// With a leader channel, the state is written only while this replica leads, and at once when it starts to.
    #[tokio::test]
    async fn only_the_leader_writes_the_state() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let options = AdmitOptions {
            decode: Default::default(),
            default_namespace: "default".into(),
        };
        let state = State::new(StateLocation::Dir(dir.path().into()), None, options);
        let held = HeldObjects::default();
        let (leader_tx, leader) = watch::channel(false);
        let (_synced_tx, synced) = watch::channel(true);
        let writer =
            state.spawn_writer(held.clone(), synced, SourceMetrics::default(), Some(leader));
        let object = test_object(serde_json::json!({"apiVersion": "networking.istio.io/v1",
            "kind": "VirtualService", "metadata": {"name": "vs", "namespace": "default"},
            "spec": {"hosts": ["a.example"]}}));
        let mut objects = Held::new();
        objects.insert(
            object.key(),
            HeldObject {
                origin: String::new(),
                object,
            },
        );
        held.set(&Scope::new("s"), objects);
        let file = dir.path().join(STATE_KEY);
        // Past the writer's quiet time and more: a follower writes nothing.
        tokio::time::sleep(WRITE_QUIET * 3).await;
        assert!(!file.exists(), "a follower wrote the state");
        leader_tx.send_replace(true);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !file.exists() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the new leader never wrote the state"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        writer.abort();
    }

    #[test]
    fn configmap_locations_parse() {
        assert_eq!(
            "admitpilot/last-good".parse::<StateLocation>(),
            Ok(StateLocation::ConfigMap {
                namespace: "admitpilot".into(),
                name: "last-good".into()
            })
        );
        assert!("last-good".parse::<StateLocation>().is_err());
        assert!("/x".parse::<StateLocation>().is_err());
    }
}
