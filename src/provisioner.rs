//! Gateway provisioner (I/O): takes the config snapshots and, while this replica holds the leader Lease
//! ([`crate::leader`]), makes the API server hold the objects [`crate::provision`] says each Gateway of admitpilot's
//! GatewayClasses needs, and no others.
//!
//! * Server-side apply with one field manager ([`FIELD_MANAGER`]), forced: a field a user changed on a provisioned
//!   object is put back at the next pass; fields admitpilot does not set (a `replicas` an autoscaler changes)
//!   are left alone.
//! * A pass runs when the snapshot changes and every [`RESYNC`] (which also picks up a new CA in
//!   [`ProvisionerConfig::ca_file`], kept current in every gateway's ConfigMap); an object whose applied form is
//!   unchanged since the last pass is not sent again, except on the resync.
//! * Objects labelled as provisioned whose Gateway no longer wants them (its class changed, it opted out with
//!   `admitpilot.io/manual-deployment: "true"`, its listeners changed names) are deleted; a deleted Gateway's
//!   objects go with it through their owner reference (the garbage collector).
//! * Nothing is pruned before the first snapshot is ready, so a restart never deletes a running gateway.
//! * The provisioned Deployments are watched ([`watch_availability`]): a Gateway whose Deployment has no available
//!   replica is published as unready, and status keeps it from `Programmed` (`Pending`) until one is; a deleted
//!   one starts a pass at once (a Gateway deleted and created again under its name loses its objects to the
//!   garbage collector after the new ones may have been applied).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kube::api::{DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Api, Client};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use serde_json::Value;
use tokio::sync::{watch, Notify};

use crate::leader::{still_holds, LeaderConfig};
use crate::model::gateway_api::parameters;
use crate::model::{Kind, ObjectKey, Snapshot, Spec};
use crate::provision::{self, Settings, GATEWAY_NAME_LABEL, MANAGED_BY_LABEL, MANAGED_BY_VALUE};
use crate::status::Unready;

/// The field manager of every provisioned object.
pub const FIELD_MANAGER: &str = "admitpilot-provisioner";
/// How often every object is applied again (and the CA file read again) without a config change.
pub const RESYNC: Duration = Duration::from_secs(30);

/// The kinds provisioned, in the order a Gateway's objects are applied.
const KINDS: [(&str, &str, &str, &str); 8] = [
    ("", "v1", "ServiceAccount", "serviceaccounts"),
    ("rbac.authorization.k8s.io", "v1", "Role", "roles"),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
    ),
    ("", "v1", "ConfigMap", "configmaps"),
    ("apps", "v1", "Deployment", "deployments"),
    ("", "v1", "Service", "services"),
    (
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
    ),
    (
        "autoscaling",
        "v2",
        "HorizontalPodAutoscaler",
        "horizontalpodautoscalers",
    ),
];

/// Settings of the provisioner.
#[derive(Debug, Clone)]
pub struct ProvisionerConfig {
    /// The GatewayClass controllerName whose Gateways are provisioned.
    pub controller: String,
    /// How proxies run; `ca_pem` is read from `ca_file` at each pass.
    pub settings: Settings,
    /// The PEM CA of admitpilot's xDS port, copied into every gateway's ConfigMap.
    pub ca_file: PathBuf,
    /// The leader Lease, checked before a pass writes.
    pub leader: LeaderConfig,
    /// The namespaces whose provisioned objects are pruned (those the sources watch); empty: every namespace.
    pub namespaces: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ApplyLabels {
    kind: String,
    result: &'static str,
}

/// The provisioner's metrics.
#[derive(Debug, Clone, Default)]
pub struct ProvisionerMetrics {
    writes: Family<ApplyLabels, Counter>,
}

impl ProvisionerMetrics {
    /// Registers `admitpilot_provision_writes_total{kind, result}` (result `applied`, `deleted`, `error`).
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "admitpilot_provision_writes",
            "Writes of provisioned gateway objects, by kind and result (applied, deleted, error)",
            metrics.writes.clone(),
        );
        metrics
    }

    fn count(&self, kind: &str, result: &'static str) {
        self.writes
            .get_or_create(&ApplyLabels {
                kind: kind.to_string(),
                result,
            })
            .inc();
    }
}

/// What the objects of one kind are addressed by: (namespace, name).
type Address = (String, String);

/// Runs the provisioner until `stop` turns true.
pub async fn run(
    client: Client,
    config: ProvisionerConfig,
    (mut snapshots, deleted): (watch::Receiver<Arc<Snapshot>>, Arc<Notify>),
    metrics: ProvisionerMetrics,
    mut leader: watch::Receiver<bool>,
    mut stop: watch::Receiver<bool>,
) {
    let mut provisioner = Provisioner {
        client,
        config,
        metrics,
        applied: BTreeMap::new(),
    };
    let mut tick = tokio::time::interval(RESYNC);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let resync = tokio::select! {
            _ = stop.wait_for(|stop| *stop) => break,
            _ = tick.tick() => true,
            // A provisioned Deployment went (the garbage collector, a user): everything is applied again.
            () = deleted.notified() => true,
            changed = snapshots.changed() => {
                if changed.is_err() {
                    break;
                }
                false
            }
            changed = leader.changed() => {
                if changed.is_err() {
                    break;
                }
                true
            }
        };
        if !*leader.borrow() {
            provisioner.applied.clear();
            continue;
        }
        let snapshot = snapshots.borrow_and_update().clone();
        if snapshot.version == 0 {
            continue;
        }
        if resync {
            provisioner.applied.clear();
        }
        provisioner.pass(&snapshot).await;
    }
}

struct Provisioner {
    client: Client,
    config: ProvisionerConfig,
    metrics: ProvisionerMetrics,
    /// What the last passes applied, by kind and address: not sent again while unchanged.
    applied: BTreeMap<(&'static str, Address), Value>,
}

impl Provisioner {
    /// Applies what the snapshot's Gateways need and deletes what none needs.
    async fn pass(&mut self, snapshot: &Snapshot) {
        let ca_pem = match std::fs::read_to_string(&self.config.ca_file) {
            Ok(pem) => pem,
            Err(error) => {
                tracing::warn!(file = %self.config.ca_file.display(), %error,
                    "cannot read the xDS CA for provisioned gateways; nothing provisioned this pass");
                return;
            }
        };
        let settings = Settings {
            ca_pem,
            ..self.config.settings.clone()
        };
        let Wanted { objects, held } = wanted(snapshot, &self.config.controller, &settings);
        if !still_holds(&self.client, &self.config.leader).await {
            return;
        }
        let mut addresses: BTreeSet<(&'static str, Address)> = BTreeSet::new();
        for object in objects {
            let Some((kind, address)) = address_of(&object) else {
                continue;
            };
            addresses.insert((kind, address.clone()));
            if self.applied.get(&(kind, address.clone())) == Some(&object) {
                continue;
            }
            match self.apply(kind, &address, &object).await {
                Ok(()) => {
                    self.metrics.count(kind, "applied");
                    self.applied.insert((kind, address), object);
                }
                Err(error) => {
                    self.metrics.count(kind, "error");
                    tracing::warn!(kind, namespace = %address.0, name = %address.1, %error,
                        "cannot apply a provisioned gateway object; retried at the next pass");
                }
            }
        }
        self.applied.retain(|key, _| addresses.contains(key));
        self.prune(&addresses, &held).await;
    }

    async fn apply(
        &self,
        kind: &'static str,
        (namespace, name): &Address,
        object: &Value,
    ) -> Result<(), kube::Error> {
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), namespace, &resource(kind));
        let params = PatchParams::apply(FIELD_MANAGER).force();
        api.patch(name, &params, &Patch::Apply(object))
            .await
            .map(|_| ())
    }

    /// Deletes the provisioned objects (by label) of the watched namespaces that no Gateway wants, except those of
    /// the `held` Gateways.
    async fn prune(&self, wanted: &BTreeSet<(&'static str, Address)>, held: &BTreeSet<Address>) {
        let selector = format!("{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}");
        let params = ListParams::default().labels(&selector);
        for (_, _, kind, _) in KINDS {
            let apis: Vec<Api<DynamicObject>> = if self.config.namespaces.is_empty() {
                vec![Api::all_with(self.client.clone(), &resource(kind))]
            } else {
                self.config
                    .namespaces
                    .iter()
                    .map(|namespace| {
                        Api::namespaced_with(self.client.clone(), namespace, &resource(kind))
                    })
                    .collect()
            };
            let mut items = Vec::new();
            for api in apis {
                match api.list_metadata(&params).await {
                    Ok(listed) => items.extend(listed.items),
                    Err(error) => {
                        tracing::warn!(kind, %error, "cannot list provisioned objects; none pruned this pass");
                    }
                }
            }
            for item in items {
                let gateway = item
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|labels| labels.get(GATEWAY_NAME_LABEL))
                    .cloned();
                let (Some(namespace), Some(name)) = (item.metadata.namespace, item.metadata.name)
                else {
                    continue;
                };
                if wanted.contains(&(kind, (namespace.clone(), name.clone())))
                    || gateway.is_some_and(|gateway| held.contains(&(namespace.clone(), gateway)))
                {
                    continue;
                }
                let api: Api<DynamicObject> =
                    Api::namespaced_with(self.client.clone(), &namespace, &resource(kind));
                match api.delete(&name, &DeleteParams::background()).await {
                    Ok(_) => {
                        self.metrics.count(kind, "deleted");
                        tracing::info!(kind, %namespace, %name, "deleted a provisioned object no Gateway needs");
                    }
                    Err(kube::Error::Api(status)) if status.code == 404 => {}
                    Err(error) => {
                        self.metrics.count(kind, "error");
                        tracing::warn!(kind, %namespace, %name, %error, "cannot delete a provisioned object");
                    }
                }
            }
        }
    }
}

/// What a pass makes the API server hold.
struct Wanted {
    /// Every object the provisioned Gateways need, in apply order.
    objects: Vec<Value>,
    /// The Gateways (namespace, name) whose parameters do not resolve: their objects stay as last applied, neither
    /// updated nor deleted, so a broken ConfigMap never takes running gateways down (status says what is wrong).
    held: BTreeSet<Address>,
}

/// What the snapshot's provisioned Gateways of `controller`'s classes need.
fn wanted(snapshot: &Snapshot, controller: &str, settings: &Settings) -> Wanted {
    let ours: BTreeSet<&str> = snapshot
        .of_kind(Kind::GatewayClass)
        .filter_map(|object| match &object.spec {
            Spec::GatewayClass(class) if class.controller_name == controller => {
                Some(object.metadata.name.as_str())
            }
            _ => None,
        })
        .collect();
    let mut out = Wanted {
        objects: Vec::new(),
        held: BTreeSet::new(),
    };
    for object in snapshot
        .of_kind(Kind::KubernetesGateway)
        .filter(|object| provision::provisioned(object))
    {
        let Spec::KubernetesGateway(gateway) = &object.spec else {
            continue;
        };
        if !ours.contains(gateway.gateway_class_name.as_str()) || gateway.not_accepted().is_some() {
            continue;
        }
        match parameters::gateway_parameters(snapshot, object, gateway) {
            Ok(parameters) => out.objects.extend(provision::objects(
                snapshot,
                (object, gateway),
                &parameters,
                settings,
            )),
            Err(_) => {
                out.held.insert((
                    object.metadata.namespace.clone(),
                    object.metadata.name.clone(),
                ));
            }
        }
    }
    out
}

/// Watches the provisioned Deployments (of `namespaces`, or every namespace when empty) until `stop` turns true,
/// publishing on `unready` the Gateways whose Deployment has no available replica, with why. A watch error is
/// retried by the watcher (with backoff); meanwhile the last view stays.
pub async fn watch_availability(
    client: Client,
    namespaces: Vec<String>,
    (unready, deleted): (watch::Sender<Arc<Unready>>, Arc<Notify>),
    mut stop: watch::Receiver<bool>,
) {
    use futures::StreamExt;
    use k8s_openapi::api::apps::v1::Deployment;
    use kube::runtime::watcher::{watcher, Config, Event};
    use kube::runtime::WatchStreamExt;

    let config = Config::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}"));
    let apis: Vec<Api<Deployment>> = if namespaces.is_empty() {
        vec![Api::all(client)]
    } else {
        namespaces
            .iter()
            .map(|namespace| Api::namespaced(client.clone(), namespace))
            .collect()
    };
    let streams = apis
        .into_iter()
        .map(|api| watcher(api, config.clone()).default_backoff().boxed());
    let mut events = futures::stream::select_all(streams);
    // Per Deployment (namespace, name): its Gateway and, when not available, why.
    let mut seen: BTreeMap<Address, (ObjectKey, Option<String>)> = BTreeMap::new();
    loop {
        let event = tokio::select! {
            _ = stop.wait_for(|stop| *stop) => return,
            event = events.next() => event,
        };
        let Some(event) = event else {
            return;
        };
        match event {
            Ok(Event::Apply(deployment) | Event::InitApply(deployment)) => {
                if let Some((address, state)) = availability(&deployment) {
                    seen.insert(address, state);
                }
            }
            Ok(Event::Delete(deployment)) => {
                if let Some((address, _)) = availability(&deployment) {
                    seen.remove(&address);
                }
                deleted.notify_one();
            }
            Ok(Event::Init | Event::InitDone) => {}
            Err(error) => {
                tracing::warn!(%error, "watching provisioned Deployments failed; retrying");
                continue;
            }
        }
        let now: Unready = seen
            .values()
            .filter_map(|(gateway, why)| Some((gateway.clone(), why.clone()?)))
            .collect();
        unready.send_if_modified(|current| {
            let changed = **current != now;
            if changed {
                *current = Arc::new(now);
            }
            changed
        });
    }
}

/// A provisioned Deployment's address, its Gateway and, when it has no available replica, why.
fn availability(
    deployment: &k8s_openapi::api::apps::v1::Deployment,
) -> Option<(Address, (ObjectKey, Option<String>))> {
    let meta = &deployment.metadata;
    let (namespace, name) = (meta.namespace.clone()?, meta.name.clone()?);
    let gateway = meta.labels.as_ref()?.get(GATEWAY_NAME_LABEL)?;
    let key = ObjectKey::new(Kind::KubernetesGateway, namespace.clone(), gateway.clone());
    let wanted = deployment
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1);
    let available = deployment
        .status
        .as_ref()
        .and_then(|s| s.available_replicas)
        .unwrap_or(0);
    let why = (available < 1).then(|| {
        format!(
            "its proxies are not available yet: Deployment {namespace}/{name} has {available} of {wanted} replicas available"
        )
    });
    Some(((namespace, name), (key, why)))
}

/// The kind (of [`KINDS`]) and address of a provisioned object.
fn address_of(object: &Value) -> Option<(&'static str, Address)> {
    let kind = object["kind"].as_str()?;
    let (_, _, kind, _) = KINDS.iter().find(|(_, _, k, _)| *k == kind)?;
    let meta = &object["metadata"];
    Some((
        kind,
        (
            meta["namespace"].as_str()?.to_string(),
            meta["name"].as_str()?.to_string(),
        ),
    ))
}

/// The API resource of a kind of [`KINDS`].
fn resource(kind: &str) -> ApiResource {
    let (group, version, kind, plural) = KINDS
        .iter()
        .find(|(_, _, k, _)| *k == kind)
        .copied()
        .unwrap_or(KINDS[0]);
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::snapshot::snapshot_from_yaml;

    fn settings() -> Settings {
        Settings {
            image: "envoy".into(),
            xds_address: "xds:15012".into(),
            token_audience: "admitpilot".into(),
            token_expiration_seconds: 3600,
            ca_pem: String::new(),
            service_type: "ClusterIP".into(),
            address_pools: Default::default(),
        }
    }

    #[test]
    fn only_our_classes_accepted_gateways_that_did_not_opt_out_are_provisioned() {
        let snapshot = snapshot_from_yaml(
            "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: ours}
spec: {controllerName: admitpilot.io/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: a, namespace: apps, uid: u-a}
spec: {gatewayClassName: ours, listeners: [{name: http, port: 80, protocol: HTTP}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: manual, namespace: apps, uid: u-m, annotations: {admitpilot.io/manual-deployment: 'true'}}
spec: {gatewayClassName: ours, listeners: [{name: http, port: 80, protocol: HTTP}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: by-hostname, namespace: apps, uid: u-h}
spec:
  gatewayClassName: ours
  addresses: [{type: Hostname, value: my-gateway.apps.svc.cluster.local}]
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: bad-parameters, namespace: apps, uid: u-p}
spec:
  gatewayClassName: ours
  infrastructure: {parametersRef: {group: '', kind: ConfigMap, name: missing}}
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: theirs, namespace: apps, uid: u-t}
spec: {gatewayClassName: other, listeners: [{name: http, port: 80, protocol: HTTP}]}
",
        );
        let wanted = wanted(&snapshot, "admitpilot.io/gateway-controller", &settings());
        let addresses: BTreeSet<(&str, Address)> =
            wanted.objects.iter().filter_map(address_of).collect();
        assert_eq!(
            wanted.held,
            [("apps".to_string(), "bad-parameters".to_string())].into(),
            "kept as last applied"
        );
        // All but the PodDisruptionBudget and the autoscaler, which only parameters ask for.
        assert_eq!(addresses.len(), KINDS.len() - 2, "{addresses:?}");
        assert!(addresses
            .iter()
            .all(|(_, (namespace, name))| namespace == "apps" && name == "a-ours"));
        assert_eq!(resource("Deployment").api_version, "apps/v1");
        assert_eq!(resource("RoleBinding").plural, "rolebindings");
    }
}
