//! The validating admission webhook: takes HTTPS `POST /validate` (or `/admitpilot`) AdmissionReviews and
//! answers allow/deny using the shared validator ([`admitpilot_validate`]).
//!
//! [`review`] is the HTTP-free core, [`effects`] what a valid object would do to the gateways, [`router`] the
//! axum routes and HTTP-level checks (size, content type, timeout), [`server`] the TLS accept loop, [`tls`] the
//! reloadable certificate, [`metrics`] what is exported.

pub mod effects;
pub mod metrics;
pub mod review;
pub mod server;

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use tokio::sync::Semaphore;
use tower_http::timeout::TimeoutLayer;

use admitpilot_model::decode::DecodeOptions;
use effects::GatewayCheck;
use metrics::WebhookMetrics;
use review::Verdict;
use server::ServerLimits;

/// The paths the webhook answers on; a trailing segment is accepted too (`/validate/`, `/validate/x`).
pub const PATHS: [&str; 2] = ["/validate", "/admitpilot"];

/// Bodies up to this size are reviewed on the async worker that received them; larger ones on the blocking
/// pool. A typical review (3 KB) takes tens of microseconds, less than handing it to another thread costs;
/// at 64 KiB a review takes about a millisecond, long enough to hold up every other connection on that worker
/// (see BENCHMARKS.md, webhook). With the effect check on, every review goes to the blocking pool: it translates,
/// and waits for other reviews of the same gateway.
pub const INLINE_REVIEW_BYTES: usize = 64 * 1024;

/// Path of the do-nothing endpoint enabled for benchmarks only (transport floor).
pub const NOOP_PATH: &str = "/noop";

/// What the webhook handler needs: where higress-config lives, the body limit, its metrics, and the effect
/// check when the process serves gateways.
#[derive(Clone)]
pub struct Webhook {
    options: DecodeOptions,
    max_body_bytes: usize,
    metrics: WebhookMetrics,
    gateways: Option<Arc<dyn GatewayCheck>>,
    review_budget: Duration,
    /// Reviews of bodies up to [`LARGE_REVIEW_BYTES`] running on the blocking pool at once.
    ordinary: Arc<Semaphore>,
    /// Reviews of larger bodies running at once: at most half the cores, so they cannot starve ordinary ones.
    large: Arc<Semaphore>,
}

/// Bodies above this are reviewed under the [`Webhook`]'s separate, smaller concurrency limit.
pub const LARGE_REVIEW_BYTES: usize = 256 * 1024;

impl std::fmt::Debug for Webhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhook")
            .field("options", &self.options)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("effect_check", &self.gateways.is_some())
            .finish_non_exhaustive()
    }
}

impl Webhook {
    /// Creates the handler state.
    pub fn new(options: DecodeOptions, max_body_bytes: usize, metrics: WebhookMetrics) -> Self {
        let cores = std::thread::available_parallelism().map_or(2, usize::from);
        Webhook {
            options,
            max_body_bytes,
            metrics,
            gateways: None,
            review_budget: ServerLimits::default().review_budget,
            ordinary: Arc::new(Semaphore::new(cores * 4)),
            large: Arc::new(Semaphore::new((cores / 2).max(1))),
        }
    }

    /// Sets the time one review's validation may take (see [`ServerLimits::review_budget`]).
    pub fn with_review_budget(mut self, budget: Duration) -> Self {
        self.review_budget = budget;
        self
    }

    /// Also checks every valid object for its effect on the gateways (see [`effects`]).
    pub fn with_gateway_check(mut self, gateways: Arc<dyn GatewayCheck>) -> Self {
        self.gateways = Some(gateways);
        self
    }

    /// Answers one request body that passed the HTTP checks: an AdmissionReview response, or 400.
    pub fn respond(&self, body: &[u8], started: Instant) -> Response {
        // The budget counts from here: time spent waiting for a permit is not the object's fault.
        let deadline = Instant::now() + self.review_budget;
        let reviewed = admitpilot_validate::deadline::run_until(deadline, || {
            review::review(body, &self.options, self.gateways.as_deref())
        });
        match reviewed {
            Ok(reviewed) => {
                self.metrics
                    .observe_review(&reviewed, started.elapsed().as_secs_f64());
                log_review(&reviewed);
                ([(header::CONTENT_TYPE, "application/json")], reviewed.body).into_response()
            }
            Err(error) => self.http_error(StatusCode::BAD_REQUEST, &error),
        }
    }

    fn http_error(&self, status: StatusCode, message: &dyn std::fmt::Display) -> Response {
        self.metrics.observe_http_error(status.as_u16());
        tracing::debug!(status = status.as_u16(), %message, "bad webhook request");
        (status, format!("{message}\n")).into_response()
    }
}

fn log_review(reviewed: &review::Reviewed) {
    // Field values are built only when the event is enabled: allowed reviews log at debug level.
    let kind = reviewed.kind.map_or("", |k| k.info().kind);
    match reviewed.verdict {
        Verdict::Denied(reason) => tracing::info!(
            operation = reviewed.operation.as_str(),
            kind,
            object = %reviewed.object_name(),
            dry_run = reviewed.dry_run,
            reason = reason.as_str(),
            message = reviewed.message.as_deref().unwrap_or_default(),
            "admission denied"
        ),
        Verdict::Allowed | Verdict::Skipped => tracing::debug!(
            operation = reviewed.operation.as_str(),
            kind,
            object = %reviewed.object_name(),
            dry_run = reviewed.dry_run,
            warnings = %reviewed.warnings.join("; "),
            "admission allowed"
        ),
    }
}

/// Tells whether a Content-Type header names JSON (`application/json`, parameters such as charset allowed).
pub fn is_json_content_type(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

async fn validate_handler(State(webhook): State<Arc<Webhook>>, request: Request) -> Response {
    let started = Instant::now();
    // Read the one header needed instead of extracting (cloning) the whole header map.
    let json = is_json_content_type(request.headers());
    let body = match Bytes::from_request(request, &()).await {
        Ok(body) => body,
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            let limit = webhook.max_body_bytes;
            return webhook.http_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("request body is larger than {limit} bytes"),
            );
        }
        Err(rejection) => {
            return webhook.http_error(
                StatusCode::BAD_REQUEST,
                &format!("cannot read request body: {}", rejection.body_text()),
            );
        }
    };
    if !json {
        return webhook.http_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            &"invalid Content-Type; expected application/json",
        );
    }
    if body.is_empty() {
        return webhook.http_error(StatusCode::BAD_REQUEST, &review::Error::EmptyBody);
    }
    if body.len() <= INLINE_REVIEW_BYTES && webhook.gateways.is_none() {
        return webhook.respond(&body, started);
    }
    // Reviews on the blocking pool take a permit first, large bodies from their own smaller pool, so a burst of
    // huge objects cannot hold every core while ordinary reviews wait.
    let permits = if body.len() > LARGE_REVIEW_BYTES {
        &webhook.large
    } else {
        &webhook.ordinary
    };
    let wait = webhook.review_budget.saturating_sub(started.elapsed());
    let Ok(Ok(permit)) = tokio::time::timeout(wait, Arc::clone(permits).acquire_owned()).await
    else {
        return webhook.http_error(
            StatusCode::SERVICE_UNAVAILABLE,
            &"the webhook is busy with other large reviews; retry",
        );
    };
    let blocking = Arc::clone(&webhook);
    let reviewing = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        blocking.respond(&body, started)
    });
    match reviewing.await {
        Ok(response) => response,
        Err(error) => webhook.http_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("the review task failed: {error}"),
        ),
    }
}

async fn noop_handler(_body: Bytes) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], "{}").into_response()
}

/// Builds the webhook routes with the body limit and request timeout of `limits`; `bench_noop` adds the
/// do-nothing [`NOOP_PATH`] route used to measure the transport alone.
pub fn router(webhook: Webhook, limits: &ServerLimits, bench_noop: bool) -> Router {
    let mut router = Router::new();
    for path in PATHS {
        router = router
            .route(path, post(validate_handler))
            .route(&format!("{path}/"), post(validate_handler))
            .route(&format!("{path}/{{*rest}}"), post(validate_handler));
    }
    if bench_noop {
        router = router.route(NOOP_PATH, post(noop_handler));
    }
    router
        .with_state(Arc::new(webhook))
        .layer(DefaultBodyLimit::max(limits.max_body_bytes))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            limits.request_timeout,
        ))
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    #[test]
    fn accepts_json_content_types_only() {
        let mut headers = HeaderMap::new();
        assert!(!is_json_content_type(&headers));
        for (value, ok) in [
            ("application/json", true),
            ("application/json; charset=utf-8", true),
            ("Application/JSON", true),
            ("application/yaml", false),
            ("text/plain", false),
            ("application/jsonx", false),
        ] {
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(value));
            assert_eq!(is_json_content_type(&headers), ok, "{value}");
        }
    }
}
