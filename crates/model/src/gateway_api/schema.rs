//! The Gateway API CRDs' OpenAPI schemas (pure; the manifests are compiled in from `crds/gateway-api/`, Gateway API
//! v1.6.3, experimental channel, which serves every version the standard one does and more): takes a kind and an
//! API version, yields that version's `spec` schema, and applies the schema's defaults to a `spec` the way the API
//! server's structural defaulting does before the object is read or validated.

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use crate::Kind;

/// One CRD: the `spec` schema of each served version and every `pattern` in them, compiled.
#[derive(Debug)]
pub struct Crd {
    versions: Vec<(String, Value)>,
    patterns: HashMap<String, Regex>,
}

impl Crd {
    /// The `spec` schema of a served `version`, or `None` when the CRD does not serve it.
    pub fn spec_schema(&self, version: &str) -> Option<&Value> {
        self.versions
            .iter()
            .find(|(name, _)| name == version)
            .map(|(_, schema)| schema)
    }

    /// The served versions, as the CRD lists them.
    pub fn versions(&self) -> impl Iterator<Item = &str> {
        self.versions.iter().map(|(name, _)| name.as_str())
    }

    /// A schema `pattern`, compiled (every pattern of the CRD compiles: a unit test checks).
    pub fn pattern(&self, pattern: &str) -> Option<&Regex> {
        self.patterns.get(pattern)
    }
}

/// The manifest of each Gateway API kind.
fn manifest(kind: Kind) -> Option<&'static str> {
    Some(match kind {
        Kind::GatewayClass => {
            include_str!(
                "../../../../crds/gateway-api/gateway.networking.k8s.io_gatewayclasses.yaml"
            )
        }
        Kind::KubernetesGateway => {
            include_str!("../../../../crds/gateway-api/gateway.networking.k8s.io_gateways.yaml")
        }
        Kind::HttpRoute => {
            include_str!("../../../../crds/gateway-api/gateway.networking.k8s.io_httproutes.yaml")
        }
        Kind::GrpcRoute => {
            include_str!("../../../../crds/gateway-api/gateway.networking.k8s.io_grpcroutes.yaml")
        }
        Kind::ReferenceGrant => {
            include_str!(
                "../../../../crds/gateway-api/gateway.networking.k8s.io_referencegrants.yaml"
            )
        }
        Kind::TlsRoute => {
            include_str!("../../../../crds/gateway-api/gateway.networking.k8s.io_tlsroutes.yaml")
        }
        Kind::TcpRoute => {
            include_str!("../../../../crds/gateway-api/gateway.networking.k8s.io_tcproutes.yaml")
        }
        Kind::BackendTlsPolicy => include_str!(
            "../../../../crds/gateway-api/gateway.networking.k8s.io_backendtlspolicies.yaml"
        ),
        Kind::ListenerSet => {
            include_str!("../../../../crds/gateway-api/gateway.networking.k8s.io_listenersets.yaml")
        }
        _ => return None,
    })
}

/// Parses a manifest into its served versions' `spec` schemas; `None` when it does not parse (a unit test
/// parses every manifest).
fn parse(text: &str) -> Option<Crd> {
    let crd: Value = serde_yaml_ng::from_str(text).ok()?;
    let versions: Vec<(String, Value)> = crd["spec"]["versions"]
        .as_array()?
        .iter()
        .filter(|v| v["served"].as_bool() == Some(true))
        .filter_map(|v| {
            let schema = v["schema"]["openAPIV3Schema"]["properties"]["spec"].clone();
            Some((v["name"].as_str()?.to_string(), schema))
        })
        .collect();
    let mut patterns = HashMap::new();
    for (_, schema) in &versions {
        collect_patterns(schema, &mut patterns);
    }
    Some(Crd { versions, patterns })
}

fn collect_patterns(schema: &Value, out: &mut HashMap<String, Regex>) {
    let Some(fields) = schema.as_object() else {
        return;
    };
    if let Some(pattern) = fields.get("pattern").and_then(Value::as_str) {
        if !out.contains_key(pattern) {
            if let Ok(regex) = Regex::new(pattern) {
                out.insert(pattern.to_string(), regex);
            }
        }
    }
    for child in ["items", "additionalProperties"] {
        if let Some(child) = fields.get(child) {
            collect_patterns(child, out);
        }
    }
    if let Some(Value::Object(properties)) = fields.get("properties") {
        for property in properties.values() {
            collect_patterns(property, out);
        }
    }
}

/// The CRD of a Gateway API kind, parsed on first use; `None` for other kinds.
pub fn crd(kind: Kind) -> Option<&'static Crd> {
    static CRDS: LazyLock<Vec<(Kind, Crd)>> = LazyLock::new(|| {
        Kind::ALL
            .into_iter()
            .filter_map(|kind| Some((kind, parse(manifest(kind)?)?)))
            .collect()
    });
    CRDS.iter().find(|(k, _)| *k == kind).map(|(_, crd)| crd)
}

/// Applies `schema`'s defaults to `value` in place as the API server's structural defaulting does: a property
/// that is absent (or `null`) and has a `default` gets it, then defaulting descends into properties and items.
pub fn apply_defaults(schema: &Value, value: &mut Value) {
    match value {
        Value::Object(fields) => {
            let Some(Value::Object(properties)) = schema.get("properties") else {
                return;
            };
            for (name, property) in properties {
                let absent = fields.get(name).is_none_or(Value::is_null);
                if absent {
                    if let Some(default) = property.get("default") {
                        fields.insert(name.clone(), default.clone());
                    }
                }
                if let Some(child) = fields.get_mut(name) {
                    apply_defaults(property, child);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    apply_defaults(item_schema, item);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_manifest_parses_and_every_pattern_compiles() {
        for kind in Kind::ALL {
            let Some(text) = manifest(kind) else { continue };
            let crd = crd(kind).unwrap_or_else(|| panic!("{kind:?} does not parse"));
            assert!(crd.versions().any(|v| v == "v1"), "{kind:?}");
            let mut all = HashMap::new();
            let parsed: Value = serde_yaml_ng::from_str(text).unwrap_or_default();
            collect_patterns(&parsed, &mut all);
            for pattern in all.keys() {
                assert!(crd.pattern(pattern).is_some(), "{kind:?}: {pattern}");
            }
        }
    }

    #[test]
    fn served_versions_are_the_crds() {
        let versions = |kind| crd(kind).map(|c| c.versions().collect::<Vec<_>>());
        assert_eq!(versions(Kind::HttpRoute), Some(vec!["v1", "v1beta1"]));
        assert_eq!(
            versions(Kind::TlsRoute),
            Some(vec!["v1", "v1alpha2", "v1alpha3"])
        );
        assert_eq!(versions(Kind::GrpcRoute), Some(vec!["v1"]));
    }

    #[test]
    fn defaults_fill_absent_fields_recursively() {
        let schema = crd(Kind::HttpRoute)
            .and_then(|c| c.spec_schema("v1"))
            .cloned();
        let mut spec = json!({"parentRefs": [{"name": "gw"}],
            "rules": [{"backendRefs": [{"name": "svc", "port": 80}]}]});
        apply_defaults(&schema.unwrap_or_default(), &mut spec);
        assert_eq!(spec["parentRefs"][0]["group"], "gateway.networking.k8s.io");
        assert_eq!(spec["parentRefs"][0]["kind"], "Gateway");
        assert_eq!(spec["rules"][0]["matches"][0]["path"]["type"], "PathPrefix");
        assert_eq!(spec["rules"][0]["matches"][0]["path"]["value"], "/");
        assert_eq!(spec["rules"][0]["backendRefs"][0]["weight"], 1);
        assert_eq!(spec["rules"][0]["backendRefs"][0]["kind"], "Service");
    }
}
