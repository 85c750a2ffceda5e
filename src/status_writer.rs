//! Status writer: takes the config snapshots and what the connected gateways acknowledged, and, while this replica
//! holds the leader Lease ([`crate::leader`]), writes the Gateway API status [`crate::status`] computes onto the API
//! server.
//!
//! * One leader; the other replicas serve xDS and admission and only publish their reports (below). A new leader
//!   rewrites every status once.
//! * Coalesced and bounded: at most one pass per `interval`, each writing at most `max_writes` objects; a status
//!   equal to the one last written (times aside) is not written again, and a condition that keeps its status keeps
//!   its `lastTransitionTime` (a new leader first reads what is on the server, so it keeps those times too and does
//!   not rewrite an unchanged status; reads count against `max_writes`). Before a pass writes, the leader checks
//!   that its Lease is still its own and fresh ([`crate::leader::still_holds`]).
//! * GatewayClass and Gateway status is admitpilot's alone (a merge patch of `status`); a route's `parents` list and
//!   a BackendTLSPolicy's `ancestors` list are shared with other controllers ([`shared_list`]), so they are read,
//!   admitpilot's entries replaced, and written back with the read `resourceVersion` (a conflict is retried on the
//!   next pass).
//! * `Programmed` means served: a Gateway is Programmed once every connected proxy labelled with its name has
//!   acknowledged a config version holding its current generation ([`crate::status::programmed`]). Each replica
//!   sees only the proxies connected to it, so every replica publishes what its proxies did per Gateway in a
//!   ConfigMap of its own (label `admitpilot.io/status-report`, refreshed every 10 s, deleted on shutdown; the
//!   leader deletes any older than 5 minutes) and the leader combines the fresh ones (at most 30 s old) with its
//!   own. A Gateway whose own change the push guard holds back for its proxies is not Programmed.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use serde_json::{json, Value};
use tokio::sync::watch;

use crate::leader::{still_holds, LeaderConfig};
use crate::model::gateway_api::ROUTE_KINDS;
use crate::model::{Kind, ObjectKey, Snapshot};

/// The status list of `kind` that other controllers write entries into too, keyed by `controllerName`: a route's
/// `parents`, a BackendTLSPolicy's `ancestors`; `None` for a status admitpilot owns whole.
fn shared_list(kind: Kind) -> Option<&'static str> {
    if ROUTE_KINDS.contains(&kind) {
        Some("parents")
    } else if kind == Kind::BackendTlsPolicy {
        Some("ancestors")
    } else {
        None
    }
}
use crate::model::kind::api_resource;
use crate::source::refusals::Refusals;
use crate::status::programmed::{GenerationTracker, HeldBack, ReplicaReport};
use crate::status::{from_reports, StatusScope, StatusUpdate, Unready};
use crate::xds::status::StatusRegistry;

/// Settings of the status writer.
#[derive(Debug, Clone)]
pub struct StatusWriterConfig {
    /// What status to write: the Gateway API objects of a controller, and Istio objects when asked to.
    pub scope: StatusScope,
    /// Namespace of the replicas' reports (admitpilot's own, as the leader Lease's).
    pub namespace: String,
    /// This replica's name (the pod name), in its report's name.
    pub identity: String,
    /// Shortest time between two passes.
    pub interval: Duration,
    /// Most objects written in one pass.
    pub max_writes: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct WriteLabels {
    kind: String,
    result: &'static str,
}

/// The writer's metrics.
#[derive(Debug, Clone)]
pub struct StatusMetrics {
    writes: Family<WriteLabels, Counter>,
    write_seconds: Histogram,
    leader: prometheus_client::metrics::gauge::Gauge,
}

impl StatusMetrics {
    /// Registers `admitpilot_status_writes_total{kind,result}`, `admitpilot_status_write_seconds` and
    /// `admitpilot_status_leader`.
    pub fn register(registry: &mut Registry) -> StatusMetrics {
        let metrics = StatusMetrics {
            writes: Family::default(),
            write_seconds: Histogram::new([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5]),
            leader: Default::default(),
        };
        registry.register(
            "status_writes",
            "Status writes to the API server, by kind and result (written, conflict, gone, failed)",
            metrics.writes.clone(),
        );
        registry.register(
            "status_write_seconds",
            "Time one status write took",
            metrics.write_seconds.clone(),
        );
        registry.register(
            "status_leader",
            "1 while this replica holds the status Lease and writes status",
            metrics.leader.clone(),
        );
        metrics
    }
}

/// Runs the writer until `stop` turns true, writing while `leader` is true (see [`crate::leader`]).
pub async fn run(
    client: Client,
    config: StatusWriterConfig,
    (mut snapshots, refusals): (watch::Receiver<Arc<Snapshot>>, Refusals),
    (gateways, unready): (GatewayFeedback, UnreadyFeed),
    metrics: StatusMetrics,
    mut leader: watch::Receiver<bool>,
    mut stop: watch::Receiver<bool>,
) {
    let tracker = GenerationTracker::new(config.scope.istio_domain_suffix.is_some());
    let mut writer = Writer {
        client,
        config,
        metrics,
        written: HashMap::new(),
        tracker,
        published: None,
        bundle: None,
        refusals,
        unready,
    };
    let mut tick = tokio::time::interval(writer.config.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.wait_for(|stop| *stop) => break,
            _ = tick.tick() => {}
        }
        let snapshot = snapshots.borrow_and_update().clone();
        writer.tracker.track(&snapshot);
        let local = writer.tracker.report(
            &snapshot,
            &gateways.connections.list_gateways(),
            &(gateways.held_back)(),
        );
        writer.publish(&local).await;
        let is_leader = *leader.borrow_and_update();
        writer.metrics.leader.set(i64::from(is_leader));
        if !is_leader {
            // A replica that becomes leader again rewrites everything: another may have written since.
            writer.written.clear();
            continue;
        }
        let mut reports = writer.read_reports().await;
        reports.push(local);
        writer.pass(&snapshot, &reports).await;
    }
    writer.withdraw().await;
}

/// What the status writer reads from the xDS server: the connected gateways and what the push guard leaves out.
pub struct GatewayFeedback {
    /// The connected streams.
    pub connections: Arc<StatusRegistry>,
    /// The objects the push guard leaves out, per connected proxy group, with what Envoy would reject.
    pub held_back: HeldBackFn,
}

/// The Gateways whose provisioned proxies are not available, as the provisioner last saw their Deployments
/// ([`crate::provisioner`]); always empty without provisioning.
pub type UnreadyFeed = watch::Receiver<Arc<Unready>>;

/// The status of a snapshot's objects as the gateways connected to this process give it (what `/debug/configz`
/// shows; in folder mode, the only status there is): this replica's report alone, as a leader would combine it.
pub fn local_view(
    scope: StatusScope,
    gateways: GatewayFeedback,
    refusals: Refusals,
) -> crate::status::StatusView {
    let tracker =
        std::sync::Mutex::new(GenerationTracker::new(scope.istio_domain_suffix.is_some()));
    Arc::new(move |snapshot: &Snapshot| {
        let report = {
            let mut tracker = tracker
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            tracker.track(snapshot);
            tracker.report(
                snapshot,
                &gateways.connections.list_gateways(),
                &(gateways.held_back)(),
            )
        };
        let unready = Unready::new();
        from_reports(
            snapshot,
            &scope,
            (&[report], &refusals.all(), &unready),
            None,
            &now(),
        )
    })
}

/// The time conditions are stamped with: now, RFC 3339 to the second (also `render --status`'s).
pub fn now() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Lists the objects the push guard leaves out: (proxy group, object, what Envoy would reject).
pub type HeldBackFn = Arc<dyn Fn() -> Vec<HeldBack> + Send + Sync>;

/// A report older than this is from a replica that is gone.
const REPORT_STALE: Duration = Duration::from_secs(30);
/// A report older than this is deleted by the leader.
const REPORT_GONE: Duration = Duration::from_secs(300);
/// A replica rewrites its unchanged report this often, to show it is alive.
const REPORT_REFRESH: Duration = Duration::from_secs(10);
/// The CRD whose bundle version GatewayClasses' `SupportedVersion` reports on.
const GATEWAY_CLASS_CRD: &str = "gatewayclasses.gateway.networking.k8s.io";
/// The annotation the Gateway API puts its release on every CRD with.
const BUNDLE_VERSION_ANNOTATION: &str = "gateway.networking.k8s.io/bundle-version";
/// How often the bundle version is read again.
const BUNDLE_REFRESH: Duration = Duration::from_secs(60);
/// The largest report written (a ConfigMap holds at most 1 MiB).
const REPORT_MAX_BYTES: usize = 900 * 1024;
/// The label of report ConfigMaps.
const REPORT_LABEL: &str = "admitpilot.io/status-report";

struct Writer {
    client: Client,
    config: StatusWriterConfig,
    metrics: StatusMetrics,
    /// The status last written per object (times included), to skip unchanged ones and keep transition times, with
    /// the UID of the object it was written to: an object deleted and created again under the same name between
    /// two passes is another object, whose status must be written anew.
    written: HashMap<ObjectKey, (Option<String>, Value)>,
    /// Per object reported on: its generation and the first config version that held it.
    tracker: GenerationTracker,
    /// This replica's report as last published, and when.
    published: Option<(ReplicaReport, Instant)>,
    /// The installed Gateway API CRDs' bundle version as last read (none when unreadable), and when.
    bundle: Option<(Option<String>, Instant)>,
    /// The objects stored although validation refuses them.
    refusals: Refusals,
    /// The Gateways whose provisioned proxies are not available.
    unready: UnreadyFeed,
}

impl Writer {
    /// The report ConfigMap's API and this replica's ConfigMap name.
    fn report_api(&self) -> (Api<ConfigMap>, String) {
        let name: String = format!("admitpilot-status-report-{}", self.config.identity)
            .to_ascii_lowercase()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                    c
                } else {
                    '-'
                }
            })
            .take(253)
            .collect();
        (
            Api::namespaced(self.client.clone(), &self.config.namespace),
            name,
        )
    }

    /// Publishes this replica's report (when it changed, or to refresh it) in its ConfigMap, for the leader.
    async fn publish(&mut self, local: &ReplicaReport) {
        if self
            .published
            .as_ref()
            .is_some_and(|(last, at)| last == local && at.elapsed() < REPORT_REFRESH)
        {
            return;
        }
        let (api, name) = self.report_api();
        let mut report = json!({
            "identity": self.config.identity,
            "updatedUnix": crate::xds::status::unix_now(),
            "gateways": local.gateways,
            "istio": local.istio,
        });
        if report.to_string().len() > REPORT_MAX_BYTES {
            tracing::warn!(objects = local.istio.len(), max_bytes = REPORT_MAX_BYTES,
                "this replica's report on its Istio objects is too large for a ConfigMap; their Reconciled stays Pending");
            report["istio"] = json!({});
            report["istio_truncated"] = json!(true);
        }
        let config_map = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "labels": {REPORT_LABEL: "true"}},
            "data": {"report.json": report.to_string()},
        });
        let params = PatchParams::apply("admitpilot").force();
        match api.patch(&name, &params, &Patch::Apply(config_map)).await {
            Ok(_) => self.published = Some((local.clone(), Instant::now())),
            Err(error) => {
                tracing::warn!(%error, config_map = %name,
                    "cannot publish what this replica's gateways acknowledged; the leader will not count them");
            }
        }
    }

    /// The other replicas' fresh reports.
    async fn read_reports(&self) -> Vec<ReplicaReport> {
        let (api, own) = self.report_api();
        let list = match api.list(&ListParams::default().labels(REPORT_LABEL)).await {
            Ok(list) => list,
            Err(error) => {
                tracing::warn!(%error, "cannot read the other replicas' reports; counting this replica's gateways only");
                return Vec::new();
            }
        };
        let now = crate::xds::status::unix_now();
        let mut reports = Vec::new();
        for cm in list.items {
            let Some(name) = cm.metadata.name.clone() else {
                continue;
            };
            if name == own {
                continue;
            }
            let report: Option<Value> = cm
                .data
                .and_then(|mut data| data.remove("report.json"))
                .and_then(|text| serde_json::from_str(&text).ok());
            let age = report
                .as_ref()
                .and_then(|r| r["updatedUnix"].as_u64())
                .map_or(u64::MAX, |updated| now.saturating_sub(updated));
            if age > REPORT_GONE.as_secs() {
                // A replica that ended without withdrawing its report (killed): the leader removes it.
                if let Err(error) = api.delete(&name, &Default::default()).await {
                    tracing::warn!(%error, config_map = %name, "could not delete a stale status report");
                }
                continue;
            }
            if age > REPORT_STALE.as_secs() {
                continue;
            }
            if let Some(report) = report.and_then(|r| serde_json::from_value(r).ok()) {
                reports.push(report);
            }
        }
        reports
    }

    /// The `gateway.networking.k8s.io/bundle-version` annotation of the installed GatewayClass CRD, read at most once
    /// a minute; none when Gateway API status is off or the CRD cannot be read (then no `SupportedVersion`).
    async fn bundle_version(&mut self) -> Option<String> {
        if !self.config.scope.gateway_api {
            return None;
        }
        if let Some((bundle, at)) = &self.bundle {
            if at.elapsed() < BUNDLE_REFRESH {
                return bundle.clone();
            }
        }
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let bundle = match api.get_metadata(GATEWAY_CLASS_CRD).await {
            Ok(crd) => crd
                .metadata
                .annotations
                .and_then(|mut annotations| annotations.remove(BUNDLE_VERSION_ANNOTATION)),
            Err(error) => {
                tracing::warn!(%error, crd = GATEWAY_CLASS_CRD,
                    "cannot read the Gateway API CRDs' bundle version; keeping the last one read, if any");
                self.bundle.as_ref().and_then(|(last, _)| last.clone())
            }
        };
        self.bundle = Some((bundle.clone(), Instant::now()));
        bundle
    }

    /// Deletes this replica's report (on shutdown).
    async fn withdraw(&self) {
        let (api, name) = self.report_api();
        if self.published.is_some() {
            if let Err(error) = api.delete(&name, &Default::default()).await {
                tracing::warn!(%error, config_map = %name, "could not delete this replica's report");
            }
        }
    }

    async fn pass(&mut self, snapshot: &Snapshot, reports: &[ReplicaReport]) {
        // Objects gone from the config: nothing to remember (a route that only moved away is still here). A refused
        // object is still there, whether or not a last valid version of it is in the config.
        let refusals = self.refusals.all();
        self.written
            .retain(|key, (uid, _)| match snapshot.objects.get(key) {
                Some(object) => object.metadata.uid == *uid,
                None => refusals.iter().any(|r| &r.key == key),
            });
        let bundle = self.bundle_version().await;
        let unready = Arc::clone(&self.unready.borrow());
        let updates = from_reports(
            snapshot,
            &self.config.scope,
            (reports, &refusals, &unready),
            bundle.as_deref(),
            &now(),
        );
        // Routes (policies) whose parent (ancestor) entries admitpilot wrote but that no longer attach to (apply
        // under) a Gateway of its classes: their entries are removed (an empty list of ours; other controllers'
        // entries stay).
        let mut updates = updates;
        let current: std::collections::HashSet<ObjectKey> =
            updates.iter().map(|u| u.key.clone()).collect();
        let gone: Vec<(ObjectKey, &str)> = self
            .written
            .keys()
            .filter(|key| !current.contains(*key))
            .filter_map(|key| Some((key.clone(), shared_list(key.kind)?)))
            .collect();
        updates.extend(gone.into_iter().map(|(key, list)| StatusUpdate {
            key,
            generation: 0,
            status: json!({ list: [] }),
        }));
        // Requests (reads of what is on the server, and writes) this pass.
        let mut requests = 0;
        let mut lease_checked = false;
        for update in updates {
            if requests >= self.config.max_writes {
                break; // the rest on the next pass
            }
            // The version the object was read at: the API server serves its status there (the newest one may
            // not be installed).
            let version = snapshot
                .objects
                .get(&update.key)
                .map(|object| Kind::split_api_version(&object.api_version).1.to_string())
                .filter(|version| !version.is_empty());
            let uid = snapshot
                .objects
                .get(&update.key)
                .and_then(|object| object.metadata.uid.clone());
            if !self.written.contains_key(&update.key) {
                // Not yet written by this leader: what is on the server is the previous status (its transition
                // times are kept, and an equal status is not written again).
                requests += 1;
                if let Some(on_server) = self.server_status(&update.key, version.as_deref()).await {
                    self.written
                        .insert(update.key.clone(), (uid.clone(), on_server));
                }
            }
            let previous = self.written.get(&update.key).map(|(_, status)| status);
            let status = keep_transition_times(update.status.clone(), previous);
            if previous == Some(&status) {
                continue;
            }
            if !lease_checked {
                let leader = LeaderConfig {
                    namespace: self.config.namespace.clone(),
                    identity: self.config.identity.clone(),
                };
                if !still_holds(&self.client, &leader).await {
                    tracing::warn!("the leader Lease is not renewed (or held by another replica): not writing status");
                    self.written.clear();
                    return;
                }
                lease_checked = true;
            }
            requests += 1;
            let detached = shared_list(update.key.kind)
                .is_some_and(|list| status[list].as_array().is_some_and(Vec::is_empty));
            if self.write(&update, &status, version.as_deref()).await {
                if detached {
                    self.written.remove(&update.key);
                } else {
                    self.written.insert(update.key, (uid, status));
                }
            }
        }
    }

    /// The API of `key`'s kind at `version` (the one its watcher reads it at), else at its newest version.
    fn api(&self, key: &ObjectKey, version: Option<&str>) -> Option<Api<DynamicObject>> {
        let version = version.or_else(|| key.kind.info().versions.first().copied())?;
        let resource = api_resource(key.kind, version);
        Some(if key.kind.is_cluster_scoped() {
            Api::all_with(self.client.clone(), &resource)
        } else {
            Api::namespaced_with(self.client.clone(), &key.namespace, &resource)
        })
    }

    /// The status `key` has on the server, as admitpilot writes it (of a shared list, admitpilot's entries).
    async fn server_status(&self, key: &ObjectKey, version: Option<&str>) -> Option<Value> {
        let object = self.api(key, version)?.get_status(&key.name).await.ok()?;
        let status = object.data.get("status")?.clone();
        let Some(list) = shared_list(key.kind) else {
            return Some(status);
        };
        let ours: Vec<Value> = status[list]
            .as_array()?
            .iter()
            .filter(|p| p["controllerName"].as_str() == Some(self.config.scope.controller.as_str()))
            .cloned()
            .collect();
        Some(json!({ list: ours }))
    }

    /// Writes one object's status; true once it is on the server.
    async fn write(&self, update: &StatusUpdate, status: &Value, version: Option<&str>) -> bool {
        let kind = update.key.kind;
        let Some(api) = self.api(&update.key, version) else {
            return false;
        };
        let started = Instant::now();
        let result = match shared_list(kind) {
            Some(list) => self.write_shared_list(&api, update, (list, status)).await,
            None => api
                .patch_status(
                    &update.key.name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": status})),
                )
                .await
                .map(|_| ()),
        };
        self.metrics
            .write_seconds
            .observe(started.elapsed().as_secs_f64());
        let outcome = match &result {
            Ok(()) => "written",
            Err(kube::Error::Api(status)) if status.code == 409 => "conflict",
            Err(kube::Error::Api(status)) if status.code == 404 => "gone",
            Err(_) => "failed",
        };
        self.metrics
            .writes
            .get_or_create(&WriteLabels {
                kind: kind.to_string(),
                result: outcome,
            })
            .inc();
        if let Err(error) = &result {
            tracing::warn!(object = %update.key, %error, "status not written; retrying on the next pass");
        }
        result.is_ok()
    }

    /// Replaces admitpilot's entries of a shared status list (`parents`, `ancestors`), leaving other controllers'
    /// entries.
    async fn write_shared_list(
        &self,
        api: &Api<DynamicObject>,
        update: &StatusUpdate,
        (list, status): (&str, &Value),
    ) -> Result<(), kube::Error> {
        let current = api.get_status(&update.key.name).await?;
        let controller = self.config.scope.controller.as_str();
        let mut entries: Vec<Value> = current.data["status"][list]
            .as_array()
            .map(|parents| {
                parents
                    .iter()
                    .filter(|p| p["controllerName"].as_str() != Some(controller))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        entries.extend(status[list].as_array().cloned().unwrap_or_default());
        api.patch_status(
            &update.key.name,
            &PatchParams::default(),
            &Patch::Merge(json!({
                "metadata": {"resourceVersion": current.metadata.resource_version},
                "status": { list: entries },
            })),
        )
        .await
        .map(|_| ())
    }
}

/// `status` with each condition's `lastTransitionTime` taken from `previous` when that condition (by type, in the
/// same place: the object, a listener, a route parent) kept its status.
fn keep_transition_times(mut status: Value, previous: Option<&Value>) -> Value {
    let Some(previous) = previous else {
        return status;
    };
    let mut before: BTreeMap<String, (Value, Value)> = BTreeMap::new();
    collect_conditions(previous, String::new(), &mut |place, condition| {
        before.insert(
            place,
            (
                condition["status"].clone(),
                condition["lastTransitionTime"].clone(),
            ),
        );
    });
    visit_conditions_mut(&mut status, String::new(), &mut |place, condition| {
        if let Some((was, time)) = before.get(&place) {
            if *was == condition["status"] {
                condition["lastTransitionTime"] = time.clone();
            }
        }
    });
    status
}

/// The place of a condition: its type, under the listener name or parent (ancestor) reference that holds it.
fn place_of(prefix: &str, holder: &Value) -> String {
    match holder
        .get("name")
        .or_else(|| holder.get("parentRef"))
        .or_else(|| holder.get("ancestorRef"))
    {
        Some(id) => format!("{prefix}/{id}"),
        None => prefix.to_string(),
    }
}

fn collect_conditions(value: &Value, prefix: String, each: &mut dyn FnMut(String, &Value)) {
    for condition in value["conditions"].as_array().into_iter().flatten() {
        each(format!("{prefix}:{}", condition["type"]), condition);
    }
    for list in ["listeners", "parents", "ancestors"] {
        for holder in value[list].as_array().into_iter().flatten() {
            collect_conditions(holder, place_of(&prefix, holder), each);
        }
    }
}

fn visit_conditions_mut(
    value: &mut Value,
    prefix: String,
    each: &mut dyn FnMut(String, &mut Value),
) {
    if let Some(conditions) = value.get_mut("conditions").and_then(Value::as_array_mut) {
        for condition in conditions {
            let place = format!("{prefix}:{}", condition["type"]);
            each(place, condition);
        }
    }
    for list in ["listeners", "parents", "ancestors"] {
        if let Some(holders) = value.get_mut(list).and_then(Value::as_array_mut) {
            for holder in holders {
                let place = place_of(&prefix, holder);
                visit_conditions_mut(holder, place, each);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_condition_that_keeps_its_status_keeps_its_transition_time() {
        let previous = json!({"conditions": [
                {"type": "Accepted", "status": "True", "lastTransitionTime": "T1"},
                {"type": "Programmed", "status": "False", "lastTransitionTime": "T1"}],
            "listeners": [{"name": "http", "conditions": [
                {"type": "Accepted", "status": "True", "lastTransitionTime": "T1"}]}]});
        let next = json!({"conditions": [
                {"type": "Accepted", "status": "True", "lastTransitionTime": "T2"},
                {"type": "Programmed", "status": "True", "lastTransitionTime": "T2"}],
            "listeners": [{"name": "http", "conditions": [
                {"type": "Accepted", "status": "True", "lastTransitionTime": "T2"}]},
                {"name": "https", "conditions": [
                {"type": "Accepted", "status": "True", "lastTransitionTime": "T2"}]}]});
        let kept = keep_transition_times(next, Some(&previous));
        assert_eq!(kept["conditions"][0]["lastTransitionTime"], "T1");
        assert_eq!(kept["conditions"][1]["lastTransitionTime"], "T2");
        assert_eq!(
            kept["listeners"][0]["conditions"][0]["lastTransitionTime"],
            "T1"
        );
        assert_eq!(
            kept["listeners"][1]["conditions"][0]["lastTransitionTime"],
            "T2"
        );
        // Unchanged apart from times: equal to what was written, so not written again.
        let again = keep_transition_times(kept.clone(), Some(&kept));
        assert_eq!(again, kept);
    }
}
