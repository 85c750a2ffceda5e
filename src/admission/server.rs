//! The HTTPS accept loop: takes a bound listener, a rustls config and an axum [`Router`], and serves
//! HTTP/1.1 and HTTP/2 over TLS until the shutdown future resolves, then drains open connections.
//!
//! Limits: a cap on concurrent connections (accepting waits for a free slot), a TLS handshake timeout and an
//! HTTP/1 header-read timeout. The request timeout and body limit are layers on the router.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use rustls::ServerConfig;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;

/// Resource limits of one HTTPS server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerLimits {
    /// Connections served at once; further clients wait in the listen backlog.
    pub max_connections: usize,
    /// Time allowed for the TLS handshake.
    pub handshake_timeout: Duration,
    /// Time allowed to receive a request's headers (HTTP/1).
    pub header_read_timeout: Duration,
    /// Time allowed from request start to response (answered with 408 when exceeded).
    pub request_timeout: Duration,
    /// Largest request body accepted (413 beyond it).
    pub max_body_bytes: usize,
    /// Time open connections get to finish after shutdown begins.
    pub drain_timeout: Duration,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_connections: 1024,
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            // Istio's cap: twice the API server's own request limit.
            max_body_bytes: 6 * 1024 * 1024,
            drain_timeout: Duration::from_secs(10),
        }
    }
}

/// Serves `app` over TLS on `listener` until `shutdown` resolves; then stops accepting and waits up to
/// `limits.drain_timeout` for open connections to finish.
pub async fn serve_https(
    listener: TcpListener,
    tls: Arc<ServerConfig>,
    app: Router,
    limits: ServerLimits,
    shutdown: impl Future<Output = ()>,
) {
    let acceptor = TlsAcceptor::from(tls);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    let mut http1 = http1::Builder::new();
    http1
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let mut http2 = http2::Builder::new(TokioExecutor::new());
    http2.timer(TokioTimer::new()).max_concurrent_streams(256);
    tokio::pin!(shutdown);
    loop {
        let slot = tokio::select! {
            _ = &mut shutdown => break,
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
        };
        let (tcp, peer) = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Usually out of file descriptors; pause instead of spinning.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        // Responses are written whole; Nagle would only delay them.
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!(%peer, %error, "cannot disable Nagle's algorithm");
        }
        let acceptor = acceptor.clone();
        let (http1, http2) = (http1.clone(), http2.clone());
        let service = TowerToHyperService::new(app.clone());
        let watcher = graceful.watcher();
        let handshake_timeout = limits.handshake_timeout;
        tokio::spawn(async move {
            let _slot = slot;
            let stream = match tokio::time::timeout(handshake_timeout, acceptor.accept(tcp)).await {
                Ok(Ok(stream)) => stream,
                Ok(Err(error)) => {
                    tracing::debug!(%peer, %error, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            };
            // HTTP/2 over TLS is only spoken after ALPN chose it (RFC 9113 section 3.2); everything else is
            // HTTP/1.1. Choosing here, rather than sniffing the first bytes, starts the header-read timeout as
            // soon as the handshake ends, so a client that never sends a request is dropped.
            let is_h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
            let io = TokioIo::new(stream);
            let result = if is_h2 {
                watcher.watch(http2.serve_connection(io, service)).await
            } else {
                watcher.watch(http1.serve_connection(io, service)).await
            };
            if let Err(error) = result {
                tracing::debug!(%peer, %error, "connection ended with an error");
            }
        });
    }
    drop(listener);
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(limits.drain_timeout) => {
            tracing::warn!("connections still open after the drain timeout; closing them");
        }
    }
}
