//! Document decoding: takes one JSON value (a parsed YAML/JSON document or an AdmissionReview object) and
//! yields a typed [`ConfigObject`], or findings that say exactly which field did not decode.
//!
//! Like Istio's webhook, unknown fields inside `spec` are tolerated (each becomes a warning) and unknown
//! top-level fields are rejected. Every field that does not decode is reported, not just the first
//! ([`super::value_de`]); the object is then invalid, but a stand-in with zero values in those fields is handed
//! on so the per-kind rules can still check the rest.

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::service::Service;
use super::value_de::{self, Outcome};
use super::{higress_config, ConfigObject, Finding, Kind, ObjectMeta, Spec};

/// Where the higress-config and the mesh config ConfigMaps live; other ConfigMaps are not admitpilot's business.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeOptions {
    /// Namespace of the higress-config ConfigMap (default `higress-system`).
    pub higress_namespace: String,
    /// Name of the ConfigMap (always `higress-config` in Higress).
    pub higress_name: String,
    /// Namespace of Istio's mesh config ConfigMap (default `istio-system`).
    pub mesh_namespace: String,
    /// Its name (`istio`, as istiod reads it without a revision).
    pub mesh_name: String,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            higress_namespace: "higress-system".into(),
            higress_name: "higress-config".into(),
            mesh_namespace: "istio-system".into(),
            mesh_name: "istio".into(),
        }
    }
}

impl DecodeOptions {
    /// Which ConfigMap kind a ConfigMap of this namespace and name is, if any.
    pub fn configmap_kind(&self, namespace: &str, name: &str) -> Option<Kind> {
        if namespace == self.higress_namespace && name == self.higress_name {
            Some(Kind::HigressConfig)
        } else if namespace == self.mesh_namespace && name == self.mesh_name {
            Some(Kind::MeshConfig)
        } else {
            None
        }
    }
}

/// The identifying fields of a document, read before it is decoded (for messages and reports).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct DocumentHeader {
    /// `apiVersion` as written.
    pub api_version: String,
    /// `kind` as written.
    pub kind: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
}

impl DocumentHeader {
    /// Reads the header fields of a document; missing fields are empty.
    pub fn read(doc: &Value) -> Self {
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        DocumentHeader {
            api_version: text(&doc["apiVersion"]),
            kind: text(&doc["kind"]),
            namespace: text(&doc["metadata"]["namespace"]),
            name: text(&doc["metadata"]["name"]),
        }
    }
}

/// The outcome of decoding one document.
// Returned once per document and moved straight into a report, so the size gap between variants costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Decoded {
    /// The document decoded; `findings` holds warnings only.
    Object {
        /// Header fields, for reporting.
        header: DocumentHeader,
        /// The typed object.
        object: ConfigObject,
        /// Warnings (unknown spec fields and the like).
        findings: Vec<Finding>,
    },
    /// The document is of a kind admitpilot handles (or has no usable kind) but does not decode.
    Invalid {
        /// Header fields, for reporting.
        header: DocumentHeader,
        /// The kind, when it was recognised.
        kind: Option<Kind>,
        /// At least one error.
        findings: Vec<Finding>,
        /// The object with a zero value in each field that did not decode, when everything else did: for running
        /// the per-kind rules on the rest of it, never for use (`None` for higress-config, whose items are checked
        /// on their own).
        stand_in: Option<ConfigObject>,
    },
    /// A kind admitpilot does not handle, or a ConfigMap other than the configured higress-config.
    Unrecognized {
        /// Header fields, for reporting.
        header: DocumentHeader,
    },
}

/// Top-level fields every Istio/Higress custom resource may have.
const CRD_TOP_LEVEL: &[&str] = &["apiVersion", "kind", "metadata", "spec", "status"];

/// Decodes one document into a typed object.
pub fn decode(doc: &Value, options: &DecodeOptions) -> Decoded {
    let header = DocumentHeader::read(doc);
    let Some(fields) = doc.as_object() else {
        return Decoded::Invalid {
            header,
            kind: None,
            findings: vec![Finding::error("", "document is not an object")],
            stand_in: None,
        };
    };
    if header.kind.is_empty() || header.api_version.is_empty() {
        return Decoded::Invalid {
            header,
            kind: None,
            findings: vec![Finding::error("", "document must have apiVersion and kind")],
            stand_in: None,
        };
    }
    let (group, version) = Kind::split_api_version(&header.api_version);
    let Some(mut kind) = Kind::from_group_kind(group, &header.kind) else {
        return Decoded::Unrecognized { header };
    };
    if kind == Kind::HigressConfig {
        match options.configmap_kind(&header.namespace, &header.name) {
            Some(configmap) => kind = configmap,
            None if crate::gateway_api::parameters::referenced_data(doc) => {
                kind = Kind::ReferencedConfigMap
            }
            None => return Decoded::Unrecognized { header },
        }
    }

    let mut findings = Vec::new();
    let mut metadata = decode_metadata(doc, &mut findings);
    if let Some(metadata) = metadata.as_mut() {
        keep_needed_metadata(kind, metadata);
    }
    if kind.is_cluster_scoped() {
        // A source may have filled in its default namespace; a cluster-scoped object has none.
        if let Some(metadata) = metadata.as_mut() {
            metadata.namespace.clear();
        }
    }
    let spec = match kind {
        Kind::HigressConfig => decode_higress_config(fields, &mut findings),
        Kind::MeshConfig => {
            let decoded = super::mesh_config::decode_configmap(fields);
            findings.extend(decoded.findings);
            Some(Spec::MeshConfig(Box::new(decoded.config)))
        }
        Kind::Service => decode_part(&doc["spec"], "spec", &mut findings)
            .map(|spec| Spec::Service(Box::new(Service::new(spec, &doc["status"])))),
        Kind::EndpointSlice => {
            decode_part(doc, "", &mut findings).map(|s| Spec::EndpointSlice(Box::new(s)))
        }
        Kind::Secret => {
            decode_part(doc, "", &mut findings).map(|s| Spec::Secret(Box::new(secret_material(s))))
        }
        Kind::Namespace => Some(Spec::Namespace),
        Kind::Ingress => {
            decode_part(&doc["spec"], "spec", &mut findings).map(|s| Spec::Ingress(Box::new(s)))
        }
        Kind::IngressClass => decode_part(&doc["spec"], "spec", &mut findings)
            .map(|s| Spec::IngressClass(Box::new(s))),
        Kind::ReferencedConfigMap => {
            decode_part(doc, "", &mut findings).map(|c| Spec::ReferencedConfigMap(Box::new(c)))
        }
        kind if kind.is_gateway_api() => {
            check_top_level_fields(fields, &header, &mut findings);
            let spec = doc.get("spec").unwrap_or(&Value::Null);
            decode_gateway_api_spec(kind, version, spec, &mut findings)
        }
        _ => {
            check_top_level_fields(fields, &header, &mut findings);
            decode_crd_spec(kind, doc.get("spec").unwrap_or(&Value::Null), &mut findings)
        }
    };
    let has_errors = findings.iter().any(Finding::is_error);
    let object = match (metadata, spec) {
        (Some(metadata), Some(spec)) => Some(ConfigObject {
            api_version: header.api_version.clone(),
            metadata,
            spec,
        }),
        _ => None,
    };
    match object {
        Some(object) if !has_errors => Decoded::Object {
            header,
            object,
            findings,
        },
        object => {
            if !has_errors {
                findings.push(Finding::error("", "document could not be decoded"));
            }
            Decoded::Invalid {
                header,
                kind: Some(kind),
                findings,
                stand_in: object.filter(|_| kind != Kind::HigressConfig),
            }
        }
    }
}

fn decode_metadata(doc: &Value, findings: &mut Vec<Finding>) -> Option<ObjectMeta> {
    let meta: ObjectMeta = decode_usable(&doc["metadata"], "metadata", findings, METADATA)?;
    if meta.name.is_empty() && !findings.iter().any(|f| f.field == "metadata.name") {
        findings.push(Finding::error("metadata.name", "name is required"));
    }
    Some(meta)
}

/// The annotation `kubectl apply` writes: a copy of the whole object as applied (a Secret's keys included).
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drops what no rule or translation reads and what could carry secret material: the last-applied copy of every
/// object, and every annotation of a Secret (its data is the only part translation reads).
fn keep_needed_metadata(kind: Kind, metadata: &mut ObjectMeta) {
    if kind == Kind::Secret {
        metadata.annotations.clear();
    } else {
        metadata.annotations.remove(LAST_APPLIED);
    }
}

/// A Secret reduced to what translation reads (type and data): its embedded metadata, with annotations and
/// managed fields, is dropped (the object's own [`ObjectMeta`] names it).
fn secret_material(
    secret: k8s_openapi::api::core::v1::Secret,
) -> k8s_openapi::api::core::v1::Secret {
    k8s_openapi::api::core::v1::Secret {
        metadata: Default::default(),
        ..secret
    }
}

fn check_top_level_fields(
    fields: &serde_json::Map<String, Value>,
    header: &DocumentHeader,
    findings: &mut Vec<Finding>,
) {
    for field in fields.keys() {
        if !CRD_TOP_LEVEL.contains(&field.as_str()) {
            findings.push(Finding::error(
                field.clone(),
                format!(
                    "unknown field \"{field}\" on {} resource {}/{}",
                    header.kind, header.namespace, header.name
                ),
            ));
        }
    }
}

fn decode_higress_config(
    fields: &serde_json::Map<String, Value>,
    findings: &mut Vec<Finding>,
) -> Option<Spec> {
    let decoded = higress_config::decode_configmap(fields);
    findings.extend(decoded.findings);
    Some(Spec::HigressConfig(Box::new(decoded.config)))
}

fn decode_crd_spec(kind: Kind, spec: &Value, findings: &mut Vec<Finding>) -> Option<Spec> {
    use super::{higress as h, istio as i};
    let f = findings;
    Some(match kind {
        Kind::VirtualService => Spec::VirtualService(decode_spec::<i::VirtualService>(spec, f)?),
        Kind::DestinationRule => Spec::DestinationRule(decode_spec::<i::DestinationRule>(spec, f)?),
        Kind::Gateway => Spec::Gateway(decode_spec::<i::Gateway>(spec, f)?),
        Kind::ServiceEntry => Spec::ServiceEntry(decode_spec::<i::ServiceEntry>(spec, f)?),
        Kind::Sidecar => Spec::Sidecar(decode_spec::<i::Sidecar>(spec, f)?),
        Kind::EnvoyFilter => Spec::EnvoyFilter(decode_spec::<i::EnvoyFilter>(spec, f)?),
        Kind::WorkloadEntry => Spec::WorkloadEntry(decode_spec::<i::WorkloadEntry>(spec, f)?),
        Kind::WorkloadGroup => Spec::WorkloadGroup(decode_spec::<i::WorkloadGroup>(spec, f)?),
        Kind::ProxyConfig => Spec::ProxyConfig(decode_spec::<i::ProxyConfig>(spec, f)?),
        Kind::AuthorizationPolicy => {
            Spec::AuthorizationPolicy(decode_spec::<i::AuthorizationPolicy>(spec, f)?)
        }
        Kind::PeerAuthentication => {
            Spec::PeerAuthentication(decode_spec::<i::PeerAuthentication>(spec, f)?)
        }
        Kind::RequestAuthentication => {
            Spec::RequestAuthentication(decode_spec::<i::RequestAuthentication>(spec, f)?)
        }
        Kind::Telemetry => Spec::Telemetry(decode_spec::<i::Telemetry>(spec, f)?),
        Kind::IstioWasmPlugin => Spec::IstioWasmPlugin(decode_spec::<i::WasmPlugin>(spec, f)?),
        Kind::TrafficExtension => {
            Spec::TrafficExtension(decode_spec::<i::TrafficExtension>(spec, f)?)
        }
        Kind::McpBridge => Spec::McpBridge(decode_spec::<h::McpBridge>(spec, f)?),
        Kind::Http2Rpc => Spec::Http2Rpc(decode_spec::<h::Http2Rpc>(spec, f)?),
        Kind::HigressWasmPlugin => Spec::HigressWasmPlugin(decode_spec::<h::WasmPlugin>(spec, f)?),
        _ => return None,
    })
}

/// Decodes a Gateway API spec of a served `version` after applying its CRD's defaults, as the API server stores
/// it; an unserved version is an error.
fn decode_gateway_api_spec(
    kind: Kind,
    version: &str,
    spec: &Value,
    findings: &mut Vec<Finding>,
) -> Option<Spec> {
    use super::gateway_api::schema;
    let crd = schema::crd(kind)?;
    let Some(schema) = crd.spec_schema(version) else {
        let served: Vec<&str> = crd.versions().collect();
        findings.push(Finding::error(
            "apiVersion",
            format!(
                "{}/{version} {kind} is not served by Gateway API v1.6 (served versions: {})",
                kind.info().group,
                served.join(", ")
            ),
        ));
        return None;
    };
    let mut defaulted = match spec {
        Value::Null => Value::Object(serde_json::Map::new()),
        spec => spec.clone(),
    };
    schema::apply_defaults(schema, &mut defaulted);
    let f = findings;
    let d = &defaulted;
    Some(match kind {
        Kind::GatewayClass => Spec::GatewayClass(decode_spec(d, f)?),
        Kind::KubernetesGateway => Spec::KubernetesGateway(Box::new(decode_spec(d, f)?)),
        Kind::HttpRoute => Spec::HttpRoute(Box::new(decode_spec(d, f)?)),
        Kind::GrpcRoute => Spec::GrpcRoute(Box::new(decode_spec(d, f)?)),
        Kind::ReferenceGrant => Spec::ReferenceGrant(decode_spec(d, f)?),
        Kind::TlsRoute => Spec::TlsRoute(decode_spec(d, f)?),
        Kind::TcpRoute => Spec::TcpRoute(decode_spec(d, f)?),
        Kind::BackendTlsPolicy => Spec::BackendTlsPolicy(decode_spec(d, f)?),
        Kind::ListenerSet => Spec::ListenerSet(decode_spec(d, f)?),
        _ => return None,
    })
}

/// Decodes a CRD spec: a missing spec decodes as the empty spec; unknown fields become warnings. Object fields set
/// to `null` are skipped, as the API server prunes them from CRD objects (none of the Istio/Higress schemas is
/// nullable), so `egress:` with no value means "unset" rather than a type error.
fn decode_spec<T: DeserializeOwned>(spec: &Value, findings: &mut Vec<Finding>) -> Option<T> {
    let options = value_de::Options {
        warn_unknown: true,
        skip_null_fields: true,
        null_is_zero: false,
    };
    match spec {
        Value::Null => decode_usable(
            &Value::Object(serde_json::Map::new()),
            "spec",
            findings,
            options,
        ),
        spec => decode_usable(spec, "spec", findings, options),
    }
}

/// Metadata: unknown fields ignored silently, and a field set to `null` is absent, as the API server reads it
/// (`annotations:` with no value is no annotations: Go's JSON decoding leaves the map nil).
const METADATA: value_de::Options = value_de::Options {
    warn_unknown: false,
    skip_null_fields: true,
    null_is_zero: true,
};

/// Kubernetes parts: unknown fields ignored silently, and a `null` (a field, or a list item) is its type's zero
/// value, as Go's `encoding/json` decodes built-in types for the API server.
const PLAIN: value_de::Options = value_de::Options {
    warn_unknown: false,
    skip_null_fields: false,
    null_is_zero: true,
};

/// Decodes a Kubernetes built-in part as k8s-openapi defines it (unknown fields ignored silently).
fn decode_part<T: DeserializeOwned>(
    value: &Value,
    prefix: &str,
    findings: &mut Vec<Finding>,
) -> Option<T> {
    decode_usable(value, prefix, findings, PLAIN)
}

/// Decodes `value` as `T`, recording every error; yields the value even when stand-ins replaced bad fields (the
/// recorded errors then make the document invalid).
fn decode_usable<T: DeserializeOwned>(
    value: &Value,
    prefix: &str,
    findings: &mut Vec<Finding>,
    options: value_de::Options,
) -> Option<T> {
    match value_de::deserialize(value, prefix, options, findings) {
        Outcome::Clean(decoded) | Outcome::Patched(decoded) => Some(decoded),
        Outcome::Failed => None,
    }
}

/// Deserializes `value` as `T`, turning every type error into an error finding at its exact field path and,
/// when `warn_unknown` is set, each ignored (unknown) field into a warning. Yields the value only when it
/// decoded without errors.
pub fn decode_lenient<T: DeserializeOwned>(
    value: &Value,
    prefix: &str,
    findings: &mut Vec<Finding>,
    warn_unknown: bool,
) -> Option<T> {
    let options = value_de::Options {
        warn_unknown,
        skip_null_fields: false,
        null_is_zero: false,
    };
    match value_de::deserialize(value, prefix, options, findings) {
        Outcome::Clean(decoded) => Some(decoded),
        Outcome::Patched(_) | Outcome::Failed => None,
    }
}

/// Decodes a test document that must decode (test builds and the `test-util` feature only).
#[cfg(any(test, feature = "test-util"))]
pub fn test_object(doc: Value) -> std::sync::Arc<ConfigObject> {
    match decode(&doc, &DecodeOptions::default()) {
        Decoded::Object { object, .. } => std::sync::Arc::new(object),
        other => panic!("test document does not decode: {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The API server reads `annotations:` and `labels:` with no value as none (16 of Higress's own e2e Ingress
    /// manifests are written so): decoded, not denied.
    #[test]
    fn null_metadata_maps_are_empty() {
        let doc = serde_json::json!({
            "apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
            "metadata": {"name": "vs", "namespace": "edge", "annotations": null, "labels": null},
            "spec": {"hosts": ["a.example"]},
        });
        let Decoded::Object {
            object, findings, ..
        } = decode(&doc, &DecodeOptions::default())
        else {
            panic!("null annotations were refused");
        };
        assert!(findings.is_empty(), "{findings:?}");
        assert!(object.metadata.annotations.is_empty() && object.metadata.labels.is_empty());
    }

    /// Built-in kinds decode as Go's `encoding/json` does for the API server: a null list item is a zero item, a
    /// null string list item an empty string (validation then judges them), not a type error.
    #[test]
    fn nulls_in_built_in_kinds_are_zero_values() {
        let doc = serde_json::json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "web", "namespace": "edge"},
            "spec": {"rules": [null, {"host": "a.example"}], "tls": [{"hosts": [null]}]},
        });
        let Decoded::Object {
            object, findings, ..
        } = decode(&doc, &DecodeOptions::default())
        else {
            panic!("null list items were refused");
        };
        assert!(findings.is_empty(), "{findings:?}");
        let Spec::Ingress(spec) = &object.spec else {
            panic!("an Ingress");
        };
        let rules = spec.rules.as_deref().unwrap_or_default();
        assert_eq!(rules.len(), 2);
        assert_eq!(rules[0].host, None);
        let tls = spec.tls.as_deref().unwrap_or_default();
        assert_eq!(tls[0].hosts.as_deref(), Some(&[String::new()][..]));
    }

    /// `kubectl apply` leaves a copy of the whole Secret, keys included, in an annotation: none of it is kept.
    #[test]
    fn secrets_keep_no_annotation_and_no_object_keeps_its_last_applied_copy() {
        let secret = serde_json::json!({
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": "tls", "namespace": "edge", "labels": {"app": "gw"},
                "annotations": {LAST_APPLIED: "{\"data\":{\"tls.key\":\"UFJJVkFURQ==\"}}", "note": "x"},
                "managedFields": [{"manager": "kubectl"}]},
            "data": {"tls.key": "UFJJVkFURQ=="},
        });
        let Decoded::Object { object, .. } = decode(&secret, &DecodeOptions::default()) else {
            panic!("the Secret did not decode");
        };
        assert!(object.metadata.annotations.is_empty());
        assert_eq!(object.metadata.labels["app"], "gw");
        let Spec::Secret(decoded) = &object.spec else {
            panic!("not a Secret");
        };
        assert_eq!(decoded.metadata, Default::default());
        assert!(decoded
            .data
            .as_ref()
            .is_some_and(|d| d.contains_key("tls.key")));
        let shown = serde_json::to_string(&object).unwrap_or_default();
        assert!(!shown.contains("last-applied"), "{shown}");

        let vs = serde_json::json!({
            "apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
            "metadata": {"name": "vs", "namespace": "edge", "annotations": {LAST_APPLIED: "{}", "note": "x"}},
            "spec": {"hosts": ["a.example"]},
        });
        let Decoded::Object { object, .. } = decode(&vs, &DecodeOptions::default()) else {
            panic!("the VirtualService did not decode");
        };
        assert_eq!(
            object.metadata.annotations.keys().collect::<Vec<_>>(),
            ["note"]
        );
    }

    #[test]
    fn unknown_group_kind_is_unrecognized() {
        let doc = serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}});
        assert!(matches!(
            decode(&doc, &DecodeOptions::default()),
            Decoded::Unrecognized { .. }
        ));
    }

    #[test]
    fn other_config_maps_are_unrecognized() {
        let doc = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "other", "namespace": "higress-system"}});
        assert!(matches!(
            decode(&doc, &DecodeOptions::default()),
            Decoded::Unrecognized { .. }
        ));
    }

    #[test]
    fn non_objects_are_invalid() {
        assert!(matches!(
            decode(&serde_json::json!(3), &DecodeOptions::default()),
            Decoded::Invalid { kind: None, .. }
        ));
    }
}
