//! Istio status (pure): takes a snapshot and, per Istio object, what the gateways that select it did with its
//! current generation, and yields the `status` istiod would write (`istio.meta.v1alpha1.IstioStatus`): a
//! `Reconciled` condition (True once every connected gateway that selects the object serves its generation, as
//! istiod's distribution status reports) and `validationMessages`, the findings of the reference analysis with
//! Istio's analyzer codes (as istiod writes with `istiod.enableAnalysis`), each also carrying its `message` and
//! field path (an addition of admitpilot's; the status schema preserves unknown fields).

use serde_json::{json, Value};

use super::gateway_api::{condition, generation, Programmed, StatusUpdate};
use super::programmed::ISTIO_STATUS_KINDS;
use admitpilot_model::{ObjectKey, Snapshot};
use admitpilot_validate::references::{
    check_references, HostClaims, CONFLICTING_VIRTUAL_SERVICE_HOSTS, HOST_NOT_FOUND_IN_GATEWAY,
    REFERENCED_RESOURCE_NOT_FOUND,
};

/// The name and level Istio gives an analyzer code (`pkg/config/analysis/msg/messages.yaml`).
fn code_info(code: &str) -> Option<(&'static str, &'static str)> {
    match code {
        REFERENCED_RESOURCE_NOT_FOUND => Some(("ReferencedResourceNotFound", "ERROR")),
        CONFLICTING_VIRTUAL_SERVICE_HOSTS => {
            Some(("ConflictingMeshGatewayVirtualServiceHosts", "ERROR"))
        }
        HOST_NOT_FOUND_IN_GATEWAY => Some(("VirtualServiceHostNotFoundInGateway", "WARNING")),
        _ => None,
    }
}

/// The status of every object of [`ISTIO_STATUS_KINDS`] in `snapshot`; `served` says what its gateways did,
/// `domain_suffix` completes short Service names in the analysis, `now` (RFC 3339) stamps the conditions.
pub fn istio_status(
    snapshot: &Snapshot,
    served: &dyn Fn(&ObjectKey) -> Programmed,
    domain_suffix: &str,
    now: &str,
) -> Vec<StatusUpdate> {
    let claims = HostClaims::new(snapshot, domain_suffix);
    let mut out = Vec::new();
    for kind in ISTIO_STATUS_KINDS {
        for object in snapshot.of_kind(kind) {
            let key = object.key();
            let generation = generation(object);
            let (ok, reason, message) = match served(&key) {
                Programmed::Served => (
                    true,
                    "Reconciled",
                    "served by every connected gateway that selects it".to_string(),
                ),
                Programmed::Pending(why) => (false, "Pending", why),
                Programmed::Rejected(why) => (false, "Rejected", why),
            };
            let messages: Vec<Value> =
                check_references(snapshot, object, domain_suffix, Some(&claims))
                    .into_iter()
                    .filter_map(|reference| {
                        let (name, level) = code_info(reference.code)?;
                        Some(json!({
                            "type": {"code": reference.code, "name": name},
                            "level": level,
                            "documentationUrl": format!(
                                "https://istio.io/latest/docs/reference/config/analysis/{}/",
                                reference.code.to_ascii_lowercase()
                            ),
                            "message": reference.message,
                            "field": reference.field,
                        }))
                    })
                    .collect();
            out.push(StatusUpdate {
                key,
                generation,
                status: json!({
                    "conditions": [condition("Reconciled", ok, reason, &message, generation, now)],
                    "validationMessages": messages,
                    "observedGeneration": generation,
                }),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use admitpilot_model::snapshot::snapshot_from_yaml;
    use admitpilot_model::Kind;

    #[test]
    fn reconciled_follows_the_gateways_and_findings_carry_istio_codes() {
        let config = snapshot_from_yaml(
            "apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: web, namespace: apps, generation: 3}
spec:
  hosts: [web.example.com]
  gateways: [infra/missing]
  http: [{route: [{destination: {host: web}}]}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: deny, namespace: infra, generation: 1}
spec: {action: DENY, rules: [{}]}
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: sc, namespace: apps}
spec: {}
",
        );
        let vs = ObjectKey::new(Kind::VirtualService, "apps", "web");
        let served = |key: &ObjectKey| {
            if *key == vs {
                Programmed::Rejected("gateway g rejected the config: bad route".into())
            } else {
                Programmed::Served
            }
        };
        let updates = istio_status(&config, &served, "cluster.local", "T");
        assert_eq!(updates.len(), 2, "a Sidecar gets no status: {updates:?}");
        let web = updates.iter().find(|u| u.key == vs).unwrap();
        assert_eq!(web.generation, 3);
        let reconciled = &web.status["conditions"][0];
        assert_eq!(reconciled["type"], "Reconciled");
        assert_eq!(reconciled["status"], "False");
        assert_eq!(reconciled["observedGeneration"], 3);
        assert!(reconciled["message"]
            .as_str()
            .unwrap()
            .contains("bad route"));
        let codes: Vec<&str> = web.status["validationMessages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["type"]["code"].as_str().unwrap())
            .collect();
        assert!(codes.contains(&"IST0101"), "{codes:?}");
        assert_eq!(web.status["validationMessages"][0]["level"], "ERROR");
        let deny = updates.iter().find(|u| u.key != vs).unwrap();
        assert_eq!(deny.status["conditions"][0]["status"], "True");
        assert_eq!(deny.status["validationMessages"], json!([]));
    }
}
