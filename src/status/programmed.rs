//! Whether a Gateway is programmed (pure): takes the gateways connected over xDS (what each was last sent and has
//! acknowledged) and the config version that first held the Gateway's current generation, and says whether every
//! gateway of it serves that version ([`Programmed`]). Each replica sees only the gateways connected to it: it sums
//! that up per Gateway in a [`GatewayReport`], and the replicas' reports [`combine`] into the Gateway's status.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::gateway_api::Programmed;

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

/// What the gateways of the Gateway `namespace/name` did with config version `needed` (the first that held its
/// current generation).
pub fn programmed(
    namespace: &str,
    name: &str,
    needed: u64,
    connected: &[ConnectedGateway],
) -> Programmed {
    let ours = gateways_of(namespace, name, connected);
    if ours.is_empty() {
        return none_connected(namespace, name);
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

fn none_connected(namespace: &str, name: &str) -> Programmed {
    Programmed::Pending(format!(
        "no gateway with label {GATEWAY_NAME_LABEL}={name} in namespace {namespace} is connected"
    ))
}

/// What the gateways connected to one replica did with one Gateway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GatewayReport {
    /// The Gateway's generation the replica knows.
    pub generation: i64,
    /// How many gateways of it are connected to the replica.
    pub connected: usize,
    /// What they did: `Served`, `Pending` or `Rejected`.
    pub state: ReportState,
    /// Why, when not served.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Routes (`namespace/name`) the push guard leaves out of these gateways' config, with what Envoy would reject.
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
    let (state, message) = match programmed(namespace, name, needed, connected) {
        Programmed::Served => (ReportState::Served, String::new()),
        Programmed::Pending(why) => (ReportState::Pending, why),
        Programmed::Rejected(why) => (ReportState::Rejected, why),
    };
    GatewayReport {
        generation,
        connected: gateways_of(namespace, name, connected).len(),
        state,
        message,
        held_back,
    }
}

/// The Gateway `namespace/name` at `generation`, from every replica's report on it: programmed once some gateway
/// is connected and every replica with gateways of it reports them served at that generation.
pub fn combine(
    namespace: &str,
    name: &str,
    generation: i64,
    reports: &[&GatewayReport],
) -> Programmed {
    let with_gateways: Vec<&&GatewayReport> = reports.iter().filter(|r| r.connected > 0).collect();
    if with_gateways.is_empty() {
        return none_connected(namespace, name);
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
        let combine = |reports: &[&GatewayReport]| combine("infra", "web", 2, reports);
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
