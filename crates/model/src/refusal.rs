//! Objects the API server stored although admitpilot's validation refuses them (the webhook was down, not
//! installed, or `failurePolicy: Ignore`): takes the raw document and its errors, yields a [`Refusal`], what the
//! status of such an object must say (`status` turns it into conditions, as istiod's status reports its analysis).

use serde_json::Value;

use crate::gateway_api::common::{LocalReference, ParentReference};
use crate::gateway_api::GROUP;
use crate::{Finding, Kind, ObjectKey};

/// One refused object: enough of its raw document to address its status, and why it is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The object.
    pub key: ObjectKey,
    /// `metadata.generation` of the refused version (0 when absent).
    pub generation: i64,
    /// The first error, as "field: message", and how many more there are.
    pub reason: String,
    /// Whether the gateways keep serving an earlier, valid version of it.
    pub kept_last_good: bool,
    /// A Gateway's `spec.gatewayClassName` (empty for other kinds).
    pub gateway_class_name: String,
    /// A route's `spec.parentRefs`, or a ListenerSet's `spec.parentRef` (read leniently: entries that do not
    /// decode are left out).
    pub parent_refs: Vec<ParentReference>,
    /// A policy's `spec.targetRefs` (BackendTLSPolicy; read leniently like `parent_refs`).
    pub target_refs: Vec<LocalReference>,
}

/// The parts of `document` a [`Refusal`] reads (`metadata.generation`, `spec.gatewayClassName`,
/// `spec.parentRefs`, `spec.parentRef`, `spec.targetRefs`), copied before the document is handed on to
/// validation; `None` for a document outside the Gateway API's group and Istio's (`*.istio.io`), whose refusal no
/// status reports (nothing is copied for it). An Istio document has none of those spec fields: only its generation
/// is copied.
pub fn addressing(document: &Value) -> Option<Value> {
    let (group, _) = Kind::split_api_version(document["apiVersion"].as_str()?);
    if group != GROUP && !group.ends_with(".istio.io") {
        return None;
    }
    let spec = &document["spec"];
    let mut kept = serde_json::Map::new();
    for field in ["gatewayClassName", "parentRefs", "parentRef", "targetRefs"] {
        if let Some(value) = spec.get(field) {
            kept.insert(field.to_string(), value.clone());
        }
    }
    Some(serde_json::json!({
        "metadata": {"generation": document["metadata"]["generation"].clone()},
        "spec": Value::Object(kept),
    }))
}

impl Refusal {
    /// Reads what status needs from `document` (the object as stored), refused for `errors` (at least one).
    pub fn from_document(
        key: ObjectKey,
        document: &Value,
        errors: &[Finding],
        kept_last_good: bool,
    ) -> Refusal {
        let spec = &document["spec"];
        let parent = |value: &Value| serde_json::from_value::<ParentReference>(value.clone()).ok();
        let parent_refs = match spec.get("parentRefs").and_then(Value::as_array) {
            Some(list) => list.iter().filter_map(parent).collect(),
            None => spec.get("parentRef").and_then(parent).into_iter().collect(),
        };
        let target_refs = spec
            .get("targetRefs")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|value| serde_json::from_value::<LocalReference>(value.clone()).ok())
            .collect();
        let reason = match errors {
            [] => "invalid".to_string(),
            [first] => first_text(first),
            [first, rest @ ..] => format!("{} (and {} more)", first_text(first), rest.len()),
        };
        Refusal {
            key,
            generation: document["metadata"]["generation"].as_i64().unwrap_or(0),
            reason,
            kept_last_good,
            gateway_class_name: spec["gatewayClassName"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            parent_refs,
            target_refs,
        }
    }
}

/// "field: message", or the message alone for a finding without a field.
fn first_text(finding: &Finding) -> String {
    if finding.field.is_empty() {
        finding.message.clone()
    } else {
        format!("{}: {}", finding.field, finding.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn gateway_api_and_istio_documents_are_addressed() {
        let route = json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"generation": 2}, "spec": {"parentRefs": [{"name": "gw"}], "rules": []}});
        assert_eq!(
            addressing(&route),
            Some(json!({"metadata": {"generation": 2}, "spec": {"parentRefs": [{"name": "gw"}]}}))
        );
        let istio = json!({"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
            "metadata": {"generation": 5}, "spec": {"hosts": ["a"]}});
        assert_eq!(
            addressing(&istio),
            Some(json!({"metadata": {"generation": 5}, "spec": {}}))
        );
        let service = json!({"apiVersion": "v1", "kind": "Service"});
        assert_eq!(addressing(&service), None);
    }

    #[test]
    fn a_refused_route_keeps_its_parents_and_says_its_first_error() {
        let document = json!({"metadata": {"name": "r", "namespace": "ns", "generation": 4},
            "spec": {"parentRefs": [{"name": "gw"}, {"name": 7}, {"name": "other", "sectionName": "http"}]}});
        let errors = [
            Finding::error("spec.rules[0].matches[0].path.value", "not an RE2 regex"),
            Finding::error("spec.rules[1]", "second"),
        ];
        let key = ObjectKey::new(Kind::HttpRoute, "ns", "r");
        let refusal = Refusal::from_document(key, &document, &errors, false);
        assert_eq!(refusal.generation, 4);
        assert_eq!(
            refusal.reason,
            "spec.rules[0].matches[0].path.value: not an RE2 regex (and 1 more)"
        );
        let names: Vec<&str> = refusal
            .parent_refs
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(names, ["gw", "other"]);
    }

    #[test]
    fn a_listener_set_names_its_one_parent_a_gateway_its_class_and_a_policy_its_targets() {
        let set = json!({"spec": {"parentRef": {"name": "gw"}}});
        let key = ObjectKey::new(Kind::ListenerSet, "ns", "s");
        let refusal = Refusal::from_document(key, &set, &[], true);
        assert_eq!(refusal.parent_refs.len(), 1);
        assert_eq!(refusal.reason, "invalid");
        let gateway = json!({"spec": {"gatewayClassName": "ap"}});
        let key = ObjectKey::new(Kind::KubernetesGateway, "ns", "gw");
        assert_eq!(
            Refusal::from_document(key, &gateway, &[], false).gateway_class_name,
            "ap"
        );
        let policy =
            json!({"spec": {"targetRefs": [{"group": "", "kind": "Service", "name": "web"}, 3]}});
        let key = ObjectKey::new(Kind::BackendTlsPolicy, "ns", "p");
        let targets = Refusal::from_document(key, &policy, &[], false).target_refs;
        assert_eq!(targets.len(), 1);
        assert_eq!(targets[0].name, "web");
    }
}
