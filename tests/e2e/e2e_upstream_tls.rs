//! DestinationRule client TLS from files, end to end: the real `admitpilot serve --config-dir` binary, a real Envoy
//! 1.40 (SotW, default `initial_fetch_timeout`) and backends on 127.0.0.1, one of them serving TLS with a
//! certificate for `localhost` signed by a CA made in the test. The CA file reaches Envoy as the file-based SDS
//! secret `file-root:<path>`, as Istio names it: the TLS route answers 200 through a verified connection (SNI and
//! subject alternative name `localhost`). A second DestinationRule names a CA file that does not exist: only its
//! cluster fails (503), the other routes keep working, no listener, route or cluster update is rejected and
//! Envoy names the missing file (it rejects the secret response, applying every secret it can read).
//!
//! Skips with a message when Envoy is not installed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::envoy;
use support::pipeline;

use std::net::SocketAddr;
use std::sync::Arc;

use envoy::*;
use pipeline::*;

const NODE_ID: &str = "router~127.0.0.1~gw-tls.default~default.svc.cluster.local";

/// Accepts TCP connections and completes their TLS handshake, for `axum::serve`.
struct TlsListener {
    tcp: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((tcp, addr)) = self.tcp.accept().await else {
                continue;
            };
            if let Ok(tls) = self.acceptor.accept(tcp).await {
                return (tls, addr);
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

/// Serves `secure` over TLS with a `localhost` certificate whose CA is written to `ca`; returns the port.
async fn tls_backend(ca: &std::path::Path) -> (u16, tokio::task::JoinHandle<()>) {
    let key = admitpilot::tls::self_signed(ca).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(admitpilot::tls::provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(key)));
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = tcp.local_addr().unwrap().port();
    let listener = TlsListener {
        tcp,
        acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
    };
    let app = axum::Router::new().fallback(|| async { "secure" });
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (port, task)
}

/// A ServiceEntry for `host` on the TLS backend, a route from `prefix` to it and a DestinationRule verifying it
/// against the CA file `ca`.
fn tls_service(name: &str, prefix: &str, port: u16, ca: &str) -> String {
    let host = format!("{name}.example.com");
    format!(
        "{}---\n\
         apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: {name}, namespace: default}}\n\
         spec:\n  hosts: [\"*\"]\n  gateways: [gw]\n  http:\n  - match: [{{uri: {{prefix: {prefix}}}}}]\n    \
         route: [{{destination: {{host: {host}, port: {{number: {port}}}}}}}]\n---\n\
         apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: {name}, namespace: default}}\n\
         spec:\n  host: {host}\n  trafficPolicy:\n    tls: {{mode: SIMPLE, caCertificates: {ca}, sni: localhost, \
         subjectAltNames: [localhost]}}\n",
        service_entry(name, &host, port)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destination_rule_tls_files_are_read_through_sds_and_a_missing_file_fails_one_cluster() {
    let Some(binary) = envoy_binary() else {
        return;
    };
    let certs = tempfile::tempdir().unwrap();
    let ca = certs.path().join("ca.pem");
    let (tls_port, tls_task) = tls_backend(&ca).await;
    let backend = Backend::start("plain").await;
    let port = free_port();
    let dir = api_config_dir(port, backend.port);
    write(
        dir.path(),
        "secure.yaml",
        &tls_service("secure", "/secure", tls_port, ca.to_str().unwrap()),
    );
    // Sorts before `ca.pem`: the readable secret is applied even when it follows the one that fails.
    let missing = certs.path().join("a-missing-ca.pem");
    write(
        dir.path(),
        "broken.yaml",
        &tls_service("broken", "/broken", tls_port, missing.to_str().unwrap()),
    );
    let admitpilot = Admitpilot::start(dir.path()).await;
    let envoy = EnvoyProcess::start(
        &binary,
        &bootstrap(AdsApi::Sotw, admitpilot.xds_port, NODE_ID)
            .replace("app: e2e", "istio: ingressgateway"),
        53_200,
    )
    .await;
    let http = client();
    let base = format!("http://127.0.0.1:{port}");
    wait_for_response(&http, &format!("{base}/secure/x"), 200, "secure").await;
    assert_eq!(
        get(&http, &format!("{base}/api/x")).await,
        Some((200, "plain".to_string()))
    );
    let (status, _) = get(&http, &format!("{base}/broken/x")).await.unwrap();
    assert_eq!(status, 503, "the cluster whose CA file is missing fails");

    // Envoy rejects the secret response as a whole (each secret's stat counts it) but applies every secret it can
    // read: the route above works whichever secret comes first.
    let stats = envoy.stats("update_rejected").await;
    let rejected: Vec<_> = stats.iter().filter(|(_, v)| *v != 0).collect();
    assert!(
        rejected
            .iter()
            .all(|(name, _)| name.starts_with("sds.file-root")),
        "only secrets are rejected: {rejected:?}"
    );
    assert!(
        envoy
            .log()
            .contains(&format!("Invalid path: {}", missing.display())),
        "Envoy names the missing file"
    );
    for stat in [
        "cluster_manager.cds.update_rejected",
        "listener_manager.lds.update_rejected",
    ] {
        assert_eq!(envoy.stat(stat).await, 0, "{stat}");
    }
    drop(envoy);
    drop(admitpilot);
    tls_task.abort();
}
