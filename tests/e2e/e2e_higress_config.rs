//! End-to-end for the `higress-config` ConfigMap: `admitpilot serve --config-dir` (the real binary) feeds a real
//! Envoy 1.40 over ADS (`GRPC` and `DELTA_GRPC`), with a Gateway on a free port routing `/api` through a
//! VirtualService to a ServiceEntry whose STATIC endpoint is a header-recording backend on 127.0.0.1.
//!
//! The test rewrites `higress-system/higress-config` step by step and checks each item where Envoy shows it:
//! the zipkin, OpenTelemetry and SkyWalking tracers (tracer config and the collector cluster in `/config_dump`;
//! spans are not collected), gzip on (a `content-encoding: gzip` response) and off again, the downstream and
//! upstream options (idle timeouts, buffer limits, HTTP/2 settings, header size, route timeout, all in
//! `/config_dump`), `addXRealIpHeader` (the backend receives `x-real-ip`) and `disableXEnvoyHeaders` (no
//! `x-envoy-*` header in the response, none from the router upstream), then everything at once.
//! Tracing is first configured before its collector exists: the listener is served without it, with no
//! rejection, and the tracer follows once the collector is created.
//! After every step Envoy must have rejected no update (`*update_rejected` stats all 0) and logged no deprecated
//! field.
//!
//! `mcpServer` is left out: its filters are Higress's golang filter, which stock Envoy does not have (admitpilot
//! does not serve them either). Skips with a message when Envoy is not installed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::envoy;
use support::pipeline;

use envoy::*;
use pipeline::*;
use serde_json::Value;

const NODE_ID: &str =
    "router~127.0.0.1~higress-gateway.higress-system~higress-system.svc.cluster.local";
const COLLECTOR_HOST: &str = "collector.example.com";

/// What one step of the test sees through Envoy.
struct Gateway<'a> {
    backend: &'a Backend,
    http: reqwest::Client,
    base: String,
    dir: &'a std::path::Path,
}

impl Gateway<'_> {
    /// Writes the ConfigMap with `higress` as its `higress` key.
    fn configure(&self, higress: &str) {
        write(self.dir, "higress-config.yaml", &higress_config(higress));
    }

    /// GETs `path` through Envoy (with `Accept-Encoding: gzip`); the response and the request the backend saw.
    async fn request(&self, path: &str) -> (reqwest::Response, axum::http::HeaderMap) {
        let response = self
            .http
            .get(format!("{}{path}", self.base))
            .header("accept-encoding", "gzip")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
        (response, self.backend.last_request().unwrap())
    }

    /// Polls `path` until `check` holds for the response and the backend's request (panics after [`CONVERGE`]).
    async fn wait_for_traffic(
        &self,
        what: &str,
        path: &str,
        check: impl Fn(&reqwest::Response, &axum::http::HeaderMap) -> bool,
    ) {
        let deadline = tokio::time::Instant::now() + CONVERGE;
        loop {
            let (response, upstream) = self.request(path).await;
            if check(&response, &upstream) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "never saw {what}; response {:?}, upstream request {upstream:?}",
                response.headers()
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
}

/// The tracer provider of every HTTP connection manager, when all carry the same one.
fn tracer(dump: &Value) -> Option<&Value> {
    let hcms = dumped_hcms(dump);
    let first = hcms.first()?.pointer("/tracing/provider")?;
    hcms.iter()
        .all(|hcm| hcm.pointer("/tracing/provider") == Some(first))
        .then_some(first)
}

/// The upstream idle timeout of a dumped cluster, from its typed HTTP protocol options.
fn upstream_idle_timeout(cluster: &Value) -> Option<&Value> {
    cluster.pointer(
        "/typed_extension_protocol_options/envoy.extensions.upstreams.http.v3.HttpProtocolOptions\
         /common_http_protocol_options/idle_timeout",
    )
}

/// The dumped cluster called `name`.
fn cluster<'a>(dump: &'a Value, name: &str) -> Option<&'a Value> {
    dumped(dump, Dumped::Cluster)
        .into_iter()
        .find(|c| c["name"] == name)
}

/// The router filter of the first HTTP connection manager.
fn router(dump: &Value) -> Option<&Value> {
    dumped_hcms(dump)
        .first()?
        .get("http_filters")?
        .as_array()?
        .iter()
        .find(|f| f["name"] == "envoy.filters.http.router")
}

fn has_filter(dump: &Value, name: &str) -> bool {
    dumped_hcms(dump).iter().any(|hcm| {
        hcm["http_filters"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|f| f["name"] == name)
    })
}

fn x_envoy_headers(headers: &axum::http::HeaderMap) -> Vec<String> {
    headers
        .keys()
        .map(|k| k.as_str().to_string())
        .filter(|k| k.starts_with("x-envoy-"))
        .collect()
}

/// True when the only x-envoy-* headers are the two Envoy adds outside the router (see the disableXEnvoyHeaders step).
fn no_router_x_envoy_headers(headers: &axum::http::HeaderMap) -> bool {
    x_envoy_headers(headers)
        .iter()
        .all(|h| h == "x-envoy-external-address" || h == "x-envoy-attempt-count")
}

async fn run(api: AdsApi, base_id: u32) {
    let Some(binary) = envoy_binary() else {
        return;
    };
    let backend = Backend::start("backend").await;
    let collector_port = free_port();
    let collector = format!("outbound|{collector_port}||{COLLECTOR_HOST}");
    let backend_cluster = format!("outbound|{}||backend.example.com", backend.port);
    let port = free_port();
    let dir = api_config_dir(port, backend.port);
    let admitpilot = Admitpilot::start(dir.path()).await;
    let yaml = bootstrap(api, admitpilot.xds_port, NODE_ID)
        .replace("NAMESPACE: default", "NAMESPACE: higress-system")
        .replace("app: e2e", "istio: ingressgateway");
    let envoy = EnvoyProcess::start(&binary, &yaml, base_id).await;
    let gw = Gateway {
        backend: &backend,
        http: client(),
        base: format!("http://127.0.0.1:{port}"),
        dir: dir.path(),
    };

    // Baseline, without higress-config: routed, uncompressed, and the router adds its x-envoy-* headers.
    wait_for_response(&gw.http, &format!("{}/api/x", gw.base), 200, "backend").await;
    let (response, upstream) = gw.request("/api/big").await;
    assert!(response.headers().get("content-encoding").is_none());
    assert!(response
        .headers()
        .contains_key("x-envoy-upstream-service-time"));
    assert!(!x_envoy_headers(&upstream).is_empty(), "{upstream:?}");
    assert!(!upstream.contains_key("x-real-ip"));
    envoy.assert_nothing_rejected("baseline").await;

    // Tracing whose collector does not exist yet: the listener is served without it (Envoy would reject a
    // listener naming a cluster it does not have), and tracing follows as soon as the collector is created.
    // (The same ConfigMap as the zipkin step below, which then finds it in force.)
    gw.configure(&format!(
        "tracing:\n  enable: true\n  sampling: 50\n  timeout: 750\n  \
         zipkin: {{service: {COLLECTOR_HOST}, port: {collector_port}}}\ngzip: {{enable: false}}\n"
    ));
    let http = client();
    let metrics = format!("{}/metrics", admitpilot.admin);
    let deadline = tokio::time::Instant::now() + CONVERGE;
    while !get(&http, &metrics).await.is_some_and(|(_, text)| {
        text.contains(r#"admitpilot_xds_left_out_features_total{effect="left_out"} 1"#)
    }) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "tracing was never left out:\n{}",
            admitpilot.log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    wait_for_response(&gw.http, &format!("{}/api/x", gw.base), 200, "backend").await;
    assert!(tracer(&envoy.config_dump_json().await).is_none());
    envoy
        .assert_nothing_rejected("tracing before its collector exists")
        .await;
    write(
        dir.path(),
        "collector.yaml",
        &service_entry("collector", COLLECTOR_HOST, collector_port),
    );
    envoy
        .wait_for_config("zipkin once its collector exists", |d| {
            tracer(d).is_some_and(|t| t["name"] == "envoy.tracers.zipkin")
                && cluster(d, &collector).is_some()
        })
        .await;
    envoy
        .assert_nothing_rejected("tracing after its collector was created")
        .await;

    // Tracing, one tracer after the other; gzip stays off meanwhile.
    let tracers = [
        (
            "zipkin",
            format!("{{service: {COLLECTOR_HOST}, port: {collector_port}}}"),
            "envoy.tracers.zipkin",
        ),
        (
            "opentelemetry",
            format!("{{service: {COLLECTOR_HOST}, port: {collector_port}}}"),
            "envoy.tracers.opentelemetry",
        ),
        (
            "skywalking",
            format!(
                "{{service: {COLLECTOR_HOST}, port: {collector_port}, access_token: e2e-token}}"
            ),
            "envoy.tracers.skywalking",
        ),
    ];
    for (key, block, provider) in &tracers {
        gw.configure(&format!(
            "tracing:\n  enable: true\n  sampling: 50\n  timeout: 750\n  {key}: {block}\ngzip: {{enable: false}}\n"
        ));
        // Listeners and clusters arrive separately (Delta in particular): wait until both show this tracer.
        let dump = envoy
            .wait_for_config(provider, |d| {
                tracer(d).is_some_and(|t| t["name"] == *provider)
                    && cluster(d, &collector)
                        .is_some_and(|c| collector_http2(c).is_some() == (*key != "zipkin"))
            })
            .await;
        let hcm = dumped_hcms(&dump)[0];
        assert_eq!(hcm["tracing"]["random_sampling"]["value"], 50.0, "{key}");
        let config = &tracer(&dump).unwrap()["typed_config"];
        let grpc_cluster = config.pointer("/grpc_service/envoy_grpc/cluster_name");
        match *key {
            "zipkin" => {
                assert_eq!(config["collector_cluster"], collector.as_str(), "{config}");
                assert_eq!(config["collector_endpoint"], "/api/v2/spans");
                assert_eq!(config["collector_endpoint_version"], "HTTP_JSON");
            }
            "opentelemetry" => {
                assert_eq!(
                    grpc_cluster,
                    Some(&Value::from(collector.as_str())),
                    "{config}"
                );
                assert_eq!(config["grpc_service"]["timeout"], "0.750s");
                assert_eq!(config["service_name"], "higress-gateway.higress-system");
            }
            _ => {
                assert_eq!(
                    grpc_cluster,
                    Some(&Value::from(collector.as_str())),
                    "{config}"
                );
                // Envoy redacts the token in /config_dump; its presence is what can be checked.
                assert_eq!(config["client_config"]["backend_token"], "[redacted]");
            }
        }
        let hcm = dumped_hcms(&dump)[0];
        assert_eq!(hcm["tracing"]["spawn_upstream_span"], true, "{hcm}");
        let collector_cluster = cluster(&dump, &collector).expect("collector cluster");
        let http2 = collector_http2(collector_cluster);
        // gRPC collectors get HTTP/2; zipkin (HTTP/JSON) keeps the cluster as it is.
        assert_eq!(
            http2.is_some(),
            *key != "zipkin",
            "{key}: {collector_cluster}"
        );
        wait_for_response(&gw.http, &format!("{}/api/x", gw.base), 200, "backend").await;
        envoy.assert_nothing_rejected(key).await;
    }

    // gzip on: a large enough text/plain response is compressed; off again: it is not.
    gw.configure("gzip:\n  enable: true\n  minContentLength: 256\n  contentType: [text/plain]\n");
    envoy
        .wait_for_config("no tracer", |d| {
            tracer(d).is_none() && !dumped_hcms(d).is_empty()
        })
        .await;
    gw.wait_for_traffic("a gzip-encoded response", "/api/big", |r, _| {
        r.headers()
            .get("content-encoding")
            .is_some_and(|v| v == "gzip")
    })
    .await;
    let (response, _) = gw.request("/api/big").await;
    let compressed = response.bytes().await.unwrap();
    assert!(
        compressed.len() < big_body().len() / 4,
        "{} bytes",
        compressed.len()
    );
    // A body below minContentLength stays as it is.
    let (response, _) = gw.request("/api/small").await;
    assert!(response.headers().get("content-encoding").is_none());
    let dump = envoy.config_dump_json().await;
    assert!(has_filter(&dump, "envoy.filters.http.compressor"));
    envoy.assert_nothing_rejected("gzip on").await;
    gw.configure("gzip:\n  enable: false\n");
    envoy
        .wait_for_config("no compressor", |d| {
            !dumped_hcms(d).is_empty() && !has_filter(d, "envoy.filters.http.compressor")
        })
        .await;
    gw.wait_for_traffic("an uncompressed response", "/api/big", |r, _| {
        r.headers().get("content-encoding").is_none()
    })
    .await;
    envoy.assert_nothing_rejected("gzip off").await;

    // Downstream and upstream options.
    gw.configure(
        "gzip: {enable: false}\n\
         downstream:\n  idleTimeout: 123\n  connectionBufferLimits: 65536\n  maxRequestHeadersKb: 70\n  routeTimeout: 17\n\
         \x20 http2: {maxConcurrentStreams: 77, initialStreamWindowSize: 131072, initialConnectionWindowSize: 2097152}\n\
         upstream:\n  idleTimeout: 11\n  connectionBufferLimits: 20000\n",
    );
    let dump = envoy
        .wait_for_config("the downstream options", |d| {
            dumped_hcms(d)
                .first()
                .is_some_and(|hcm| hcm["max_request_headers_kb"] == 70)
        })
        .await;
    for hcm in dumped_hcms(&dump) {
        assert_eq!(hcm["common_http_protocol_options"]["idle_timeout"], "123s");
        assert_eq!(hcm["stream_idle_timeout"], "123s");
        assert_eq!(hcm["http2_protocol_options"]["max_concurrent_streams"], 77);
        assert_eq!(
            hcm["http2_protocol_options"]["initial_stream_window_size"],
            131072
        );
        assert_eq!(
            hcm["http2_protocol_options"]["initial_connection_window_size"],
            2097152
        );
    }
    for listener in dumped(&dump, Dumped::Listener) {
        assert_eq!(
            listener["per_connection_buffer_limit_bytes"], 65536,
            "{listener}"
        );
    }
    let dump = envoy
        .wait_for_config("the route timeout", |d| {
            let routes: Vec<&Value> = dumped(d, Dumped::RouteConfig)
                .into_iter()
                .flat_map(|rc| rc["virtual_hosts"].as_array().into_iter().flatten())
                .flat_map(|vh| vh["routes"].as_array().into_iter().flatten())
                .filter(|r| r.get("route").is_some())
                .collect();
            // Clusters arrive apart from routes (Delta in particular): wait for the upstream options too.
            let clusters = dumped(d, Dumped::Cluster);
            !routes.is_empty()
                && routes.iter().all(|r| r["route"]["timeout"] == "17s")
                && clusters
                    .iter()
                    .all(|c| upstream_idle_timeout(c) == Some(&Value::from("11s")))
        })
        .await;
    let clusters = dumped(&dump, Dumped::Cluster);
    assert!(clusters
        .iter()
        .any(|c| c["name"] == backend_cluster.as_str()));
    for cluster in clusters {
        assert_eq!(
            upstream_idle_timeout(cluster),
            Some(&Value::from("11s")),
            "{cluster}"
        );
        assert_eq!(cluster.get("common_http_protocol_options"), None);
        assert_eq!(
            cluster["per_connection_buffer_limit_bytes"], 20000,
            "{cluster}"
        );
    }
    wait_for_response(&gw.http, &format!("{}/api/x", gw.base), 200, "backend").await;
    envoy.assert_nothing_rejected("downstream/upstream").await;

    // addXRealIpHeader: the backend sees the client's address.
    gw.configure("gzip: {enable: false}\naddXRealIpHeader: true\n");
    gw.wait_for_traffic("x-real-ip at the backend", "/api/x", |_, upstream| {
        upstream.get("x-real-ip").is_some_and(|v| v == "127.0.0.1")
    })
    .await;
    envoy.assert_nothing_rejected("addXRealIpHeader").await;

    // disableXEnvoyHeaders: the router's `suppress_envoy_headers`. The response carries no x-envoy-* header. Upstream,
    // Envoy still sends the two it does not count as the router's own (its docs on suppress_envoy_headers): the
    // connection manager's `x-envoy-external-address` and `x-envoy-attempt-count` (asked for by the virtual host's
    // `include_request_attempt_count`, as on Istio gateways). Higress's gateway behaves the same.
    gw.configure("gzip: {enable: false}\ndisableXEnvoyHeaders: true\n");
    let dump = envoy
        .wait_for_config("suppress_envoy_headers", |d| {
            router(d).is_some_and(|r| r["typed_config"]["suppress_envoy_headers"] == true)
        })
        .await;
    assert_eq!(
        router(&dump).unwrap()["typed_config"].get("start_child_span"),
        None
    );
    gw.wait_for_traffic("no x-envoy-* headers", "/api/x", |response, upstream| {
        x_envoy_headers(response.headers()).is_empty() && no_router_x_envoy_headers(upstream)
    })
    .await;
    envoy.assert_nothing_rejected("disableXEnvoyHeaders").await;

    // Everything at once: the router keeps suppress_envoy_headers (REPLACE) with tracing on.
    gw.configure(&format!(
        "tracing:\n  enable: true\n  zipkin: {{service: {COLLECTOR_HOST}, port: {collector_port}}}\n\
         gzip:\n  enable: true\n  minContentLength: 256\n  contentType: [text/plain]\n\
         downstream: {{idleTimeout: 90, routeTimeout: 5}}\nupstream: {{idleTimeout: 9}}\n\
         addXRealIpHeader: true\ndisableXEnvoyHeaders: true\n"
    ));
    let dump = envoy
        .wait_for_config("every item together", |d| {
            tracer(d).is_some() && has_filter(d, "envoy.filters.http.compressor")
        })
        .await;
    let router_config = &router(&dump).unwrap()["typed_config"];
    assert_eq!(
        router_config["suppress_envoy_headers"], true,
        "{router_config}"
    );
    assert_eq!(
        router_config.get("start_child_span"),
        None,
        "{router_config}"
    );
    assert_eq!(
        dumped_hcms(&dump)[0]["tracing"]["spawn_upstream_span"],
        true
    );
    gw.wait_for_traffic("every item in traffic", "/api/big", |response, upstream| {
        response
            .headers()
            .get("content-encoding")
            .is_some_and(|v| v == "gzip")
            && x_envoy_headers(response.headers()).is_empty()
            && no_router_x_envoy_headers(upstream)
            && upstream.get("x-real-ip").is_some_and(|v| v == "127.0.0.1")
    })
    .await;
    envoy.assert_nothing_rejected("everything").await;
    drop(envoy);
    drop(admitpilot);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn higress_config_reaches_envoy_sotw() {
    run(AdsApi::Sotw, 44_100 + std::process::id() % 1000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn higress_config_reaches_envoy_delta() {
    run(AdsApi::Delta, 45_100 + std::process::id() % 1000).await;
}

/// The HTTP/2 protocol options of a cluster (set on gRPC tracing collectors), if any.
fn collector_http2(cluster: &Value) -> Option<&Value> {
    cluster.pointer(
        "/typed_extension_protocol_options/envoy.extensions.upstreams.http.v3.HttpProtocolOptions/explicit_http_config/http2_protocol_options",
    )
}
