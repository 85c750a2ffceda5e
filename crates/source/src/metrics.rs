//! Source metrics (prometheus-client): takes counts from the sources and the store, yields metric families to be
//! registered in the shared registry under the `source` sub-prefix (`admitpilot_source_*`).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use admitpilot_model::Kind;
use admitpilot_serving::metrics::register_metrics;

/// Labels a metric by object kind.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct KindLabels {
    /// The object kind (`VirtualService`, `ConfigMap`, ...).
    pub kind: String,
}

/// Labels a rejection by kind and reason.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct RejectLabels {
    /// The object kind, or `unknown` when it could not be read.
    pub kind: String,
    /// `undecodable`, `invalid` or `duplicate`.
    pub reason: String,
}

/// Labels a metric by source (`folder`, `kube`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct SourceLabels {
    /// The source.
    pub source: String,
}

/// Every metric the sources and the store record. Cheap to clone (all handles are shared).
#[derive(Debug, Clone)]
pub struct SourceMetrics {
    /// Objects in the latest published snapshot, by kind.
    pub objects: Family<KindLabels, Gauge>,
    /// Objects in the latest published snapshot that admitpilot does not enforce on gateways, by kind.
    pub unenforced: Family<KindLabels, Gauge>,
    /// Objects kept out of the store, by kind and reason.
    pub rejected: Family<RejectLabels, Counter>,
    /// Files or watch payloads that could not be parsed at all, by source.
    pub parse_errors: Family<SourceLabels, Counter>,
    /// Snapshots published.
    pub publishes: Counter,
    /// Seconds from the first unpublished change to its snapshot being published (includes the debounce).
    pub publish_latency: Histogram,
    /// Version of the latest published snapshot.
    pub snapshot_version: Gauge,
    /// Kubernetes Events that could not be created.
    pub event_errors: Counter,
    /// Objects served in their last good version because their newest version is invalid.
    pub last_good_held: Gauge,
    /// Held objects not persisted because the state would grow past its size limit.
    pub last_good_unsaved: Gauge,
    /// Failed writes of the persisted last-good state.
    pub state_write_errors: Counter,
}

impl Default for SourceMetrics {
    fn default() -> Self {
        SourceMetrics {
            objects: Family::default(),
            unenforced: Family::default(),
            rejected: Family::default(),
            parse_errors: Family::default(),
            publishes: Counter::default(),
            // 0.5 ms .. ~8 s
            publish_latency: Histogram::new(exponential_buckets(0.0005, 2.0, 15)),
            snapshot_version: Gauge::default(),
            event_errors: Counter::default(),
            last_good_held: Gauge::default(),
            last_good_unsaved: Gauge::default(),
            state_write_errors: Counter::default(),
        }
    }
}

impl SourceMetrics {
    /// Registers every metric in `registry` under the `source` sub-prefix (the shared registry carries the
    /// `admitpilot` prefix, so names read `admitpilot_source_*`).
    pub fn register(&self, registry: &mut Registry) {
        register_metrics! { registry;
            "unenforced_objects" => self.unenforced,
                "Objects in the latest published snapshot that admitpilot validates but does not enforce on gateways \
                 (AuthorizationPolicy, Telemetry, WasmPlugin...), by kind";
        }
        let registry = registry.sub_registry_with_prefix("source");
        register_metrics! { registry;
            "objects" => self.objects,
                "Objects in the latest published snapshot, by kind";
            "rejected_objects" => self.rejected,
                "Objects kept out of the snapshot, by kind and reason";
            "parse_errors" => self.parse_errors,
                "Files or payloads that could not be parsed, by source";
            "snapshot_publishes" => self.publishes,
                "Snapshots published";
            "publish_latency_seconds" => self.publish_latency,
                "Seconds from the first unpublished change to the published snapshot (includes debounce)";
            "snapshot_version" => self.snapshot_version,
                "Version of the latest published snapshot";
            "event_errors" => self.event_errors,
                "Kubernetes Events that could not be created";
            "last_good_held" => self.last_good_held,
                "Objects served in their last good version because their newest version is invalid";
            "last_good_unsaved" => self.last_good_unsaved,
                "Held objects not persisted because the state would grow past its size limit";
            "state_write_errors" => self.state_write_errors,
                "Failed writes of the persisted last-good state";
        }
    }

    /// Counts one rejected object.
    pub fn reject(&self, kind: Option<Kind>, reason: &str) {
        let kind = kind.map_or_else(|| "unknown".to_string(), |k| k.to_string());
        self.rejected
            .get_or_create(&RejectLabels {
                kind,
                reason: reason.to_string(),
            })
            .inc();
    }

    /// Counts one unparseable file or payload.
    pub fn parse_error(&self, source: &str) {
        self.parse_errors
            .get_or_create(&SourceLabels {
                source: source.to_string(),
            })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::encoding::text::encode;

    #[test]
    fn encodes_with_prefix_and_labels() {
        let metrics = SourceMetrics::default();
        let mut registry = Registry::with_prefix("admitpilot");
        metrics.register(&mut registry);
        metrics.reject(Some(Kind::VirtualService), "invalid");
        metrics.parse_error("folder");
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert!(text.contains(
            "admitpilot_source_rejected_objects_total{kind=\"VirtualService\",reason=\"invalid\"} 1"
        ));
        assert!(text.contains("admitpilot_source_parse_errors_total{source=\"folder\"} 1"));
    }
}
