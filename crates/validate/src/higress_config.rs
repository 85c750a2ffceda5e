//! higress-config item rules: takes a decoded [`HigressConfig`] and records Higress's own error strings, item by
//! item in Higress's order (tracing, gzip, global-option, mcpServer), at field paths under `data.higress`.
//!
//! Higress stops at the first failing rule and then drops the whole update. Here every rule runs and every
//! item's errors are reported; within an item the rules run in Higress's order, so an item's first error is the
//! one Higress would log. [`merge_valid_items`] then lets the store apply the valid items and keep the last
//! good value of the others.

use serde_json::Value;

use crate::common::{check_port, check_regex};
use admitpilot_envoy_proto::pool;
use admitpilot_model::higress_config::{
    decode_configmap, DecodedConfigMap, Downstream, Gzip, HigressConfig, Item, McpServer, Tracing,
    HIGRESS_PATH, MCP_FILTER_CONFIG_TYPE,
};
use admitpilot_model::{Finding, Findings};

/// Accepted `gzip.compressionLevel` values, as Higress lists them in its message.
const COMPRESSION_LEVELS: &str = "BEST_COMPRESSION,BEST_SPEED,COMPRESSION_LEVEL_1,COMPRESSION_LEVEL_2,COMPRESSION_LEVEL_3,COMPRESSION_LEVEL_4,COMPRESSION_LEVEL_5,COMPRESSION_LEVEL_6,COMPRESSION_LEVEL_7,COMPRESSION_LEVEL_8,COMPRESSION_LEVEL_9";
/// Accepted `gzip.compressionStrategy` values.
const COMPRESSION_STRATEGIES: &str = "DEFAULT_STRATEGY,FILTERED,HUFFMAN_ONLY,RLE,FIXED";
/// Accepted `match_rule_type` values.
const MATCH_RULE_TYPES: [&str; 5] = ["exact", "prefix", "suffix", "contains", "regex"];
/// Accepted `upstream_type` values (besides the empty default).
const UPSTREAM_TYPES: [&str; 3] = ["rest", "sse", "streamable"];
/// Upper bound of the HTTP/2 settings Higress checks.
const HTTP2_MAX: u32 = 2_147_483_647;

/// Validates every higress-config item.
pub fn validate(config: &HigressConfig, out: &mut Findings) {
    for item in Item::ALL {
        validate_item(config, item, out);
    }
}

/// Validates one item (Higress's `ValidHigressConfig` of that item controller, every rule reported).
pub fn validate_item(config: &HigressConfig, item: Item, out: &mut Findings) {
    match item {
        Item::Tracing => {
            if let Some(tracing) = &config.tracing {
                validate_tracing(tracing, out);
            }
        }
        Item::Gzip => {
            if let Some(gzip) = &config.gzip {
                validate_gzip(gzip, out);
            }
        }
        // Higress validates nothing of the item when `downstream` is absent (upstream is never checked).
        Item::GlobalOption => {
            if let Some(downstream) = &config.downstream {
                validate_downstream(downstream, out);
            }
        }
        Item::McpServer => {
            if let Some(mcp) = &config.mcp_server {
                validate_mcp_server(mcp, out);
            }
        }
    }
}

/// Applies the items of `candidate` that decoded and pass their rules on top of `last_good`. Returns the
/// effective config and the items that kept their `last_good` value: the invalid ones, or all of them when the
/// ConfigMap has no `higress` key (Higress ignores such a ConfigMap). At first start `last_good` is
/// `HigressConfig::default()`, as Higress starts from its defaults.
pub fn merge_valid_items(
    last_good: &HigressConfig,
    candidate: &DecodedConfigMap,
) -> (HigressConfig, Vec<Item>) {
    // The mesh settings are not an item: the candidate's always apply (Higress's pilot reads the `mesh` key
    // whatever the `higress` key holds).
    if !candidate.has_higress {
        let mut effective = last_good.clone();
        effective.mesh.clone_from(&candidate.config.mesh);
        return (effective, Item::ALL.to_vec());
    }
    let mut effective = last_good.clone();
    effective.mesh.clone_from(&candidate.config.mesh);
    let mut kept = Vec::new();
    for item in Item::ALL {
        let mut findings = Findings::default();
        validate_item(&candidate.config, item, &mut findings);
        if candidate.undecodable.contains(&item) || findings.has_errors() {
            kept.push(item);
        } else {
            effective.take_item(item, &candidate.config);
        }
    }
    (effective, kept)
}

/// The rule findings of the items that did decode, for a higress-config document whose decoding failed (so
/// an item with a type error does not hide the other items' errors). Empty for other documents.
pub fn rules_of_decoded_items(doc: &Value) -> Vec<Finding> {
    let Some(fields) = doc.as_object() else {
        return Vec::new();
    };
    let decoded = decode_configmap(fields);
    let mut out = Findings::default();
    for item in Item::ALL {
        if decoded.has_higress && !decoded.undecodable.contains(&item) {
            validate_item(&decoded.config, item, &mut out);
        }
    }
    out.into_vec()
}

fn path(rest: &str) -> String {
    format!("{HIGRESS_PATH}.{rest}")
}

/// Higress's `validTracing`.
fn validate_tracing(t: &Tracing, out: &mut Findings) {
    if t.timeout <= 0 {
        out.error(path("tracing.timeout"), "timeout can not be less than zero");
    }
    if t.sampling < 0.0 || t.sampling > 100.0 {
        out.error(
            path("tracing.sampling"),
            "sampling must be in (0.0 - 100.0)",
        );
    }
    let tracers = [
        ("zipkin", t.zipkin.as_ref().map(|z| (&z.service, &z.port))),
        (
            "skywalking",
            t.skywalking.as_ref().map(|s| (&s.service, &s.port)),
        ),
        (
            "opentelemetry",
            t.opentelemetry.as_ref().map(|o| (&o.service, &o.port)),
        ),
    ];
    let mut present = 0;
    for (name, tracer) in tracers {
        let Some((service, port)) = tracer else {
            continue;
        };
        present += 1;
        if service.is_empty() || port.is_empty() {
            out.error(
                path(&format!("tracing.{name}")),
                format!("{name} service and port can not be empty"),
            );
        } else if let Err(problem) = port
            .parse::<u32>()
            .map_err(|_| format!("`{port}` is not a number"))
            .and_then(check_port)
        {
            out.warning(
                path(&format!("tracing.{name}.port")),
                format!("{problem}: no cluster `outbound|{port}||{service}` can exist for the collector (Higress accepts it)"),
            );
        }
    }
    // Higress counts the valid tracers after returning on an invalid one; counting every present block gives
    // the same first error and still says "only one" when a second block is present but broken.
    if t.enable && present != 1 {
        out.error(
            path("tracing"),
            "only one of skywalking\u{ff0c}zipkin and opentelemetry configuration can be set",
        );
    }
    let sent = format!("{:.1}", t.sampling);
    if t.enable && sent.parse::<f64>().is_ok_and(|sent| sent != t.sampling) {
        out.warning(
            path("tracing.sampling"),
            format!(
                "sampling {} is sent to Envoy as {sent}: Higress keeps one decimal",
                t.sampling
            ),
        );
    }
    if t.enable && t.sampling == 0.0 {
        out.warning(
            path("tracing.sampling"),
            "sampling 0: Higress drops a zero sampling when it stores the item and samples 100%; admitpilot samples 0%",
        );
    }
}

/// Higress's `validGzip` (it applies whether or not gzip is enabled).
fn validate_gzip(g: &Gzip, out: &mut Findings) {
    if g.min_content_length <= 0 {
        out.error(
            path("gzip.minContentLength"),
            "minContentLength can not be less than zero",
        );
    }
    if g.content_type.is_empty() {
        out.error(path("gzip.contentType"), "content type can not be empty");
    }
    if !(1..=9).contains(&g.memory_level) {
        out.error(
            path("gzip.memoryLevel"),
            "memory level need be between 1 and 9",
        );
    }
    if !(9..=15).contains(&g.window_bits) {
        out.error(
            path("gzip.windowBits"),
            "window bits need be between 9 and 15",
        );
    }
    if g.chunk_size <= 0 {
        out.error(path("gzip.chunkSize"), "chunk size need be large than zero");
    }
    if !COMPRESSION_LEVELS
        .split(',')
        .any(|level| level == g.compression_level)
    {
        out.error(
            path("gzip.compressionLevel"),
            format!("compressionLevel need be one of {COMPRESSION_LEVELS}"),
        );
    }
    if !COMPRESSION_STRATEGIES
        .split(',')
        .any(|strategy| strategy == g.compression_strategy)
    {
        out.error(
            path("gzip.compressionStrategy"),
            format!("compressionStrategy need be one of {COMPRESSION_STRATEGIES}"),
        );
    }
}

/// Higress's `validGlobal` (downstream only).
fn validate_downstream(d: &Downstream, out: &mut Findings) {
    if d.max_request_headers_kb > 8192 {
        out.error(
            path("downstream.maxRequestHeadersKb"),
            "maxRequestHeadersKb must be less than or equal to 8192",
        );
    }
    let Some(h2) = &d.http2 else {
        out.warning(
            path("downstream.http2"),
            "http2: null does not remove the HTTP/2 settings: Higress (and admitpilot) apply the defaults \
             (100 streams, 65535-byte stream and 1048576-byte connection windows)",
        );
        return;
    };
    if !(1..=HTTP2_MAX).contains(&h2.max_concurrent_streams) {
        out.error(
            path("downstream.http2.maxConcurrentStreams"),
            "http2.maxConcurrentStreams must be between 1 and 2147483647",
        );
    }
    if !(65535..=HTTP2_MAX).contains(&h2.initial_stream_window_size) {
        out.error(
            path("downstream.http2.initialStreamWindowSize"),
            "http2.initialStreamWindowSize must be between 65535 and 2147483647",
        );
    }
    if !(65535..=HTTP2_MAX).contains(&h2.initial_connection_window_size) {
        out.error(
            path("downstream.http2.initialConnectionWindowSize"),
            "http2.initialConnectionWindowSize must be between 65535 and 2147483647",
        );
    }
}

/// Higress's `validMcpServer` (it applies whether or not the MCP server is enabled).
fn validate_mcp_server(m: &McpServer, out: &mut Findings) {
    if m.enable && pool().get_message_by_name(MCP_FILTER_CONFIG_TYPE).is_none() {
        out.warning(
            path("mcpServer.enable"),
            format!(
                "the MCP filters are not served: they need Envoy's contrib golang filter \
                 ({MCP_FILTER_CONFIG_TYPE}), which admitpilot's Envoy descriptor set does not include"
            ),
        );
    }
    if let Some(secret) = m.redis.as_ref().and_then(|r| r.password_secret.as_ref()) {
        if secret.name.is_empty() {
            out.error(
                path("mcpServer.redis.passwordSecret.name"),
                "redis passwordSecret.name cannot be empty",
            );
        }
        if secret.key.is_empty() {
            out.error(
                path("mcpServer.redis.passwordSecret.key"),
                "redis passwordSecret.key cannot be empty",
            );
        }
    }
    if m.enable_user_level_server && m.redis.is_none() {
        out.error(
            path("mcpServer.enable_user_level_server"),
            "redis config cannot be empty when user level server is enabled",
        );
    }
    for (i, rule) in m.match_list.iter().enumerate() {
        let at = |field: &str| path(&format!("mcpServer.match_list[{i}].{field}"));
        if rule.match_rule_type.is_empty() {
            out.error(
                at("match_rule_type"),
                "match_rule_type cannot be empty, must be one of: exact, prefix, suffix, contains, regex",
            );
        } else if !MATCH_RULE_TYPES.contains(&rule.match_rule_type.as_str()) {
            out.error(
                at("match_rule_type"),
                format!(
                    "invalid match_rule_type: {}, must be one of: exact, prefix, suffix, contains, regex",
                    rule.match_rule_type
                ),
            );
        }
        if rule.match_rule_type == "regex" {
            if let Err(problem) = check_regex(&rule.match_rule_path) {
                out.warning(
                    at("match_rule_path"),
                    format!(
                        "{problem}; Higress accepts it, but the MCP session filter cannot match it"
                    ),
                );
            }
        }
        if !rule.upstream_type.is_empty() && !UPSTREAM_TYPES.contains(&rule.upstream_type.as_str())
        {
            out.error(
                at("upstream_type"),
                format!(
                    "invalid upstream_type: {}, must be one of: rest, sse, streamable",
                    rule.upstream_type
                ),
            );
        }
        if rule.enable_path_rewrite && rule.upstream_type != "sse" {
            out.error(
                at("enable_path_rewrite"),
                "path rewrite is only supported for SSE upstream type",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate_document;
    use admitpilot_model::decode::DecodeOptions;
    use serde_json::json;

    fn decode(text: &str) -> DecodedConfigMap {
        decode_configmap(json!({"data": {"higress": text}}).as_object().unwrap())
    }

    fn errors(config: &HigressConfig) -> Vec<(String, String)> {
        let mut out = Findings::default();
        validate(config, &mut out);
        out.into_vec()
            .into_iter()
            .filter(|f| f.is_error())
            .map(|f| (f.field, f.message))
            .collect()
    }

    #[test]
    fn defaults_are_valid() {
        assert!(errors(&HigressConfig::default()).is_empty());
    }

    #[test]
    fn every_item_reports_its_errors() {
        let decoded = decode(
            "tracing: {enable: true, timeout: 0}\ngzip: {memoryLevel: 0, windowBits: 16}\n\
             downstream: {maxRequestHeadersKb: 9000}\nmcpServer: {match_list: [{match_rule_type: x, enable_path_rewrite: true}]}\n",
        );
        let fields: Vec<String> = errors(&decoded.config).into_iter().map(|e| e.0).collect();
        assert_eq!(
            fields,
            [
                "data.higress.tracing.timeout",
                "data.higress.tracing",
                "data.higress.gzip.memoryLevel",
                "data.higress.gzip.windowBits",
                "data.higress.downstream.maxRequestHeadersKb",
                "data.higress.mcpServer.match_list[0].match_rule_type",
                "data.higress.mcpServer.match_list[0].enable_path_rewrite",
            ]
        );
    }

    #[test]
    fn a_broken_second_tracer_also_breaks_the_count() {
        let decoded = decode(
            "tracing:\n  enable: true\n  skywalking: {port: 11800, service: ''}\n  opentelemetry: {service: jaeger, port: 4317}\n",
        );
        let messages: Vec<String> = errors(&decoded.config).into_iter().map(|e| e.1).collect();
        assert_eq!(
            messages,
            [
                "skywalking service and port can not be empty",
                "only one of skywalking\u{ff0c}zipkin and opentelemetry configuration can be set",
            ]
        );
    }

    #[test]
    fn upstream_is_never_checked_and_downstream_null_skips_the_item() {
        let decoded =
            decode("downstream: null\nupstream: {idleTimeout: 0, connectionBufferLimits: 0}\n");
        assert!(errors(&decoded.config).is_empty());
    }

    #[test]
    fn sampling_beyond_one_decimal_warns() {
        let decoded =
            decode("tracing: {enable: true, sampling: 0.01, zipkin: {service: z, port: 9411}}\n");
        let mut out = Findings::default();
        validate(&decoded.config, &mut out);
        let findings = out.into_vec();
        assert_eq!(findings.len(), 1);
        assert_eq!(
            findings[0].message,
            "sampling 0.01 is sent to Envoy as 0.0: Higress keeps one decimal"
        );
    }

    #[test]
    fn zero_sampling_warns_about_the_higress_difference() {
        let decoded =
            decode("tracing: {enable: true, sampling: 0, zipkin: {service: z, port: 9411}}\n");
        let mut out = Findings::default();
        validate(&decoded.config, &mut out);
        let findings = out.into_vec();
        assert_eq!(findings.len(), 1);
        assert!(!findings[0].is_error());
    }

    #[test]
    fn merge_applies_valid_items_and_keeps_the_rest() {
        let mut last_good = HigressConfig::default();
        last_good.gzip.as_mut().unwrap().min_content_length = 4096;
        last_good.downstream.as_mut().unwrap().idle_timeout = 60;
        let candidate = decode(
            "gzip: {minContentLength: 0}\ndownstream: {idleTimeout: -1}\naddXRealIpHeader: true\n\
             tracing: {enable: true, zipkin: {service: z, port: 9411}}\nmcpServer: null\n",
        );
        let (effective, kept) = merge_valid_items(&last_good, &candidate);
        assert_eq!(kept, [Item::Gzip, Item::GlobalOption]);
        assert_eq!(effective.gzip.as_ref().unwrap().min_content_length, 4096);
        assert_eq!(effective.downstream.as_ref().unwrap().idle_timeout, 60);
        assert!(
            !effective.add_x_real_ip_header,
            "global-option kept as a whole"
        );
        assert!(effective.tracing.as_ref().unwrap().enable);
        assert_eq!(effective.mcp_server, None);
    }

    #[test]
    fn merge_keeps_everything_without_a_higress_key_or_with_broken_yaml() {
        let last_good = HigressConfig {
            add_x_real_ip_header: true,
            ..HigressConfig::default()
        };
        let absent = decode_configmap(json!({"data": {}}).as_object().unwrap());
        assert_eq!(
            merge_valid_items(&last_good, &absent),
            (last_good.clone(), Item::ALL.to_vec())
        );
        let broken = decode("tracing: [\n");
        assert_eq!(
            merge_valid_items(&last_good, &broken),
            (last_good.clone(), Item::ALL.to_vec())
        );
    }

    #[test]
    fn merge_of_a_fully_valid_candidate_is_the_candidate() {
        let candidate = decode("gzip: {enable: false}\ndisableXEnvoyHeaders: true\n");
        let (effective, kept) = merge_valid_items(&HigressConfig::default(), &candidate);
        assert!(kept.is_empty());
        assert_eq!(effective, candidate.config);
    }

    #[test]
    fn a_type_error_does_not_hide_other_items_errors() {
        let doc = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "higress-config", "namespace": "higress-system"},
            "data": {"higress": "downstream: {idleTimeout: -1}\ngzip: {memoryLevel: 0}\n"},
        });
        let report = validate_document(&doc, &DecodeOptions::default());
        let fields: Vec<&str> = report.errors().map(|f| f.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "data.higress.downstream.idleTimeout",
                "data.higress.gzip.memoryLevel"
            ]
        );
    }

    #[test]
    fn warnings_where_higress_is_silent() {
        let decoded = decode(
            "tracing: {zipkin: {service: z, port: http}, skywalking: {service: s, port: 70000}}\n\
             downstream: {http2: null}\n\
             mcpServer: {enable: true, match_list: [{match_rule_type: regex, match_rule_path: '(unclosed'}]}\n",
        );
        let mut out = Findings::default();
        validate(&decoded.config, &mut out);
        let findings = out.into_vec();
        assert!(findings.iter().all(|f| !f.is_error()), "{findings:?}");
        let fields: Vec<&str> = findings.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "data.higress.tracing.zipkin.port",
                "data.higress.tracing.skywalking.port",
                "data.higress.downstream.http2",
                "data.higress.mcpServer.enable",
                "data.higress.mcpServer.match_list[0].match_rule_path",
            ]
        );
    }
}
