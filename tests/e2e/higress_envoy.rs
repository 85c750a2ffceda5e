//! Envoy accepts what higress-config produces: the tracing, gzip and global-option EnvoyFilters are applied to a
//! small gateway config (one HTTP connection manager with CORS and router filters, one route, a backend cluster
//! and the collector clusters) and the result must pass `envoy --mode validate`. The patches are applied by a
//! test-only JSON merge (objects merge, lists append, as protobuf merge does), which is enough for the few
//! operations these filters use; the MCP filters are left out because the golang filter is contrib-only.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::envoy;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use admitpilot::model::higress_config::decode_configmap;
use admitpilot::translate::higress::envoy_filters;
use serde_json::{json, Value};

const HCM: &str = "envoy.filters.network.http_connection_manager";

/// Kills the child on drop, so a hung Envoy never outlives the test.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Protobuf-style merge of JSON: objects merge key by key, lists append, anything else is replaced.
fn merge(into: &mut Value, from: &Value) {
    match (into, from) {
        (Value::Object(into), Value::Object(from)) => {
            for (key, value) in from {
                match into.get_mut(key) {
                    Some(existing) => merge(existing, value),
                    None => {
                        into.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (Value::Array(into), Value::Array(from)) => into.extend(from.iter().cloned()),
        (into, from) => *into = from.clone(),
    }
}

/// A gateway-like bootstrap: listener → HCM (cors, router) → route → `backend`, plus `clusters`.
fn base_bootstrap(clusters: &[String]) -> Value {
    let static_cluster = |name: &str| {
        json!({"name": name, "type": "STATIC", "connect_timeout": "1s",
            "load_assignment": {"cluster_name": name, "endpoints": [{"lb_endpoints": [{"endpoint": {
                "address": {"socket_address": {"address": "127.0.0.1", "port_value": 9}}}}]}]}})
    };
    let mut all = vec![static_cluster("backend")];
    all.extend(clusters.iter().map(|c| static_cluster(c)));
    json!({
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}}},
        "static_resources": {
            "listeners": [{
                "name": "0.0.0.0_80",
                "address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}},
                "filter_chains": [{"filters": [{
                    "name": HCM,
                    "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                        "stat_prefix": "gateway",
                        "route_config": {"name": "http.80", "virtual_hosts": [{
                            "name": "any", "domains": ["*"],
                            "routes": [{"match": {"prefix": "/"}, "route": {"cluster": "backend"}}],
                        }]},
                        "http_filters": [
                            {"name": "envoy.filters.http.cors", "typed_config": {
                                "@type": "type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors"}},
                            {"name": "envoy.filters.http.router", "typed_config": {
                                "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}},
                        ],
                    },
                }]}],
            }],
            "clusters": all,
        },
    })
}

/// Applies one config patch the way Istio would for this single-listener gateway.
fn apply(bootstrap: &mut Value, patch: &Value) {
    let value = &patch["patch"]["value"];
    let operation = patch["patch"]["operation"].as_str().unwrap();
    let listener = &mut bootstrap["static_resources"]["listeners"][0];
    match patch["applyTo"].as_str().unwrap() {
        "LISTENER" => merge(listener, value),
        "NETWORK_FILTER" => merge(&mut listener["filter_chains"][0]["filters"][0], value),
        "ROUTE_CONFIGURATION" => merge(
            &mut listener["filter_chains"][0]["filters"][0]["typed_config"]["route_config"],
            value,
        ),
        "HTTP_ROUTE" => {
            let hcm = &mut listener["filter_chains"][0]["filters"][0]["typed_config"];
            for route in hcm["route_config"]["virtual_hosts"][0]["routes"]
                .as_array_mut()
                .unwrap()
            {
                merge(route, value);
            }
        }
        "HTTP_FILTER" => {
            let sub = patch["match"]["listener"]["filterChain"]["filter"]["subFilter"]["name"]
                .as_str()
                .unwrap();
            let filters = listener["filter_chains"][0]["filters"][0]["typed_config"]
                ["http_filters"]
                .as_array_mut()
                .unwrap();
            let at = filters.iter().position(|f| f["name"] == sub).unwrap();
            match operation {
                "MERGE" => merge(&mut filters[at], value),
                "REPLACE" => filters[at] = value.clone(),
                "INSERT_BEFORE" => filters.insert(at, value.clone()),
                "INSERT_AFTER" => filters.insert(at + 1, value.clone()),
                other => panic!("unexpected operation {other}"),
            }
        }
        "CLUSTER" => {
            let name = patch["match"]["cluster"]["name"].as_str();
            for cluster in bootstrap["static_resources"]["clusters"]
                .as_array_mut()
                .unwrap()
            {
                if name.is_none_or(|n| cluster["name"] == n) {
                    merge(cluster, value);
                }
            }
        }
        other => panic!("unexpected applyTo {other}"),
    }
}

/// Runs `envoy --mode validate` on `bootstrap`; returns (success, log).
fn validate(binary: &std::path::Path, bootstrap: &Value) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("bootstrap.json");
    std::fs::write(&config, serde_json::to_vec_pretty(bootstrap).unwrap()).unwrap();
    let log = dir.path().join("envoy.log");
    let child = Command::new(binary)
        .arg("--mode")
        .arg("validate")
        .arg("-c")
        .arg(&config)
        .args(["--log-level", "warn", "--disable-hot-restart"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start envoy");
    let mut guard = Guard(child);
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = guard.0.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "envoy --mode validate hung");
        std::thread::sleep(Duration::from_millis(50));
    };
    (
        status.success(),
        std::fs::read_to_string(&log).unwrap_or_default(),
    )
}

const TRACERS: &[(&str, &str)] = &[
    (
        "zipkin",
        "{service: zipkin.zipkin.svc.cluster.local, port: 9411}",
    ),
    (
        "skywalking",
        "{service: oap.skywalking.svc.cluster.local, port: 11800, access_token: t}",
    ),
    (
        "opentelemetry",
        "{service: otel.observability.svc.cluster.local, port: 4317}",
    ),
];

#[test]
fn envoy_accepts_the_higress_config_filters() {
    let Some(binary) = envoy::envoy_binary() else {
        return;
    };
    for (tracer, block) in TRACERS {
        let higress = format!(
            "tracing:\n  enable: true\n  sampling: 25\n  {tracer}: {block}\n\
             gzip: {{chunkSize: 8192, compressionLevel: BEST_SPEED}}\n\
             downstream: {{routeTimeout: 30, idleTimeout: 0}}\n\
             addXRealIpHeader: true\ndisableXEnvoyHeaders: true\n"
        );
        let decoded = decode_configmap(json!({"data": {"higress": higress}}).as_object().unwrap());
        assert!(
            decoded.findings.iter().all(|f| !f.is_error()),
            "{:?}",
            decoded.findings
        );
        let filters = envoy_filters(&decoded.config, "higress-system");
        let collectors: Vec<String> = filters
            .iter()
            .flat_map(|f| f["spec"]["configPatches"].as_array().unwrap().iter())
            .filter_map(|p| p["match"]["cluster"]["name"].as_str().map(str::to_string))
            .chain(std::iter::once(
                "outbound|9411||zipkin.zipkin.svc.cluster.local".to_string(),
            ))
            .collect();
        let mut bootstrap = base_bootstrap(&collectors);
        // Istio applies EnvoyFilters in creation-time-then-name order; Higress's all sort as built, except that
        // global-option precedes higress-config-tracing by name (REPLACE of the router first, then MERGE).
        let mut ordered = filters.clone();
        ordered.sort_by_key(|f| f["metadata"]["name"].as_str().unwrap().to_string());
        for filter in &ordered {
            for patch in filter["spec"]["configPatches"].as_array().unwrap() {
                apply(&mut bootstrap, patch);
            }
        }
        let http_filters = &bootstrap["static_resources"]["listeners"][0]["filter_chains"][0]
            ["filters"][0]["typed_config"]["http_filters"];
        let router = &http_filters[2]["typed_config"];
        assert_eq!(router["suppress_envoy_headers"], true, "{tracer}");
        let hcm = &bootstrap["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]
            ["typed_config"];
        assert_eq!(hcm["tracing"]["spawn_upstream_span"], true, "{tracer}");
        let (ok, log) = validate(&binary, &bootstrap);
        assert!(
            ok,
            "{tracer}: envoy rejected the config:\n{log}\n{bootstrap:#}"
        );
    }
}

/// The check is real: Higress's own gzip output (`check_size`) is rejected by the same validation.
#[test]
fn envoy_rejects_higress_check_size() {
    let Some(binary) = envoy::envoy_binary() else {
        return;
    };
    let decoded = decode_configmap(json!({"data": {"higress": "{}"}}).as_object().unwrap());
    let filters = envoy_filters(&decoded.config, "higress-system");
    let mut bootstrap = base_bootstrap(&[]);
    for patch in filters[0]["spec"]["configPatches"].as_array().unwrap() {
        apply(&mut bootstrap, patch);
    }
    assert!(validate(&binary, &bootstrap).0, "admitpilot's gzip filter");
    let library = bootstrap.pointer_mut(
        "/static_resources/listeners/0/filter_chains/0/filters/0/typed_config/http_filters/0/typed_config/compressor_library/typed_config",
    )
    .unwrap()
    .as_object_mut()
    .unwrap();
    let chunk = library.remove("chunk_size").unwrap();
    library.insert("check_size".into(), chunk);
    let (ok, log) = validate(&binary, &bootstrap);
    assert!(!ok, "envoy accepted check_size");
    assert!(log.contains("check_size"), "{log}");
}
