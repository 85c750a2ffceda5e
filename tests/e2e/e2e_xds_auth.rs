//! Authenticated xDS end to end: a real Envoy 1.40 with the README's bootstrap (google_grpc over TLS trusting the
//! control plane's CA, a service-account token read from a file by `envoy.grpc_credentials.file_based_metadata`)
//! gets its Gateway's certificate over SDS from an in-process xDS server whose tokens and RBAC are checked by the
//! API-server double, and serves HTTPS to a client (real TLS handshake through Envoy to a 127.0.0.1 backend), with
//! Envoy's default `initial_fetch_timeout` and no update rejected. Then the token rotates: the file is rewritten,
//! the old token expires, the server ends the stream, Envoy reconnects with the new token and keeps serving.
//!
//! Skips with a message when Envoy is not installed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::envoy;
use support::pipeline;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use admitpilot::xds::TranslateFn;
use base64::Engine as _;
use envoy::*;
use support::apiserver::ApiServer;
use support::xds_auth::{default_settings, AuthServer, Pki};

const AUDIENCE: &str = "admitpilot";
const HOST: &str = "secure.example";

/// The README's gateway bootstrap, taken from README.md with its Service address, CA and token paths replaced: ADS
/// over TLS to `localhost:<xds port>` (a name, as the README's Service name;
/// the server certificate is for localhost), trusting `ca`, presenting the token in `token`.
fn bootstrap(xds: SocketAddr, ca: &Path, token: &Path) -> String {
    const README: &str = include_str!("../../README.md");
    let section = &README[README
        .find("The gateway bootstrap (")
        .expect("README bootstrap")..];
    let start = section.find("```yaml\n").expect("README bootstrap block") + "```yaml\n".len();
    let end = start
        + section[start..]
            .find("```")
            .expect("README bootstrap block end");
    let mut yaml = section[start..end].to_string();
    for (written, here) in [
        (
            "admitpilot.admitpilot.svc:15012",
            format!("localhost:{}", xds.port()),
        ),
        ("/etc/admitpilot-ca/ca.crt", ca.display().to_string()),
        (
            "/var/run/secrets/admitpilot/token",
            token.display().to_string(),
        ),
        (
            "POD_IP~POD_NAME.NAMESPACE~NAMESPACE",
            "127.0.0.1~gw-0.gw~gw".to_string(),
        ),
    ] {
        assert!(
            yaml.contains(written),
            "the README's bootstrap no longer has {written}"
        );
        yaml = yaml.replace(written, &here);
    }
    // The test reads Envoy's stats and config dump.
    yaml + "admin:\n  address: {socket_address: {address: 127.0.0.1, port_value: 0}}\n"
}

/// Gateway `gw/gw` terminating TLS for [`HOST`] on `port` with the Secret `gw/gw-cert`, routed to the backend.
fn config(port: u16, backend: u16, cert: &str, key: &str) -> String {
    let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    format!(
        r#"apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {{name: gw, namespace: gw}}
spec:
  selector: {{app: gw}}
  servers:
  - port: {{number: {port}, name: https, protocol: HTTPS}}
    hosts: ["{HOST}"]
    tls: {{mode: SIMPLE, credentialName: gw-cert}}
---
apiVersion: v1
kind: Secret
metadata: {{name: gw-cert, namespace: gw}}
type: kubernetes.io/tls
data:
  tls.crt: {cert}
  tls.key: {key}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: backend, namespace: gw}}
spec:
  hosts: [backend.example.com]
  location: MESH_EXTERNAL
  resolution: STATIC
  ports: [{{number: {backend}, name: http, protocol: HTTP}}]
  endpoints: [{{address: 127.0.0.1}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: secure, namespace: gw}}
spec:
  hosts: ["{HOST}"]
  gateways: [gw]
  http:
  - route: [{{destination: {{host: backend.example.com, port: {{number: {backend}}}}}}}]
"#,
        cert = b64(cert),
        key = b64(key),
    )
}

/// An HTTPS client trusting `ca_pem` that sends [`HOST`] to 127.0.0.1:`port`.
fn https_client(ca_pem: &str, port: u16) -> reqwest::Client {
    reqwest::Client::builder()
        .use_rustls_tls()
        .add_root_certificate(reqwest::Certificate::from_pem(ca_pem.as_bytes()).unwrap())
        .resolve(HOST, SocketAddr::from(([127, 0, 0, 1], port)))
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

/// An authenticated xDS server over a folder holding a gateway whose HTTPS server on `port` uses a certificate
/// for [`HOST`] (a Secret), with the API-server double behind its TokenReviews and SubjectAccessReviews.
struct Secured {
    api: ApiServer,
    pki: Pki,
    server: AuthServer,
    port: u16,
    _backend: Backend,
    _dir: tempfile::TempDir,
    _sources: admitpilot::source::Sources,
}

impl Secured {
    /// Starts it; `may_read_secrets` grants ServiceAccount `gw/gateway` `get secrets` in `gw`.
    async fn start(may_read_secrets: bool) -> Secured {
        let api = ApiServer::start(Duration::from_secs(60)).await;
        if may_read_secrets {
            api.grant(("gw", "gateway"), "get", "", "secrets", "gw");
        }
        let pki = Pki::new();
        let backend = Backend::start("secured").await;
        let port = free_port();
        let (cert, key) = pki.issue(&[HOST]);
        let dir = tempfile::tempdir().unwrap();
        pipeline::write(
            dir.path(),
            "config.yaml",
            &config(port, backend.port, &cert, &key),
        );
        let sources = pipeline::folder_sources(dir.path());
        let server = AuthServer::start(
            &pki,
            api.client(),
            AUDIENCE,
            TranslateFn::caching(admitpilot::translate::Options::default()),
            sources.snapshots.clone(),
            default_settings(),
        )
        .await;
        Secured {
            api,
            pki,
            server,
            port,
            _backend: backend,
            _dir: dir,
            _sources: sources,
        }
    }

    /// Writes `token` to the token file and starts Envoy (`base_id`) on the bootstrap that presents it; returns
    /// Envoy and the file.
    async fn envoy(&self, binary: &Path, token: &str, base_id: u32) -> (EnvoyProcess, PathBuf) {
        let token_file = self.pki.dir.path().join("token");
        std::fs::write(&token_file, token).unwrap();
        let bootstrap = bootstrap(self.server.tls_addr, &self.pki.ca, &token_file);
        (
            EnvoyProcess::start(binary, &bootstrap, base_id).await,
            token_file,
        )
    }

    fn https(&self) -> (reqwest::Client, String) {
        (
            https_client(&self.pki.ca_pem, self.port),
            format!("https://{HOST}:{}/", self.port),
        )
    }
}

#[tokio::test]
async fn envoy_with_a_rotating_token_gets_its_certificate_and_serves_https() {
    let Some(binary) = envoy_binary() else {
        return;
    };
    let secured = Secured::start(true).await;
    let api = &secured.api;
    // A token that expires in a few seconds, as a projected token near the end of its life.
    let first = api.issue_token("gw", "gateway", AUDIENCE, Duration::from_secs(6));
    let (envoy, token_file) = secured.envoy(&binary, &first, 4711).await;
    let (https, url) = secured.https();
    wait_for_response(&https, &url, 200, "secured").await;
    envoy.assert_nothing_rejected("first token").await;

    // Rotation: the kubelet writes a new token; the old one expires and its stream ends; Envoy reconnects with
    // the token now in the file.
    let second = api.issue_token("gw", "gateway", AUDIENCE, Duration::from_secs(3600));
    std::fs::write(&token_file, &second).unwrap();
    let deadline = tokio::time::Instant::now() + CONVERGE;
    while !api.was_reviewed(&second) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "Envoy never reconnected with the rotated token:\n{}",
            envoy.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The reconnected stream serves the same certificate: HTTPS keeps working, nothing rejected.
    wait_for_response(&https, &url, 200, "secured").await;
    envoy.assert_nothing_rejected("rotated token").await;
    let text = secured.server.metrics_text();
    assert!(
        !text.contains("admitpilot_xds_secret_denied_total{"),
        "{text}"
    );
    drop(envoy);
    secured.server.shutdown().await;
}

#[tokio::test]
async fn envoy_of_a_service_account_without_secret_access_gets_no_certificate() {
    let Some(binary) = envoy_binary() else {
        return;
    };
    let secured = Secured::start(false).await;
    let token = secured
        .api
        .issue_token("gw", "gateway", AUDIENCE, Duration::from_secs(3600));
    let (envoy, _) = secured.envoy(&binary, &token, 4712).await;
    support::eventually(|| {
        secured
            .server
            .metrics_text()
            .contains("admitpilot_xds_secret_denied_total{reason=\"rbac\"} 1")
    })
    .await;
    // Envoy holds the listener warming for the secret it never gets: no HTTPS, no key anywhere in its config.
    let dump = envoy.config_dump().await;
    assert!(!dump.contains("PRIVATE KEY"), "the key reached Envoy");
    let (https, url) = secured.https();
    assert!(get(&https, &url).await.is_none());
    drop(envoy);
    secured.server.shutdown().await;
}
