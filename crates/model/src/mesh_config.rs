//! Istio's mesh config (pure): takes the `istio` ConfigMap (its `data.mesh` YAML, as istiod reads it in
//! `pilot/pkg/bootstrap/mesh.go`) and yields what admitpilot uses of it: the `extensionProviders` that CUSTOM
//! AuthorizationPolicies (`envoyExtAuthzHttp`, `envoyExtAuthzGrpc`) and Telemetry access logging
//! (`envoyFileAccessLog`, `envoyOtelAls`) name, other provider kinds by name only, and
//! `defaultProviders.accessLogging`, and the gateway-wide settings [`MeshSettings`] (`rootNamespace`,
//! `pathNormalization`), which Higress's own mesh config (the `mesh` key of higress-config) carries too. The other
//! settings are listed ([`MeshConfig::unapplied`]) so they can be reported as not enforced.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::decode::decode_lenient;
use super::Finding;

/// The access-log provider Istio defines when the mesh config does not (a file log to `/dev/stdout`).
pub const BUILTIN_ACCESS_LOG_PROVIDER: &str = "envoy";

/// Where the mesh YAML sits in the ConfigMap.
pub const MESH_PATH: &str = "data.mesh";

/// Istio's root namespace when the mesh config names none (`constants.IstioSystemNamespace`, the `rootNamespace`
/// of Istio's `mesh.DefaultMeshConfig`).
pub const DEFAULT_ROOT_NAMESPACE: &str = "istio-system";

/// The mesh settings that shape every gateway, as read from a mesh config.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MeshSettings {
    /// `rootNamespace`: policies (AuthorizationPolicy, RequestAuthentication, Telemetry) and EnvoyFilters there
    /// apply to every workload; `None` when unset or empty.
    pub root_namespace: Option<String>,
    /// `pathNormalization.normalization`.
    pub path_normalization: PathNormalization,
}

impl MeshSettings {
    /// The root namespace: the one set, else Istio's default ([`DEFAULT_ROOT_NAMESPACE`]).
    pub fn root_namespace(&self) -> &str {
        self.root_namespace
            .as_deref()
            .unwrap_or(DEFAULT_ROOT_NAMESPACE)
    }

    /// These settings as mesh config YAML (what [`settings_of_text`] reads back), leaving out what is unset.
    pub fn to_mesh_yaml(&self) -> String {
        let mut mesh = serde_json::Map::new();
        if let Some(root) = &self.root_namespace {
            mesh.insert("rootNamespace".into(), root.clone().into());
        }
        if self.path_normalization != PathNormalization::Default {
            mesh.insert(
                "pathNormalization".into(),
                serde_json::json!({ "normalization": self.path_normalization }),
            );
        }
        serde_yaml_ng::to_string(&Value::Object(mesh)).unwrap_or_default()
    }
}

/// How gateways normalize request paths before matching routes and policies (Istio's
/// `MeshConfig.ProxyPathNormalization.NormalizationType`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PathNormalization {
    /// Unset: as `BASE`.
    #[default]
    Default,
    /// No normalization: paths reach policies and routes as sent.
    None,
    /// RFC 3986 normalization (dot segments, percent-decoding of unreserved characters).
    Base,
    /// `BASE`, and repeated slashes merged.
    MergeSlashes,
    /// `MERGE_SLASHES`, after decoding `%2F` and `%5C` to `/` and `\`.
    DecodeAndMergeSlashes,
}

/// The `pathNormalization` message.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct PathNormalizationConfig {
    normalization: PathNormalization,
}

/// Reads [`MeshSettings`] from the keys of a mesh config, leaving the others alone; returns whether `key` is one
/// of them. Problems are recorded with paths under `data.mesh`.
pub fn read_setting(
    key: &str,
    value: &Value,
    settings: &mut MeshSettings,
    findings: &mut Vec<Finding>,
) -> bool {
    let path = format!("{MESH_PATH}.{key}");
    match key {
        "rootNamespace" => match value {
            Value::String(namespace) => {
                settings.root_namespace = Some(namespace.clone()).filter(|ns| !ns.is_empty());
            }
            Value::Null => settings.root_namespace = None,
            _ => findings.push(Finding::error(path, "rootNamespace must be a string")),
        },
        "pathNormalization" => {
            if let Some(config) =
                decode_lenient::<PathNormalizationConfig>(value, &path, findings, true)
            {
                settings.path_normalization = config.normalization;
            }
        }
        _ => return false,
    }
    true
}

/// The [`MeshSettings`] of a mesh YAML text (the `mesh` key of a ConfigMap); text that is not a YAML map has none
/// (the ConfigMap's decoder reports it).
pub fn settings_of_text(text: &str, findings: &mut Vec<Finding>) -> MeshSettings {
    let mut settings = MeshSettings::default();
    if let Ok(Value::Object(mesh)) = serde_yaml_ng::from_str::<Value>(text) {
        for (key, value) in &mesh {
            read_setting(key, value, &mut settings, findings);
        }
    }
    settings
}

/// The parts of the mesh config admitpilot reads.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MeshConfig {
    /// `extensionProviders`, in the order written.
    pub extension_providers: Vec<ExtensionProvider>,
    /// `defaultProviders.accessLogging`: the access-log providers of workloads no Telemetry names one for.
    pub default_access_log_providers: Vec<String>,
    /// `rootNamespace` and `pathNormalization`.
    pub settings: MeshSettings,
    /// The settings that are set but not read by admitpilot (`accessLogFile`, `defaultProviders.tracing`…).
    pub unapplied: Vec<String>,
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
    /// `envoyFileAccessLog`.
    EnvoyFileAccessLog(FileAccessLog),
    /// `envoyOtelAls`.
    EnvoyOtelAls(OtelAccessLog),
    /// Any other kind (tracing, logging, metrics), by its key.
    Other(String),
}

impl Provider {
    /// The key that names this kind in YAML (`envoyExtAuthzHttp`…).
    pub fn key(&self) -> &str {
        match self {
            Provider::EnvoyExtAuthzHttp(_) => "envoyExtAuthzHttp",
            Provider::EnvoyExtAuthzGrpc(_) => "envoyExtAuthzGrpc",
            Provider::EnvoyFileAccessLog(_) => "envoyFileAccessLog",
            Provider::EnvoyOtelAls(_) => "envoyOtelAls",
            Provider::Other(key) => key,
        }
    }

    /// The `service` (`[<namespace>/]<hostname>`) and `port` of a provider that sends to a server.
    pub fn server(&self) -> Option<(&str, u32)> {
        match self {
            Provider::EnvoyExtAuthzHttp(http) => Some((&http.service, http.port)),
            Provider::EnvoyExtAuthzGrpc(grpc) => Some((&grpc.service, grpc.port)),
            Provider::EnvoyOtelAls(otel) => Some((&otel.service, otel.port)),
            Provider::EnvoyFileAccessLog(_) | Provider::Other(_) => None,
        }
    }
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

/// A file access log (`EnvoyFileAccessLogProvider`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FileAccessLog {
    /// Where Envoy writes (`/dev/stdout` when empty).
    pub path: String,
    /// The line format (Istio's text format when unset).
    pub log_format: Option<LogFormat>,
    /// Leave out fields whose value is empty.
    pub omit_empty_values: bool,
}

/// An OpenTelemetry access-log service (`EnvoyOpenTelemetryLogProvider`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OtelAccessLog {
    /// `[<namespace>/]<hostname>` of the collector's Service or ServiceEntry.
    pub service: String,
    /// Its port.
    pub port: u32,
    /// The log name (`otel_envoy_accesslog` when empty).
    pub log_name: String,
    /// The record body (`text`) and attributes (`labels`).
    pub log_format: Option<LogFormat>,
}

/// An access-log format: a text line, or labels (JSON fields for a file, attributes for OpenTelemetry).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct LogFormat {
    /// A text format with Envoy's `%COMMAND%` operators.
    pub text: Option<String>,
    /// Field name to format.
    pub labels: Option<serde_json::Map<String, Value>>,
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
        Value::Object(mesh) => {
            read_defaults(mesh, out);
            match mesh.get("extensionProviders") {
                None | Some(Value::Null) => return,
                Some(Value::Array(items)) => items,
                Some(_) => {
                    out.findings.push(Finding::error(
                        format!("{MESH_PATH}.extensionProviders"),
                        "extensionProviders must be a list",
                    ));
                    return;
                }
            }
        }
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

/// Reads `defaultProviders.accessLogging` and the [`MeshSettings`], and lists the settings admitpilot does not
/// apply.
fn read_defaults(mesh: &serde_json::Map<String, Value>, out: &mut DecodedMesh) {
    for (key, value) in mesh {
        match key.as_str() {
            "extensionProviders" => {}
            "defaultProviders" => {
                let Value::Object(defaults) = value else {
                    out.findings.push(Finding::error(
                        format!("{MESH_PATH}.defaultProviders"),
                        "defaultProviders must be a map",
                    ));
                    continue;
                };
                for (kind, names) in defaults {
                    if kind != "accessLogging" {
                        out.config
                            .unapplied
                            .push(format!("defaultProviders.{kind}"));
                        continue;
                    }
                    let path = format!("{MESH_PATH}.defaultProviders.accessLogging");
                    if let Some(names) =
                        decode_lenient::<Vec<String>>(names, &path, &mut out.findings, false)
                    {
                        out.config.default_access_log_providers = names;
                    }
                }
            }
            other => {
                if !read_setting(other, value, &mut out.config.settings, &mut out.findings) {
                    out.config.unapplied.push(other.to_string());
                }
            }
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
        "envoyFileAccessLog" => {
            Provider::EnvoyFileAccessLog(decode_lenient(value, &at, findings, true)?)
        }
        "envoyOtelAls" => Provider::EnvoyOtelAls(decode_lenient(value, &at, findings, true)?),
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
    fn access_log_providers_and_defaults_are_read_and_other_settings_listed() {
        let decoded = decode("accessLogFile: /dev/stdout\ndefaultProviders:\n  accessLogging: [file]\n  tracing: [zipkin]\nextensionProviders:\n- name: file\n  envoyFileAccessLog: {path: /tmp/a.log, logFormat: {labels: {code: '%RESPONSE_CODE%'}}}\n- name: otel\n  envoyOtelAls: {service: otel.svc, port: 4317, logName: gw}\n");
        assert_eq!(decoded.findings, Vec::new());
        let config = &decoded.config;
        assert_eq!(config.default_access_log_providers, ["file"]);
        assert_eq!(
            config.unapplied,
            ["accessLogFile", "defaultProviders.tracing"]
        );
        let Provider::EnvoyFileAccessLog(file) = &config.extension_providers[0].provider else {
            panic!("{config:?}");
        };
        assert_eq!(file.path, "/tmp/a.log");
        assert!(file.log_format.as_ref().is_some_and(|f| f.labels.is_some()));
        assert_eq!(
            config.extension_providers[1].provider.server(),
            Some(("otel.svc", 4317))
        );
        assert_eq!(config.extension_providers[1].provider.key(), "envoyOtelAls");
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

    #[test]
    fn root_namespace_and_path_normalization_are_read() {
        let decoded =
            decode("rootNamespace: mesh-root\npathNormalization: {normalization: MERGE_SLASHES}\n");
        assert_eq!(decoded.findings, Vec::new());
        let settings = &decoded.config.settings;
        assert_eq!(settings.root_namespace(), "mesh-root");
        assert_eq!(settings.path_normalization, PathNormalization::MergeSlashes);
        assert!(decoded.config.unapplied.is_empty());
        let mut findings = Vec::new();
        assert_eq!(
            settings_of_text(&settings.to_mesh_yaml(), &mut findings),
            *settings
        );
        assert_eq!(findings, Vec::new());

        let defaults = decode("accessLogFile: /dev/stdout\n").config.settings;
        assert_eq!(defaults.root_namespace(), DEFAULT_ROOT_NAMESPACE);
        assert_eq!(defaults.path_normalization, PathNormalization::Default);
        assert_eq!(
            decode("rootNamespace: ''\n")
                .config
                .settings
                .root_namespace(),
            DEFAULT_ROOT_NAMESPACE
        );

        let bad = decode("rootNamespace: [a]\npathNormalization: {normalization: SOMETIMES}\n");
        let fields: Vec<&str> = bad.findings.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "data.mesh.pathNormalization.normalization",
                "data.mesh.rootNamespace"
            ]
        );
    }
}
