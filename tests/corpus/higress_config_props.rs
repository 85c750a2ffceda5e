//! Property test of the higress-config pipeline: random `data.higress` documents (built from the real key
//! names plus noise) never make decoding, validation, merging or translation panic, and the items
//! `merge_valid_items` keeps are exactly the items with an error finding. CI runs proptest's default case
//! count; set `PROPTEST_CASES` for a long run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use admitpilot::model::higress_config::{decode_configmap, HigressConfig, Item};
use admitpilot::model::Findings;
use admitpilot::translate::higress::envoy_filters;
use admitpilot::validate::higress_config::{merge_valid_items, validate};
use proptest::prelude::*;
use serde_json::{json, Map, Value};

const KEYS: &[&str] = &[
    "tracing",
    "gzip",
    "downstream",
    "upstream",
    "addXRealIpHeader",
    "disableXEnvoyHeaders",
    "mcpServer",
    "enable",
    "sampling",
    "timeout",
    "zipkin",
    "skywalking",
    "opentelemetry",
    "service",
    "port",
    "access_token",
    "minContentLength",
    "contentType",
    "disableOnEtagHeader",
    "memoryLevel",
    "windowBits",
    "chunkSize",
    "compressionLevel",
    "compressionStrategy",
    "idleTimeout",
    "maxRequestHeadersKb",
    "connectionBufferLimits",
    "http2",
    "routeTimeout",
    "maxConcurrentStreams",
    "initialStreamWindowSize",
    "initialConnectionWindowSize",
    "redis",
    "address",
    "username",
    "password",
    "passwordSecret",
    "namespace",
    "name",
    "key",
    "db",
    "sse_path_suffix",
    "servers",
    "path",
    "type",
    "config",
    "domain_list",
    "match_list",
    "match_rule_domain",
    "match_rule_path",
    "match_rule_type",
    "upstream_type",
    "enable_path_rewrite",
    "path_rewrite_prefix",
    "enable_user_level_server",
    "rate_limit",
    "limit",
    "window",
    "white_list",
    "GZIP",
    "gizp",
    "Enable",
];

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(KEYS).prop_map(str::to_string),
        1 => "[a-zA-Z_]{1,8}",
    ]
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-5i64..70_000).prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e3f64..1e3).prop_map(Value::from),
        proptest::sample::select(
            &[
                "",
                "yes",
                "on",
                "true",
                "BEST_SPEED",
                "FIXED",
                "prefix",
                "sse",
                "rest",
                "x:1",
                "11800",
            ][..]
        )
        .prop_map(Value::from),
        "[ -~]{0,12}".prop_map(Value::from),
    ]
}

fn document() -> impl Strategy<Value = Value> {
    let leaf = scalar();
    let value = leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::vec((key(), inner), 0..6)
                .prop_map(|entries| Value::Object(entries.into_iter().collect::<Map<_, _>>())),
        ]
    });
    proptest::collection::vec((key(), value), 0..8)
        .prop_map(|entries| Value::Object(entries.into_iter().collect()))
}

/// The items an error finding belongs to, from its field path.
fn items_with_errors(findings: &[admitpilot::model::Finding]) -> BTreeSet<Item> {
    let mut out = BTreeSet::new();
    for finding in findings.iter().filter(|f| f.is_error()) {
        let rest = finding.field.strip_prefix("data.higress").unwrap();
        let top = rest
            .trim_start_matches('.')
            .split(['.', '['])
            .next()
            .unwrap_or("");
        match Item::of_field(top) {
            Some(item) => {
                out.insert(item);
            }
            None => out.extend(Item::ALL),
        }
    }
    out
}

fn check(doc: &Value) {
    let text = serde_yaml_ng::to_string(doc).unwrap();
    let decoded = decode_configmap(json!({"data": {"higress": text}}).as_object().unwrap());
    let mut rules = Findings::default();
    validate(&decoded.config, &mut rules);
    let mut findings = decoded.findings.clone();
    findings.extend(rules.into_vec());
    let (effective, kept) = merge_valid_items(&HigressConfig::default(), &decoded);
    assert_eq!(
        kept.into_iter().collect::<BTreeSet<_>>(),
        items_with_errors(&findings),
        "{text}\n{findings:?}"
    );
    let filters = envoy_filters(&effective, "higress-system");
    assert!(!filters.is_empty());
}

proptest! {
    #[test]
    fn pipeline_never_panics_and_keeps_exactly_the_invalid_items(doc in document()) {
        check(&doc);
    }
}
