//! CUSTOM AuthorizationPolicy enforced on a gateway, end to end: the real `admitpilot serve --config-dir` binary,
//! a real Envoy 1.40 (SotW, default `initial_fetch_timeout`), a backend and an external authorization server (plain
//! HTTP, written here) on 127.0.0.1. The mesh config (`istio` ConfigMap in `istio-system`) in the folder declares
//! the provider, a ServiceEntry gives its address. Checked with real HTTP through Envoy:
//! - only requests the policy's rules match reach the server; it denies (its 403 and body reach the client) or
//!   allows (the headers it names reach the backend);
//! - a policy naming a provider the mesh config does not define denies what its rules match (as istiod does), the
//!   webhook warns about it (IST0101), and an invalid mesh config is denied at admission naming the field.
//!
//! Every `*update_rejected` stat stays 0. Skips with a message when Envoy is not installed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::envoy;
use support::pipeline;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use envoy::*;
use pipeline::*;
use serde_json::json;

const NODE_ID: &str = "router~127.0.0.1~gw-ext-authz.default~default.svc.cluster.local";
const DENIED_BY_SERVER: &str = "denied by ext-authz";

/// An external authorization server: allows requests carrying `x-allow: yes` (answering with `x-authz-user`),
/// denies the rest with 403 and a body; counts the checks it answers.
struct AuthzServer {
    port: u16,
    checks: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl AuthzServer {
    async fn start() -> AuthzServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let checks = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&checks);
        let app = axum::Router::new().fallback(move |headers: axum::http::HeaderMap| {
            let counted = Arc::clone(&counted);
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
                if headers.get("x-allow").is_some_and(|v| v == "yes") {
                    (
                        axum::http::StatusCode::OK,
                        [("x-authz-user", "alice")],
                        String::new(),
                    )
                } else {
                    (
                        axum::http::StatusCode::FORBIDDEN,
                        [("x-authz-user", "nobody")],
                        DENIED_BY_SERVER.to_string(),
                    )
                }
            }
        });
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        AuthzServer { port, checks, task }
    }

    fn checks(&self) -> usize {
        self.checks.load(Ordering::SeqCst)
    }
}

impl Drop for AuthzServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The `istio` ConfigMap with one HTTP external authorization provider `ext-authz` on `authz.example.com`.
fn mesh_config(authz_port: u16) -> serde_json::Value {
    let mesh = format!(
        "extensionProviders:\n- name: ext-authz\n  envoyExtAuthzHttp:\n    service: authz.example.com\n    port: {authz_port}\n    includeRequestHeadersInCheck: [x-allow]\n    headersToUpstreamOnAllow: [x-authz-user]\n"
    );
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "istio", "namespace": "istio-system"}, "data": {"mesh": mesh}})
}

/// A CUSTOM policy `default/custom` selecting the gateway, sending `/admin*` requests to `provider`.
fn custom_policy(provider: &str) -> serde_json::Value {
    json!({"apiVersion": "security.istio.io/v1", "kind": "AuthorizationPolicy",
        "metadata": {"name": "custom", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"istio": "ingressgateway"}}, "action": "CUSTOM",
            "provider": {"name": provider},
            "rules": [{"to": [{"operation": {"paths": ["/admin*"]}}]}]}})
}

fn yaml(value: &serde_json::Value) -> String {
    serde_yaml_ng::to_string(value).unwrap()
}

async fn get_with(http: &reqwest::Client, url: &str, allow: bool) -> (u16, String) {
    let mut request = http.get(url);
    if allow {
        request = request.header("x-allow", "yes");
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_policies_ask_the_extension_provider() {
    let Some(binary) = envoy_binary() else {
        return;
    };
    let backend = Backend::start("backend").await;
    let authz = AuthzServer::start().await;
    let (port, dir) = catch_all_config_dir(backend.port);
    let admitpilot = Admitpilot::start(dir.path()).await;
    let bootstrap = bootstrap(AdsApi::Sotw, admitpilot.xds_port, NODE_ID)
        .replace("app: e2e", "istio: ingressgateway");
    let envoy = EnvoyProcess::start(&binary, &bootstrap, 53_100).await;
    let http = unpooled_client();
    let base = format!("http://127.0.0.1:{port}");
    let admin = format!("{base}/admin/x");
    wait_for_response(&http, &admin, 200, "backend").await;

    // The provider, its address and the policy.
    write(
        dir.path(),
        "authz.yaml",
        &service_entry("authz", "authz.example.com", authz.port),
    );
    write(dir.path(), "mesh.yaml", &yaml(&mesh_config(authz.port)));
    write(
        dir.path(),
        "custom.yaml",
        &yaml(&custom_policy("ext-authz")),
    );
    wait_for_response(&http, &admin, 403, DENIED_BY_SERVER).await;

    // Allowed by the server: the backend answers and gets the header the server named.
    assert_eq!(
        get_with(&http, &admin, true).await,
        (200, "backend".to_string())
    );
    let seen = backend.last_request().unwrap();
    assert_eq!(seen.get("x-authz-user").unwrap(), "alice");

    // Requests the rules do not match are not checked.
    let before = authz.checks();
    assert_eq!(
        get_with(&http, &format!("{base}/api/x"), false).await,
        (200, "backend".to_string())
    );
    assert_eq!(
        authz.checks(),
        before,
        "/api was sent to the authorization server"
    );

    // The webhook warns about a provider the mesh config lacks; the gateway then denies what the rules match.
    let review = admitpilot.review(custom_policy("missing")).await;
    assert_eq!(review["allowed"], true, "{review}");
    let warnings = review["warnings"].to_string();
    assert!(
        warnings.contains("IST0101") && warnings.contains("spec.provider.name"),
        "{review}"
    );
    write(dir.path(), "custom.yaml", &yaml(&custom_policy("missing")));
    wait_for_response(&http, &admin, 403, "RBAC: access denied").await;
    assert_eq!(
        get_with(&http, &format!("{base}/api/x"), false).await,
        (200, "backend".to_string())
    );

    // An invalid mesh config is denied at admission, naming the field.
    let mut bad = mesh_config(0);
    bad["data"]["mesh"] = json!("extensionProviders:\n- name: ext-authz\n  envoyExtAuthzHttp: {service: authz.example.com, port: 0}\n");
    let review = admitpilot.review(bad).await;
    assert_eq!(review["allowed"], false, "{review}");
    let message = review["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("data.mesh.extensionProviders[0].envoyExtAuthzHttp.port")
            && message.contains("port number 0 must be in the range 1..65535"),
        "{review}"
    );

    envoy.assert_nothing_rejected("CUSTOM policies").await;
    drop(envoy);
    drop(admitpilot);
}
