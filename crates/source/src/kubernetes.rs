//! Kubernetes source (`--kube`): takes a `kube::Client`, runs one kube-rs `watcher` per watched kind and namespace,
//! and yields [`SourceEvent`]s (a resync after every initial list or relist, then applies and deletes).
//!
//! What is watched (all as `DynamicObject`s, `ApiResource` built from [`Kind::info`]):
//! * the ConfigMap `higress-config` in the higress namespace and Istio's mesh config, the ConfigMap `istio` in
//!   the Istio namespace (field selectors on their names);
//! * every Istio and Higress custom resource kind ([`default_kinds`]): those translation turns into gateway config,
//!   and those it does not, which are counted and reported as not enforced. A kind whose CRD is not installed
//!   is simply empty (see failure handling);
//! * Ingresses and IngressClasses (networking.k8s.io/v1, built into every API server, also in [`default_kinds`]):
//!   which Ingresses are served is decided from them ([`admitpilot_model::ingress`]);
//! * Services and EndpointSlices;
//! * Secrets of type `kubernetes.io/tls` (field selector `type=kubernetes.io/tls`). All TLS Secrets in the watched
//!   namespaces are watched rather than only those a Gateway names: it avoids restarting watches whenever a Gateway
//!   changes, and RBAC must grant Secret reads in those namespaces either way. Generic (Opaque) credential Secrets
//!   are not watched.
//!
//! `--watch-namespaces` limits every watcher except the two ConfigMaps' to those namespaces (one watcher per kind
//! and namespace); without it, kinds are watched cluster-wide. Cluster-scoped kinds (GatewayClass, Namespace,
//! IngressClass) have one cluster-wide watcher either way.
//!
//! Failure handling: a kind whose API is missing (404, CRD not installed) is tried at each served version, newest
//! first; when none answers it is logged, counted as synced-with-nothing, and retried with exponential backoff
//! while the other watchers keep working. A watch the API server no longer serves (410 Gone/Expired, as a watch
//! event or as the answer to the watch request) relists at once, without a backoff wait; a dropped connection
//! resumes from its resourceVersion. The relisted set replaces the old one in one resync, so nothing disappears in
//! between. The retry delay doubles while errors follow each other and starts again from its minimum after any
//! event, a 410, or as long as its maximum without an error, so a long outage does not slow the recovery. An object that fails validation is kept
//! out of the store (its last good version stays, if there was one), logged, counted and reported as a `Warning`
//! Event (events.k8s.io/v1, reason `InvalidConfig`) on the object, once per resourceVersion. Any other list error
//! (403 from missing RBAC, an unreachable API server) is retried with backoff and keeps that watcher unsynced, so
//! `/readyz` ("sources synced") stays false until it is fixed.
//!
//! RBAC needed (ClusterRole, or Role per watched namespace):
//! ```yaml
//! - apiGroups: ["networking.istio.io", "security.istio.io", "telemetry.istio.io", "extensions.istio.io",
//!               "networking.higress.io", "extensions.higress.io", "gateway.networking.k8s.io"]
//!   resources: [<the kinds of default_kinds()>]
//!   verbs: [get, list, watch]
//! - apiGroups: [""]
//!   resources: [services, secrets, configmaps]   # secrets: TLS only; configmaps: higress-config, istio, those
//!   verbs: [get, list, watch]                    # with ca.crt or gateway parameters (--no-referenced-configmaps)
//! - apiGroups: [""]
//!   resources: [namespaces]                      # cluster-wide: their labels, for allowedRoutes selectors
//!   verbs: [get, list, watch]
//! - apiGroups: ["discovery.k8s.io"]
//!   resources: [endpointslices]
//!   verbs: [get, list, watch]
//! - apiGroups: ["networking.k8s.io"]
//!   resources: [ingresses, ingressclasses]       # ingressclasses: cluster-wide (cluster-scoped)
//!   verbs: [get, list, watch]
//! - apiGroups: ["events.k8s.io"]
//!   resources: [events]
//!   verbs: [create, patch]
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::events::{Event as KubeEvent, EventType, Recorder, Reporter};
use kube::runtime::watcher::{self, watcher, Event};
use kube::{Api, Client};
use serde_json::Value;
use tokio::task::JoinHandle;

use super::admit::{admit, Admission, AdmitOptions};
use super::last_good::{fallback, held_without_origin, Held, HeldObjects};
use super::refusals::Refusals;
use super::state::State;
use super::{Scope, ScopedSender, SourceEvent, SourceMetrics, Store};
use admitpilot_model::kind::api_resource;
use admitpilot_model::refusal::{self, Refusal};
use admitpilot_model::{ConfigObject, Finding, Kind, ObjectKey};

/// Kinds watched by default: every Istio, Higress and Gateway API kind admitpilot knows
/// ([`Kind::custom_resources`]), so what it does not enforce on gateways is counted and reported too, plus Ingress and
/// IngressClass. Those two are built into every API server, so unlike the custom resources they never depend on an
/// installed CRD.
pub fn default_kinds() -> Vec<Kind> {
    Kind::custom_resources()
        .chain([Kind::Ingress, Kind::IngressClass])
        .collect()
}

/// Controller name written on Events.
pub const REPORTER: &str = "admitpilot";

/// Errors building a client.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kubeconfig file could not be read.
    #[error("cannot read kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    /// Neither in-cluster config nor a default kubeconfig was found.
    #[error("cannot find cluster config: {0}")]
    Infer(#[from] kube::config::InferConfigError),
    /// The client could not be built from the config.
    #[error("cannot build client: {0}")]
    Client(#[from] kube::Error),
}

/// The result of this module's fallible functions.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Builds a client from `--kubeconfig`, or from the in-cluster service account (falling back to `$KUBECONFIG`).
pub async fn client(kubeconfig: Option<&Path>) -> Result<Client, Error> {
    let config = match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await?
        }
        None => kube::Config::infer().await?,
    };
    Ok(Client::try_from(config)?)
}

/// Retry delays after watch errors: doubles from `min` to `max`; back to `min` after a successful event, a 410
/// (which relists at once) or `max` without an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// First delay.
    pub min: Duration,
    /// Largest delay.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            min: Duration::from_millis(800),
            max: Duration::from_secs(30),
        }
    }
}

/// How to watch a cluster.
#[derive(Clone)]
pub struct KubeConfig {
    /// The API client.
    pub client: Client,
    /// `--watch-namespaces`; empty means all namespaces.
    pub namespaces: Vec<String>,
    /// Istio, Higress, Gateway API and Ingress kinds to watch (besides higress-config, Services, EndpointSlices and
    /// TLS Secrets).
    pub kinds: Vec<Kind>,
    /// Retry delays.
    pub backoff: Backoff,
    /// Events' `reportingInstance` (pod name); `None` uses the controller name.
    pub instance: Option<String>,
    /// Watch TLS Secrets (for Gateways' `credentialName`); off where RBAC grants no Secret reads.
    pub tls_secrets: bool,
    /// Watch ConfigMaps other objects reference (a CA bundle `ca.crt` for BackendTLSPolicy `caCertificateRefs`,
    /// gateway parameters for a `parametersRef`); off where RBAC grants no ConfigMap reads.
    pub referenced_configmaps: bool,
}

impl std::fmt::Debug for KubeConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeConfig")
            .field("namespaces", &self.namespaces)
            .field("kinds", &self.kinds)
            .field("backoff", &self.backoff)
            .finish_non_exhaustive()
    }
}

impl KubeConfig {
    /// Watches the default kinds in all namespaces.
    pub fn new(client: Client) -> Self {
        KubeConfig {
            client,
            namespaces: Vec::new(),
            kinds: default_kinds(),
            backoff: Backoff::default(),
            instance: None,
            tls_secrets: true,
            referenced_configmaps: true,
        }
    }
}

/// One watcher: a kind in one namespace (or all), with an optional field selector.
#[derive(Debug, Clone)]
struct WatchSpec {
    kind: Kind,
    namespace: Option<String>,
    fields: Option<String>,
}

impl WatchSpec {
    fn scope(&self) -> Scope {
        // Named by the variant, not the `kind`: the two groups' `Gateway` watchers (and the two ConfigMap ones) must not
        // replace each other's objects on a resync.
        Scope::new(format!(
            "kube:{:?}/{}",
            self.kind,
            self.namespace.as_deref().unwrap_or("*")
        ))
    }
}

fn watch_specs(config: &KubeConfig, options: &AdmitOptions) -> Vec<WatchSpec> {
    let namespaces: Vec<Option<String>> = if config.namespaces.is_empty() {
        vec![None]
    } else {
        config.namespaces.iter().cloned().map(Some).collect()
    };
    let decode = &options.decode;
    let mut specs = vec![
        WatchSpec {
            kind: Kind::HigressConfig,
            namespace: Some(decode.higress_namespace.clone()),
            fields: Some(format!("metadata.name={}", decode.higress_name)),
        },
        WatchSpec {
            kind: Kind::MeshConfig,
            namespace: Some(decode.mesh_namespace.clone()),
            fields: Some(format!("metadata.name={}", decode.mesh_name)),
        },
    ];
    let kinds = config
        .kinds
        .iter()
        .copied()
        .filter(|k| !matches!(k, Kind::HigressConfig | Kind::MeshConfig))
        .chain([Kind::Service, Kind::EndpointSlice])
        .chain(config.tls_secrets.then_some(Kind::Secret))
        .chain(
            config
                .referenced_configmaps
                .then_some(Kind::ReferencedConfigMap),
        )
        // Their labels decide which namespaces a Gateway API listener's `allowedRoutes` selector admits.
        .chain(
            config
                .kinds
                .contains(&Kind::KubernetesGateway)
                .then_some(Kind::Namespace),
        );
    for kind in kinds {
        // A cluster-scoped kind (GatewayClass, IngressClass) has one watcher, whatever the namespaces.
        let namespaces = if kind.is_cluster_scoped() {
            &[None][..]
        } else {
            &namespaces[..]
        };
        for namespace in namespaces {
            specs.push(WatchSpec {
                kind,
                namespace: namespace.clone(),
                fields: (kind == Kind::Secret).then(|| "type=kubernetes.io/tls".to_string()),
            });
        }
    }
    specs
}

/// Registers one scope per watcher with the store and starts the watchers. Each first waits for the persisted
/// last good versions of `state`, and reports the objects it serves in a last good version to `held`.
pub fn spawn(
    config: KubeConfig,
    options: AdmitOptions,
    store: &Store,
    metrics: SourceMetrics,
    state: State,
    held: HeldObjects,
    refusals: Refusals,
) -> Vec<JoinHandle<()>> {
    let reporter = Reporter {
        controller: REPORTER.into(),
        instance: config.instance.clone(),
    };
    let shared = Arc::new(Shared {
        client: config.client.clone(),
        recorder: Recorder::new(config.client.clone(), reporter),
        options,
        metrics,
        backoff: config.backoff,
        state,
        held,
        refusals,
    });
    watch_specs(&config, &shared.options)
        .into_iter()
        .map(|spec| {
            let sender = store.sender(spec.scope());
            tokio::spawn(run_watcher(spec, shared.clone(), sender))
        })
        .collect()
}

struct Shared {
    client: Client,
    recorder: Recorder,
    options: AdmitOptions,
    metrics: SourceMetrics,
    backoff: Backoff,
    state: State,
    held: HeldObjects,
    refusals: Refusals,
}

fn is_not_found(error: &watcher::Error) -> bool {
    matches!(error, watcher::Error::InitialListFailed(kube::Error::Api(status)) if status.code == 404)
}

/// A list RBAC forbids (403) of a kind admitpilot can do without (Namespaces, referenced ConfigMaps): counted as synced with
/// nothing, like a kind not served, so readiness does not wait on a permission that was left out on purpose.
fn is_forbidden_optional(error: &watcher::Error, kind: Kind) -> bool {
    matches!(kind, Kind::Namespace | Kind::ReferencedConfigMap)
        && matches!(error, watcher::Error::InitialListFailed(kube::Error::Api(status)) if status.code == 403)
}

/// A watch whose resourceVersion the API server no longer has (410 Gone / Expired), as a watch event or as the
/// answer to the watch request: only a new list can continue, and it can be made at once.
fn is_gone(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::WatchError(status) => status.code == 410,
        watcher::Error::WatchStartFailed(kube::Error::Api(status)) => status.code == 410,
        _ => false,
    }
}

/// The delay before the next retry: doubles from `min` to `max` while errors follow each other, and starts again
/// from `min` once the watch has gone on without error for `max` (it had connected again).
#[derive(Debug)]
pub(super) struct RetryDelay {
    backoff: Backoff,
    next: Duration,
    /// When the last retry started (after its delay).
    retried_at: Option<tokio::time::Instant>,
}

impl RetryDelay {
    pub(super) fn new(backoff: Backoff) -> Self {
        RetryDelay {
            backoff,
            next: backoff.min,
            retried_at: None,
        }
    }

    fn reset(&mut self) {
        self.next = self.backoff.min;
    }

    /// The delay to wait now; the one after it doubles.
    pub(super) fn take(&mut self) -> Duration {
        if self
            .retried_at
            .take()
            .is_some_and(|at| at.elapsed() >= self.backoff.max)
        {
            self.reset();
        }
        let delay = self.next;
        self.next = (delay * 2).min(self.backoff.max);
        delay
    }

    /// Waits the delay [`RetryDelay::take`] gives.
    pub(super) async fn wait(&mut self, delay: Duration) {
        tokio::time::sleep(delay).await;
        self.retried_at = Some(tokio::time::Instant::now());
    }
}

/// Runs one watcher forever (until the task is aborted).
async fn run_watcher(spec: WatchSpec, shared: Arc<Shared>, sender: ScopedSender) {
    let versions = spec.kind.info().versions;
    let mut state = WatchState {
        kind: spec.kind,
        scope: spec.scope(),
        persisted: shared.state.loaded().await,
        last_good: HashMap::new(),
        relist: None,
        reported: HashMap::new(),
        held: BTreeSet::new(),
        refused: BTreeMap::new(),
        relist_refused: None,
        refused_changed: false,
    };
    let mut version = 0;
    let mut retry = RetryDelay::new(shared.backoff);
    let mut config = watcher::Config::default();
    if let Some(fields) = &spec.fields {
        config = config.fields(fields);
    }
    loop {
        let resource = api_resource(spec.kind, versions[version]);
        let api: Api<DynamicObject> = match &spec.namespace {
            Some(ns) => Api::namespaced_with(shared.client.clone(), ns, &resource),
            None => Api::all_with(shared.client.clone(), &resource),
        };
        let mut stream = watcher(api, config.clone()).boxed();
        while let Some(item) = stream.next().await {
            match item {
                Ok(event) => {
                    // `Init` comes before the list is even sent: only what the server answered shows it is back.
                    if !matches!(event, Event::Init) {
                        retry.reset();
                    }
                    let held = state.held.len();
                    if state.handle(event, &resource, &shared, &sender).is_err() {
                        return;
                    }
                    if held != state.held.len() || !state.held.is_empty() {
                        state.report_held(&shared);
                    }
                    if std::mem::take(&mut state.refused_changed) {
                        shared.refusals.set(&state.scope, state.refused.clone());
                    }
                }
                Err(error) if is_gone(&error) => {
                    // A new watcher lists at once (kube's own would retry a refused watch start with the same
                    // resourceVersion); the relisted set replaces this watcher's objects at `InitDone`.
                    tracing::info!(resource = %spec.kind.info().resource_name(), namespace = ?spec.namespace, %error,
                        "watch expired; relisting");
                    retry.reset();
                    break;
                }
                Err(error) if is_not_found(&error) || is_forbidden_optional(&error, spec.kind) => {
                    if version + 1 < versions.len() && is_not_found(&error) {
                        version += 1;
                        tracing::debug!(resource = %spec.kind.info().resource_name(), version = versions[version],
                            "API version not served; trying an older one");
                    } else {
                        version = 0;
                        let delay = retry.take();
                        tracing::warn!(resource = %spec.kind.info().resource_name(), namespace = ?spec.namespace,
                            retry_in = ?delay, %error, "API not served (CRD not installed?) or not readable (RBAC); \
                            retrying");
                        // Nothing of this kind exists (any more): count the scope as synced, holding nothing, so
                        // the rest can go live.
                        state.last_good.clear();
                        state.reported.clear();
                        state.held.clear();
                        state.refused.clear();
                        state.report_held(&shared);
                        shared.refusals.set(&state.scope, BTreeMap::new());
                        if state.resync(&sender).is_err() {
                            return;
                        }
                        retry.wait(delay).await;
                    }
                    break;
                }
                Err(error) => {
                    let delay = retry.take();
                    tracing::warn!(resource = %spec.kind.info().resource_name(), namespace = ?spec.namespace, %error,
                        retry_in = ?delay, "watch failed; retrying");
                    retry.wait(delay).await;
                }
            }
        }
    }
}

/// Per-watcher state: last good objects and the relist buffer.
struct WatchState {
    /// The kind it watches: objects of another kind are not its business (the ConfigMap watchers see one
    /// resource, told apart by name and content).
    kind: Kind,
    /// The watcher's store scope.
    scope: Scope,
    /// Last good versions an earlier run persisted (the fallback for objects invalid since before this start).
    persisted: Arc<Held>,
    /// Keys served in a last good version because their newest version is invalid.
    held: BTreeSet<ObjectKey>,
    /// Objects in force from this watcher (the last valid version of each).
    last_good: HashMap<ObjectKey, Arc<ConfigObject>>,
    /// Objects seen during a relist, until `InitDone`.
    relist: Option<HashMap<ObjectKey, Arc<ConfigObject>>>,
    /// resourceVersion of the last rejected version reported per object (avoids repeating Events on relists).
    reported: HashMap<ObjectKey, String>,
    /// Objects the API server stores that validation refuses (their status says why).
    refused: BTreeMap<ObjectKey, Refusal>,
    /// The refusals seen during a relist, until `InitDone` replaces `refused` with them.
    relist_refused: Option<BTreeMap<ObjectKey, Refusal>>,
    /// Whether `refused` changed since it was last published.
    refused_changed: bool,
}

impl WatchState {
    fn handle(
        &mut self,
        event: Event<DynamicObject>,
        resource: &ApiResource,
        shared: &Shared,
        sender: &ScopedSender,
    ) -> Result<(), super::store::Closed> {
        match event {
            Event::Init => {
                self.relist = Some(HashMap::new());
                self.relist_refused = Some(BTreeMap::new());
                Ok(())
            }
            Event::InitApply(object) => {
                if let Some(object) = self.admit(object, resource, shared) {
                    self.relist
                        .get_or_insert_with(HashMap::new)
                        .insert(object.key(), object);
                }
                Ok(())
            }
            Event::InitDone => {
                self.last_good = self.relist.take().unwrap_or_default();
                self.reported
                    .retain(|key, _| self.last_good.contains_key(key));
                self.held.retain(|key| self.last_good.contains_key(key));
                self.refused = self.relist_refused.take().unwrap_or_default();
                self.refused_changed = true;
                self.resync(sender)
            }
            Event::Apply(object) => {
                let key = key_of(&object, resource, &shared.options);
                match self.admit(object, resource, shared) {
                    Some(object) => {
                        self.last_good.insert(object.key(), object.clone());
                        sender.send(SourceEvent::Apply(object))
                    }
                    // No longer this watcher's business (a ConfigMap that lost its `ca.crt` and parameters keys): gone from the config.
                    None => match key.filter(|key| self.last_good.remove(key).is_some()) {
                        Some(key) => sender.send(SourceEvent::Delete(key)),
                        None => Ok(()),
                    },
                }
            }
            Event::Delete(object) => {
                let Some(key) = key_of(&object, resource, &shared.options) else {
                    return Ok(());
                };
                if key.kind != self.kind {
                    return Ok(());
                }
                self.last_good.remove(&key);
                self.reported.remove(&key);
                self.held.remove(&key);
                self.unrefuse(&key);
                sender.send(SourceEvent::Delete(key))
            }
        }
    }

    fn resync(&self, sender: &ScopedSender) -> Result<(), super::store::Closed> {
        sender.send(SourceEvent::Resync(
            self.last_good.values().cloned().collect(),
        ))
    }

    /// Validates one object; returns what must be in force for its key (the object, its last good version, or
    /// nothing). Rejections are logged, counted and reported as Events.
    fn admit(
        &mut self,
        object: DynamicObject,
        resource: &ApiResource,
        shared: &Shared,
    ) -> Option<Arc<ConfigObject>> {
        let reference = object_reference(&object, resource);
        let mut value = match serde_json::to_value(&object) {
            Ok(value) => value,
            Err(error) => {
                tracing::error!(kind = %resource.kind, %error, "cannot re-encode watched object");
                shared.metrics.parse_error("kube");
                return None;
            }
        };
        prepare(&mut value, resource);
        let addressing = refusal::addressing(&value);
        let uid = reference.uid.as_deref();
        let verdict = admit(value, &shared.options, &|key| self.last_good_of(key, uid));
        if verdict.kind().is_some_and(|kind| kind != self.kind) {
            return None;
        }
        let log_warning = |key: &ObjectKey, warning: &Finding| {
            tracing::debug!(object = %key, field = %warning.field, warning = %warning.message,
                "config warning");
        };
        match verdict.settle(&shared.metrics, log_warning) {
            Admission::Serve {
                key,
                object,
                rejected,
            } => {
                self.unrefuse(&key);
                if rejected.is_empty() {
                    self.reported.remove(&key);
                    self.held.remove(&key);
                } else {
                    // Only parts were left out (higress-config items): report them, serve the rest.
                    self.reject(&key, &reference, &rejected, Excluded::Items, shared);
                    self.held.insert(key);
                }
                Some(Arc::from(object))
            }
            Admission::Refuse { key, errors } => {
                if key.is_none() {
                    for error in &errors {
                        tracing::error!(kind = %resource.kind, resource_version = ?reference.resource_version,
                            field = %error.field, error = %error.message, "invalid object excluded");
                    }
                }
                let key = key?;
                let last_good = self.last_good_of(&key, uid);
                let excluded = if last_good.is_some() {
                    Excluded::KeptLastGood
                } else {
                    Excluded::NotServed
                };
                self.reject(&key, &reference, &errors, excluded, shared);
                if let Some(addressing) = &addressing {
                    let refusal = Refusal::from_document(
                        key.clone(),
                        addressing,
                        &errors,
                        last_good.is_some(),
                    );
                    self.refuse(refusal);
                }
                if last_good.is_some() {
                    tracing::warn!(object = %key, "keeping the last good version of the invalid object");
                    self.held.insert(key);
                } else {
                    self.held.remove(&key);
                }
                last_good
            }
            Admission::Ignore => None,
        }
    }
}

impl WatchState {
    /// The version in force for `key` (this run's), else the one an earlier run persisted for the same object.
    fn last_good_of(&self, key: &ObjectKey, uid: Option<&str>) -> Option<Arc<ConfigObject>> {
        self.last_good.get(key).cloned().or_else(|| {
            fallback(&self.persisted, key, uid).map(|held| {
                tracing::info!(object = %key, "using the last good version persisted by an earlier run");
                held.object.clone()
            })
        })
    }

    /// Reports the objects this watcher serves in a last good version.
    /// Records a refusal: in the relist's buffer while relisting, else in the watcher's refusals.
    fn refuse(&mut self, refusal: Refusal) {
        match &mut self.relist_refused {
            Some(relisting) => {
                relisting.insert(refusal.key.clone(), refusal);
            }
            None => {
                self.refused.insert(refusal.key.clone(), refusal);
                self.refused_changed = true;
            }
        }
    }

    /// Forgets the refusal of `key`, if any (it is valid again, or gone).
    fn unrefuse(&mut self, key: &ObjectKey) {
        if let Some(relisting) = &mut self.relist_refused {
            relisting.remove(key);
        }
        self.refused_changed |= self.refused.remove(key).is_some();
    }

    fn report_held(&self, shared: &Shared) {
        let held = held_without_origin(self.held.iter(), |key| self.last_good.get(key));
        shared.held.set(&self.scope, held);
    }

    /// Logs the errors of a rejected object (or part) and reports them as an Event, once per resourceVersion.
    fn reject(
        &mut self,
        key: &ObjectKey,
        reference: &ObjectReference,
        errors: &[Finding],
        excluded: Excluded,
        shared: &Shared,
    ) {
        for error in errors {
            tracing::error!(object = %key, resource_version = ?reference.resource_version,
                field = %error.field, error = %error.message, "invalid object excluded");
        }
        let version = reference.resource_version.clone().unwrap_or_default();
        if self.reported.get(key) != Some(&version) {
            self.reported.insert(key.clone(), version);
            report(shared, reference.clone(), errors, excluded);
        }
    }
}

/// Fills in `apiVersion`/`kind` (list items of built-in kinds omit them) and drops `managedFields`.
fn prepare(value: &mut Value, resource: &ApiResource) {
    if let Some(fields) = value.as_object_mut() {
        fields
            .entry("apiVersion")
            .or_insert_with(|| Value::String(resource.api_version.clone()));
        fields
            .entry("kind")
            .or_insert_with(|| Value::String(resource.kind.clone()));
        if let Some(metadata) = fields.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.remove("managedFields");
        }
    }
}

fn key_of(
    object: &DynamicObject,
    resource: &ApiResource,
    options: &AdmitOptions,
) -> Option<ObjectKey> {
    let mut kind = Kind::from_group_kind(&resource.group, &resource.kind)?;
    let name = object.metadata.name.clone()?;
    let namespace = match &object.metadata.namespace {
        _ if kind.is_cluster_scoped() => String::new(),
        Some(namespace) => namespace.clone(),
        None => options.default_namespace.clone(),
    };
    if kind == Kind::HigressConfig {
        // Every ConfigMap reads as HigressConfig; its name says which kind it is.
        kind = options
            .decode
            .configmap_kind(&namespace, &name)
            .unwrap_or(Kind::ReferencedConfigMap);
    }
    Some(ObjectKey::new(kind, namespace, name))
}

fn object_reference(object: &DynamicObject, resource: &ApiResource) -> ObjectReference {
    ObjectReference {
        api_version: Some(resource.api_version.clone()),
        kind: Some(resource.kind.clone()),
        name: object.metadata.name.clone(),
        namespace: object.metadata.namespace.clone(),
        uid: object.metadata.uid.clone(),
        resource_version: object.metadata.resource_version.clone(),
        field_path: None,
    }
}

/// Largest Event note the API server accepts.
const MAX_NOTE: usize = 1024;

/// What was done with an invalid object (or its invalid parts), as its Event says.
#[derive(Debug, Clone, Copy)]
enum Excluded {
    /// The object is served in its last good version.
    KeptLastGood,
    /// No valid version was ever seen: the object is not served.
    NotServed,
    /// Invalid higress-config items were dropped; the rest is served.
    Items,
}

impl Excluded {
    fn note(self) -> &'static str {
        match self {
            Excluded::KeptLastGood => {
                "admitpilot keeps serving the last good version of this object; this version is invalid: "
            }
            Excluded::NotServed => {
                "admitpilot does not serve this object (it has no valid version yet): "
            }
            Excluded::Items => {
                "admitpilot serves this config without its invalid items, which keep their last good values where \
                 there are any: "
            }
        }
    }
}

/// Publishes a Warning Event on the rejected object, in the background.
fn report(shared: &Shared, reference: ObjectReference, errors: &[Finding], excluded: Excluded) {
    let mut note = String::from(excluded.note());
    for (i, error) in errors.iter().enumerate() {
        if i > 0 {
            note.push_str("; ");
        }
        note.push_str(&error.to_string());
    }
    if note.len() > MAX_NOTE {
        let mut cut = MAX_NOTE - 3;
        while !note.is_char_boundary(cut) {
            cut -= 1;
        }
        note.truncate(cut);
        note.push_str("...");
    }
    let event = KubeEvent {
        type_: EventType::Warning,
        reason: "InvalidConfig".into(),
        note: Some(note),
        action: "Validate".into(),
        secondary: None,
    };
    let recorder = shared.recorder.clone();
    let metrics = shared.metrics.clone();
    tokio::spawn(async move {
        if let Err(error) = recorder.publish(&event, &reference).await {
            metrics.event_errors.inc();
            tracing::warn!(%error, object = ?reference.name, "cannot create Event");
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn retry_delay_doubles_to_its_maximum_and_starts_again_after_a_quiet_stretch() {
        let backoff = Backoff {
            min: Duration::from_millis(10),
            max: Duration::from_millis(40),
        };
        let mut retry = RetryDelay::new(backoff);
        let mut delays = Vec::new();
        for _ in 0..4 {
            let delay = retry.take();
            delays.push(delay.as_millis());
            retry.wait(delay).await;
        }
        assert_eq!(delays, [10, 20, 40, 40]);
        // The retried watch ran without error for as long as the maximum: the next error starts from the minimum.
        tokio::time::advance(backoff.max).await;
        assert_eq!(retry.take(), backoff.min);
        assert_eq!(retry.take(), backoff.min * 2);
        retry.reset();
        assert_eq!(retry.take(), backoff.min);
    }

    #[tokio::test]
    async fn tls_secrets_are_watched_only_when_asked() {
        let url = "http://127.0.0.1:9".parse().expect("a URL");
        let client = Client::try_from(kube::Config::new(url)).expect("a client");
        let mut config = KubeConfig::new(client);
        let options = AdmitOptions {
            decode: admitpilot_model::decode::DecodeOptions::default(),
            default_namespace: "default".into(),
        };
        let watches_secrets = |c: &KubeConfig| {
            watch_specs(c, &options)
                .iter()
                .any(|w| w.kind == Kind::Secret)
        };
        assert!(watches_secrets(&config));
        config.tls_secrets = false;
        assert!(!watches_secrets(&config));
    }

    /// A resync replaces every object of its scope: two watchers sharing one would delete each other's objects (the
    /// Gateway API's `Gateway` watcher, not served, emptied Istio's `Gateway`s every retry).
    #[tokio::test]
    async fn every_watcher_has_a_scope_of_its_own() {
        let url = "http://127.0.0.1:9".parse().expect("a URL");
        let client = Client::try_from(kube::Config::new(url)).expect("a client");
        let mut config = KubeConfig::new(client);
        config.namespaces = vec!["a".into(), "b".into()];
        let mut decode = admitpilot_model::decode::DecodeOptions::default();
        decode.mesh_namespace.clone_from(&decode.higress_namespace);
        let options = AdmitOptions {
            decode,
            default_namespace: "default".into(),
        };
        let specs = watch_specs(&config, &options);
        let scopes: BTreeSet<String> = specs.iter().map(|w| w.scope().to_string()).collect();
        assert_eq!(scopes.len(), specs.len(), "{scopes:?}");
        assert!(specs.iter().any(|w| w.kind == Kind::Gateway));
        assert!(specs.iter().any(|w| w.kind == Kind::KubernetesGateway));
        assert!(specs.iter().any(|w| w.kind == Kind::ReferencedConfigMap));
        assert_eq!(
            specs
                .iter()
                .filter(|w| w.kind == Kind::Namespace)
                .map(|w| w.namespace.clone())
                .collect::<Vec<_>>(),
            [None],
            "one cluster-wide Namespace watcher"
        );
    }

    /// Ingresses are namespaced (one watcher per watched namespace); IngressClasses are cluster-scoped (one
    /// cluster-wide watcher, which `--watch-namespaces` does not multiply).
    #[tokio::test]
    async fn ingresses_are_watched_per_namespace_and_ingress_classes_cluster_wide() {
        let url = "http://127.0.0.1:9".parse().expect("a URL");
        let client = Client::try_from(kube::Config::new(url)).expect("a client");
        let mut config = KubeConfig::new(client);
        let options = AdmitOptions {
            decode: admitpilot_model::decode::DecodeOptions::default(),
            default_namespace: "default".into(),
        };
        let namespaces_of = |config: &KubeConfig, kind: Kind| {
            watch_specs(config, &options)
                .into_iter()
                .filter(|w| w.kind == kind)
                .map(|w| w.namespace)
                .collect::<Vec<_>>()
        };
        assert_eq!(namespaces_of(&config, Kind::Ingress), [None]);
        assert_eq!(namespaces_of(&config, Kind::IngressClass), [None]);
        config.namespaces = vec!["a".into(), "b".into()];
        assert_eq!(
            namespaces_of(&config, Kind::Ingress),
            [Some("a".to_string()), Some("b".to_string())]
        );
        assert_eq!(
            namespaces_of(&config, Kind::IngressClass),
            [None],
            "one cluster-wide IngressClass watcher"
        );
        let specs = watch_specs(&config, &options);
        let ingress = specs
            .iter()
            .find(|w| w.kind == Kind::Ingress)
            .expect("an Ingress watcher");
        assert!(ingress.fields.is_none(), "every Ingress is listed");
        let resource = api_resource(Kind::Ingress, Kind::Ingress.info().versions[0]);
        assert_eq!(
            (resource.api_version.as_str(), resource.plural.as_str()),
            ("networking.k8s.io/v1", "ingresses")
        );
    }

    #[test]
    fn a_configmap_is_keyed_by_what_its_name_makes_it() {
        let options = AdmitOptions {
            decode: admitpilot_model::decode::DecodeOptions::default(),
            default_namespace: "default".into(),
        };
        let resource = api_resource(Kind::ReferencedConfigMap, "v1");
        let key = |namespace: &str, name: &str| {
            let mut object = DynamicObject::new(name, &resource);
            object.metadata.namespace = Some(namespace.into());
            key_of(&object, &resource, &options).map(|k| k.kind)
        };
        let higress = &options.decode;
        assert_eq!(
            key(&higress.higress_namespace, &higress.higress_name),
            Some(Kind::HigressConfig)
        );
        assert_eq!(
            key(&higress.mesh_namespace, &higress.mesh_name),
            Some(Kind::MeshConfig)
        );
        assert_eq!(key("apps", "backend-ca"), Some(Kind::ReferencedConfigMap));
    }

    #[test]
    fn fills_type_meta_and_drops_managed_fields() {
        let mut value = serde_json::json!({"metadata": {"name": "a", "managedFields": [{}]}});
        prepare(&mut value, &api_resource(Kind::Service, "v1"));
        assert_eq!(value["apiVersion"], "v1");
        assert_eq!(value["kind"], "Service");
        assert!(value["metadata"].get("managedFields").is_none());
    }
}
