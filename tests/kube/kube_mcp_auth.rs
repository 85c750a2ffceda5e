//! admitpilot's own MCP client against an authenticated admitpilot, on a REAL kube-apiserver (`scripts/kube-up`,
//! `ADMITPILOT_KUBECONFIG`): A serves `--kube` with TLS and token-checked xDS (the chart's default); B subscribes
//! with `--mcp-source-ca` and `--mcp-source-token-file`, as a ServiceAccount that RBAC lets list the Istio config,
//! and takes A's VirtualService, but not A's EnvoyFilter, which its service account may not list (MCP authorization
//! is per collection). The token file is read on every connection, and a token without TLS is refused
//! before anything starts.
//!
//! Skips with a message when no API server is configured.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::kube_server;
use support::pipeline;

use std::path::Path;

use kube_server::Kube;
use pipeline::Admitpilot;

const CRDS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/kube/istio-crds.yaml");

/// A CA and a certificate it signed for 127.0.0.1 and localhost, as PEM files in `dir`: (CA, cert, key) paths.
fn pki(dir: &Path) -> [std::path::PathBuf; 3] {
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "admitpilot test CA");
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let issuer =
        rcgen::CertifiedIssuer::self_signed(ca, rcgen::KeyPair::generate().unwrap()).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let paths = ["ca.crt", "tls.crt", "tls.key"].map(|name| dir.join(name));
    std::fs::write(&paths[0], issuer.pem()).unwrap();
    std::fs::write(&paths[1], leaf.pem()).unwrap();
    std::fs::write(&paths[2], key.serialize_pem()).unwrap();
    paths
}

#[tokio::test]
async fn an_mcp_subscriber_proves_itself_with_tls_and_a_token() {
    let Some(kube) = Kube::shared("mcp-auth").await else {
        return;
    };
    kube.install_crds(Path::new(CRDS)).await;
    let ns = kube.namespace().to_string();
    kube.create_service_account("mcp-reader").await;
    // What an MCP subscriber must be allowed for each collection (Question::list_all): list it cluster-wide.
    let rbac = format!(
        "apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {ns}-mcp-reader}}
rules: [{{apiGroups: [networking.istio.io], resources: [virtualservices], verbs: [list]}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {ns}-mcp-reader}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {ns}-mcp-reader}}
subjects: [{{kind: ServiceAccount, name: mcp-reader, namespace: {ns}}}]
"
    );
    kube.kubectl_ok(&["apply", "-f", "-"], Some(&rbac)).await;
    kube.kubectl_ok(
        &["apply", "-f", "-"],
        Some(
            &pipeline::virtual_service("api", "/api", 9)
                .replace("namespace: default", &format!("namespace: {ns}")),
        ),
    )
    .await;
    // A kind the subscriber may not list: it must not reach B.
    let filter = format!(
        "apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {{name: not-for-b, namespace: {ns}}}
spec:
  configPatches:
  - applyTo: HTTP_FILTER
    match: {{context: GATEWAY, listener: {{filterChain: {{filter: {{name: envoy.filters.network.http_connection_manager}}}}}}}}
    patch:
      operation: INSERT_BEFORE
      value:
        name: envoy.filters.http.lua
        typed_config:
          '@type': type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua
          default_source_code: {{inline_string: 'function envoy_on_request(h) end'}}
"
    );
    kube.kubectl_ok(&["apply", "-f", "-"], Some(&filter)).await;

    let dir = tempfile::tempdir().unwrap();
    let [ca, cert, key] = pki(dir.path());
    let a = Admitpilot::start_kube(
        kube.kubeconfig(),
        None,
        &[
            format!("--xds-tls-cert={}", cert.display()),
            format!("--xds-tls-key={}", key.display()),
            format!("--watch-namespaces={ns}"),
        ],
    )
    .await;
    a.wait_for_admin("/debug/configz", "the EnvoyFilter on A", |text| {
        text.contains("\"not-for-b\"")
    })
    .await;
    let token = dir.path().join("token");
    std::fs::write(
        &token,
        kube.token(&ns, "mcp-reader", Some("admitpilot"), "10m")
            .await,
    )
    .unwrap();
    let b = Admitpilot::start_mcp_subscriber_with(
        &format!("xds://127.0.0.1:{}", a.xds_port),
        &[
            format!("--mcp-source-ca={}", ca.display()),
            format!("--mcp-source-token-file={}", token.display()),
        ],
    )
    .await;
    b.wait_for_admin("/debug/configz", "A's VirtualService on B", |text| {
        text.contains(&format!("\"{ns}\"")) && text.contains("\"api\"")
    })
    .await;
    a.wait_for_admin("/debug/syncz", "B subscribed over MCP", |text| {
        text.contains("admitpilot-mcp-source~") && text.contains("\"mcp\"")
    })
    .await;
    // B's service account may list VirtualServices only: the EnvoyFilter collection is answered empty.
    b.wait_for_admin("/debug/configz", "B without the EnvoyFilter", |text| {
        text.contains("\"api\"") && !text.contains("not-for-b")
    })
    .await;
}

#[test]
fn a_token_without_tls_is_refused_at_start() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_admitpilot"))
        .args([
            "serve",
            "--mcp-source=xds://127.0.0.1:1",
            "--mcp-source-token-file=/nonexistent",
        ])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--mcp-source-token-file needs --mcp-source-ca"),
        "{stderr}"
    );
}
