//! Istio's mesh config (pure): takes the `istio` ConfigMap (its `data.mesh` YAML, as istiod reads it in
//! `pilot/pkg/bootstrap/mesh.go`) and yields what admitpilot uses of it: the `extensionProviders` that CUSTOM
//! AuthorizationPolicies name (`envoyExtAuthzHttp`, `envoyExtAuthzGrpc`; other provider kinds are kept by name
//! only). The other mesh settings are istiod's, not admitpilot's, and are not read.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::decode::decode_lenient;
use super::Finding;

/// Where the mesh YAML sits in the ConfigMap.
pub const MESH_PATH: &str = "data.mesh";

/// The parts of the mesh config admitpilot reads.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MeshConfig {
    /// `extensionProviders`, in the order written.
    pub extension_providers: Vec<ExtensionProvider>,
}

impl MeshConfig {
    /// The provider named `name`.
    pub fn provider(&self, name: &str) -> Option<&ExtensionProvider> {
        self.extension_providers.iter().find(|p| p.name == name)
    }
}

/// One entry of `extensionProviders`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExtensionProvider {
    /// `name`, which policies refer to.
    pub name: String,
    /// What it provides.
    pub provider: Provider,
}

/// The kind of an extension provider (the `provider` oneof of Istio's `MeshConfig.ExtensionProvider`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Provider {
    /// `envoyExtAuthzHttp`.
    EnvoyExtAuthzHttp(ExtAuthzHttp),
    /// `envoyExtAuthzGrpc`.
    EnvoyExtAuthzGrpc(ExtAuthzGrpc),
    /// Any other kind (tracing, logging, metrics), by its key.
    Other(String),
}

/// An HTTP external authorization server (`EnvoyExternalAuthorizationHttpProvider`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ExtAuthzHttp {
    /// `[<namespace>/]<hostname>` of the server's Service or ServiceEntry.
    pub service: String,
    /// Its port.
    pub port: u32,
    /// How long a check may take (Istio's default: 600s).
    pub timeout: Option<String>,
    /// Prefix added to the path of check requests.
    pub path_prefix: String,
    /// Let requests through when the server cannot be reached.
    pub fail_open: bool,
    /// Declared by Istio's API, not used by istiod.
    pub clear_route_cache: bool,
    /// HTTP status when the server cannot be reached (a number as a string), default 403.
    pub status_on_error: String,
    /// Deprecated form of `includeRequestHeadersInCheck`, used when that is empty.
    pub include_headers_in_check: Vec<String>,
    /// Request headers sent to the server (`exact`, `prefix*`, `*suffix`).
    pub include_request_headers_in_check: Vec<String>,
    /// Fixed headers added to check requests.
    pub include_additional_headers_in_check: BTreeMap<String, String>,
    /// Whether and how the request body is sent.
    pub include_request_body_in_check: Option<BodyInCheck>,
    /// Server response headers added to the request sent upstream when allowed.
    pub headers_to_upstream_on_allow: Vec<String>,
    /// Server response headers sent to the client when denied.
    pub headers_to_downstream_on_deny: Vec<String>,
    /// Server response headers sent to the client when allowed.
    pub headers_to_downstream_on_allow: Vec<String>,
}

/// A gRPC external authorization server (`EnvoyExternalAuthorizationGrpcProvider`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ExtAuthzGrpc {
    /// `[<namespace>/]<hostname>` of the server's Service or ServiceEntry.
    pub service: String,
    /// Its port.
    pub port: u32,
    /// How long a check may take (Istio's default: 600s).
    pub timeout: Option<String>,
    /// Let requests through when the server cannot be reached.
    pub fail_open: bool,
    /// Declared by Istio's API, not used by istiod.
    pub clear_route_cache: bool,
    /// HTTP status when the server cannot be reached (a number as a string), default 403.
    pub status_on_error: String,
    /// Whether and how the request body is sent.
    pub include_request_body_in_check: Option<BodyInCheck>,
}

/// `includeRequestBodyInCheck`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BodyInCheck {
    /// Largest body buffered for the check.
    pub max_request_bytes: u32,
    /// Send what was buffered when the body is larger.
    pub allow_partial_message: bool,
    /// Send the body as bytes rather than UTF-8 text.
    pub pack_as_bytes: bool,
}

/// The status code in a `statusOnError` value, read as Go's `strconv.ParseInt(s, 10, 32)` reads it, or that
/// function's error text.
pub fn parse_status(status: &str) -> Result<i32, String> {
    let digits = status.strip_prefix(['+', '-']).unwrap_or(status);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return Err(format!(
            "strconv.ParseInt: parsing {status:?}: invalid syntax"
        ));
    }
    status
        .parse::<i32>()
        .map_err(|_| format!("strconv.ParseInt: parsing {status:?}: value out of range"))
}

/// A decoded mesh ConfigMap: what was read, and every problem found on the way.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DecodedMesh {
    /// The mesh config (only the providers that decoded).
    pub config: MeshConfig,
    /// Errors and warnings, with field paths under `data.mesh`.
    pub findings: Vec<Finding>,
}

/// Decodes the mesh ConfigMap's top-level fields. A ConfigMap without `data.mesh` is an empty mesh config
/// (istiod then runs on its defaults), reported as a warning.
pub fn decode_configmap(fields: &serde_json::Map<String, Value>) -> DecodedMesh {
    let mut out = DecodedMesh::default();
    match fields.get("data").and_then(|data| data.get("mesh")) {
        None | Some(Value::Null) => out.findings.push(Finding::warning(
            MESH_PATH,
            "no `mesh` key: istiod runs on its default mesh config, which has no extension providers",
        )),
        Some(Value::String(text)) => decode_mesh(text, &mut out),
        Some(_) => out.findings.push(Finding::error(
            MESH_PATH,
            "data.mesh must be a string holding a YAML document",
        )),
    }
    out
}

fn decode_mesh(text: &str, out: &mut DecodedMesh) {
    let yaml = match serde_yaml_ng::from_str::<Value>(text) {
        Ok(yaml) => yaml,
        Err(error) => {
            out.findings.push(Finding::error(
                MESH_PATH,
                format!("not valid YAML: {error}"),
            ));
            return;
        }
    };
    let providers = match &yaml {
        Value::Null => return,
        Value::Object(mesh) => match mesh.get("extensionProviders") {
            None | Some(Value::Null) => return,
            Some(Value::Array(items)) => items,
            Some(_) => {
                out.findings.push(Finding::error(
                    format!("{MESH_PATH}.extensionProviders"),
                    "extensionProviders must be a list",
                ));
                return;
            }
        },
        _ => {
            out.findings
                .push(Finding::error(MESH_PATH, "the mesh config must be a map"));
            return;
        }
    };
    for (index, item) in providers.iter().enumerate() {
        let path = format!("{MESH_PATH}.extensionProviders[{index}]");
        if let Some(provider) = decode_provider(item, &path, &mut out.findings) {
            out.config.extension_providers.push(provider);
        }
    }
}

/// Decodes one provider: a `name` and exactly one kind key.
fn decode_provider(
    item: &Value,
    path: &str,
    findings: &mut Vec<Finding>,
) -> Option<ExtensionProvider> {
    let Value::Object(fields) = item else {
        findings.push(Finding::error(path, "an extension provider must be a map"));
        return None;
    };
    let name = match fields.get("name") {
        Some(Value::String(name)) => name.clone(),
        _ => {
            findings.push(Finding::error(
                format!("{path}.name"),
                "an extension provider needs a name",
            ));
            return None;
        }
    };
    let kinds: Vec<(&String, &Value)> = fields.iter().filter(|(key, _)| *key != "name").collect();
    let [(key, value)] = kinds[..] else {
        findings.push(Finding::error(
            path,
            format!(
                "extension provider {name:?} must set exactly one provider kind, found {}",
                kinds.len()
            ),
        ));
        return None;
    };
    let at = format!("{path}.{key}");
    let provider = match key.as_str() {
        "envoyExtAuthzHttp" => {
            Provider::EnvoyExtAuthzHttp(decode_lenient(value, &at, findings, true)?)
        }
        "envoyExtAuthzGrpc" => {
            Provider::EnvoyExtAuthzGrpc(decode_lenient(value, &at, findings, true)?)
        }
        other => Provider::Other(other.to_string()),
    };
    Some(ExtensionProvider { name, provider })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decode(mesh: &str) -> DecodedMesh {
        let doc = json!({"data": {"mesh": mesh}});
        decode_configmap(doc.as_object().unwrap())
    }

    #[test]
    fn ext_authz_providers_are_read_and_others_kept_by_name() {
        let decoded = decode(
            "accessLogFile: /dev/stdout\nextensionProviders:\n- name: http-authz\n  envoyExtAuthzHttp:\n    service: authz.foo.svc.cluster.local\n    port: 8000\n    includeRequestHeadersInCheck: [x-user]\n- name: grpc-authz\n  envoyExtAuthzGrpc: {service: foo/authz.foo.svc.cluster.local, port: 9000, failOpen: true}\n- name: otel\n  opentelemetry: {service: otel.svc, port: 4317}\n",
        );
        assert_eq!(decoded.findings, Vec::new());
        let providers = &decoded.config.extension_providers;
        assert_eq!(providers.len(), 3);
        let Provider::EnvoyExtAuthzHttp(http) = &providers[0].provider else {
            panic!("{providers:?}");
        };
        assert_eq!(
            (http.service.as_str(), http.port),
            ("authz.foo.svc.cluster.local", 8000)
        );
        assert_eq!(http.include_request_headers_in_check, ["x-user"]);
        assert!(matches!(&providers[1].provider, Provider::EnvoyExtAuthzGrpc(g) if g.fail_open));
        assert_eq!(
            providers[2].provider,
            Provider::Other("opentelemetry".into())
        );
        assert!(decoded.config.provider("grpc-authz").is_some());
    }

    #[test]
    fn problems_name_their_field() {
        let decoded = decode("extensionProviders:\n- name: a\n  envoyExtAuthzHttp: {service: s, port: x}\n- envoyExtAuthzGrpc: {}\n- name: b\n");
        let fields: Vec<&str> = decoded.findings.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "data.mesh.extensionProviders[0].envoyExtAuthzHttp.port",
                "data.mesh.extensionProviders[1].name",
                "data.mesh.extensionProviders[2]",
            ]
        );
        assert!(decode("a: [").findings[0]
            .message
            .starts_with("not valid YAML"));
        assert!(!decode_configmap(json!({}).as_object().unwrap()).findings[0].is_error());
    }
}
