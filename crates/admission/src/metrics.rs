//! Webhook metrics: registered into the shared Prometheus registry, updated by the handler and the
//! certificate reloader.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use admitpilot_serving::metrics::register_metrics;

use super::review::{Reviewed, Verdict};

/// Labels of `requests_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct RequestLabels {
    /// API group of the object (`core` for the core group; `unknown` for kinds admitpilot does not handle, to bound cardinality).
    pub group: &'static str,
    /// Kind of the object (`unknown` likewise).
    pub kind: &'static str,
    /// CREATE, UPDATE, DELETE or CONNECT.
    pub operation: &'static str,
    /// `allowed`, `skipped` (admitted without validation) or `denied`.
    pub verdict: &'static str,
}

/// Labels of `denials_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct DenialLabels {
    /// `missing_object`, `decode_error`, `invalid_resource`, `would_be_rejected` or `broken_reference`.
    pub reason: &'static str,
}

/// Labels of `http_errors_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct HttpErrorLabels {
    /// HTTP status code sent instead of an AdmissionReview.
    pub status: u16,
}

/// Labels of `cert_reloads_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ReloadLabels {
    /// `success` or `error` (the previous certificate stays in use).
    pub result: &'static str,
}

/// Every metric the webhook exports; cheap to clone (all handles are shared).
#[derive(Debug, Clone)]
pub struct WebhookMetrics {
    requests: Family<RequestLabels, Counter>,
    denials: Family<DenialLabels, Counter>,
    dry_run_denials: Family<DenialLabels, Counter>,
    http_errors: Family<HttpErrorLabels, Counter>,
    duration: Histogram,
    effect_check_duration: Histogram,
    cert_reloads: Family<ReloadLabels, Counter>,
}

impl WebhookMetrics {
    /// Creates the metrics and registers them under the `webhook` prefix of `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = WebhookMetrics {
            requests: Family::default(),
            denials: Family::default(),
            dry_run_denials: Family::default(),
            http_errors: Family::default(),
            duration: Histogram::new(exponential_buckets(0.000_05, 2.0, 18)),
            effect_check_duration: Histogram::new(exponential_buckets(0.000_05, 2.0, 18)),
            cert_reloads: Family::default(),
        };
        let sub = registry.sub_registry_with_prefix("webhook");
        register_metrics! { sub;
            "requests" => metrics.requests,
                "AdmissionReviews answered, by object group/kind, operation and verdict (dry-run denials excluded)";
            "denials" => metrics.denials,
                "AdmissionReviews denied, by reason (dry-run requests excluded)";
            "dry_run_denials" => metrics.dry_run_denials,
                "Dry-run AdmissionReviews that would have been denied, by reason (not counted as requests or denials)";
            "http_errors" => metrics.http_errors,
                "Requests answered with an HTTP error instead of an AdmissionReview, by status";
            "request_duration_seconds" => metrics.duration,
                "Time from request received to response ready for AdmissionReviews";
            "effect_check_duration_seconds" => metrics.effect_check_duration,
                "Time the whole-config check of one valid object took (translation for every gateway it touches, \
                 Envoy's load checks, references); objects admitpilot does not validate are never checked";
            "cert_reloads" => metrics.cert_reloads,
                "Serving certificate reloads from disk, by result";
        }
        metrics
    }

    /// Records one answered review and its handling time.
    pub fn observe_review(&self, reviewed: &Reviewed, seconds: f64) {
        self.duration.observe(seconds);
        let verdict = match reviewed.verdict {
            Verdict::Allowed => "allowed",
            Verdict::Skipped => "skipped",
            Verdict::Denied(reason) => {
                // Like Istio, a failed dry run is not counted as a failure; it has a counter of its own.
                if reviewed.dry_run {
                    self.dry_run_denials
                        .get_or_create(&DenialLabels {
                            reason: reason.as_str(),
                        })
                        .inc();
                    return;
                }
                self.denials
                    .get_or_create(&DenialLabels {
                        reason: reason.as_str(),
                    })
                    .inc();
                "denied"
            }
        };
        let (group, kind) = reviewed
            .kind
            .map(|k| match k.info().group {
                "" => ("core", k.info().kind),
                group => (group, k.info().kind),
            })
            .unwrap_or(("unknown", "unknown"));
        self.requests
            .get_or_create(&RequestLabels {
                group,
                kind,
                operation: reviewed.operation.as_str(),
                verdict,
            })
            .inc();
    }

    /// Records the time one whole-config check took.
    pub fn observe_effect_check(&self, seconds: f64) {
        self.effect_check_duration.observe(seconds);
    }

    /// Records a request answered with an HTTP error status.
    pub fn observe_http_error(&self, status: u16) {
        self.http_errors
            .get_or_create(&HttpErrorLabels { status })
            .inc();
    }

    /// Records a certificate reload attempt.
    pub fn observe_cert_reload(&self, ok: bool) {
        let result = if ok { "success" } else { "error" };
        self.cert_reloads
            .get_or_create(&ReloadLabels { result })
            .inc();
    }
}
