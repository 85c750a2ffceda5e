//! Status of Gateway API objects the API server stored although admitpilot's validation refuses them (pure): takes
//! the [`Refusal`]s, the snapshot and admitpilot's controller name, and yields their status, so an object admitted
//! while the webhook was down says why it is not served, as istiod's status reports its analysis:
//!
//! * a Gateway of admitpilot's classes: `Accepted` and `Programmed` False, reason `Invalid` (Gateway API v1.6
//!   `apis/v1/gateway_types.go`, `GatewayReasonInvalid`: "the Gateway is syntactically or semantically invalid");
//! * a ListenerSet on such a Gateway: the same, `ListenerSetReasonInvalid`;
//! * a route (HTTP, GRPC, TLS, TCP): for each parentRef to such a Gateway, or to a ListenerSet on one, `Accepted`
//!   False, reason `UnsupportedValue` (`RouteReasonUnsupportedValue`: the route has a value the implementation does
//!   not support).
//!
//! The message names the first refused field and says whether the gateways keep serving the last valid version.

use serde_json::{json, Value};

use super::gateway_api::{condition, parent_ref_as_written, StatusUpdate};
use admitpilot_model::gateway_api::common::ParentReference;
use admitpilot_model::gateway_api::{GROUP, ROUTE_KINDS};
use admitpilot_model::refusal::Refusal;
use admitpilot_model::{Kind, ObjectKey, Snapshot, Spec};

/// The status of every refused object of `controller`'s classes.
pub fn refused_status(
    snapshot: &Snapshot,
    controller: &str,
    refusals: &[Refusal],
    now: &str,
) -> Vec<StatusUpdate> {
    refusals
        .iter()
        .filter_map(|refusal| {
            let ours = Ours {
                snapshot,
                controller,
            };
            let status = match refusal.key.kind {
                Kind::KubernetesGateway if ours.class(&refusal.gateway_class_name) => {
                    invalid(refusal, "Invalid", now)
                }
                Kind::ListenerSet
                    if refusal
                        .parent_refs
                        .iter()
                        .any(|parent| ours.gateway_of(parent, &refusal.key.namespace)) =>
                {
                    invalid(refusal, "Invalid", now)
                }
                kind if ROUTE_KINDS.contains(&kind) => {
                    let parents: Vec<Value> = refusal
                        .parent_refs
                        .iter()
                        .filter(|parent| ours.parent(parent, &refusal.key.namespace))
                        .map(|parent| route_parent(refusal, parent, controller, now))
                        .collect();
                    if parents.is_empty() {
                        return None;
                    }
                    json!({ "parents": parents })
                }
                _ => return None,
            };
            Some(StatusUpdate {
                key: refusal.key.clone(),
                generation: refusal.generation,
                status,
            })
        })
        .collect()
}

/// What a refused object's conditions say.
fn message(refusal: &Refusal) -> String {
    let served = if refusal.kept_last_good {
        "the gateways keep serving its last valid version"
    } else {
        "the gateways serve nothing of it"
    };
    format!(
        "refused by admitpilot's validation: {}; {served}",
        refusal.reason
    )
}

/// `Accepted` and `Programmed` False with `reason` (Gateways, ListenerSets).
fn invalid(refusal: &Refusal, reason: &str, now: &str) -> Value {
    let message = message(refusal);
    json!({"conditions": [
        condition("Accepted", false, reason, &message, refusal.generation, now),
        condition("Programmed", false, reason, &message, refusal.generation, now),
    ]})
}

/// A route's parent entry: not accepted, `UnsupportedValue`.
fn route_parent(refusal: &Refusal, parent: &ParentReference, controller: &str, now: &str) -> Value {
    json!({
        "parentRef": parent_ref_as_written(parent),
        "controllerName": controller,
        "conditions": [condition("Accepted", false, "UnsupportedValue", &message(refusal),
            refusal.generation, now)],
    })
}

/// Which objects belong to admitpilot's GatewayClasses.
struct Ours<'a> {
    snapshot: &'a Snapshot,
    controller: &'a str,
}

impl Ours<'_> {
    /// Whether the GatewayClass `name` is admitpilot's.
    fn class(&self, name: &str) -> bool {
        matches!(
            self.snapshot.get(&ObjectKey::new(Kind::GatewayClass, "", name)).map(|o| &o.spec),
            Some(Spec::GatewayClass(class)) if class.controller_name == self.controller
        )
    }

    /// Whether the Gateway `key` is of admitpilot's classes.
    fn gateway(&self, key: &ObjectKey) -> bool {
        matches!(
            self.snapshot.get(key).map(|o| &o.spec),
            Some(Spec::KubernetesGateway(gateway)) if self.class(&gateway.gateway_class_name)
        )
    }

    /// Whether `parent` (of an object in `namespace`) is a Gateway of admitpilot's classes.
    fn gateway_of(&self, parent: &ParentReference, namespace: &str) -> bool {
        let namespace = parent.namespace.as_deref().unwrap_or(namespace);
        parent.group() == GROUP
            && parent.kind.as_deref().unwrap_or("Gateway") == "Gateway"
            && self.gateway(&ObjectKey::new(
                Kind::KubernetesGateway,
                namespace,
                parent.name.clone(),
            ))
    }

    /// Whether a route's `parent` is a Gateway of admitpilot's classes or a ListenerSet on one.
    fn parent(&self, parent: &ParentReference, namespace: &str) -> bool {
        if parent.kind.as_deref() != Some("ListenerSet") {
            return self.gateway_of(parent, namespace);
        }
        let namespace = parent.namespace.as_deref().unwrap_or(namespace);
        match self
            .snapshot
            .get(&ObjectKey::new(
                Kind::ListenerSet,
                namespace,
                parent.name.clone(),
            ))
            .map(|o| &o.spec)
        {
            Some(Spec::ListenerSet(set)) => self.gateway(&set.gateway_key(namespace)),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use admitpilot_model::snapshot::snapshot_from_yaml;
    use admitpilot_model::Finding;

    const CONFIG: &str = "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: ap}
spec: {controllerName: admitpilot.io/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: default}
spec:
  gatewayClassName: ap
  listeners: [{name: http, port: 80, protocol: HTTP}]
";

    fn refusal(kind: Kind, document: Value, kept: bool) -> Refusal {
        let error = Finding::error("spec.rules[0].matches[0].path.value", "not an RE2 regex");
        Refusal::from_document(
            ObjectKey::new(kind, "default", "x"),
            &document,
            &[error],
            kept,
        )
    }

    #[test]
    fn refused_routes_and_gateways_of_our_classes_say_why() {
        let snapshot = snapshot_from_yaml(CONFIG);
        let route = refusal(
            Kind::HttpRoute,
            json!({"metadata": {"generation": 3},
                "spec": {"parentRefs": [{"name": "gw"}, {"name": "theirs"}]}}),
            false,
        );
        let gateway = refusal(
            Kind::KubernetesGateway,
            json!({"spec": {"gatewayClassName": "ap"}}),
            true,
        );
        let other_class = refusal(
            Kind::KubernetesGateway,
            json!({"spec": {"gatewayClassName": "someone-else"}}),
            false,
        );
        let updates = refused_status(
            &snapshot,
            "admitpilot.io/gateway-controller",
            &[route, gateway, other_class],
            "now",
        );
        assert_eq!(updates.len(), 2);
        let parents = updates[0].status["parents"].as_array().unwrap();
        assert_eq!(parents.len(), 1, "only the parent that is ours");
        let accepted = &parents[0]["conditions"][0];
        assert_eq!(
            (
                &accepted["status"],
                &accepted["reason"],
                &accepted["observedGeneration"]
            ),
            (&json!("False"), &json!("UnsupportedValue"), &json!(3))
        );
        let text = accepted["message"].as_str().unwrap();
        assert!(
            text.contains("spec.rules[0].matches[0].path.value: not an RE2 regex"),
            "{text}"
        );
        assert!(text.contains("serve nothing of it"), "{text}");
        let conditions = updates[1].status["conditions"].as_array().unwrap();
        assert_eq!(conditions[0]["reason"], "Invalid");
        assert_eq!(conditions[1]["type"], "Programmed");
        assert!(conditions[0]["message"]
            .as_str()
            .unwrap()
            .contains("last valid version"));
    }
}
