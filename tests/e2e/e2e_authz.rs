//! AuthorizationPolicy enforced on a gateway, end to end: the real `admitpilot serve --config-dir` binary, a real
//! Envoy 1.40 (SotW, default `initial_fetch_timeout`) and a backend on 127.0.0.1. Policies written into the config
//! folder select the gateway (`istio: ingressgateway` in its namespace) and are checked by sending real HTTP
//! through Envoy: a DENY path gives 403, an ALLOW policy admits only its methods or a header condition, a remote IP
//! block denies, a dry-run policy only counts (shadow-rule stat) and removing the policies restores access. A TCP
//! server of the same gateway gets the network RBAC filter: a DENY rule on a path denies every connection there,
//! as in Istio. A policy attached by `targetRefs` to the gateway's Gateway API Gateway (the pods'
//! `gateway.networking.k8s.io/gateway-name` label) applies; one naming another Gateway does not. Every
//! `*update_rejected` stat stays 0.
//!
//! Skips with a message when Envoy is not installed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::envoy;
use support::pipeline;

use envoy::*;

use pipeline::*;
use serde_json::{json, Value};

const NODE_ID: &str = "router~127.0.0.1~gw-authz.default~default.svc.cluster.local";
const DENIED: &str = "RBAC: access denied";

/// An AuthorizationPolicy `default/<name>` selecting the gateway.
fn policy(name: &str, spec: Value) -> String {
    let mut spec = spec;
    spec["selector"] = json!({"matchLabels": {"istio": "ingressgateway"}});
    let object = json!({
        "apiVersion": "security.istio.io/v1",
        "kind": "AuthorizationPolicy",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    });
    serde_yaml_ng::to_string(&object).unwrap()
}

/// Polls `url` (through the TCP server) until the connection is refused or closed without an answer.
async fn wait_for_tcp_denied(http: &reqwest::Client, url: &str) {
    let deadline = tokio::time::Instant::now() + CONVERGE;
    while let Some(answer) = get(http, url).await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{url} still answers: {answer:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

async fn status(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    header: Option<&str>,
) -> u16 {
    let mut request = http.request(method, url);
    if let Some(value) = header {
        request = request.header("x-token", value);
    }
    request.send().await.unwrap().status().as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorization_policies_are_enforced_on_the_gateway() {
    let Some(binary) = envoy_binary() else {
        return;
    };
    let backend = Backend::start("backend").await;
    let (port, dir) = catch_all_config_dir(backend.port);
    // A TCP server too, proxying to the same backend: HTTP through it is plain bytes to Envoy.
    let tcp_port = free_port();
    write(
        dir.path(),
        "gateway.yaml",
        &format!(
            "{}  - port: {{number: {tcp_port}, name: tcp, protocol: TCP}}\n    hosts: [\"*\"]\n",
            gateway(port)
        ),
    );
    write(
        dir.path(),
        "tcp.yaml",
        &format!(
            "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: tcp, namespace: default}}\n\
             spec:\n  hosts: [\"*\"]\n  gateways: [gw]\n  tcp:\n  - match: [{{port: {tcp_port}}}]\n    route:\n\
             \x20   - destination: {{host: backend.example.com, port: {{number: {}}}}}\n",
            backend.port
        ),
    );
    let admitpilot = Admitpilot::start(dir.path()).await;
    let bootstrap = bootstrap(AdsApi::Sotw, admitpilot.xds_port, NODE_ID)
        .replace("app: e2e", "istio: ingressgateway");
    let envoy = EnvoyProcess::start(&binary, &bootstrap, 52_100).await;
    let http = unpooled_client();
    let base = format!("http://127.0.0.1:{port}");
    let tcp = format!("http://127.0.0.1:{tcp_port}/x");
    wait_for_response(&http, &format!("{base}/admin/x"), 200, "backend").await;
    wait_for_response(&http, &tcp, 200, "backend").await;

    // DENY a path: 403 there, the rest untouched.
    write(
        dir.path(),
        "deny-admin.yaml",
        &policy(
            "deny-admin",
            json!({"action": "DENY",
            "rules": [{"to": [{"operation": {"paths": ["/admin*"]}}]}]}),
        ),
    );
    wait_for_response(&http, &format!("{base}/admin/x"), 403, DENIED).await;
    wait_for_response(&http, &format!("{base}/api/x"), 200, "backend").await;
    // On the TCP server the rule applies without its HTTP-only path: every connection is denied (as in Istio).
    wait_for_tcp_denied(&http, &tcp).await;

    // DENY from a remote IP block (the client is 127.0.0.1): only the matching block denies.
    write(
        dir.path(),
        "deny-ip.yaml",
        &policy(
            "deny-ip",
            json!({"action": "DENY", "rules": [
            {"from": [{"source": {"remoteIpBlocks": ["127.0.0.1/32"]}}],
             "to": [{"operation": {"paths": ["/blocked*"]}}]},
            {"from": [{"source": {"remoteIpBlocks": ["10.0.0.0/8"]}}],
             "to": [{"operation": {"paths": ["/api*"]}}]}]}),
        ),
    );
    wait_for_response(&http, &format!("{base}/blocked"), 403, DENIED).await;
    wait_for_response(&http, &format!("{base}/api/x"), 200, "backend").await;

    // ALLOW GET, or any method with the right header: everything else is denied.
    write(
        dir.path(),
        "allow.yaml",
        &policy(
            "allow",
            json!({"action": "ALLOW", "rules": [
            {"to": [{"operation": {"methods": ["GET"]}}]},
            {"when": [{"key": "request.headers[x-token]", "values": ["let-me-in"]}]}]}),
        ),
    );
    let api = format!("{base}/api/x");
    let deadline = tokio::time::Instant::now() + CONVERGE;
    while status(&http, reqwest::Method::POST, &api, None).await != 403 {
        assert!(tokio::time::Instant::now() < deadline, "POST never denied");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(status(&http, reqwest::Method::GET, &api, None).await, 200);
    assert_eq!(
        status(&http, reqwest::Method::POST, &api, Some("let-me-in")).await,
        200
    );
    assert_eq!(
        status(&http, reqwest::Method::POST, &api, Some("wrong")).await,
        403
    );
    // DENY still comes first.
    assert_eq!(
        status(
            &http,
            reqwest::Method::GET,
            &format!("{base}/admin/x"),
            None
        )
        .await,
        403
    );

    // A dry-run DENY only counts.
    let mut dry_run: Value = serde_yaml_ng::from_str(&policy(
        "dry-run",
        json!({"action": "DENY", "rules": [{"to": [{"operation": {"paths": ["/api*"]}}]}]}),
    ))
    .unwrap();
    dry_run["metadata"]["annotations"] = json!({"istio.io/dry-run": "true"});
    write(
        dir.path(),
        "dry-run.yaml",
        &serde_yaml_ng::to_string(&dry_run).unwrap(),
    );
    let deadline = tokio::time::Instant::now() + CONVERGE;
    loop {
        assert_eq!(get(&http, &api).await.unwrap(), (200, "backend".into()));
        let shadow: u64 = envoy
            .stats("istio_dry_run_deny_")
            .await
            .into_iter()
            .filter(|(name, _)| name.ends_with("shadow_denied"))
            .map(|(_, value)| value)
            .sum();
        if shadow > 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no shadow denial counted: {:?}",
            envoy.stats("rbac").await
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    // Removing the policies restores access.
    for name in ["deny-admin", "deny-ip", "allow", "dry-run"] {
        std::fs::remove_file(dir.path().join(format!("{name}.yaml"))).unwrap();
    }
    wait_for_response(&http, &format!("{base}/admin/x"), 200, "backend").await;
    wait_for_response(&http, &format!("{base}/blocked"), 200, "backend").await;
    assert_eq!(status(&http, reqwest::Method::POST, &api, None).await, 200);
    wait_for_response(&http, &tcp, 200, "backend").await;
    envoy
        .assert_nothing_rejected("authorization policies")
        .await;
}

/// `remoteIpBlocks` behind a load balancer: the gateway's node metadata says one trusted proxy stands in front
/// (`PROXY_CONFIG.gatewayTopology.numTrustedProxies: 1`, as Istio's agent sends it), so the client address is the
/// last `X-Forwarded-For` entry, and a DENY on a block of client addresses applies to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_ip_blocks_read_x_forwarded_for_behind_trusted_proxies() {
    let Some(binary) = envoy_binary() else {
        return;
    };
    let backend = Backend::start("backend").await;
    let (port, dir) = catch_all_config_dir(backend.port);
    write(
        dir.path(),
        "deny-clients.yaml",
        &policy(
            "deny-clients",
            json!({"action": "DENY", "rules": [{"from": [{"source": {"remoteIpBlocks": ["203.0.113.0/24"]}}]}]}),
        ),
    );
    let admitpilot = Admitpilot::start(dir.path()).await;
    let bootstrap = bootstrap(AdsApi::Sotw, admitpilot.xds_port, NODE_ID).replace(
        "LABELS: { app: e2e }",
        "LABELS: { istio: ingressgateway }, PROXY_CONFIG: { gatewayTopology: { numTrustedProxies: 1 } }",
    );
    let envoy = EnvoyProcess::start(&binary, &bootstrap, 52_150).await;
    let http = client();
    let url = format!("http://127.0.0.1:{port}/x");
    wait_for_response(&http, &url, 200, "backend").await;
    let from = |client: &'static str| {
        let request = http.get(&url).header("x-forwarded-for", client);
        async move { request.send().await.unwrap().status().as_u16() }
    };
    let deadline = tokio::time::Instant::now() + CONVERGE;
    while from("203.0.113.9").await != 403 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the client block was never denied"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(from("198.51.100.1").await, 200);
    envoy.assert_nothing_rejected("trusted proxies").await;
    drop(admitpilot);
}

/// `targetRefs`: a DENY attached to the gateway's Gateway API Gateway applies to it, one attached to another
/// Gateway does not; removing the first restores access.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policies_attached_by_target_refs_to_the_gateway_api_gateway_apply() {
    let Some(binary) = envoy_binary() else {
        return;
    };
    let backend = Backend::start("backend").await;
    let (port, dir) = catch_all_config_dir(backend.port);
    let attached = |name: &str, gateway: &str, path: &str| {
        let object = json!({
            "apiVersion": "security.istio.io/v1",
            "kind": "AuthorizationPolicy",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": gateway}],
                "action": "DENY",
                "rules": [{"to": [{"operation": {"paths": [path]}}]}],
            },
        });
        serde_yaml_ng::to_string(&object).unwrap()
    };
    write(
        dir.path(),
        "other.yaml",
        &attached("other", "internal", "/api*"),
    );
    let admitpilot = Admitpilot::start(dir.path()).await;
    let bootstrap = bootstrap(AdsApi::Sotw, admitpilot.xds_port, NODE_ID).replace(
        "LABELS: { app: e2e }",
        "LABELS: { istio: ingressgateway, \"gateway.networking.k8s.io/gateway-name\": public }",
    );
    let envoy = EnvoyProcess::start(&binary, &bootstrap, 52_175).await;
    let http = unpooled_client();
    let base = format!("http://127.0.0.1:{port}");
    wait_for_response(&http, &format!("{base}/admin/x"), 200, "backend").await;
    write(
        dir.path(),
        "mine.yaml",
        &attached("mine", "public", "/admin*"),
    );
    wait_for_response(&http, &format!("{base}/admin/x"), 403, DENIED).await;
    // The policy on the other Gateway never applied.
    wait_for_response(&http, &format!("{base}/api/x"), 200, "backend").await;
    std::fs::remove_file(dir.path().join("mine.yaml")).unwrap();
    wait_for_response(&http, &format!("{base}/admin/x"), 200, "backend").await;
    envoy.assert_nothing_rejected("target refs").await;
    drop(admitpilot);
}
