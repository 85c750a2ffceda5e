//! The webhook's connection limits over real sockets: a TCP client that never starts the TLS handshake and a TLS
//! client that never sends request headers are both disconnected after their timeouts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use admitpilot::admission::server::ServerLimits;
use admitpilot::admission::tls::CertSource;
use admitpilot::app::{App, Running, ServeConfig, WebhookConfig};
use admitpilot::model::decode::DecodeOptions;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

async fn start(dir: &std::path::Path, limits: ServerLimits) -> Running {
    let config = ServeConfig {
        webhook: WebhookConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            cert: CertSource::SelfSigned {
                ca_out: dir.join("ca.crt"),
            },
            reload_interval: Duration::from_secs(3600),
            decode: DecodeOptions::default(),
            limits,
            bench_noop: false,
        },
        admin_addr: "127.0.0.1:0".parse().unwrap(),
    };
    App::new(config).start().await.unwrap()
}

/// Reads until the server closes the connection; returns how long that took. Fails after `deadline`.
async fn wait_for_close<S: AsyncReadExt + Unpin>(stream: &mut S, deadline: Duration) -> Duration {
    let started = Instant::now();
    let mut buf = [0u8; 256];
    loop {
        match tokio::time::timeout(deadline, stream.read(&mut buf)).await {
            Err(_) => panic!("the server kept the connection open for {deadline:?}"),
            Ok(Ok(0)) | Ok(Err(_)) => return started.elapsed(),
            Ok(Ok(_)) => {}
        }
    }
}

#[tokio::test]
async fn a_client_that_never_starts_the_handshake_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let limits = ServerLimits {
        handshake_timeout: Duration::from_millis(300),
        ..ServerLimits::default()
    };
    let running = start(dir.path(), limits).await;
    let mut tcp = TcpStream::connect(running.webhook_addr).await.unwrap();
    let waited = wait_for_close(&mut tcp, Duration::from_secs(10)).await;
    assert!(
        waited >= Duration::from_millis(250),
        "closed after {waited:?}"
    );
    running.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_client_that_never_sends_headers_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let limits = ServerLimits {
        header_read_timeout: Duration::from_millis(300),
        ..ServerLimits::default()
    };
    let running = start(dir.path(), limits).await;
    let ca = std::fs::read(dir.path().join("ca.crt")).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&ca) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(running.webhook_addr).await.unwrap();
    let mut tls = connector
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    let waited = wait_for_close(&mut tls, Duration::from_secs(10)).await;
    assert!(
        waited >= Duration::from_millis(250),
        "closed after {waited:?}"
    );
    running.shutdown().await.unwrap();
}
