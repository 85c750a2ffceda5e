//! Gateway parameters (pure): takes a Gateway, its GatewayClass and the snapshot holding the ConfigMaps their
//! `parametersRef`s name, and yields the overlays for the objects that run the Gateway's proxies, or why the
//! parameters are invalid (the Gateway's, or its class's, `Accepted` False, reason `InvalidParameters`).
//!
//! The design is istiod's (its gateway deployment controller's customization ConfigMaps): a core ConfigMap whose
//! data keys name the generated object they overlay ([`OVERLAY_KEYS`]), each a YAML document merged into that object
//! the way a strategic merge patch is. The GatewayClass's `parametersRef` (a ConfigMap with its namespace) applies
//! to every Gateway of the class, then the Gateway's `spec.infrastructure.parametersRef` (a ConfigMap of its
//! namespace) on top of it. A document may set `metadata.labels` and `metadata.annotations` and the object's body
//! (`spec`; a ServiceAccount's `imagePullSecrets` and `automountServiceAccountToken`); the name, namespace, owner
//! and the selectors that tie the objects together stay admitpilot's. `podDisruptionBudget` and
//! `horizontalPodAutoscaler` create those objects (the autoscaler then owns the Deployment's replicas).

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Gateway, GatewayClass};
use crate::{ConfigObject, Kind, ObjectKey, Snapshot, Spec};

/// The data keys of a parameters ConfigMap, each the generated object it overlays.
pub const OVERLAY_KEYS: [&str; 5] = [
    "deployment",
    "service",
    "serviceAccount",
    "podDisruptionBudget",
    "horizontalPodAutoscaler",
];

/// The data key of a CA bundle ConfigMap (BackendTLSPolicy `caCertificateRefs`).
pub const CA_KEY: &str = "ca.crt";

/// Whether a ConfigMap document holds data another object may reference: a CA bundle ([`CA_KEY`]) or one of the
/// [`OVERLAY_KEYS`]. Other ConfigMaps are not admitpilot's business (a `parametersRef` to one is told so).
pub fn referenced_data(doc: &Value) -> bool {
    doc.get("data")
        .and_then(Value::as_object)
        .is_some_and(|data| {
            data.keys()
                .any(|key| key == CA_KEY || OVERLAY_KEYS.contains(&key.as_str()))
        })
}

/// The overlays of one ConfigMap.
#[derive(Debug, Clone, PartialEq)]
pub struct Overlay {
    /// Where they come from (`GatewayClass <name>` or `Gateway <ns>/<name>`, and the ConfigMap), for messages.
    pub origin: String,
    /// Each [`OVERLAY_KEYS`] key the ConfigMap has, with its document.
    pub patches: BTreeMap<&'static str, Value>,
}

/// The overlays that apply to a Gateway's objects, its class's first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parameters {
    /// The class's overlay, then the Gateway's (each when it has a `parametersRef`).
    pub layers: Vec<Overlay>,
}

impl Parameters {
    /// The documents for the object of `key`, in the order they apply.
    pub fn patches<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.layers
            .iter()
            .filter_map(move |layer| layer.patches.get(key))
    }

    /// Whether any layer has the object of `key` (a PodDisruptionBudget or an autoscaler is made only then).
    pub fn has(&self, key: &str) -> bool {
        self.patches(key).next().is_some()
    }
}

/// The parameters of a GatewayClass (`spec.parametersRef`), or why they are invalid (the message names the field).
pub fn class_parameters(
    snapshot: &Snapshot,
    name: &str,
    class: &GatewayClass,
) -> Result<Option<Overlay>, String> {
    let Some(reference) = class.parameters_ref.as_ref() else {
        return Ok(None);
    };
    let field = "spec.parametersRef";
    let (configmap_namespace, configmap) = configmap_reference(reference, field)?;
    let Some(namespace) = configmap_namespace else {
        return Err(format!(
            "{field}: a ConfigMap is namespaced; set {field}.namespace"
        ));
    };
    overlay(
        snapshot,
        format!("GatewayClass {name} {field}"),
        (&namespace, &configmap),
    )
    .map(Some)
}

/// The parameters of Gateway `object` (spec `gateway`): its class's, then its own
/// (`spec.infrastructure.parametersRef`); `Err` is the `Accepted` condition's reason and message.
pub fn gateway_parameters(
    snapshot: &Snapshot,
    object: &ConfigObject,
    gateway: &Gateway,
) -> Result<Parameters, (&'static str, String)> {
    let mut layers = Vec::new();
    if let Some(Spec::GatewayClass(class)) = snapshot
        .get(&ObjectKey::new(
            Kind::GatewayClass,
            "",
            gateway.gateway_class_name.clone(),
        ))
        .map(|class| &class.spec)
    {
        let class_overlay = class_parameters(snapshot, &gateway.gateway_class_name, class)
            .map_err(|why| {
                (
                    "InvalidParameters",
                    format!(
                        "its GatewayClass {} is not accepted: {why}",
                        gateway.gateway_class_name
                    ),
                )
            })?;
        layers.extend(class_overlay);
    }
    if let Some(reference) = gateway.parameters_ref() {
        let field = "spec.infrastructure.parametersRef";
        let invalid = |why: String| ("InvalidParameters", why);
        let (_, configmap) = configmap_reference(reference, field).map_err(invalid)?;
        let namespace = object.metadata.namespace.as_str();
        let origin = format!("Gateway {namespace}/{} {field}", object.metadata.name);
        layers.push(overlay(snapshot, origin, (namespace, &configmap)).map_err(invalid)?);
    }
    let parameters = Parameters { layers };
    autoscaler_bounds(&parameters).map_err(|why| ("InvalidParameters", why))?;
    Ok(parameters)
}

/// Whether the autoscaler the layers ask for, merged (a later layer's value wins), has `1 <= minReplicas <=
/// maxReplicas`; the error says which and where the values come from.
fn autoscaler_bounds(parameters: &Parameters) -> Result<(), String> {
    if !parameters.has("horizontalPodAutoscaler") {
        return Ok(());
    }
    // The last layer that sets `field` wins.
    let merged = |field: &str| {
        parameters
            .layers
            .iter()
            .rev()
            .filter_map(|layer| {
                layer
                    .patches
                    .get("horizontalPodAutoscaler")
                    .map(|p| (layer, p))
            })
            .filter_map(|(layer, patch)| {
                let value = patch.get("spec")?.get(field)?;
                Some((value.as_i64(), layer.origin.as_str()))
            })
            .next()
    };
    let origins: Vec<&str> = parameters
        .layers
        .iter()
        .filter(|layer| layer.patches.contains_key("horizontalPodAutoscaler"))
        .map(|layer| layer.origin.as_str())
        .collect();
    let Some((Some(max), _)) = merged("maxReplicas").filter(|(max, _)| max.is_some_and(|m| m >= 1))
    else {
        return Err(format!(
            "horizontalPodAutoscaler: the autoscaler needs spec.maxReplicas, an integer of at least 1 (from {})",
            origins.join(", ")
        ));
    };
    match merged("minReplicas") {
        Some((Some(min), origin)) if min < 1 || min > max => Err(format!(
            "{origin}: horizontalPodAutoscaler spec.minReplicas {min} must be between 1 and maxReplicas {max}"
        )),
        Some((None, origin)) => Err(format!(
            "{origin}: horizontalPodAutoscaler spec.minReplicas must be an integer"
        )),
        _ => Ok(()),
    }
}

/// The namespace (when given) and name of a `parametersRef` naming a core ConfigMap; the error says what else it
/// names.
pub fn configmap_reference(
    reference: &Value,
    field: &str,
) -> Result<(Option<String>, String), String> {
    let text = |key: &str| reference.get(key).and_then(Value::as_str).unwrap_or("");
    if !text("group").is_empty() || text("kind") != "ConfigMap" {
        return Err(format!(
            "{field} ({}/{} {}): admitpilot reads parameters from a core ConfigMap (group \"\", kind ConfigMap) only",
            text("group"),
            text("kind"),
            text("name")
        ));
    }
    let namespace = Some(text("namespace").to_string()).filter(|ns| !ns.is_empty());
    Ok((namespace, text("name").to_string()))
}

/// The overlays of ConfigMap `namespace/name`, checked.
fn overlay(
    snapshot: &Snapshot,
    origin: String,
    (namespace, name): (&str, &str),
) -> Result<Overlay, String> {
    let key = ObjectKey::new(Kind::ReferencedConfigMap, namespace, name);
    let data = match snapshot.get(&key).map(|object| &object.spec) {
        Some(Spec::ReferencedConfigMap(configmap)) => configmap.data.clone().unwrap_or_default(),
        _ => {
            return Err(format!(
                "{origin}: ConfigMap {namespace}/{name} does not exist, or has none of the keys {}",
                OVERLAY_KEYS.join(", ")
            ))
        }
    };
    let mut patches = BTreeMap::new();
    for (data_key, text) in &data {
        let at = format!("{origin}: ConfigMap {namespace}/{name} data.{data_key}");
        let Some(key) = OVERLAY_KEYS.iter().find(|k| **k == data_key) else {
            return Err(format!(
                "{at}: not a key admitpilot reads (it reads {})",
                OVERLAY_KEYS.join(", ")
            ));
        };
        let document: Value =
            serde_yaml_ng::from_str(text).map_err(|error| format!("{at}: not YAML: {error}"))?;
        check_document(key, &document).map_err(|why| format!("{at}{why}"))?;
        patches.insert(*key, document);
    }
    Ok(Overlay { origin, patches })
}

/// What a document of `key` may set; the error is the offending field's path (appended to the key's) and why.
fn check_document(key: &str, document: &Value) -> Result<(), String> {
    let Some(fields) = document.as_object() else {
        return Err(": must be a YAML mapping (metadata, spec)".into());
    };
    let body: &[&str] = match key {
        "serviceAccount" => &["imagePullSecrets", "automountServiceAccountToken"],
        _ => &["spec"],
    };
    for (field, value) in fields {
        if field == "metadata" {
            check_metadata(value)?;
        } else if !body.contains(&field.as_str()) {
            return Err(format!(
                ".{field}: an overlay sets metadata.labels, metadata.annotations and {}",
                body.join(", ")
            ));
        } else if field == "spec" && !value.is_object() {
            return Err(".spec: must be a mapping".into());
        }
    }
    Ok(())
}

/// An overlay's `metadata`: labels and annotations, string to string.
fn check_metadata(metadata: &Value) -> Result<(), String> {
    let Some(fields) = metadata.as_object() else {
        return Err(".metadata: must be a mapping".into());
    };
    for (field, value) in fields {
        if field != "labels" && field != "annotations" {
            return Err(format!(
                ".metadata.{field}: an overlay sets metadata.labels and metadata.annotations only (the name, \
                 namespace and owner are admitpilot's)"
            ));
        }
        let strings = value
            .as_object()
            .is_some_and(|map| map.values().all(Value::is_string));
        if !strings {
            return Err(format!(".metadata.{field}: must map strings to strings"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::test_object;
    use serde_json::json;

    fn snapshot(objects: Vec<Value>) -> Snapshot {
        let mut snapshot = Snapshot::default();
        for doc in objects {
            let object = test_object(doc);
            snapshot.objects.insert(object.key(), object);
        }
        snapshot
    }

    fn configmap(namespace: &str, name: &str, data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace}, "data": data})
    }

    fn gateway(infrastructure: Value) -> std::sync::Arc<ConfigObject> {
        test_object(
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": "apps"},
            "spec": {"gatewayClassName": "ap", "infrastructure": infrastructure,
                "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}}),
        )
    }

    fn class(parameters: Value) -> Value {
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
            "metadata": {"name": "ap"},
            "spec": {"controllerName": "admitpilot.io/gateway-controller", "parametersRef": parameters}})
    }

    fn resolve(
        snapshot: &Snapshot,
        object: &ConfigObject,
    ) -> Result<Parameters, (&'static str, String)> {
        let Spec::KubernetesGateway(spec) = &object.spec else {
            panic!("a Gateway");
        };
        gateway_parameters(snapshot, object, spec)
    }

    #[test]
    fn the_class_overlay_comes_first_then_the_gateways() {
        let snapshot = snapshot(vec![
            class(
                json!({"group": "", "kind": "ConfigMap", "name": "defaults", "namespace": "admitpilot"}),
            ),
            configmap(
                "admitpilot",
                "defaults",
                json!({
                "deployment": "spec:\n  replicas: 2\n",
                "podDisruptionBudget": "spec: {minAvailable: 1}"}),
            ),
            configmap(
                "apps",
                "mine",
                json!({"deployment": "metadata: {labels: {team: a}}\nspec: {replicas: 3}"}),
            ),
        ]);
        let object =
            gateway(json!({"parametersRef": {"group": "", "kind": "ConfigMap", "name": "mine"}}));
        let parameters = resolve(&snapshot, &object).expect("valid");
        let replicas: Vec<&Value> = parameters
            .patches("deployment")
            .map(|p| &p["spec"]["replicas"])
            .collect();
        assert_eq!(replicas, [&json!(2), &json!(3)]);
        assert!(parameters.has("podDisruptionBudget"));
        assert!(!parameters.has("horizontalPodAutoscaler"));
    }

    #[test]
    fn invalid_parameters_name_the_field() {
        let cases = [
            (
                json!({"deployment": "spec: [1"}),
                "data.deployment: not YAML",
            ),
            (
                json!({"service": "spec: {}", "deploymnt": "spec: {}"}),
                "data.deploymnt: not a key admitpilot reads",
            ),
            (
                json!({"service": "metadata: {name: other}"}),
                "data.service.metadata.name: an overlay sets",
            ),
            (
                json!({"service": "kind: Pod"}),
                "data.service.kind: an overlay sets",
            ),
            (
                json!({"horizontalPodAutoscaler": "spec: {minReplicas: 2}"}),
                "spec.maxReplicas",
            ),
            (
                json!({"horizontalPodAutoscaler": "spec: {minReplicas: 4, maxReplicas: 3}"}),
                "minReplicas 4",
            ),
            (json!({"deployment": "- a"}), "must be a YAML mapping"),
        ];
        for (data, expected) in cases {
            let snapshot = snapshot(vec![configmap("apps", "mine", data.clone())]);
            let object = gateway(
                json!({"parametersRef": {"group": "", "kind": "ConfigMap", "name": "mine"}}),
            );
            let (reason, why) = resolve(&snapshot, &object).expect_err("invalid");
            assert_eq!(reason, "InvalidParameters");
            assert!(why.contains(expected), "{data}: {why}");
            assert!(
                why.contains("Gateway apps/gw spec.infrastructure.parametersRef"),
                "{why}"
            );
        }
    }

    #[test]
    fn a_missing_configmap_or_a_class_without_namespace_is_invalid() {
        let object =
            gateway(json!({"parametersRef": {"group": "", "kind": "ConfigMap", "name": "gone"}}));
        let (_, why) = resolve(&Snapshot::default(), &object).expect_err("missing");
        assert!(why.contains("ConfigMap apps/gone does not exist"), "{why}");
        let snapshot = snapshot(vec![class(
            json!({"group": "", "kind": "ConfigMap", "name": "defaults"}),
        )]);
        let (_, why) = resolve(&snapshot, &gateway(json!({}))).expect_err("no namespace");
        assert!(
            why.contains("its GatewayClass ap is not accepted: spec.parametersRef"),
            "{why}"
        );
        assert!(why.contains("set spec.parametersRef.namespace"), "{why}");
        let snapshot =
            snapshot_of_class(json!({"group": "example.io", "kind": "Params", "name": "p"}));
        let (_, why) = resolve(&snapshot, &gateway(json!({}))).expect_err("not a ConfigMap");
        assert!(why.contains("core ConfigMap"), "{why}");
    }

    fn snapshot_of_class(parameters: Value) -> Snapshot {
        snapshot(vec![class(parameters)])
    }

    #[test]
    fn the_autoscaler_is_checked_merged() {
        let snapshot = snapshot(vec![
            class(
                json!({"group": "", "kind": "ConfigMap", "name": "defaults", "namespace": "admitpilot"}),
            ),
            configmap(
                "admitpilot",
                "defaults",
                json!({"horizontalPodAutoscaler": "spec: {maxReplicas: 5}"}),
            ),
            configmap(
                "apps",
                "mine",
                json!({"horizontalPodAutoscaler": "spec: {minReplicas: 3}"}),
            ),
        ]);
        let object =
            gateway(json!({"parametersRef": {"group": "", "kind": "ConfigMap", "name": "mine"}}));
        assert!(
            resolve(&snapshot, &object).is_ok(),
            "the class's maximum, the Gateway's minimum"
        );
    }

    #[test]
    fn configmaps_with_a_ca_or_overlays_are_kept() {
        assert!(referenced_data(&configmap(
            "a",
            "b",
            json!({"ca.crt": "x"})
        )));
        assert!(referenced_data(&configmap(
            "a",
            "b",
            json!({"service": "x"})
        )));
        assert!(!referenced_data(&configmap(
            "a",
            "b",
            json!({"other": "x"})
        )));
        assert!(!referenced_data(&json!({"kind": "ConfigMap"})));
    }
}
