//! The HTTPS accept loop: takes a bound listener, a rustls config and an axum [`Router`], and serves
//! HTTP/1.1 and HTTP/2 over TLS until the shutdown future resolves, then drains open connections.
//!
//! Limits: a cap on concurrent connections (accepting waits for a free slot), a TLS handshake timeout and a
//! header-read timeout (HTTP/1: hyper's own, idle keep-alive included; HTTP/2: the connection is closed once no
//! request has been in progress for that long). The request timeout and body limit are layers on the router.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use rustls::ServerConfig;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

/// Resource limits of one HTTPS server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerLimits {
    /// Connections served at once; further clients wait in the listen backlog.
    pub max_connections: usize,
    /// Time allowed for the TLS handshake.
    pub handshake_timeout: Duration,
    /// Time allowed to receive a request's headers; idle time between requests counts too (HTTP/1 and
    /// HTTP/2).
    pub header_read_timeout: Duration,
    /// Time allowed from request start to response (answered with 408 when exceeded).
    pub request_timeout: Duration,
    /// Largest request body accepted (413 beyond it).
    pub max_body_bytes: usize,
    /// Time one review's validation may take; past it the rules stop and the object is denied as too large to
    /// check in time, well inside the API server's webhook timeout.
    pub review_budget: Duration,
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
            review_budget: Duration::from_secs(3),
            // Istio's cap: twice the API server's own request limit.
            max_body_bytes: 6 * 1024 * 1024,
            drain_timeout: Duration::from_secs(10),
        }
    }
}

/// Serves `app` over TLS on `listener` until `shutdown` resolves; then stops accepting, asks every open
/// connection to finish (HTTP/2 GOAWAY, HTTP/1 close after the current response) and waits up to
/// `limits.drain_timeout` for them.
pub async fn serve_https(
    listener: TcpListener,
    tls: Arc<ServerConfig>,
    app: Router,
    limits: ServerLimits,
    shutdown: impl Future<Output = ()>,
) {
    let acceptor = TlsAcceptor::from(tls);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let (stop, stopping) = watch::channel(false);
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
        let app = app.clone();
        let stopping = stopping.clone();
        let limits = limits.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let stream =
                match tokio::time::timeout(limits.handshake_timeout, acceptor.accept(tcp)).await {
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
                // hyper's header-read timeout is HTTP/1 only: an HTTP/2 connection with no request in
                // progress for that long is closed here instead (requests are counted on HTTP/2 only).
                let activity = Activity::default();
                let service = TowerToHyperService::new(activity.track(app));
                let idle = activity.idle_for(limits.header_read_timeout);
                let conn = http2.serve_connection(io, service);
                let grace = limits.header_read_timeout.min(limits.drain_timeout);
                run_connection(conn, stopping, idle, grace, |conn| conn.graceful_shutdown()).await
            } else {
                let conn = http1.serve_connection(io, TowerToHyperService::new(app));
                let never = std::future::pending();
                run_connection(conn, stopping, never, limits.drain_timeout, |conn| {
                    conn.graceful_shutdown()
                })
                .await
            };
            if let Err(error) = result {
                tracing::debug!(%peer, %error, "connection ended with an error");
            }
        });
    }
    drop(listener);
    stop.send_replace(true);
    // Every connection holds a slot until it ends: all slots back means all connections are closed.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    if tokio::time::timeout(limits.drain_timeout, slots.acquire_many(all))
        .await
        .is_err()
    {
        tracing::warn!("connections still open after the drain timeout; closing them");
    }
}

/// Serves one connection until it ends. When the server stops or `idle` resolves, asks it to finish
/// (`graceful` sends HTTP/2 GOAWAY or closes HTTP/1 after the current response) and drops it if it has not
/// finished `grace` later (an HTTP/2 client that does not answer the GOAWAY's PING would keep it open).
async fn run_connection<C, E>(
    conn: C,
    mut stopping: watch::Receiver<bool>,
    idle: impl Future<Output = ()>,
    grace: Duration,
    graceful: impl Fn(Pin<&mut C>),
) -> Result<(), E>
where
    C: Future<Output = Result<(), E>>,
{
    tokio::pin!(conn, idle);
    let mut finish_by: Option<tokio::time::Instant> = None;
    loop {
        tokio::select! {
            result = conn.as_mut() => return result,
            _ = stopping.wait_for(|stop| *stop), if finish_by.is_none() => {
                graceful(conn.as_mut());
                finish_by = Some(tokio::time::Instant::now() + grace);
            }
            _ = &mut idle, if finish_by.is_none() => {
                graceful(conn.as_mut());
                finish_by = Some(tokio::time::Instant::now() + grace);
            }
            _ = tokio::time::sleep_until(finish_by.unwrap_or_else(tokio::time::Instant::now)), if finish_by.is_some() => {
                return Ok(());
            }
        }
    }
}

/// Requests in progress on one connection and when the last one ended.
#[derive(Debug, Clone, Default)]
struct Activity(Arc<ActivityState>);

#[derive(Debug, Default)]
struct ActivityState {
    in_progress: AtomicUsize,
    /// Set when the count drops to zero (`None` until the first request ends: idle since the start).
    idle_since: Mutex<Option<Instant>>,
}

/// Marks one request in progress until dropped.
struct InProgress(Activity);

impl Drop for InProgress {
    fn drop(&mut self) {
        let state = &(self.0).0;
        if state.in_progress.fetch_sub(1, Ordering::AcqRel) == 1 {
            *state
                .idle_since
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
        }
    }
}

impl Activity {
    /// Wraps `app` so every request is counted while it is handled.
    fn track(
        &self,
        app: Router,
    ) -> impl tower::Service<
        Request<Incoming>,
        Response = axum::response::Response,
        Error = Infallible,
        Future = impl Future<Output = Result<axum::response::Response, Infallible>> + Send,
    > + Clone {
        let activity = self.clone();
        tower::service_fn(move |request: Request<Incoming>| {
            (activity.0).in_progress.fetch_add(1, Ordering::AcqRel);
            let in_progress = InProgress(activity.clone());
            let response = app.clone().oneshot(request);
            async move {
                let response = response.await;
                drop(in_progress);
                response
            }
        })
    }

    /// Resolves once no request has been in progress for `limit`.
    async fn idle_for(self, limit: Duration) {
        let started = Instant::now();
        loop {
            let since = *(self.0)
                .idle_since
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let busy = (self.0).in_progress.load(Ordering::Acquire) > 0;
            let deadline = since.unwrap_or(started) + limit;
            if !busy && Instant::now() >= deadline {
                return;
            }
            // While busy, check again a full period later: the request may run that long at most anyway.
            let wake = if busy {
                Instant::now() + limit
            } else {
                deadline
            };
            tokio::time::sleep_until(wake.into()).await;
        }
    }
}
