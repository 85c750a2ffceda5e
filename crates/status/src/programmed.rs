//! Whether an object is served (pure): takes the gateways connected over xDS (what each was last sent and has
//! acknowledged) and the config version that first held the object's current generation, and says whether every
//! gateway it applies to serves that version ([`Programmed`]). Each replica sees only the gateways connected to it:
//! a [`GenerationTracker`] sums that up per object in the replica's [`ReplicaReport`], and the replicas' reports
//! [`combine`] into the object's status (a Gateway API Gateway's `Programmed`, an Istio object's `Reconciled`).

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::gateway_api::Programmed;
use admitpilot_model::gateway_api::ROUTE_KINDS;
use admitpilot_model::{Kind, ObjectKey, Snapshot};
use admitpilot_translate::selection::selects;
use admitpilot_translate::Proxy;

/// The node label that names the Gateway API Gateway a proxy serves (Istio's convention).
pub const GATEWAY_NAME_LABEL: &str = "gateway.networking.k8s.io/gateway-name";

/// One connected gateway, as the xDS server last saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectedGateway {
    /// The node id.
    pub node_id: String,
    /// The proxy's namespace.
    pub namespace: String,
    /// The proxy's labels.
    pub labels: BTreeMap<String, String>,
    /// The config version it has acknowledged everything of (`None` while a response is in flight or was never
    /// acknowledged).
    pub acked_version: Option<u64>,
    /// Envoy's error when the last response sent was rejected.
    pub rejected: Option<String>,
}

impl ConnectedGateway {
    fn proxy(&self) -> Proxy {
        Proxy {
            namespace: self.namespace.clone(),
            labels: self.labels.clone(),
            ..Proxy::default()
        }
    }
}

/// What `ours` (the connected gateways an object applies to) did with config version `needed` (the first that
/// held the object's current generation); `none` says why nothing serves it when `ours` is empty.
fn served_by(needed: u64, ours: &[&ConnectedGateway], none: String) -> Programmed {
    if ours.is_empty() {
        return Programmed::Pending(none);
    }
    if let Some(rejecting) = ours.iter().find(|gateway| gateway.rejected.is_some()) {
        return Programmed::Rejected(format!(
            "gateway {} rejected the config: {}",
            rejecting.node_id,
            rejecting.rejected.as_deref().unwrap_or_default()
        ));
    }
    let waiting = ours
        .iter()
        .filter(|gateway| gateway.acked_version.is_none_or(|acked| acked < needed))
        .count();
    if waiting == 0 {
        Programmed::Served
    } else {
        Programmed::Pending(format!(
            "{waiting} of {} connected gateways have not yet acknowledged config version {needed}",
            ours.len()
        ))
    }
}

/// What the gateways of the Gateway API Gateway `namespace/name` did with config version `needed`.
pub fn programmed(
    namespace: &str,
    name: &str,
    needed: u64,
    connected: &[ConnectedGateway],
) -> Programmed {
    served_by(
        needed,
        &gateways_of(namespace, name, connected),
        no_gateway_of(namespace, name),
    )
}

fn gateways_of<'a>(
    namespace: &str,
    name: &str,
    connected: &'a [ConnectedGateway],
) -> Vec<&'a ConnectedGateway> {
    connected
        .iter()
        .filter(|gateway| {
            gateway.namespace == namespace
                && gateway.labels.get(GATEWAY_NAME_LABEL).map(String::as_str) == Some(name)
        })
        .collect()
}

/// Why a Gateway API Gateway is not programmed when none of its gateways is connected.
pub fn no_gateway_of(namespace: &str, name: &str) -> String {
    format!(
        "no gateway with label {GATEWAY_NAME_LABEL}={name} in namespace {namespace} is connected"
    )
}

/// Why an Istio object is not reconciled when no connected gateway selects it.
pub const NO_GATEWAY_SELECTS: &str = "no connected gateway selects it";

/// What the gateways connected to one replica did with one object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewayReport {
    /// The object's generation the replica knows.
    pub generation: i64,
    /// How many gateways it applies to are connected to the replica.
    pub connected: usize,
    /// What they did: `Served`, `Pending` or `Rejected`.
    pub state: ReportState,
    /// Why, when not served.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Routes ([`held_back_id`]) the push guard leaves out of these gateways' config, with what Envoy would reject.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub held_back: BTreeMap<String, String>,
}

/// [`Programmed`] as a report carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReportState {
    /// Every connected gateway of it acknowledged the generation.
    Served,
    /// Not yet.
    Pending,
    /// One rejected it.
    Rejected,
}

fn report(
    generation: i64,
    needed: u64,
    ours: &[&ConnectedGateway],
    none: String,
    held_back: BTreeMap<String, String>,
) -> GatewayReport {
    let (state, message) = match served_by(needed, ours, none) {
        Programmed::Served => (ReportState::Served, String::new()),
        Programmed::Pending(why) => (ReportState::Pending, why),
        Programmed::Rejected(why) => (ReportState::Rejected, why),
    };
    GatewayReport {
        generation,
        connected: ours.len(),
        state,
        message,
        held_back,
    }
}

/// This replica's report on the Gateway `namespace/name` at `generation` (first held by config version `needed`);
/// `held_back` lists the routes the push guard leaves out of its gateways' config.
pub fn local_report(
    namespace: &str,
    name: &str,
    generation: i64,
    needed: u64,
    connected: &[ConnectedGateway],
    held_back: BTreeMap<String, String>,
) -> GatewayReport {
    report(
        generation,
        needed,
        &gateways_of(namespace, name, connected),
        no_gateway_of(namespace, name),
        held_back,
    )
}

/// An object at `generation`, from every replica's report on it: served once some gateway it applies to is
/// connected and every replica with such gateways reports them served at that generation; `none` says why not
/// when no replica has one.
pub fn combine(generation: i64, reports: &[&GatewayReport], none: String) -> Programmed {
    let with_gateways: Vec<&&GatewayReport> = reports.iter().filter(|r| r.connected > 0).collect();
    if with_gateways.is_empty() {
        return Programmed::Pending(none);
    }
    if let Some(rejected) = with_gateways
        .iter()
        .find(|r| r.state == ReportState::Rejected)
    {
        return Programmed::Rejected(rejected.message.clone());
    }
    if let Some(behind) = with_gateways.iter().find(|r| r.generation != generation) {
        return Programmed::Pending(format!(
            "a replica serving {} gateways of it has not yet seen generation {generation}",
            behind.connected
        ));
    }
    if let Some(pending) = with_gateways
        .iter()
        .find(|r| r.state == ReportState::Pending)
    {
        return Programmed::Pending(pending.message.clone());
    }
    Programmed::Served
}

/// One replica's reports: per Gateway API Gateway (`namespace/name`) and, when Istio status is on, per Istio
/// object (`Kind/namespace/name`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaReport {
    /// Per Gateway API Gateway.
    #[serde(default)]
    pub gateways: BTreeMap<String, GatewayReport>,
    /// Per Istio object whose status admitpilot writes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub istio: BTreeMap<String, GatewayReport>,
    /// Whether `istio` was left out to keep the report within a ConfigMap's size.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub istio_truncated: bool,
}

/// The id of a route in a report's `held_back`: `namespace/name` for an HTTPRoute, `Kind/namespace/name` for
/// others.
pub fn held_back_id(route: &ObjectKey) -> String {
    match route.kind {
        Kind::HttpRoute => format!("{}/{}", route.namespace, route.name),
        _ => istio_id(route),
    }
}

/// The report id of an Istio object.
pub fn istio_id(key: &ObjectKey) -> String {
    format!("{}/{}/{}", key.kind, key.namespace, key.name)
}

/// A gateway the push guard leaves an object out of: (its proxy group, the object, what Envoy would reject).
pub type HeldBack = (Proxy, ObjectKey, String);

/// Remembers, per object whose status is reported, its generation and the first config version that held it, and
/// makes this replica's [`ReplicaReport`] from what its connected gateways acknowledged.
#[derive(Debug, Default)]
pub struct GenerationTracker {
    first_seen: HashMap<ObjectKey, (i64, u64)>,
    /// Whether Istio objects are reported too.
    istio: bool,
}

impl GenerationTracker {
    /// A tracker of Gateway API Gateways and, with `istio`, of the Istio objects of [`ISTIO_STATUS_KINDS`].
    pub fn new(istio: bool) -> Self {
        GenerationTracker {
            first_seen: HashMap::new(),
            istio,
        }
    }

    fn tracked_kinds(&self) -> impl Iterator<Item = Kind> + '_ {
        std::iter::once(Kind::KubernetesGateway)
            .chain(ISTIO_STATUS_KINDS.iter().copied().filter(|_| self.istio))
    }

    /// Records, per tracked object of `snapshot`, the first config version that held its current generation.
    pub fn track(&mut self, snapshot: &Snapshot) {
        let kinds: Vec<Kind> = self.tracked_kinds().collect();
        for kind in kinds {
            for object in snapshot.of_kind(kind) {
                let generation = object.metadata.generation.unwrap_or_default();
                let seen = self
                    .first_seen
                    .entry(object.key())
                    .or_insert((generation, snapshot.version));
                if seen.0 != generation {
                    *seen = (generation, snapshot.version);
                }
            }
        }
        self.first_seen
            .retain(|key, _| snapshot.objects.contains_key(key));
    }

    /// What the gateways `connected` to this replica did with each tracked object of `snapshot`, and which
    /// routes (and Gateways) the push guard leaves out of their config (`held_back`).
    pub fn report(
        &self,
        snapshot: &Snapshot,
        connected: &[ConnectedGateway],
        held_back: &[HeldBack],
    ) -> ReplicaReport {
        let mut out = ReplicaReport::default();
        for object in snapshot.of_kind(Kind::KubernetesGateway) {
            let key = object.key();
            let Some((generation, needed)) = self.first_seen.get(&key) else {
                continue;
            };
            let of_it = |proxy: &Proxy| {
                proxy.namespace == key.namespace
                    && proxy.labels.get(GATEWAY_NAME_LABEL) == Some(&key.name)
            };
            let routes = held_back
                .iter()
                .filter(|(proxy, route, _)| ROUTE_KINDS.contains(&route.kind) && of_it(proxy))
                .map(|(_, route, why)| (held_back_id(route), why.clone()))
                .collect();
            let mut report = local_report(
                &key.namespace,
                &key.name,
                *generation,
                *needed,
                connected,
                routes,
            );
            // The Gateway itself held back by the push guard: its proxies serve an older version of it.
            if let Some((_, _, why)) = held_back
                .iter()
                .find(|(proxy, object, _)| *object == key && of_it(proxy))
            {
                report.state = ReportState::Rejected;
                report.message = format!(
                    "not served: Envoy would reject what this Gateway makes of its gateways' config ({why}); \
                     they keep its last good version, if any"
                );
            }
            out.gateways
                .insert(format!("{}/{}", key.namespace, key.name), report);
        }
        if !self.istio {
            return out;
        }
        // Selection depends on a gateway's namespace and labels only: decided once per group of them.
        let mut groups: BTreeMap<(&str, &BTreeMap<String, String>), Vec<&ConnectedGateway>> =
            BTreeMap::new();
        for gateway in connected {
            groups
                .entry((gateway.namespace.as_str(), &gateway.labels))
                .or_default()
                .push(gateway);
        }
        let groups: Vec<(Proxy, Vec<&ConnectedGateway>)> = groups
            .into_values()
            .filter_map(|gateways| Some((gateways.first()?.proxy(), gateways)))
            .collect();
        for kind in ISTIO_STATUS_KINDS {
            for object in snapshot.of_kind(kind) {
                let key = object.key();
                let Some((generation, needed)) = self.first_seen.get(&key) else {
                    continue;
                };
                let selecting: Vec<&Proxy> = groups
                    .iter()
                    .filter(|(proxy, _)| selects(snapshot, object, proxy))
                    .map(|(proxy, _)| proxy)
                    .collect();
                let ours: Vec<&ConnectedGateway> = groups
                    .iter()
                    .filter(|(proxy, _)| selecting.contains(&proxy))
                    .flat_map(|(_, gateways)| gateways.iter().copied())
                    .collect();
                let mut report = report(
                    *generation,
                    *needed,
                    &ours,
                    NO_GATEWAY_SELECTS.to_string(),
                    BTreeMap::new(),
                );
                // A proxy group is its namespace and labels here (and its trusted proxies count in the xDS server,
                // which does not change what an object selects).
                if let Some((proxy, _, why)) = held_back.iter().find(|(proxy, object, _)| {
                    *object == key
                        && selecting
                            .iter()
                            .any(|p| p.namespace == proxy.namespace && p.labels == proxy.labels)
                }) {
                    report.state = ReportState::Rejected;
                    report.message = format!(
                        "not served to the gateways in {} labelled {:?}: Envoy would reject what it makes of their \
                         config ({why}); they keep its last good version, if any",
                        proxy.namespace, proxy.labels
                    );
                }
                out.istio.insert(istio_id(&key), report);
            }
        }
        out
    }
}

/// The Istio kinds whose `status` admitpilot writes when asked to (those it translates for gateways).
pub const ISTIO_STATUS_KINDS: [Kind; 8] = [
    Kind::Gateway,
    Kind::VirtualService,
    Kind::DestinationRule,
    Kind::ServiceEntry,
    Kind::EnvoyFilter,
    Kind::AuthorizationPolicy,
    Kind::RequestAuthentication,
    Kind::Telemetry,
];

#[cfg(test)]
mod tests {
    use super::*;

    fn gateway(name: &str, acked: Option<u64>, rejected: Option<&str>) -> ConnectedGateway {
        ConnectedGateway {
            node_id: format!("{name}-node"),
            namespace: "infra".into(),
            labels: [(GATEWAY_NAME_LABEL.to_string(), name.to_string())].into(),
            acked_version: acked,
            rejected: rejected.map(str::to_string),
        }
    }

    #[test]
    fn served_only_when_every_gateway_of_it_acknowledged_the_version() {
        let none = programmed("infra", "web", 5, &[gateway("other", Some(9), None)]);
        assert!(
            matches!(none, Programmed::Pending(ref why) if why.contains("no gateway")),
            "{none:?}"
        );
        let behind = [gateway("web", Some(6), None), gateway("web", Some(4), None)];
        let pending = programmed("infra", "web", 5, &behind);
        assert!(
            matches!(pending, Programmed::Pending(ref why) if why.starts_with("1 of 2")),
            "{pending:?}"
        );
        let in_flight = programmed("infra", "web", 5, &[gateway("web", None, None)]);
        assert!(matches!(in_flight, Programmed::Pending(_)));
        let served = [gateway("web", Some(5), None), gateway("web", Some(7), None)];
        assert_eq!(programmed("infra", "web", 5, &served), Programmed::Served);
        let rejected = [
            gateway("web", Some(7), None),
            gateway("web", Some(4), Some("bad listener")),
        ];
        assert!(matches!(programmed("infra", "web", 5, &rejected),
            Programmed::Rejected(ref why) if why.contains("bad listener") && why.contains("web-node")));
        assert!(matches!(
            programmed("other-ns", "web", 5, &served),
            Programmed::Pending(_)
        ));
    }

    #[test]
    fn an_istio_object_the_push_guard_holds_back_is_not_reconciled() {
        let config = admitpilot_model::snapshot::snapshot_from_yaml(
            "apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: edge, namespace: infra, generation: 1}
spec:
  selector: {istio: edge}
  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ['*']}]
",
        );
        let mut tracker = GenerationTracker::new(true);
        tracker.track(&config);
        let connected = [ConnectedGateway {
            node_id: "edge-1".into(),
            namespace: "infra".into(),
            labels: [("istio".to_string(), "edge".to_string())].into(),
            acked_version: Some(1),
            rejected: None,
        }];
        let id = istio_id(&ObjectKey::new(Kind::Gateway, "infra", "edge"));
        let served = tracker.report(&config, &connected, &[]);
        assert_eq!(served.istio[&id].state, ReportState::Served);
        // The xDS server's proxy group also counts trusted proxies; the object is still held back for it.
        let group = Proxy {
            trusted_proxies: 1,
            ..connected[0].proxy()
        };
        let held = [(
            group,
            ObjectKey::new(Kind::Gateway, "infra", "edge"),
            "bad".to_string(),
        )];
        let report = tracker.report(&config, &connected, &held);
        assert_eq!(report.istio[&id].state, ReportState::Rejected);
        assert!(report.istio[&id].message.contains("bad"));
    }

    #[test]
    fn replicas_reports_combine_into_one_verdict() {
        let report = |generation, connected, state, message: &str| GatewayReport {
            generation,
            connected,
            state,
            message: message.into(),
            held_back: BTreeMap::new(),
        };
        let served = report(2, 1, ReportState::Served, "");
        let idle = report(1, 0, ReportState::Pending, "none here");
        let behind = report(1, 3, ReportState::Served, "");
        let waiting = report(2, 2, ReportState::Pending, "1 of 2 waiting");
        let rejected = report(2, 1, ReportState::Rejected, "bad listener");
        let combine =
            |reports: &[&GatewayReport]| combine(2, reports, no_gateway_of("infra", "web"));
        assert_eq!(combine(&[&served, &idle]), Programmed::Served);
        assert!(
            matches!(combine(&[&idle]), Programmed::Pending(ref why) if why.contains("no gateway"))
        );
        assert!(matches!(combine(&[&served, &behind]),
            Programmed::Pending(ref why) if why.contains("3 gateways") && why.contains("generation 2")));
        assert_eq!(
            combine(&[&served, &waiting]),
            Programmed::Pending("1 of 2 waiting".into())
        );
        assert_eq!(
            combine(&[&waiting, &rejected]),
            Programmed::Rejected("bad listener".into())
        );
        let alone = local_report(
            "infra",
            "web",
            2,
            5,
            &[gateway("web", Some(5), None)],
            BTreeMap::new(),
        );
        assert_eq!(alone, served);
    }
}
