//! xDS metrics: counters, gauges and histograms the stream handlers update, registered into the shared
//! prometheus-client registry under `admitpilot_xds_*`.

use admitpilot_translate::dangling::Effect;
use std::fmt::Write as _;
use std::sync::Arc;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use super::resources::ResourceType;
use admitpilot_serving::metrics::register_metrics;

/// Which ADS flavour a stream speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Api {
    /// State of the world (`StreamAggregatedResources`).
    Sotw,
    /// Incremental (`DeltaAggregatedResources`).
    Delta,
}

impl Api {
    /// `sotw` or `delta`.
    pub fn as_str(self) -> &'static str {
        match self {
            Api::Sotw => "sotw",
            Api::Delta => "delta",
        }
    }
}

impl EncodeLabelValue for Api {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        encoder.write_str(self.as_str())
    }
}

/// Label set: ADS flavour only.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ApiLabels {
    /// ADS flavour.
    pub api: Api,
}

impl EncodeLabelValue for ResourceType {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        encoder.write_str(self.short_name())
    }
}

/// Label set: resource type (`cds`, `eds`, `lds`, …).
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct TypeLabels {
    /// Resource type, shown by its short name.
    pub r#type: ResourceType,
}

impl TypeLabels {
    fn of(kind: ResourceType) -> Self {
        TypeLabels { r#type: kind }
    }
}

/// Label set: what was done to config naming clusters a proxy does not get (`left_out`, `listener_held_back`, …).
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct EffectLabels {
    /// [`Effect::as_str`].
    pub effect: &'static str,
}

/// Label set: which limit bit (`connections`, `request_size`, …).
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct LimitLabels {
    /// The limit's name.
    pub limit: &'static str,
}

/// Label set: why something was refused (`unauthenticated`, `rbac`, `invalid`, …).
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ReasonLabels {
    /// Short reason.
    pub reason: &'static str,
}

type HistogramFamily = Family<TypeLabels, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // 0.5 ms … ~16 s.
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

/// Every metric the xDS server reports. Cheap to clone: one shared pointer, so each stream's copy costs a word.
#[derive(Debug, Clone, Default)]
pub struct XdsMetrics(Arc<Families>);

#[derive(Debug)]
struct Families {
    connected: Family<ApiLabels, Gauge>,
    pushes: Family<TypeLabels, Counter>,
    nacks: Family<TypeLabels, Counter>,
    stale_nonces: Counter,
    left_out: Family<EffectLabels, Counter>,
    held_back: Counter,
    excluded: Counter,
    secret_denied: Family<ReasonLabels, Counter>,
    auth_failures: Family<ReasonLabels, Counter>,
    limits: Family<LimitLabels, Counter>,
    open_connections: Gauge,
    push_latency: HistogramFamily,
    ack_latency: HistogramFamily,
}

impl Default for Families {
    fn default() -> Self {
        Families {
            connected: Family::default(),
            pushes: Family::default(),
            nacks: Family::default(),
            stale_nonces: Counter::default(),
            left_out: Family::default(),
            held_back: Counter::default(),
            excluded: Counter::default(),
            secret_denied: Family::default(),
            auth_failures: Family::default(),
            limits: Family::default(),
            open_connections: Gauge::default(),
            push_latency: Family::new_with_constructor(latency_histogram),
            ack_latency: Family::new_with_constructor(latency_histogram),
        }
    }
}

impl XdsMetrics {
    /// Creates the metrics and registers them in `registry` (prefix `xds_`).
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = XdsMetrics::default();
        let families = &metrics.0;
        let sub = registry.sub_registry_with_prefix("xds");
        register_metrics! { sub;
            "connected_proxies" => families.connected,
                "xDS streams currently open";
            "pushes" => families.pushes,
                "xDS responses sent, by resource type";
            "nacks" => families.nacks,
                "xDS responses rejected by the client, by resource type";
            "stale_nonces" => families.stale_nonces,
                "xDS requests ignored because they answered an outdated nonce";
            "left_out_features" => families.left_out,
                "Times a proxy group's translation newly changed config because it names a cluster the group does \
                 not get (e.g. tracing whose collector Service does not exist), by what was done";
            "held_back_resources" => families.held_back,
                "Times a proxy group's changed resource was held back because Envoy would reject it";
            "excluded_objects" => families.excluded,
                "Times an object changed without passing the webhook was left out of a proxy group's config (keeping \
                 its last good version) because Envoy would reject what it makes";
            "secret_denied" => families.secret_denied,
                "Secrets (certificates with private keys) withheld from an xDS stream whose identity may not read \
                 them, counted once per stream and secret, by reason (unauthenticated, rbac, api_error)";
            "auth_failures" => families.auth_failures,
                "xDS and MCP calls refused before any configuration was sent, by reason (missing, malformed, \
                 invalid or unavailable token; namespace or service account mismatch; forbidden)";
            "limits" => families.limits,
                "Times a limit of the xDS ports bit, by limit: connections (per port), streams_per_connection, \
                 pre_auth_timeout, idle_timeout, request_size, buffered_requests (all streams' unfinished \
                 requests), nack_detail (a NACK's error text truncated), nack_rate (NACKs ignored)";
            "open_connections" => families.open_connections,
                "Connections open on the xDS ports";
            "push_latency_seconds" => families.push_latency,
                "Time from a snapshot being published to the response carrying it being sent";
            "ack_latency_seconds" => families.ack_latency,
                "Time from a response being sent to the client acknowledging it";
        }
        metrics
    }

    pub(crate) fn stream_opened(&self, api: Api) {
        self.0.connected.get_or_create(&ApiLabels { api }).inc();
    }

    pub(crate) fn stream_closed(&self, api: Api) {
        self.0.connected.get_or_create(&ApiLabels { api }).dec();
    }

    pub(crate) fn pushed(&self, kind: ResourceType) {
        self.0.pushes.get_or_create(&TypeLabels::of(kind)).inc();
    }

    pub(crate) fn push_latency(&self, kind: ResourceType, seconds: f64) {
        self.0
            .push_latency
            .get_or_create(&TypeLabels::of(kind))
            .observe(seconds);
    }

    pub(crate) fn acked(&self, kind: ResourceType, seconds: f64) {
        self.0
            .ack_latency
            .get_or_create(&TypeLabels::of(kind))
            .observe(seconds);
    }

    pub(crate) fn nacked(&self, kind: ResourceType) {
        self.0.nacks.get_or_create(&TypeLabels::of(kind)).inc();
    }

    pub(crate) fn stale_nonce(&self) {
        self.0.stale_nonces.inc();
    }

    pub(crate) fn held_back(&self) {
        self.0.held_back.inc();
    }

    pub(crate) fn excluded(&self) {
        self.0.excluded.inc();
    }

    pub(crate) fn secret_denied(&self, reason: &'static str, count: u64) {
        self.0
            .secret_denied
            .get_or_create(&ReasonLabels { reason })
            .inc_by(count);
    }

    pub(crate) fn auth_failed(&self, reason: &'static str) {
        self.0
            .auth_failures
            .get_or_create(&ReasonLabels { reason })
            .inc();
    }

    pub(crate) fn limit_hit(&self, limit: &'static str) {
        self.0.limits.get_or_create(&LimitLabels { limit }).inc();
    }

    pub(crate) fn connection_opened(&self) {
        self.0.open_connections.inc();
    }

    pub(crate) fn connection_closed(&self) {
        self.0.open_connections.dec();
    }

    /// Times `limit` bit so far (for tests).
    pub fn limit_count(&self, limit: &'static str) -> u64 {
        self.0.limits.get_or_create(&LimitLabels { limit }).get()
    }

    /// Connections open on the xDS ports now.
    pub fn open_connections(&self) -> i64 {
        self.0.open_connections.get()
    }

    pub(crate) fn left_out(&self, effect: Effect) {
        self.0
            .left_out
            .get_or_create(&EffectLabels {
                effect: effect.as_str(),
            })
            .inc();
    }

    /// NACKs counted so far for one type (for tests and `/debug/syncz` consumers).
    pub fn nack_count(&self, kind: ResourceType) -> u64 {
        self.0.nacks.get_or_create(&TypeLabels::of(kind)).get()
    }

    /// Resources held back so far because Envoy would reject them.
    pub fn held_back_count(&self) -> u64 {
        self.0.held_back.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    #[test]
    fn registered_metrics_are_exported() {
        let mut registry = Registry::with_prefix("admitpilot");
        let metrics = XdsMetrics::register(&mut registry);
        metrics.stream_opened(Api::Delta);
        metrics.pushed(ResourceType::Cluster);
        metrics.nacked(ResourceType::Listener);
        metrics.push_latency(ResourceType::Cluster, 0.002);
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert!(text.contains("admitpilot_xds_connected_proxies{api=\"delta\"} 1"));
        assert!(text.contains("admitpilot_xds_pushes_total{type=\"cds\"} 1"));
        assert!(text.contains("admitpilot_xds_nacks_total{type=\"lds\"} 1"));
        assert!(text.contains("admitpilot_xds_push_latency_seconds_bucket"));
        metrics.secret_denied("rbac", 2);
        metrics.auth_failed("invalid");
        metrics.left_out(Effect::HeldBack);
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert!(text
            .contains("admitpilot_xds_left_out_features_total{effect=\"listener_held_back\"} 1"));
        assert!(text.contains("admitpilot_xds_secret_denied_total{reason=\"rbac\"} 2"));
        assert!(text.contains("admitpilot_xds_auth_failures_total{reason=\"invalid\"} 1"));
        assert_eq!(metrics.nack_count(ResourceType::Listener), 1);
    }
}
