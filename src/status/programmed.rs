//! Whether a Gateway is programmed (pure): takes the gateways connected over xDS (what each was last sent and has
//! acknowledged) and the config version that first held the Gateway's current generation, and says whether every
//! gateway of it serves that version ([`Programmed`]).

use std::collections::BTreeMap;

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
    let ours: Vec<&ConnectedGateway> = connected
        .iter()
        .filter(|gateway| {
            gateway.namespace == namespace
                && gateway.labels.get(GATEWAY_NAME_LABEL).map(String::as_str) == Some(name)
        })
        .collect();
    if ours.is_empty() {
        return Programmed::Pending(format!(
            "no gateway with label {GATEWAY_NAME_LABEL}={name} in namespace {namespace} is connected"
        ));
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
}
