//! Golden test of the EnvoyFilters built from higress-config: each config below goes through the real decoder
//! and `translate::higress::higress_envoy_filters`, and the filters of one item must equal the JSON in
//! `shared/corpus/higress/expected/` (derived from Higress's templates and unit tests), compared structurally.
//!
//! Two allowed differences, each asserted explicitly below:
//! - Higress's gzip filter writes the zlib chunk size as `check_size`, a field Envoy's gzip compressor does not
//!   have; admitpilot writes Envoy's `chunk_size`.
//! - Higress's tracing filter sets the router's `start_child_span` and Zipkin's `split_spans_for_request`, both
//!   deprecated in Envoy 1.40; admitpilot sets their replacement, the connection manager's `spawn_upstream_span`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::corpus;

use std::path::Path;

use admitpilot::model::higress_config::decode_configmap;
use admitpilot::translate::higress::higress_envoy_filters;
use serde_json::{json, Value};

fn golden(dir: &Path, file: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join(file)).unwrap()).unwrap()
}

/// Decodes `higress` (must be free of errors) and returns the filters whose name starts with `prefix`.
fn filters(higress: &str, namespace: &str, prefix: &str) -> Vec<Value> {
    let decoded = decode_configmap(json!({"data": {"higress": higress}}).as_object().unwrap());
    assert!(
        decoded.findings.iter().all(|f| !f.is_error()),
        "{:?}",
        decoded.findings
    );
    higress_envoy_filters(&decoded.config, namespace)
        .into_iter()
        .filter(|f| f["metadata"]["name"].as_str().unwrap().starts_with(prefix))
        .collect()
}

/// Replaces admitpilot's `chunk_size` by Higress's `check_size` after checking the value is the same.
fn as_higress_writes_gzip(mut ours: Vec<Value>, golden: &Value) -> Vec<Value> {
    let path = "/spec/configPatches/0/patch/value/typed_config/compressor_library/typed_config";
    let expected = golden[0].pointer(path).unwrap()["check_size"].clone();
    let library = ours[0].pointer_mut(path).unwrap().as_object_mut().unwrap();
    assert!(
        !library.contains_key("check_size"),
        "admitpilot must not emit check_size"
    );
    let chunk = library.remove("chunk_size").expect("chunk_size emitted");
    assert_eq!(chunk, expected, "chunk_size carries Higress's chunkSize");
    library.insert("check_size".into(), chunk);
    ours
}

const CASES: &[(&str, &str, &str)] = &[
    ("tracing-disabled.json", "higress-config-tracing", ""),
    (
        "tracing-skywalking.json",
        "higress-config-tracing",
        "tracing:\n  enable: true\n  skywalking:\n    service: skywalking-oap-server.op-system.svc.cluster.local\n    port: 11800\n",
    ),
    (
        "tracing-zipkin.json",
        "higress-config-tracing",
        "tracing:\n  enable: true\n  zipkin:\n    service: zipkin.zipkin.svc.cluster.local\n    port: '9411'\n",
    ),
    (
        "tracing-opentelemetry.json",
        "higress-config-tracing",
        "tracing:\n  enable: true\n  timeout: 1500\n  sampling: 50\n  opentelemetry:\n    service: otel-collector.observability.svc.cluster.local\n    port: 4317\n",
    ),
    ("global-default.json", "global-option", "{}"),
    (
        "global-all-set.json",
        "global-option",
        "downstream:\n  routeTimeout: 15\naddXRealIpHeader: true\ndisableXEnvoyHeaders: true\n",
    ),
    (
        "mcp-envoyfilters.derived.json",
        "higress-config-mcp-server",
        "mcpServer:\n  enable: true\n  redis:\n    address: localhost:6379\n  servers:\n  - name: test-server\n    path: /test\n    type: test\n    domain_list: [example.com]\n    config:\n      key: value\n",
    ),
];

#[test]
fn envoy_filters_match_the_goldens() {
    let Some(dir) = corpus::corpus_dir("higress/expected") else {
        return;
    };
    for (file, prefix, higress) in CASES {
        let ours = filters(higress, "higress-system", prefix);
        let mut expected = golden(&dir, file);
        if *prefix == "higress-config-tracing" {
            expected = as_admitpilot_writes_tracing(expected);
        }
        assert_eq!(Value::Array(ours), expected, "{file}");
    }
    let gzip_golden = golden(&dir, "gzip-default.json");
    let ours = filters("{}", "higress-system", "higress-config-gzip");
    let ours = as_higress_writes_gzip(ours, &gzip_golden);
    assert_eq!(Value::Array(ours), gzip_golden, "gzip-default.json");
    println!(
        "higress goldens: {} EnvoyFilter files matched",
        CASES.len() + 1
    );
}

/// Higress's tracing EnvoyFilters as admitpilot writes them: the router patch that sets `start_child_span` and
/// Zipkin's `split_spans_for_request` give way to `spawn_upstream_span` on the connection manager's tracing.
fn as_admitpilot_writes_tracing(mut filters: Value) -> Value {
    for filter in filters.as_array_mut().unwrap() {
        let patches = filter["spec"]["configPatches"].as_array_mut().unwrap();
        let router = patches.remove(1);
        assert_eq!(
            router["patch"]["value"]["typed_config"],
            json!({"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router",
                "start_child_span": true}),
            "Higress's second tracing patch is the router's start_child_span"
        );
        let tracing = &mut patches[0]["patch"]["value"]["typed_config"]["tracing"];
        tracing["spawn_upstream_span"] = json!(true);
        if let Some(zipkin) = tracing["provider"]["typed_config"].as_object_mut() {
            zipkin.remove("split_spans_for_request");
        }
    }
    filters
}

/// The `typed_config` of the EXTENSION_CONFIG patch of the filter named `name`, if built.
fn extension_config(filters: &[Value], name: &str) -> Option<Value> {
    let filter = filters.iter().find(|f| f["metadata"]["name"] == name)?;
    Some(filter["spec"]["configPatches"][1]["patch"]["value"]["typed_config"].clone())
}

#[test]
fn mcp_plugin_configs_match_higress_unit_tests() {
    let Some(dir) = corpus::corpus_dir("higress/expected") else {
        return;
    };
    let mut checked = 0;
    let session = golden(&dir, "mcp-session-struct.cases.json");
    for (name, case) in session["cases"].as_object().unwrap() {
        let namespace = case["input_namespace"].as_str().unwrap();
        let higress = serde_yaml_ng::to_string(&json!({"mcpServer": case["input"]})).unwrap();
        let built = filters(&higress, namespace, "higress-config-mcp-server");
        assert_eq!(
            extension_config(&built, "higress-config-mcp-server"),
            Some(case["expected"].clone()),
            "session case {name}"
        );
        checked += 1;
    }
    let server = golden(&dir, "mcp-server-struct.cases.json");
    for (name, case) in server["cases"].as_object().unwrap() {
        let mut input = case["input"].clone();
        input["enable"] = json!(true);
        let higress = serde_yaml_ng::to_string(&json!({"mcpServer": input})).unwrap();
        let built = filters(&higress, "higress-system", "higress-config-mcp-server");
        let expected = match &case["expected"] {
            Value::String(s) if s.is_empty() => None,
            other => Some(other.clone()),
        };
        assert_eq!(
            extension_config(&built, "higress-config-mcp-server-server"),
            expected,
            "server case {name}"
        );
        checked += 1;
    }
    println!("higress mcp plugin goldens: {checked} cases matched");
}
