//! The Kubernetes side of the Gateway API on a real kube-apiserver (`support::kube_server`), with `admitpilot serve
//! --kube` and a real Envoy 1.40 (default `initial_fetch_timeout`) whose node metadata names the Gateway. admitpilot
//! runs with the xDS security the chart ships: TLS on the xDS port and `--xds-auth=token`; the Envoy is a gateway of
//! the test's namespace, with a ServiceAccount that a Role lets get Secrets, a token for `admitpilot` minted with the
//! TokenRequest API, and a bootstrap that dials over TLS trusting admitpilot's CA and sends the token on every call:
//! - a listener's `allowedRoutes` namespace selector follows the Namespace's labels as `kubectl label` changes them:
//!   the route of a namespace that gains the label is served, and no longer once it loses it;
//! - a BackendTLSPolicy's CA ConfigMap, created with `kubectl` after the policy, reaches Envoy as the SDS secret
//!   `configmap://<ns>/<name>-cacert` holding its `ca.crt`; deleted, it is withdrawn; a ConfigMap without `ca.crt`
//!   is not read;
//! - Envoy rejects no update and keeps running.
//!
//! The API server refuses EndpointSlices on 127.0.0.1, so the backend Services here have no endpoints: a served route
//! answers 503 (no healthy upstream) where an unserved one answers 404. Traffic through a BackendTLSPolicy to a TLS
//! backend is `tests/e2e/e2e_gateway_api_tls.rs` (folder source).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::envoy;
use support::kube_server;
use support::pipeline;
use support::tls_backends;
use support::xds_auth;

use std::path::Path;
use std::time::Duration;

use envoy::{AdsApi, EnvoyProcess};
use kube_server::Kube;
use pipeline::Admitpilot;

const CRDS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/crds/gateway-api");
const WAIT: Duration = Duration::from_secs(60);
/// The gateway's ServiceAccount, in the test's namespace.
const ACCOUNT: &str = "gateway";

/// [`envoy::bootstrap`] as a gateway of `ns` runs it against admitpilot's authenticated xDS port on `xds_port`: over
/// TLS trusting the CA in the file `ca` (admitpilot's certificate is for 127.0.0.1), every call carrying `token`
/// (`authorization: Bearer`), node metadata naming the token's namespace and service account, and the Gateway.
fn gateway_bootstrap(xds_port: u16, ns: &str, ca: &Path, token: &str) -> String {
    let node_id = format!("router~127.0.0.1~gw.{ns}~{ns}.svc.cluster.local");
    let mut yaml = envoy::bootstrap(AdsApi::Delta, xds_port, &node_id);
    let tls = format!(
        r#"    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
        common_tls_context:
          alpn_protocols: [h2]
          validation_context:
            trusted_ca: {{ filename: "{}" }}
            match_typed_subject_alt_names: [{{ san_type: IP_ADDRESS, matcher: {{ exact: 127.0.0.1 }} }}]
    load_assignment:
"#,
        ca.display()
    );
    for (written, here) in [
        (
            "NAMESPACE: default",
            format!("NAMESPACE: {ns}, SERVICE_ACCOUNT: {ACCOUNT}"),
        ),
        (
            "app: e2e",
            "gateway.networking.k8s.io/gateway-name: gw".to_string(),
        ),
        (
            "- envoy_grpc: { cluster_name: xds_cluster }\n",
            format!(
                "- envoy_grpc: {{ cluster_name: xds_cluster }}\n      initial_metadata: [{{ key: authorization, value: \"Bearer {token}\" }}]\n"
            ),
        ),
        ("    load_assignment:\n", tls),
    ] {
        assert!(
            yaml.contains(written),
            "envoy::bootstrap no longer has {written:?}"
        );
        yaml = yaml.replacen(written, &here, 1);
    }
    yaml
}

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
    // The gateway's identity, as the chart gives it: a ServiceAccount that may get the Secrets of its namespace (what
    // admitpilot asks with a SubjectAccessReview before it sends a certificate), and a token for admitpilot that
    // outlives the test (admitpilot ends the stream when it expires).
    kube.create_service_account(ACCOUNT).await;
    let rbac = format!(
        "apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: gateway-secrets, namespace: {ns}}}
rules: [{{apiGroups: [''], resources: [secrets], verbs: [get]}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: gateway-secrets, namespace: {ns}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: gateway-secrets}}
subjects: [{{kind: ServiceAccount, name: {ACCOUNT}, namespace: {ns}}}]
"
    );
    kube.kubectl_ok(&["apply", "-f", "-"], Some(&rbac)).await;
    let token = kube.token(&ns, ACCOUNT, Some("admitpilot"), "1h").await;
    // TLS on the xDS port (a CA and a certificate for 127.0.0.1) and tokens checked by TokenReview.
    let pki = xds_auth::Pki::new();
    let flags: Vec<String> = [
        format!("--xds-tls-cert={}", pki.files.cert.display()),
        format!("--xds-tls-key={}", pki.files.key.display()),
        "--xds-auth=token".to_string(),
        "--xds-token-audience=admitpilot".to_string(),
        format!("--lease-namespace={ns}"),
        format!("--watch-namespaces={ns},{team}"),
        format!("--higress-namespace={ns}"),
        format!("--istio-namespace={ns}"),
    ]
    .into();
    let admitpilot = Admitpilot::start_kube(kube.kubeconfig(), None, &flags).await;
    let bootstrap = gateway_bootstrap(admitpilot.xds_port, &ns, &pki.ca, &token);
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
