//! The higress-config ConfigMap: takes the ConfigMap's top-level fields and yields the decoded
//! [`HigressConfig`] (Higress's defaults applied exactly as Higress applies them), decode findings at field
//! paths such as `data.higress.gzip.memoryLevel`, and which items failed to decode.
//!
//! Higress reads `data.higress` with `sigs.k8s.io/yaml` into `NewDefaultHigressConfig()`; [`gojson`] reproduces
//! that decoding (see its docs for the rules and for how YAML 1.1 booleans are handled). The config is made
//! of four independent items ([`Item`]); [`diff`] compares two configs item by item as Higress does.

mod diff;
mod global_option;
pub(crate) mod gojson;
mod gzip;
mod mcp_server;
pub(crate) mod node;
mod tracing;

use std::collections::BTreeSet;
use std::fmt;

use serde::Serialize;
use serde_json::Value;

use self::gojson::{go_struct, Cx, GoDecode};
use self::node::Node;
use super::mesh_config::{settings_of_text, MeshSettings};
use super::Finding;

pub use self::diff::{
    compare_global, compare_gzip, compare_mcp_server, compare_tracing, diff, Change, ItemChanges,
};
pub use self::global_option::{Downstream, EffectiveGlobal, GlobalOption, Http2, Upstream};
pub use self::gzip::{Gzip, DEFAULT_CONTENT_TYPES};
pub use self::mcp_server::{
    MatchRule, McpServer, RateLimit, RedisConfig, SecretKeyReference, SseServer,
    MCP_FILTER_CONFIG_TYPE,
};
pub use self::tracing::{OpenTelemetry, Skywalking, Tracing, Zipkin};

/// Path prefix of every finding about the `higress` data key.
pub const HIGRESS_PATH: &str = "data.higress";

go_struct! {
    /// The decoded `higress` key of the higress-config ConfigMap. `None` items were set to `null` explicitly,
    /// which Higress treats as "reset this item to its defaults".
    pub struct HigressConfig as "HigressConfig" {
        /// The tracing item.
        pub tracing: Option<Tracing> => "tracing",
        /// The gzip item.
        pub gzip: Option<Gzip> => "gzip",
        /// Part of the global-option item.
        pub downstream: Option<Downstream> => "downstream",
        /// Part of the global-option item.
        pub upstream: Option<Upstream> => "upstream",
        /// Part of the global-option item.
        pub disable_x_envoy_headers: bool => "disableXEnvoyHeaders",
        /// Part of the global-option item.
        pub add_x_real_ip_header: bool => "addXRealIpHeader",
        /// The mcpServer item.
        pub mcp_server: Option<McpServer> => "mcpServer",
    }
    extra {
        /// What admitpilot reads of the ConfigMap's `mesh` key (Higress's mesh config): `rootNamespace` and
        /// `pathNormalization`.
        pub mesh: MeshSettings,
    }
}

impl Default for HigressConfig {
    /// Higress's `NewDefaultHigressConfig`.
    fn default() -> Self {
        let global = GlobalOption::default();
        HigressConfig {
            tracing: Some(Tracing::default()),
            gzip: Some(Gzip::default()),
            downstream: global.downstream,
            upstream: global.upstream,
            disable_x_envoy_headers: global.disable_x_envoy_headers,
            add_x_real_ip_header: global.add_x_real_ip_header,
            mcp_server: Some(McpServer::default()),
            mesh: MeshSettings::default(),
        }
    }
}

impl HigressConfig {
    /// The global-option item's four fields.
    pub fn global_option(&self) -> GlobalOption {
        GlobalOption {
            downstream: self.downstream.clone(),
            upstream: self.upstream.clone(),
            add_x_real_ip_header: self.add_x_real_ip_header,
            disable_x_envoy_headers: self.disable_x_envoy_headers,
        }
    }

    /// Copies `item`'s value from `source` into `self`.
    pub fn take_item(&mut self, item: Item, source: &HigressConfig) {
        match item {
            Item::Tracing => self.tracing.clone_from(&source.tracing),
            Item::Gzip => self.gzip.clone_from(&source.gzip),
            Item::GlobalOption => {
                self.downstream.clone_from(&source.downstream);
                self.upstream.clone_from(&source.upstream);
                self.add_x_real_ip_header = source.add_x_real_ip_header;
                self.disable_x_envoy_headers = source.disable_x_envoy_headers;
            }
            Item::McpServer => self.mcp_server.clone_from(&source.mcp_server),
        }
    }
}

/// One independently applied part of higress-config, in Higress's controller order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Item {
    /// `tracing`.
    Tracing,
    /// `gzip`.
    Gzip,
    /// `downstream`, `upstream`, `addXRealIpHeader`, `disableXEnvoyHeaders`.
    GlobalOption,
    /// `mcpServer`.
    McpServer,
}

impl Item {
    /// Every item, in Higress's order (validation, EnvoyFilter construction).
    pub const ALL: [Item; 4] = [
        Item::Tracing,
        Item::Gzip,
        Item::GlobalOption,
        Item::McpServer,
    ];

    /// The name Higress's item controller goes by.
    pub fn name(self) -> &'static str {
        match self {
            Item::Tracing => "tracing",
            Item::Gzip => "gzip",
            Item::GlobalOption => "global-option",
            Item::McpServer => "mcpServer",
        }
    }

    /// The names of the EnvoyFilters this item produces (what Higress's push names as updated).
    pub fn envoy_filter_names(self) -> &'static [&'static str] {
        match self {
            Item::Tracing => &["higress-config-tracing"],
            Item::Gzip => &["higress-config-gzip"],
            Item::GlobalOption => &["global-option"],
            Item::McpServer => &[
                "higress-config-mcp-server",
                "higress-config-mcp-server-server",
            ],
        }
    }

    /// The item a top-level `data.higress` key (its JSON name) belongs to.
    pub fn of_field(field: &str) -> Option<Item> {
        match field {
            "tracing" => Some(Item::Tracing),
            "gzip" => Some(Item::Gzip),
            "downstream" | "upstream" | "addXRealIpHeader" | "disableXEnvoyHeaders" => {
                Some(Item::GlobalOption)
            }
            "mcpServer" => Some(Item::McpServer),
            _ => None,
        }
    }
}

impl fmt::Display for Item {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The result of decoding the ConfigMap.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DecodedConfigMap {
    /// The config, defaults applied. Items listed in `undecodable` hold whatever part decoded.
    pub config: HigressConfig,
    /// Decode findings (errors and warnings), including those about `data.mesh`.
    pub findings: Vec<Finding>,
    /// Whether `data.higress` is present; Higress ignores a ConfigMap without it and keeps its config.
    pub has_higress: bool,
    /// Items with decode errors (all of them when `data.higress` is not readable at all).
    pub undecodable: BTreeSet<Item>,
}

/// Decodes the ConfigMap's top-level fields (`data.higress`, the [`MeshSettings`] of `data.mesh`, and checks that
/// `data.mesh` and `data.meshNetworks` are well-formed YAML).
pub fn decode_configmap(fields: &serde_json::Map<String, Value>) -> DecodedConfigMap {
    let mut out = DecodedConfigMap::default();
    let data = match fields.get("data") {
        None | Some(Value::Null) => {
            out.findings.push(missing_higress());
            return out;
        }
        Some(Value::Object(data)) => data,
        Some(_) => {
            out.findings
                .push(Finding::error("data", "data must be a map of strings"));
            out.has_higress = true;
            out.undecodable.extend(Item::ALL);
            return out;
        }
    };
    match data.get("higress") {
        None => out.findings.push(missing_higress()),
        Some(Value::String(text)) => {
            out.has_higress = true;
            decode_higress(text, &mut out);
        }
        Some(_) => {
            out.has_higress = true;
            out.undecodable.extend(Item::ALL);
            out.findings.push(Finding::error(
                HIGRESS_PATH,
                "data.higress must be a string holding a YAML document",
            ));
        }
    }
    for key in ["mesh", "meshNetworks"] {
        if let Some(value) = data.get(key) {
            check_yaml_text(key, value, &mut out.findings);
        }
    }
    if let Some(Value::String(mesh)) = data.get("mesh") {
        out.config.mesh = settings_of_text(mesh, &mut out.findings);
    }
    // Higress's chart writes `rootNamespace: <its namespace>` (the ConfigMap's) into the mesh config it installs.
    if out.config.mesh.root_namespace.is_none() {
        out.config.mesh.root_namespace = fields
            .get("metadata")
            .and_then(|m| m.get("namespace"))
            .and_then(Value::as_str)
            .filter(|ns| !ns.is_empty())
            .map(str::to_string);
    }
    out
}

fn missing_higress() -> Finding {
    Finding::warning(
        HIGRESS_PATH,
        "no `higress` key: Higress ignores this ConfigMap and keeps its current configuration",
    )
}

/// Parses and decodes the `higress` YAML onto Higress's defaults.
fn decode_higress(text: &str, out: &mut DecodedConfigMap) {
    let parsed = serde_yaml_ng::from_str::<serde_yaml_ng::Value>(text).and_then(|mut value| {
        value.apply_merge()?;
        Ok(value)
    });
    let yaml = match parsed {
        Ok(yaml) => yaml,
        Err(error) => {
            out.undecodable.extend(Item::ALL);
            out.findings.push(Finding::error(
                HIGRESS_PATH,
                format!("convert to higress config error, error: {error}"),
            ));
            return;
        }
    };
    let mut cx = Cx::new(HIGRESS_PATH);
    out.config.decode(&Node::from_yaml(&yaml), &mut cx);
    out.findings.extend(cx.findings);
    out.undecodable.extend(cx.rejected);
}

fn check_yaml_text(key: &str, value: &Value, findings: &mut Vec<Finding>) {
    let field = format!("data.{key}");
    match value {
        Value::String(text) => {
            if let Err(error) = serde_yaml_ng::from_str::<serde_yaml_ng::Value>(text) {
                findings.push(Finding::error(field, format!("not valid YAML: {error}")));
            }
        }
        _ => findings.push(Finding::error(
            field,
            format!("data.{key} must be a string holding a YAML document"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decode_text(text: &str) -> DecodedConfigMap {
        let doc = json!({"data": {"higress": text}});
        decode_configmap(doc.as_object().unwrap())
    }

    fn errors(decoded: &DecodedConfigMap) -> Vec<(String, String)> {
        decoded
            .findings
            .iter()
            .filter(|f| f.is_error())
            .map(|f| (f.field.clone(), f.message.clone()))
            .collect()
    }

    #[test]
    fn empty_and_null_documents_are_the_defaults() {
        for text in ["", "{}", "~", "# only a comment\n"] {
            let decoded = decode_text(text);
            assert_eq!(decoded.config, HigressConfig::default(), "{text:?}");
            assert!(decoded.findings.is_empty(), "{text:?}");
            assert!(decoded.has_higress);
        }
    }

    #[test]
    fn omitted_fields_keep_defaults_and_lists_replace() {
        let decoded = decode_text("gzip:\n  minContentLength: 2048\n  contentType: [a/b]\n");
        let gzip = decoded.config.gzip.unwrap();
        assert_eq!(gzip.min_content_length, 2048);
        assert_eq!(gzip.content_type, ["a/b"]);
        assert!(gzip.enable);
        assert_eq!(gzip.memory_level, 5);
    }

    #[test]
    fn explicit_null_clears_an_item() {
        let decoded = decode_text("gzip: null\ndownstream:\n  http2: null\n");
        assert_eq!(decoded.config.gzip, None);
        assert_eq!(decoded.config.downstream.unwrap().http2, None);
        assert!(decoded.findings.is_empty());
    }

    #[test]
    fn null_inside_a_plain_field_keeps_the_default() {
        let decoded = decode_text("gzip:\n  minContentLength: null\n");
        assert_eq!(decoded.config.gzip.unwrap().min_content_length, 1024);
    }

    #[test]
    fn numbers_become_strings_in_string_fields() {
        let decoded = decode_text("tracing:\n  skywalking:\n    service: oap\n    port: 11800\n");
        let sky = decoded.config.tracing.unwrap().skywalking.unwrap();
        assert_eq!(sky.port, "11800");
        assert_eq!(sky.access_token, "");
        // Too large for float32: Go's formatting gives +Inf (Higress's port check then judges that text).
        let decoded = decode_text("tracing:\n  skywalking:\n    service: oap\n    port: 1e300\n");
        assert_eq!(
            decoded.config.tracing.unwrap().skywalking.unwrap().port,
            "+Inf"
        );
    }

    #[test]
    fn type_errors_carry_gos_message_and_reject_only_their_item() {
        let decoded =
            decode_text("downstream:\n  idleTimeout: -1\ngzip:\n  contentType: text/html\n");
        assert_eq!(
            errors(&decoded),
            [
                (
                    "data.higress.downstream.idleTimeout".to_string(),
                    "json: cannot unmarshal number -1 into Go struct field Downstream.downstream.idleTimeout of type uint32".to_string()
                ),
                (
                    "data.higress.gzip.contentType".to_string(),
                    "json: cannot unmarshal string into Go struct field Gzip.gzip.contentType of type []string".to_string()
                ),
            ]
        );
        assert_eq!(
            decoded.undecodable,
            BTreeSet::from([Item::Gzip, Item::GlobalOption])
        );
    }

    #[test]
    fn errors_in_list_entries_name_the_entry() {
        let decoded =
            decode_text("mcpServer:\n  match_list:\n  - match_rule_type: [x]\n  - 5\n  - null\n");
        assert_eq!(
            errors(&decoded),
            [
                (
                    "data.higress.mcpServer.match_list[0].match_rule_type".to_string(),
                    "json: cannot unmarshal array into Go struct field MatchRule.mcpServer.match_list.match_rule_type of type string".to_string()
                ),
                (
                    "data.higress.mcpServer.match_list[1]".to_string(),
                    "json: cannot unmarshal number into Go struct field McpServer.mcpServer.match_list of type configmap.MatchRule".to_string()
                ),
                (
                    "data.higress.mcpServer.match_list[2]".to_string(),
                    "list entry is null (Higress stores a nil pointer and crashes on it)".to_string()
                ),
            ]
        );
        assert_eq!(decoded.undecodable, BTreeSet::from([Item::McpServer]));
    }

    #[test]
    fn a_non_mapping_document_rejects_everything() {
        let decoded = decode_text("just text");
        assert_eq!(
            errors(&decoded),
            [(
                "data.higress".to_string(),
                "json: cannot unmarshal string into Go value of type configmap.HigressConfig"
                    .to_string()
            )]
        );
        assert_eq!(decoded.undecodable.len(), 4);
    }

    #[test]
    fn yaml_syntax_errors_reject_everything() {
        let decoded = decode_text("tracing: [\n");
        assert!(errors(&decoded)[0]
            .1
            .starts_with("convert to higress config error"));
        assert_eq!(decoded.undecodable.len(), 4);
    }

    #[test]
    fn unknown_keys_warn_with_a_suggestion() {
        let decoded = decode_text("gizp:\n  enable: false\ngzip:\n  enabel: false\n");
        let warnings: Vec<(&str, &str)> = decoded
            .findings
            .iter()
            .map(|f| (f.field.as_str(), f.message.as_str()))
            .collect();
        assert_eq!(
            warnings,
            [
                (
                    "data.higress.gizp",
                    "unknown field `gizp` is ignored by Higress; did you mean `gzip`?"
                ),
                (
                    "data.higress.gzip.enabel",
                    "unknown field `enabel` is ignored by Higress; did you mean `enable`?"
                ),
            ]
        );
        assert!(decoded.config.gzip.unwrap().enable);
        assert!(decoded.undecodable.is_empty());
    }

    #[test]
    fn keys_match_case_insensitively_with_a_warning() {
        let decoded = decode_text("Gzip:\n  Enable: false\n");
        assert!(!decoded.config.gzip.unwrap().enable);
        assert_eq!(decoded.findings.len(), 2);
        assert!(decoded.findings.iter().all(|f| !f.is_error()));
        assert_eq!(decoded.findings[0].field, "data.higress.gzip");
    }

    #[test]
    fn differently_cased_duplicates_apply_in_byte_order() {
        let decoded = decode_text(
            "gzip:\n  minContentLength: 5\nGZIP:\n  minContentLength: 7\n  enable: false\n",
        );
        let gzip = decoded.config.gzip.unwrap();
        assert_eq!(gzip.min_content_length, 5);
        assert!(!gzip.enable);
    }

    #[test]
    fn free_form_config_keeps_json_values() {
        let decoded = decode_text(
            "mcpServer:\n  servers:\n  - name: s\n    config:\n      port: 8080\n      ratio: 1.0\n      nested: {a: [1, x]}\n",
        );
        let server = &decoded.config.mcp_server.unwrap().servers[0];
        assert_eq!(
            Value::Object(server.config.clone()),
            json!({"port": 8080, "ratio": 1, "nested": {"a": [1, "x"]}})
        );
    }

    #[test]
    fn missing_higress_key_is_a_warning() {
        let doc = json!({"data": {"mesh": "a: b"}});
        let decoded = decode_configmap(doc.as_object().unwrap());
        assert!(!decoded.has_higress);
        assert_eq!(decoded.findings.len(), 1);
        assert!(!decoded.findings[0].is_error());
    }

    #[test]
    fn mesh_must_be_well_formed_yaml() {
        let doc = json!({"data": {"higress": "{}", "mesh": "a: [", "meshNetworks": 3}});
        let decoded = decode_configmap(doc.as_object().unwrap());
        let fields: Vec<&str> = decoded.findings.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, ["data.mesh", "data.meshNetworks"]);
        assert!(decoded.undecodable.is_empty());
    }

    #[test]
    fn non_finite_numbers_are_rejected() {
        let decoded = decode_text("tracing:\n  sampling: .inf\n");
        assert_eq!(
            errors(&decoded),
            [(
                "data.higress.tracing.sampling".to_string(),
                "json: unsupported value: +Inf".to_string()
            )]
        );
        assert_eq!(decoded.undecodable, BTreeSet::from([Item::Tracing]));
    }

    #[test]
    fn alias_bombs_are_refused_not_expanded() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..12 {
            let p = i - 1;
            text.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        let decoded = decode_text(&text);
        assert_eq!(decoded.undecodable.len(), 4);
        assert!(errors(&decoded)[0].1.contains("limit"));
    }
}
