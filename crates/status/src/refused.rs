//! Status of Gateway API objects the API server stored although admitpilot's validation refuses them (pure): takes
//! the [`Refusal`]s, the snapshot and admitpilot's controller name, and yields their status, so an object admitted
//! while the webhook was down says why it is not served, as istiod's status reports its analysis:
//!
//! * a Gateway of admitpilot's classes: `Accepted` and `Programmed` False, reason `Invalid` (Gateway API v1.6
//!   `apis/v1/gateway_types.go`, `GatewayReasonInvalid`: "the Gateway is syntactically or semantically invalid");
//! * a ListenerSet on such a Gateway: the same, `ListenerSetReasonInvalid`; and a valid ListenerSet whose Gateway is
//!   refused with no earlier version to serve: `Accepted` False, `ParentNotAccepted`, `Programmed` False,
//!   `ParentNotProgrammed` (`apis/v1/listenerset_types.go`; a set whose Gateway keeps its last valid version is
//!   served, and its status is that of a served set);
//! * a route (HTTP, GRPC, TLS, TCP): for each parentRef to such a Gateway, or to a ListenerSet on one, `Accepted`
//!   False, reason `UnsupportedValue` (`RouteReasonUnsupportedValue`: the route has a value the implementation does
//!   not support);
//! * a BackendTLSPolicy: for each such Gateway with a route to a Service it targets (its ancestors, as for a valid
//!   policy), `Accepted` False, reason `Invalid` (`apis/v1/policy_types.go`, `PolicyReasonInvalid`: "the policy is
//!   syntactically or semantically invalid");
//! * an Istio object of the kinds that get Istio status ([`refused_istio_status`]): `Reconciled` False, reason
//!   `Invalid`, and the validation message istiod's analysis gives a document that fails validation, IST0106
//!   `SchemaValidationError` (`pkg/config/analysis/msg/messages.yaml`).
//!
//! The message names the first refused field and says whether the gateways keep serving the last valid version.

use serde_json::{json, Value};

use std::collections::BTreeSet;

use super::backend_tls::{ancestor_entry, ancestors};
use super::gateway_api::{condition, parent_ref_as_written, StatusUpdate};
use super::programmed::ISTIO_STATUS_KINDS;
use admitpilot_model::gateway_api::common::ParentReference;
use admitpilot_model::gateway_api::{GROUP, ROUTE_KINDS};
use admitpilot_model::refusal::Refusal;
use admitpilot_model::{ConfigObject, Kind, ObjectKey, Snapshot, Spec};

/// The status of every refused object of `controller`'s classes.
pub fn refused_status(
    snapshot: &Snapshot,
    controller: &str,
    refusals: &[Refusal],
    now: &str,
) -> Vec<StatusUpdate> {
    let ours = Ours {
        snapshot,
        controller,
    };
    let mut out: Vec<StatusUpdate> = refusals
        .iter()
        .filter_map(|refusal| {
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
                Kind::BackendTlsPolicy => {
                    let entries = policy_ancestors(&ours, refusal, now);
                    if entries.is_empty() {
                        return None;
                    }
                    json!({ "ancestors": entries })
                }
                _ => return None,
            };
            Some(StatusUpdate {
                key: refusal.key.clone(),
                generation: refusal.generation,
                status,
            })
        })
        .collect();
    for refusal in refusals {
        let unserved_gateway = refusal.key.kind == Kind::KubernetesGateway
            && !refusal.kept_last_good
            && ours.class(&refusal.gateway_class_name);
        if unserved_gateway {
            let refused_sets = |key: &ObjectKey| refusals.iter().any(|r| r.key == *key);
            out.extend(orphaned_sets(snapshot, refusal, now, refused_sets));
        }
    }
    out
}

/// The ListenerSets of `snapshot` (other than refused ones) whose parent is the refused Gateway of `refusal`, which
/// the gateways do not serve: not accepted, `ParentNotAccepted`, and not programmed, `ParentNotProgrammed`.
fn orphaned_sets(
    snapshot: &Snapshot,
    refusal: &Refusal,
    now: &str,
    refused: impl Fn(&ObjectKey) -> bool,
) -> Vec<StatusUpdate> {
    let message = format!(
        "its parent Gateway {}/{} is not accepted: {}",
        refusal.key.namespace,
        refusal.key.name,
        message(refusal)
    );
    snapshot
        .of_kind(Kind::ListenerSet)
        .filter(|object| !refused(&object.key()))
        .filter_map(|object| match &object.spec {
            Spec::ListenerSet(set) if set.gateway_key(&object.metadata.namespace) == refusal.key => {
                let generation = object.metadata.generation.unwrap_or(0);
                Some(StatusUpdate {
                    key: object.key(),
                    generation,
                    status: json!({"conditions": [
                        condition("Accepted", false, "ParentNotAccepted", &message, generation, now),
                        condition("Programmed", false, "ParentNotProgrammed", &message, generation, now),
                    ], "listeners": []}),
                })
            }
            _ => None,
        })
        .collect()
}

/// The status of every refused Istio object of [`ISTIO_STATUS_KINDS`]: `Reconciled` False, `Invalid`, and the
/// refusal as an IST0106 `SchemaValidationError` validation message (level `ERROR`), as istiod's analysis reports a
/// stored document that fails validation.
pub fn refused_istio_status(refusals: &[Refusal], now: &str) -> Vec<StatusUpdate> {
    refusals
        .iter()
        .filter(|refusal| ISTIO_STATUS_KINDS.contains(&refusal.key.kind))
        .map(|refusal| {
            let generation = refusal.generation;
            let text = message(refusal);
            StatusUpdate {
                key: refusal.key.clone(),
                generation,
                status: json!({
                    "conditions": [condition("Reconciled", false, "Invalid", &text, generation, now)],
                    "validationMessages": [{
                        "type": {"code": "IST0106", "name": "SchemaValidationError"},
                        "level": "ERROR",
                        "documentationUrl": "https://istio.io/latest/docs/reference/config/analysis/ist0106/",
                        "message": format!("Schema validation error: {}", refusal.reason),
                    }],
                    "observedGeneration": generation,
                }),
            }
        })
        .collect()
}

/// A refused BackendTLSPolicy's `status.ancestors`: each Gateway of admitpilot's classes with a route to a Service
/// the policy targets, `Accepted` False, `Invalid`.
fn policy_ancestors(ours: &Ours<'_>, refusal: &Refusal, now: &str) -> Vec<Value> {
    let gateways: Vec<&ConfigObject> = ours
        .snapshot
        .of_kind(Kind::KubernetesGateway)
        .filter(|object| ours.gateway(&object.key()))
        .map(AsRef::as_ref)
        .collect();
    let services: BTreeSet<&str> = refusal
        .target_refs
        .iter()
        .filter(|target| target.group.is_empty() && target.kind == "Service")
        .map(|target| target.name.as_str())
        .collect();
    let accepted = condition(
        "Accepted",
        false,
        "Invalid",
        &message(refusal),
        refusal.generation,
        now,
    );
    ancestors(ours.snapshot, &gateways, &refusal.key.namespace, &services)
        .into_iter()
        .map(|gateway| ancestor_entry(gateway, ours.controller, std::slice::from_ref(&accepted)))
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

    #[test]
    fn a_refused_policy_tells_its_ancestors_and_an_istio_object_its_schema_error() {
        let snapshot = snapshot_from_yaml(&format!(
            "{CONFIG}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: r, namespace: default}}
spec:
  parentRefs: [{{name: gw}}]
  rules: [{{backendRefs: [{{name: secure, port: 443}}]}}]
"
        ));
        let targets = |name: &str| {
            json!({"metadata": {"generation": 2},
                "spec": {"targetRefs": [{"group": "", "kind": "Service", "name": name}]}})
        };
        let used = refusal(Kind::BackendTlsPolicy, targets("secure"), false);
        let unused = refusal(Kind::BackendTlsPolicy, targets("elsewhere"), false);
        let updates = refused_status(
            &snapshot,
            "admitpilot.io/gateway-controller",
            &[used, unused],
            "now",
        );
        assert_eq!(
            updates.len(),
            1,
            "a policy no route of ours uses: {updates:?}"
        );
        let ancestor = &updates[0].status["ancestors"][0];
        assert_eq!(ancestor["ancestorRef"]["name"], "gw");
        assert_eq!(ancestor["conditions"][0]["reason"], "Invalid");
        assert_eq!(ancestor["conditions"][0]["status"], "False");

        let service = refusal(
            Kind::VirtualService,
            json!({"metadata": {"generation": 7}}),
            true,
        );
        let not_istio = refusal(Kind::HttpRoute, json!({}), true);
        let istio = refused_istio_status(&[service, not_istio], "now");
        assert_eq!(istio.len(), 1);
        let status = &istio[0].status;
        assert_eq!(status["observedGeneration"], 7);
        assert_eq!(
            (
                &status["conditions"][0]["type"],
                &status["conditions"][0]["status"]
            ),
            (&json!("Reconciled"), &json!("False"))
        );
        let finding = &status["validationMessages"][0];
        assert_eq!(finding["type"]["code"], "IST0106");
        assert!(finding["message"]
            .as_str()
            .unwrap()
            .contains("not an RE2 regex"));
    }

    #[test]
    fn the_sets_of_a_refused_gateway_with_nothing_served_are_not_accepted() {
        let snapshot = snapshot_from_yaml(
            "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: ap}
spec: {controllerName: admitpilot.io/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {name: set, namespace: default, generation: 5}
spec:
  parentRef: {name: x}
  listeners: [{name: extra, port: 8080, protocol: HTTP}]
",
        );
        let gateway = |kept| {
            refusal(
                Kind::KubernetesGateway,
                json!({"spec": {"gatewayClassName": "ap"}}),
                kept,
            )
        };
        let controller = "admitpilot.io/gateway-controller";
        let updates = refused_status(&snapshot, controller, &[gateway(false)], "now");
        let set = updates
            .iter()
            .find(|u| u.key.kind == Kind::ListenerSet)
            .expect("the set gets a status");
        assert_eq!(set.generation, 5);
        let reasons: Vec<&Value> = set.status["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| &c["reason"])
            .collect();
        assert_eq!(reasons, ["ParentNotAccepted", "ParentNotProgrammed"]);
        let kept = refused_status(&snapshot, controller, &[gateway(true)], "now");
        assert!(
            kept.iter().all(|u| u.key.kind != Kind::ListenerSet),
            "a set of a Gateway still served keeps its own status: {kept:?}"
        );
    }
}
