//! Who may read the admin server's `/debug/*` pages (the whole config, connected proxies, their NACKs): takes a
//! request's peer address and `authorization` header and lets it through or answers 401/403. After istiod's
//! `allowAuthenticatedOrLocalhost` (pilot/pkg/xds/debug.go): a request from the loopback address (inside the pod:
//! `kubectl port-forward`, `kubectl exec … curl`) is served; any other needs a service-account token that the
//! API server verifies (TokenReview, the xDS audience) and that belongs to admitpilot's own namespace, as
//! istiod's debug endpoints accept its system namespace only. `/metrics`, `/healthz` and `/readyz` stay open
//! (Prometheus and the kubelet's probes).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use admitpilot_xds::auth::{bearer, KubeAuth};

/// Prefix of the paths this gate guards.
pub const DEBUG_PREFIX: &str = "/debug/";

/// Who may read `/debug/*` besides loopback callers.
#[derive(Clone, Debug)]
pub enum DebugAccess {
    /// Loopback callers only (folder mode, or no API server to verify tokens with).
    Loopback,
    /// Loopback callers, and callers with a verified token of a service account in `namespace`.
    LoopbackOrToken {
        /// The checks of the authenticated xDS port.
        auth: Arc<KubeAuth>,
        /// admitpilot's own namespace.
        namespace: String,
    },
}

/// The axum middleware applying `access` to `/debug/*`.
pub async fn guard(State(access): State<DebugAccess>, request: Request, next: Next) -> Response {
    if !request.uri().path().starts_with(DEBUG_PREFIX) {
        return next.run(request).await;
    }
    // A request without a peer address (never over a socket) is not let through: the gate fails closed.
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|info| info.0);
    if peer.is_some_and(|peer| peer.ip().is_loopback()) {
        return next.run(request).await;
    }
    // Nothing borrowed from the request is held across an await (its body is not `Sync`).
    let path = request.uri().path().to_owned();
    let refused = |status: StatusCode, why: String| {
        tracing::warn!(peer = ?peer, %path, %why, "debug request refused");
        (status, format!("{why}\n")).into_response()
    };
    let DebugAccess::LoopbackOrToken { auth, namespace } = &access else {
        return refused(
            StatusCode::FORBIDDEN,
            "the debug pages are served on the loopback address only (kubectl port-forward)".into(),
        );
    };
    let Some(token) = bearer(request.headers()).map(str::to_owned) else {
        return refused(
            StatusCode::UNAUTHORIZED,
            format!(
                "the debug pages need `authorization: Bearer <token>` of a service account in {namespace} \
                 (audience {}), or a loopback caller",
                auth.audience()
            ),
        );
    };
    match auth.verify_token(&token).await {
        Ok(identity) if identity.namespace == *namespace => next.run(request).await,
        Ok(identity) => refused(
            StatusCode::FORBIDDEN,
            format!("{identity} is not a service account of admitpilot's namespace {namespace}"),
        ),
        Err(error) => refused(StatusCode::UNAUTHORIZED, error.to_string()),
    }
}
