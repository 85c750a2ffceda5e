//! The xDS ports' connection limits: takes a bound listener, its transport handshake and [`ConnectionLimits`], and
//! yields the accepted connections wrapped in a [`Guarded`] stream that enforces them:
//! - at most `max_connections` open on the port; past it a new connection is closed at once;
//! - a connection must start a call that passes authentication within `pre_auth_timeout` (TLS handshake included
//!   in the handshake's own timeout), else it is closed: nothing is held for a client that never proves who it is;
//! - a connection with no open call for `idle_timeout` is closed;
//! - at most `max_streams` calls at once per connection ([`ConnectionState::open_stream`]); HTTP/2's
//!   `SETTINGS_MAX_CONCURRENT_STREAMS` refuses any past one more.
//!
//! Each limit counts in `admitpilot_xds_limits_total{limit}` and logs (at most once a second per limit) when it
//! bites. The per-connection state travels to each call as the request's connect info.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};
use tonic::transport::server::Connected;

use super::metrics::XdsMetrics;

/// The limits of one xDS port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Most connections open at once.
    pub max_connections: usize,
    /// Most calls open at once on one connection (an Envoy or istiod opens one).
    pub max_streams: usize,
    /// Time a connection has to start an authenticated call.
    pub pre_auth_timeout: Duration,
    /// Time a connection may stay without any open call.
    pub idle_timeout: Duration,
    /// Time a client has to finish the TLS handshake.
    pub handshake_timeout: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: 1024,
            max_streams: 8,
            pre_auth_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            handshake_timeout: Duration::from_secs(10),
        }
    }
}

/// What one connection's calls share: its peer, how many calls are open, whether one was authenticated.
#[derive(Debug, Clone)]
pub struct ConnectionState(Arc<StateInner>);

#[derive(Debug)]
struct StateInner {
    peer: Option<SocketAddr>,
    max_streams: usize,
    streams: AtomicUsize,
    authenticated: AtomicBool,
    /// When the last call ended (or the connection opened).
    idle_since: Mutex<Instant>,
    metrics: XdsMetrics,
}

impl ConnectionState {
    fn new(peer: Option<SocketAddr>, max_streams: usize, metrics: XdsMetrics) -> Self {
        ConnectionState(Arc::new(StateInner {
            peer,
            max_streams,
            streams: AtomicUsize::new(0),
            authenticated: AtomicBool::new(false),
            idle_since: Mutex::new(Instant::now()),
            metrics,
        }))
    }

    /// Records that a call on this connection passed authentication.
    pub fn authenticated(&self) {
        self.0.authenticated.store(true, Ordering::Relaxed);
    }

    /// Takes a call slot, or `None` (counted and logged) when the connection has `max_streams` calls open.
    pub fn open_stream(&self) -> Option<StreamSlot> {
        let inner = &self.0;
        let taken = inner
            .streams
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |open| {
                (open < inner.max_streams).then_some(open + 1)
            });
        if taken.is_err() {
            limit_hit(
                &inner.metrics,
                Limit::StreamsPerConnection,
                format_args!(
                    "refusing an xDS call: its connection from {} already has {} calls open",
                    display_peer(inner.peer),
                    inner.max_streams
                ),
            );
            return None;
        }
        Some(StreamSlot(self.clone()))
    }
}

/// An open call's slot on its connection; freed when dropped.
#[derive(Debug)]
pub struct StreamSlot(ConnectionState);

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let inner = &(self.0).0;
        if inner.streams.fetch_sub(1, Ordering::AcqRel) == 1 {
            *inner
                .idle_since
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Instant::now();
        }
    }
}

/// The limits, for `admitpilot_xds_limits_total{limit}` (`NackRate` stays last: [`LAST_LOGGED`] is sized by it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Limit {
    Connections,
    StreamsPerConnection,
    PreAuth,
    Idle,
    RequestSize,
    BufferedRequests,
    NackDetail,
    NackRate,
}

impl Limit {
    /// The metric label.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Limit::Connections => "connections",
            Limit::StreamsPerConnection => "streams_per_connection",
            Limit::PreAuth => "pre_auth_timeout",
            Limit::Idle => "idle_timeout",
            Limit::RequestSize => "request_size",
            Limit::BufferedRequests => "buffered_requests",
            Limit::NackDetail => "nack_detail",
            Limit::NackRate => "nack_rate",
        }
    }
}

/// The second each limit last logged (indexed by the [`Limit`]), so a flood logs one line a second per limit.
static LAST_LOGGED: [AtomicU64; Limit::NackRate as usize + 1] =
    [const { AtomicU64::new(u64::MAX) }; Limit::NackRate as usize + 1];

/// Counts a limit that bit and logs `message`, at most once a second per limit.
pub(crate) fn limit_hit(metrics: &XdsMetrics, limit: Limit, message: std::fmt::Arguments<'_>) {
    metrics.limit_hit(limit.as_str());
    let second = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    if LAST_LOGGED[limit as usize].swap(second, Ordering::Relaxed) != second {
        tracing::warn!(limit = limit.as_str(), "{message}");
    }
}

fn display_peer(peer: Option<SocketAddr>) -> String {
    peer.map_or_else(|| "an unknown address".into(), |p| p.to_string())
}

/// An accepted connection that closes itself when a timeout of [`ConnectionLimits`] passes, and frees its place
/// under `max_connections` when dropped.
pub struct Guarded<T> {
    io: T,
    state: ConnectionState,
    limits: ConnectionLimits,
    timer: Pin<Box<Sleep>>,
    _permit: OwnedSemaphorePermit,
}

impl<T> Drop for Guarded<T> {
    fn drop(&mut self) {
        self.state.0.metrics.connection_closed();
    }
}

impl<T> Guarded<T> {
    /// Guards an established connection: counted open, its pre-authentication timer running, holding `permit`
    /// until it is dropped.
    fn new(
        io: T,
        state: ConnectionState,
        limits: ConnectionLimits,
        permit: OwnedSemaphorePermit,
    ) -> Self {
        state.0.metrics.connection_opened();
        Guarded {
            io,
            state,
            limits,
            timer: Box::pin(tokio::time::sleep(limits.pre_auth_timeout)),
            _permit: permit,
        }
    }

    /// Whether the connection must close now; otherwise re-arms the timer for the next check.
    fn expired(&mut self) -> Option<io::Error> {
        let inner = &self.state.0;
        if !inner.authenticated.load(Ordering::Relaxed) {
            limit_hit(
                &inner.metrics,
                Limit::PreAuth,
                format_args!(
                    "closing an xDS connection from {}: no authenticated call within {:?}",
                    display_peer(inner.peer),
                    self.limits.pre_auth_timeout
                ),
            );
            return Some(io::Error::new(
                io::ErrorKind::TimedOut,
                "no authenticated call in time",
            ));
        }
        let now = Instant::now();
        let next = if inner.streams.load(Ordering::Acquire) > 0 {
            now + self.limits.idle_timeout
        } else {
            let idle_since = *inner
                .idle_since
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let until = idle_since + self.limits.idle_timeout;
            if until <= now {
                limit_hit(
                    &inner.metrics,
                    Limit::Idle,
                    format_args!(
                        "closing an xDS connection from {}: no open call for {:?}",
                        display_peer(inner.peer),
                        self.limits.idle_timeout
                    ),
                );
                return Some(io::Error::new(io::ErrorKind::TimedOut, "idle connection"));
            }
            until
        };
        self.timer.as_mut().reset(next);
        None
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Guarded<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        // hyper keeps a read pending on every connection, so the timer is polled (and wakes it) here.
        while self.timer.as_mut().poll(cx).is_ready() {
            if let Some(error) = self.expired() {
                return Poll::Ready(Err(error));
            }
        }
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Guarded<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

impl<T> Connected for Guarded<T> {
    type ConnectInfo = ConnectionState;

    fn connect_info(&self) -> ConnectionState {
        self.state.clone()
    }
}

/// Accepts connections on `listener` while fewer than `limits.max_connections` are open, runs each through
/// `handshake` (within `limits.handshake_timeout`, in its own task) and yields the established ones, guarded. The
/// task stops when aborted or the receiver is gone.
pub(crate) fn incoming<T, H, F>(
    listener: TcpListener,
    limits: ConnectionLimits,
    metrics: XdsMetrics,
    handshake: H,
) -> (
    mpsc::Receiver<io::Result<Guarded<T>>>,
    tokio::task::JoinHandle<()>,
)
where
    T: Send + 'static,
    H: Fn(TcpStream) -> F + Send + 'static,
    F: Future<Output = io::Result<T>> + Send + 'static,
{
    let (sender, receiver) = mpsc::channel(64);
    let open = Arc::new(Semaphore::new(limits.max_connections));
    let task = tokio::spawn(async move {
        loop {
            let (tcp, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Usually out of file descriptors; pause instead of spinning.
                    tracing::warn!(%error, "xDS accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            if sender.is_closed() {
                return;
            }
            let Ok(permit) = Arc::clone(&open).try_acquire_owned() else {
                limit_hit(
                    &metrics,
                    Limit::Connections,
                    format_args!(
                        "closing an xDS connection from {peer}: {} connections are open on this port",
                        limits.max_connections
                    ),
                );
                drop(tcp);
                continue;
            };
            let _ = tcp.set_nodelay(true);
            let state = ConnectionState::new(Some(peer), limits.max_streams, metrics.clone());
            let established = handshake(tcp);
            let sender = sender.clone();
            // The permit is held through the handshake, and released with the connection.
            tokio::spawn(async move {
                match tokio::time::timeout(limits.handshake_timeout, established).await {
                    Ok(Ok(io)) => {
                        let _ = sender
                            .send(Ok(Guarded::new(io, state, limits, permit)))
                            .await;
                    }
                    Ok(Err(error)) => tracing::debug!(%peer, %error, "xDS handshake failed"),
                    Err(_) => tracing::debug!(%peer, "xDS handshake timed out"),
                }
            });
        }
    });
    (receiver, task)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_holds_at_most_max_streams_calls() {
        let metrics = XdsMetrics::default();
        let state = ConnectionState::new(None, 2, metrics.clone());
        let first = state.open_stream();
        let second = state.open_stream();
        assert!(first.is_some() && second.is_some());
        assert!(state.open_stream().is_none());
        assert_eq!(metrics.limit_count("streams_per_connection"), 1);
        drop(first);
        assert!(state.open_stream().is_some());
    }

    fn permit() -> OwnedSemaphorePermit {
        Arc::new(Semaphore::new(1))
            .try_acquire_owned()
            .expect("a permit")
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_without_an_authenticated_call_closes_after_the_pre_auth_timeout() {
        let (_client, server) = tokio::io::duplex(64);
        let metrics = XdsMetrics::default();
        let limits = ConnectionLimits::default();
        let state = ConnectionState::new(None, 1, metrics.clone());
        let mut guarded = Guarded::new(server, state, limits, permit());
        let mut buf = [0u8; 8];
        let read = tokio::io::AsyncReadExt::read(&mut guarded, &mut buf);
        let error = read.await.expect_err("the connection must close");
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert_eq!(metrics.limit_count("pre_auth_timeout"), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn an_authenticated_connection_closes_only_after_being_idle() {
        let (_client, server) = tokio::io::duplex(64);
        let metrics = XdsMetrics::default();
        let limits = ConnectionLimits::default();
        let state = ConnectionState::new(None, 1, metrics.clone());
        state.authenticated();
        let slot = state.open_stream();
        let mut guarded = Guarded::new(server, state, limits, permit());
        let mut buf = [0u8; 8];
        // With a call open, ten idle timeouts pass without closing.
        let read = tokio::time::timeout(
            limits.idle_timeout * 10,
            tokio::io::AsyncReadExt::read(&mut guarded, &mut buf),
        );
        assert!(
            read.await.is_err(),
            "the connection closed with a call open"
        );
        drop(slot);
        let start = Instant::now();
        let error = tokio::io::AsyncReadExt::read(&mut guarded, &mut buf)
            .await
            .expect_err("the idle connection must close");
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert!(start.elapsed() >= limits.idle_timeout);
        assert_eq!(metrics.limit_count("idle_timeout"), 1);
    }
}
