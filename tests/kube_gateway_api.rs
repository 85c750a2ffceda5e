//! The Kubernetes side of the Gateway API on a real kube-apiserver (`support::kube_server`), with `admitpilot serve
//! --kube` and a real Envoy 1.40 (default `initial_fetch_timeout`) whose node metadata names the Gateway:
//! - a listener's `allowedRoutes` namespace selector follows the Namespace's labels as `kubectl label` changes them:
//!   the route of a namespace that gains the label is served, and no longer once it loses it;
//! - a BackendTLSPolicy's CA ConfigMap, created with `kubectl` after the policy, reaches Envoy as the SDS secret
//!   `configmap://<ns>/<name>-cacert` holding its `ca.crt`; deleted, it is withdrawn; a ConfigMap without `ca.crt`
//!   is not read;
//! - Envoy rejects no update and keeps running.
//!
//! The API server refuses EndpointSlices on 127.0.0.1, so the backend Services here have no endpoints: a served route
//! answers 503 (no healthy upstream) where an unserved one answers 404. Traffic through a BackendTLSPolicy to a TLS
//! backend is `tests/e2e_gateway_api_tls.rs` (folder source).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/envoy.rs"]
mod envoy;
#[path = "support/kube_server.rs"]
mod kube_server;
#[path = "support/pipeline.rs"]
mod pipeline;
#[path = "support/tls_backends.rs"]
mod tls_backends;

use std::path::Path;
use std::time::Duration;

use envoy::{AdsApi, EnvoyProcess};
use kube_server::Kube;
use pipeline::Admitpilot;

const CRDS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/crds/gateway-api");
const WAIT: Duration = Duration::from_secs(60);

/// A Service `name` in `ns` on port 80, without endpoints.
fn service(ns: &str, name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: {ns}}}\nspec: {{ports: [{{name: http, port: 80}}]}}\n"
    )
}

/// Whether Envoy's dynamic secrets include `name`, and the CA it holds (inline bytes, base64 in the dump).
fn secret_ca(dump: &serde_json::Value, name: &str) -> Option<String> {
    dump["configs"]
        .as_array()?
        .iter()
        .flat_map(|c| c["dynamic_active_secrets"].as_array().into_iter().flatten())
        .find(|s| s["name"] == name)
        .map(|s| s["secret"]["validation_context"]["trusted_ca"]["inline_bytes"].to_string())
}

/// Polls `url` until it answers `status` (and a body containing `body`), for at most [`WAIT`].
async fn wait_for(url: &str, status: u16, body: &str, admitpilot: &Admitpilot) {
    let http = envoy::client();
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut last = None;
    loop {
        let got = envoy::get(&http, url).await;
        if got
            .as_ref()
            .is_some_and(|(s, b)| *s == status && b.contains(body))
        {
            return;
        }
        last = got.or(last);
        assert!(
            tokio::time::Instant::now() < deadline,
            "{url} never answered {status} {body:?}; last {last:?}\n{}",
            admitpilot.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_labels_and_ca_configmaps_are_followed_from_the_api_server() {
    let Some(envoy_bin) = envoy::envoy_binary() else {
        return;
    };
    let Some(kube) = Kube::shared("kube-gwapi").await else {
        return;
    };
    kube.install_crds(Path::new(CRDS)).await;
    let ns = kube.namespace().to_string();
    let team = format!("{ns}-team");
    kube.create_namespace(&team).await;
    let port = envoy::free_port();
    let objects = format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: admitpilot-{ns}}}
spec: {{controllerName: admitpilot.io/gateway-controller}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: {ns}}}
spec:
  gatewayClassName: admitpilot-{ns}
  listeners:
  - name: http
    port: {port}
    protocol: HTTP
    allowedRoutes: {{namespaces: {{from: Selector, selector: {{matchLabels: {{shared-gateway: 'yes'}}}}}}}}
---
{}---
{}---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {{name: secure, namespace: {team}}}
spec:
  targetRefs: [{{group: '', kind: Service, name: secure}}]
  validation:
    caCertificateRefs: [{{group: '', kind: ConfigMap, name: backend-ca}}]
    hostname: secure.example
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: unrelated, namespace: {team}}}
data: {{color: blue}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: web, namespace: {team}}}
spec:
  parentRefs: [{{name: gw, namespace: {ns}}}]
  rules:
  - matches: [{{path: {{value: /web}}}}]
    backendRefs: [{{name: web, port: 80}}]
  - matches: [{{path: {{value: /secure}}}}]
    backendRefs: [{{name: secure, port: 80}}]
",
        service(&team, "web"),
        service(&team, "secure"),
    );
    kube.kubectl_ok(&["apply", "-f", "-"], Some(&objects)).await;
    let flags: Vec<String> = [
        "--xds-auth=none".to_string(),
        // CA bundles on an open xDS port only when asked (they are public, but the port verifies no one).
        "--xds-unauthenticated-secrets".to_string(),
        format!("--lease-namespace={ns}"),
        format!("--watch-namespaces={ns},{team}"),
        format!("--higress-namespace={ns}"),
        format!("--istio-namespace={ns}"),
    ]
    .into();
    let admitpilot = Admitpilot::start_kube(kube.kubeconfig(), None, &flags).await;
    let bootstrap = envoy::bootstrap(
        AdsApi::Delta,
        admitpilot.xds_port,
        "router~127.0.0.1~gw.x~x.svc.cluster.local",
    )
    .replace("NAMESPACE: default", &format!("NAMESPACE: {ns}"))
    .replace("app: e2e", "gateway.networking.k8s.io/gateway-name: gw");
    let envoy = EnvoyProcess::start(&envoy_bin, &bootstrap, 72).await;
    let url = |path: &str| format!("http://127.0.0.1:{port}{path}");

    // Before the label, the listener admits no route of the team namespace.
    wait_for(&url("/web"), 404, "", &admitpilot).await;
    // The team namespace gains the label the listener selects: its route is served (503: no endpoints).
    kube.kubectl_ok(&["label", "namespace", &team, "shared-gateway=yes"], None)
        .await;
    wait_for(&url("/web"), 503, "", &admitpilot).await;
    // The CA arrives: Envoy gets it as the policy's SDS secret.
    let name = format!("configmap://{team}/backend-ca-cacert");
    let ca_pem: String = tls_backends::Ca::new()
        .pem
        .lines()
        .map(|l| format!("    {l}\n"))
        .collect();
    let configmap = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: backend-ca, namespace: {team}}}\ndata:\n  ca.crt: |\n{ca_pem}"
    );
    kube.kubectl_ok(&["apply", "-f", "-"], Some(&configmap))
        .await;
    let dump = envoy
        .wait_for_config("the CA secret", |d| secret_ca(d, &name).is_some())
        .await;
    let held = secret_ca(&dump, &name).unwrap();
    assert!(!held.is_empty() && held != "null", "{held}");
    // Deleted: withdrawn (the policy's backend then has no CA, so no traffic).
    kube.kubectl_ok(&["-n", &team, "delete", "configmap", "backend-ca"], None)
        .await;
    envoy
        .wait_for_config("the CA secret withdrawn", |d| secret_ca(d, &name).is_none())
        .await;
    // The label goes: the route is no longer admitted by the listener.
    kube.kubectl_ok(&["label", "namespace", &team, "shared-gateway-"], None)
        .await;
    wait_for(&url("/web"), 404, "", &admitpilot).await;
    let configz = reqwest::get(format!("{}/debug/configz", admitpilot.admin))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        !configz.contains("\"unrelated\""),
        "a ConfigMap without ca.crt is not admitpilot's business"
    );
    envoy
        .assert_nothing_rejected("namespace labels and CA ConfigMaps")
        .await;
}
