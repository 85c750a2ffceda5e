//! The plain-HTTP admin server: takes the shared metrics registry, the readiness conditions and extra routes
//! from other subsystems (`/debug/...`), and serves `/metrics`, `/healthz` and `/readyz`; [`configz`] serves the
//! config and its status.
//!
//! `/debug/*` is served to loopback callers, or to a verified service account of admitpilot's namespace
//! ([`debug_access`]); the other paths are open.
//!
//! Subsystems plug in by registering their metrics into the [`Registry`] (each under its own prefix) and their
//! readiness conditions into [`Readiness`] before the server starts, and by handing extra routers to
//! [`router`].

pub mod configz;
pub mod debug_access;
mod readiness;
pub mod redact;

use std::future::Future;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

pub use debug_access::DebugAccess;
pub use readiness::{Condition, Readiness};

/// Content type of the Prometheus/OpenMetrics text exposition.
pub const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone)]
struct AdminState {
    registry: Arc<Registry>,
    readiness: Readiness,
}

/// Builds the admin routes, merged with `extra` routers (which must not reuse the built-in paths), `/debug/*`
/// behind `debug`.
pub fn router(
    registry: Arc<Registry>,
    readiness: Readiness,
    debug: DebugAccess,
    extra: impl IntoIterator<Item = Router>,
) -> Router {
    let builtin = Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(AdminState {
            registry,
            readiness,
        });
    extra
        .into_iter()
        .fold(builtin, Router::merge)
        .layer(axum::middleware::from_fn_with_state(
            debug,
            debug_access::guard,
        ))
}

async fn metrics(State(state): State<AdminState>) -> Response {
    let mut text = String::new();
    match prometheus_client::encoding::text::encode(&mut text, &state.registry) {
        Ok(()) => ([(header::CONTENT_TYPE, METRICS_CONTENT_TYPE)], text).into_response(),
        Err(error) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot encode metrics: {error}\n"),
        )
            .into_response(),
    }
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(state): State<AdminState>) -> Response {
    let conditions = state.readiness.snapshot();
    let mut text = String::new();
    for (name, ok) in &conditions {
        text.push_str(if *ok { "[+] " } else { "[-] " });
        text.push_str(name);
        text.push('\n');
    }
    if conditions.iter().all(|(_, ok)| *ok) {
        text.push_str("ready\n");
        (StatusCode::OK, text).into_response()
    } else {
        text.push_str("not ready\n");
        (StatusCode::SERVICE_UNAVAILABLE, text).into_response()
    }
}

/// Serves `router` over plain HTTP on `listener` until `shutdown` resolves; handlers see the peer address
/// (`ConnectInfo<SocketAddr>`).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(
        listener,
        router.into_make_service_with_connect_info::<std::net::SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown)
    .await
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    use super::*;

    async fn get_from(router: &Router, peer: &str, path: &str) -> (StatusCode, String) {
        let peer: std::net::SocketAddr = peer.parse().unwrap();
        let response = router
            .clone()
            .oneshot(
                Request::get(path)
                    .extension(axum::extract::ConnectInfo(peer))
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    async fn get_text(router: &Router, path: &str) -> (StatusCode, String) {
        get_from(router, "127.0.0.1:40000", path).await
    }

    #[tokio::test]
    async fn serves_health_readiness_metrics_and_extra_routes() {
        let mut registry = Registry::with_prefix("admitpilot");
        let counter = prometheus_client::metrics::counter::Counter::<u64>::default();
        registry.register("things", "Things seen", counter.clone());
        counter.inc();
        let readiness = Readiness::new();
        let cert = readiness.register("certificate loaded");
        let extra = Router::new().route("/debug/configz", get(|| async { "config" }));
        let router = router(
            Arc::new(registry),
            readiness,
            DebugAccess::Loopback,
            [extra],
        );

        assert_eq!(get_text(&router, "/healthz").await.0, StatusCode::OK);
        let (status, text) = get_text(&router, "/readyz").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(text.contains("[-] certificate loaded"), "{text}");
        cert.set(true);
        assert_eq!(get_text(&router, "/readyz").await.0, StatusCode::OK);
        let (_, text) = get_text(&router, "/metrics").await;
        assert!(text.contains("admitpilot_things_total 1"), "{text}");
        assert_eq!(get_text(&router, "/debug/configz").await.1, "config");
    }

    /// The pod network gets metrics and probes, not the debug pages (nor does a request without a peer).
    #[tokio::test]
    async fn debug_pages_are_for_loopback_callers_only() {
        let extra = Router::new().route("/debug/configz", get(|| async { "config" }));
        let router = router(
            Arc::new(Registry::default()),
            Readiness::new(),
            DebugAccess::Loopback,
            [extra],
        );
        assert_eq!(
            get_from(&router, "[::1]:1", "/debug/configz").await.0,
            StatusCode::OK
        );
        let (status, text) = get_from(&router, "10.1.2.3:5000", "/debug/configz").await;
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert!(text.contains("loopback"), "{text}");
        assert_eq!(
            get_from(&router, "10.1.2.3:5000", "/metrics").await.0,
            StatusCode::OK
        );
        assert_eq!(
            get_from(&router, "10.1.2.3:5000", "/healthz").await.0,
            StatusCode::OK
        );
        let response = router
            .clone()
            .oneshot(Request::get("/debug/configz").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::FORBIDDEN);
    }
}
