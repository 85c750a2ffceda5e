//! The webhook's connection limits over real sockets: a TCP client that never starts the TLS handshake, a TLS
//! client that never sends request headers and an HTTP/2 client that never sends a request are disconnected
//! after their timeouts; a body that never ends
//! is answered 408 (or the connection closed) after the request timeout; past the connection cap a client waits
//! until a slot frees; a review whose validation outlasts the review budget is denied as too large to check.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::reviews;

use std::sync::Arc;
use std::time::{Duration, Instant};

use admitpilot::admission::server::ServerLimits;
use admitpilot::app::{App, Running, ServeConfig, WebhookConfig};
use admitpilot::model::decode::DecodeOptions;
use admitpilot::tls::CertSource;
use reviews::many_hosts_review;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
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
            reference_check: Default::default(),
        },
        admin_addr: "127.0.0.1:0".parse().unwrap(),
    };
    App::new(config).start().await.unwrap()
}

/// Checks that the server closes `stream` after the 300 ms timeout the test set, within 10 s.
async fn closed_after_the_timeout<S: AsyncReadExt + Unpin>(stream: &mut S) {
    let waited = wait_for_close(stream, Duration::from_secs(10)).await;
    assert!(
        waited >= Duration::from_millis(250),
        "closed after {waited:?}"
    );
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

type Tls = tokio_rustls::client::TlsStream<TcpStream>;

/// Opens a TLS connection trusting the generated CA in `dir`, offering `alpn` (none: HTTP/1.1).
async fn connect_tls_with_alpn(dir: &std::path::Path, running: &Running, alpn: &[&[u8]]) -> Tls {
    let ca = std::fs::read(dir.join("ca.crt")).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&ca) {
        roots.add(cert.unwrap()).unwrap();
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(running.webhook_addr).await.unwrap();
    connector
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap()
}

/// Opens a TLS connection trusting the generated CA in `dir` (HTTP/1.1).
async fn connect_tls(dir: &std::path::Path, running: &Running) -> Tls {
    connect_tls_with_alpn(dir, running, &[]).await
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
    closed_after_the_timeout(&mut tcp).await;
    running.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_body_that_never_ends_is_timed_out() {
    let dir = tempfile::tempdir().unwrap();
    let limits = ServerLimits {
        request_timeout: Duration::from_millis(300),
        ..ServerLimits::default()
    };
    let running = start(dir.path(), limits).await;
    let mut tls = connect_tls(dir.path(), &running).await;
    tls.write_all(
        b"POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"apiVersion\":",
    )
    .await
    .unwrap();
    tls.flush().await.unwrap();
    let started = Instant::now();
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(Duration::from_secs(10), tls.read(&mut buf)).await {
            Err(_) => panic!("no answer and no close within 10 s"),
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => {
                answer.extend_from_slice(&buf[..n]);
                if answer.windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
        }
    }
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(250),
        "answered after {waited:?}"
    );
    let text = String::from_utf8_lossy(&answer);
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 408"),
        "{text}"
    );
    running.shutdown().await.unwrap();
}

#[tokio::test]
async fn past_the_connection_cap_a_client_waits_for_a_free_slot() {
    let dir = tempfile::tempdir().unwrap();
    let limits = ServerLimits {
        max_connections: 2,
        ..ServerLimits::default()
    };
    let running = start(dir.path(), limits).await;
    let first = connect_tls(dir.path(), &running).await;
    let _second = connect_tls(dir.path(), &running).await;
    let path = dir.path().to_path_buf();
    let addr = running.webhook_addr;
    let running = Arc::new(running);
    let shared = Arc::clone(&running);
    let mut third = tokio::spawn(async move { connect_tls(&path, &shared).await });
    // The third handshake cannot complete while both slots are taken.
    assert!(
        tokio::time::timeout(Duration::from_millis(500), &mut third)
            .await
            .is_err(),
        "a third connection to {addr} was served past the cap of 2"
    );
    drop(first);
    let mut third = tokio::time::timeout(Duration::from_secs(10), third)
        .await
        .expect("the waiting client was never served after a slot freed")
        .unwrap();
    third
        .write_all(b"GET /validate HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(10), third.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert!(
        buf[..n].starts_with(b"HTTP/1.1 405"),
        "{:?}",
        String::from_utf8_lossy(&buf[..n])
    );
    let Ok(running) = Arc::try_unwrap(running) else {
        panic!("the connecting task still holds the server");
    };
    running.shutdown().await.unwrap();
}

/// Opens a TLS connection that offers only HTTP/2 (ALPN `h2`) and sends the client connection preface and an
/// empty SETTINGS frame, then nothing.
async fn connect_h2_and_stay_quiet(dir: &std::path::Path, running: &Running) -> Tls {
    let mut tls = connect_tls_with_alpn(dir, running, &[b"h2"]).await;
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    tls.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .unwrap();
    // SETTINGS: length 0, type 4, no flags, stream 0.
    tls.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).await.unwrap();
    tls.flush().await.unwrap();
    tls
}

#[tokio::test]
async fn a_client_that_never_sends_a_request_is_dropped_over_http1_and_http2() {
    let dir = tempfile::tempdir().unwrap();
    let limits = ServerLimits {
        header_read_timeout: Duration::from_millis(300),
        ..ServerLimits::default()
    };
    let running = start(dir.path(), limits).await;
    let mut http1 = connect_tls(dir.path(), &running).await;
    let mut http2 = connect_h2_and_stay_quiet(dir.path(), &running).await;
    closed_after_the_timeout(&mut http1).await;
    closed_after_the_timeout(&mut http2).await;
    running.shutdown().await.unwrap();
}

/// Posts `body` to `/validate` over HTTP/1.1 and returns the response's body.
async fn post_review(dir: &std::path::Path, running: &Running, body: &[u8]) -> String {
    let mut tls = connect_tls(dir, running).await;
    let head = format!(
        "POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    tls.write_all(body).await.unwrap();
    let mut response = Vec::new();
    let _ = tls.read_to_end(&mut response).await;
    let text = String::from_utf8_lossy(&response).to_string();
    text.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or(text)
}

/// A review whose validation outlasts `--review-budget` (20 ms here, against a 1.3 MB VirtualService) is answered
/// with a denial saying the object is too large to check in time; an ordinary one is still allowed.
#[tokio::test]
async fn a_review_over_its_time_budget_is_denied_as_too_large_to_check() {
    let dir = tempfile::tempdir().unwrap();
    let limits = ServerLimits {
        review_budget: Duration::from_millis(20),
        ..ServerLimits::default()
    };
    let running = start(dir.path(), limits).await;
    let answer = post_review(dir.path(), &running, &many_hosts_review(60_000)).await;
    assert!(answer.contains(r#""allowed":false"#), "{answer}");
    assert!(answer.contains("time budget ran out"), "{answer}");
    let answer = post_review(dir.path(), &running, &many_hosts_review(2)).await;
    assert!(answer.contains(r#""allowed":true"#), "{answer}");
    running.shutdown().await.unwrap();
}
