//! Validation (pure), shared by the admission webhook, the watch loop and the `validate` CLI.
//! Takes one document (JSON value) or one decoded object and yields a [`Report`]: every error and warning
//! with its field path. One file per kind holds that kind's rules; `common` holds shared primitives; `references` the
//! cross-object checks (what an object names that the config it joins lacks).

mod authorization_policy;
pub mod common;
pub mod deadline;
mod destination_rule;
pub mod enforcement;
mod envoy_filter;
mod gateway;
pub mod gateway_api;
pub mod higress_config;
mod higress_wasm_plugin;
mod host_index;
mod http2rpc;
mod ingress;
mod ingress_annotations;
mod ingress_references;
mod mcp_bridge;
pub mod mesh_config;
mod peer_authentication;
mod proxy_config;
pub mod references;
pub mod regex;
mod request_authentication;
mod service_entry;
mod sidecar;
mod telemetry;
#[cfg(test)]
mod testing;
mod traffic_extension;
mod virtual_service;
mod wasm_plugin;
mod workload_entry;
mod workload_group;

pub use authorization_policy::PLAIN_CONDITION_KEYS;
use serde_json::Value;

use admitpilot_model::decode::{decode, DecodeOptions, Decoded, DocumentHeader};
use admitpilot_model::{ConfigObject, Finding, Findings, Kind, Spec};

/// The verdict on one document: what it is, the decoded object if it decoded, and every finding.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Header fields as written in the document.
    pub header: DocumentHeader,
    /// The recognised kind; `None` for documents admitpilot does not handle or cannot read.
    pub kind: Option<Kind>,
    /// The decoded object, when decoding succeeded (present even when rules found errors).
    pub object: Option<ConfigObject>,
    /// All findings, errors and warnings, in document order.
    pub findings: Vec<Finding>,
    /// True when admitpilot does not handle this document's kind (it is neither accepted nor rejected).
    pub unrecognized: bool,
}

impl Report {
    /// Tells whether the document has no errors.
    pub fn is_valid(&self) -> bool {
        !self.findings.iter().any(Finding::is_error)
    }

    /// Iterates over the errors only.
    pub fn errors(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| f.is_error())
    }

    /// Iterates over the warnings only.
    pub fn warnings(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| !f.is_error())
    }
}

/// Decodes and validates one document.
pub fn validate_document(doc: &Value, options: &DecodeOptions) -> Report {
    let mut report = decode_and_validate(doc, options);
    if report.kind == Some(Kind::Ingress) {
        ingress::empty_path_types(doc, &mut report.findings);
    }
    report
}

/// [`validate_document`] but for what only the raw document tells.
fn decode_and_validate(doc: &Value, options: &DecodeOptions) -> Report {
    // Decoding higress-config items checks regexes before `validate_object` runs: start the object's allowance here.
    regex::start_object();
    match decode(doc, options) {
        Decoded::Object {
            header,
            object,
            mut findings,
        } => {
            findings.extend(gateway_api::schema_findings(doc, object.kind()));
            findings.extend(validate_object(&object));
            Report {
                header,
                kind: Some(object.kind()),
                object: Some(object),
                findings,
                unrecognized: false,
            }
        }
        Decoded::Invalid {
            header,
            kind,
            mut findings,
            stand_in,
        } => {
            if kind == Some(Kind::HigressConfig) {
                findings.extend(higress_config::rules_of_decoded_items(doc));
            }
            if let Some(kind) = kind {
                let schema = gateway_api::schema_findings(doc, kind);
                // A value of the wrong JSON type: the schema's words (the API server's) stand for the decoder's.
                findings.retain(|f| {
                    !(f.message.starts_with("invalid type:")
                        && schema.iter().any(|s| {
                            s.field == f.field && s.message.contains("in body must be of type")
                        }))
                });
                findings.extend(schema);
            }
            if let Some(object) = stand_in {
                let decode_errors: Vec<&str> = findings
                    .iter()
                    .filter(|f| f.is_error())
                    .map(|f| f.field.as_str())
                    .collect();
                let rules: Vec<Finding> = validate_object(&object)
                    .into_iter()
                    .filter(|f| !decode_errors.iter().any(|e| touches(&f.field, e)))
                    .collect();
                findings.extend(rules);
            }
            Report {
                header,
                kind,
                object: None,
                findings,
                unrecognized: false,
            }
        }
        Decoded::Unrecognized { header } => Report {
            header,
            kind: None,
            object: None,
            findings: Vec::new(),
            unrecognized: true,
        },
    }
}

/// Tells whether a rule finding at `rule` may stem from a stand-in put where a field failed to decode (at
/// `error`): it is about that field, something inside it, or the object holding it (whose cross-field checks
/// saw the stand-in). Findings about the top-level parts as a whole (`spec`, `metadata`) are kept.
fn touches(rule: &str, error: &str) -> bool {
    fn inside(path: &str, parent: &str) -> bool {
        path.strip_prefix(parent)
            .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
    }
    rule == error || inside(rule, error) || (inside(error, rule) && rule.contains(['.', '[']))
}

/// Runs the rules of the object's kind and returns their findings (decode findings are not included).
pub fn validate_object(object: &ConfigObject) -> Vec<Finding> {
    regex::start_object();
    deadline::take_cut_short();
    let mut out = Findings::default();
    let meta = &object.metadata;
    common::validate_metadata(object.kind(), meta, &mut out);
    match &object.spec {
        Spec::VirtualService(s) => virtual_service::validate(s, meta, &mut out),
        Spec::DestinationRule(s) => destination_rule::validate(s, meta, &mut out),
        Spec::Gateway(s) => gateway::validate(s, meta, &mut out),
        Spec::ServiceEntry(s) => service_entry::validate(s, meta, &mut out),
        Spec::Sidecar(s) => sidecar::validate(s, meta, &mut out),
        Spec::EnvoyFilter(s) => envoy_filter::validate(s, meta, &mut out),
        Spec::WorkloadEntry(s) => workload_entry::validate(s, meta, &mut out),
        Spec::WorkloadGroup(s) => workload_group::validate(s, meta, &mut out),
        Spec::ProxyConfig(s) => proxy_config::validate(s, meta, &mut out),
        Spec::AuthorizationPolicy(s) => authorization_policy::validate(s, meta, &mut out),
        Spec::PeerAuthentication(s) => peer_authentication::validate(s, meta, &mut out),
        Spec::RequestAuthentication(s) => request_authentication::validate(s, meta, &mut out),
        Spec::Telemetry(s) => telemetry::validate(s, meta, &mut out),
        Spec::IstioWasmPlugin(s) => wasm_plugin::validate(s, meta, &mut out),
        Spec::TrafficExtension(s) => traffic_extension::validate(s, meta, &mut out),
        Spec::McpBridge(s) => mcp_bridge::validate(s, meta, &mut out),
        Spec::Http2Rpc(s) => http2rpc::validate(s, meta, &mut out),
        Spec::HigressWasmPlugin(s) => higress_wasm_plugin::validate(s, meta, &mut out),
        Spec::HigressConfig(config) => higress_config::validate(config, &mut out),
        Spec::MeshConfig(config) => mesh_config::validate(config, &mut out),
        Spec::Ingress(spec) => {
            ingress::validate(spec, &mut out);
            ingress_annotations::validate(spec, meta, &mut out);
        }
        Spec::IngressClass(_) => {}
        Spec::Service(_)
        | Spec::EndpointSlice(_)
        | Spec::Secret(_)
        | Spec::ReferencedConfigMap(_)
        | Spec::Namespace => {}
        Spec::GatewayClass(_)
        | Spec::KubernetesGateway(_)
        | Spec::HttpRoute(_)
        | Spec::GrpcRoute(_)
        | Spec::ReferenceGrant(_)
        | Spec::TlsRoute(_)
        | Spec::TcpRoute(_)
        | Spec::BackendTlsPolicy(_)
        | Spec::ListenerSet(_) => gateway_api::validate(&object.spec, &mut out),
    }
    if deadline::take_cut_short() {
        out.error(
            "",
            format!(
                "not every rule ran: the review's time budget ran out while checking this {}; it is too large to \
                 check in time (split it into smaller objects)",
                object.kind().info().kind
            ),
        );
    }
    out.into_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_findings_near_a_decode_error_are_dropped() {
        let error = "spec.http[0].timeout";
        assert!(touches("spec.http[0].timeout", error));
        assert!(touches("spec.http[0].timeout.seconds", error));
        assert!(touches("spec.http[0]", error));
        assert!(!touches("spec", error));
        assert!(!touches("spec.http[1]", error));
        assert!(!touches("spec.http[0].timeoutx", error));
        assert!(!touches("spec.hosts[0]", error));
    }

    /// A custom resource's name is a DNS-1123 subdomain (apimachinery `IsDNS1123Subdomain`): 66 characters
    /// without a dot are fine, 254 are not.
    #[test]
    fn object_names_have_no_limit_per_dot_separated_part() {
        let named = |name: String| {
            let doc = serde_json::json!({
                "apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
                "metadata": {"name": name, "namespace": "ns"}, "spec": {"host": "a"}
            });
            validate_document(&doc, &DecodeOptions::default())
                .errors()
                .map(|f| f.field.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(named("r".repeat(66)), Vec::<String>::new());
        assert_eq!(named("r".repeat(254)), ["metadata.name"]);
    }

    #[test]
    fn decode_errors_and_rule_errors_on_the_rest_are_all_reported() {
        let doc = serde_json::json!({
            "apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
            "metadata": {"name": "vs", "namespace": "ns"},
            "spec": {"hosts": ["a", 7], "http": [
                {"timeout": 5, "route": [{"destination": {"host": "a", "port": {"number": "80"}}}]},
                {"route": [{"destination": {"host": "a"}, "weight": 30}], "retries": {"attempts": -1}}
            ]}
        });
        let report = validate_document(&doc, &DecodeOptions::default());
        assert!(!report.is_valid());
        assert!(report.object.is_none());
        let fields: Vec<&str> = report.errors().map(|f| f.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.hosts[1]",
                "spec.http[0].route[0].destination.port.number",
                "spec.http[0].timeout",
                "spec.http[1].retries.attempts",
            ],
            "{:?}",
            report.findings
        );
    }
}
