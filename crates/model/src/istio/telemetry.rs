//! Istio `Telemetry` spec (telemetry.istio.io v1/v1alpha1): takes the `spec` JSON, yields tracing, metrics and
//! access-logging settings.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::proxy_config::TypeWorkloadSelector;
use super::types::PolicyTargetReference;

/// The `spec` of a Telemetry: tracing, metrics and access logging for the selected workloads.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Telemetry {
    /// Workloads the settings apply to.
    pub selector: Option<TypeWorkloadSelector>,
    /// Single resource the settings attach to.
    pub target_ref: Option<PolicyTargetReference>,
    /// Resources the settings attach to.
    pub target_refs: Vec<PolicyTargetReference>,
    /// Tracing settings (at most one entry is supported).
    pub tracing: Vec<Tracing>,
    /// Metrics settings.
    pub metrics: Vec<Metrics>,
    /// Access-logging settings.
    pub access_logging: Vec<AccessLogging>,
}

/// Which traffic direction a telemetry block applies to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TelemetryMode {
    /// Both directions.
    #[default]
    ClientAndServer,
    /// Outbound only.
    Client,
    /// Inbound only.
    Server,
}

/// Restricts a telemetry block to one traffic direction.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ModeSelector {
    /// The direction.
    pub mode: TelemetryMode,
}

/// A reference to an extension provider declared in mesh config.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProviderRef {
    /// Provider name; required.
    pub name: Option<String>,
}

/// Tracing settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Tracing {
    /// Traffic direction.
    #[serde(rename = "match")]
    pub match_: Option<ModeSelector>,
    /// Tracing providers (at most one is supported).
    pub providers: Vec<ProviderRef>,
    /// Percentage of requests sampled, 0..100.
    pub random_sampling_percentage: Option<f64>,
    /// Stop reporting spans (context is still propagated).
    pub disable_span_reporting: Option<bool>,
    /// Extra span tags, by tag name.
    pub custom_tags: BTreeMap<String, CustomTag>,
    /// Sample based on the `x-request-id` header.
    pub use_request_id_for_trace_sampling: Option<bool>,
    /// Add Istio's standard tags.
    pub enable_istio_tags: Option<bool>,
    /// Do not propagate trace context.
    pub disable_context_propagation: Option<bool>,
}

/// Where a custom tag's value comes from (exactly one of the fields).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CustomTag {
    /// A fixed value.
    pub literal: Option<LiteralTag>,
    /// A proxy environment variable.
    pub environment: Option<NamedTag>,
    /// A request header.
    pub header: Option<NamedTag>,
    /// An Envoy command formatter.
    pub formatter: Option<LiteralTag>,
}

/// A tag with a fixed value or formatter string.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LiteralTag {
    /// The value; required.
    pub value: Option<String>,
}

/// A tag read from a named environment variable or header.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NamedTag {
    /// Variable or header name; required.
    pub name: Option<String>,
    /// Value used when it is absent.
    pub default_value: String,
}

/// Metrics settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Metrics {
    /// Metrics providers.
    pub providers: Vec<ProviderRef>,
    /// Per-metric overrides.
    pub overrides: Vec<MetricsOverrides>,
    /// How often metrics are reported (duration string).
    pub reporting_interval: Option<String>,
}

/// Standard Istio metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum IstioMetric {
    /// Every metric.
    #[default]
    AllMetrics,
    /// `requests_total`.
    RequestCount,
    /// `request_duration_milliseconds`.
    RequestDuration,
    /// `request_bytes`.
    RequestSize,
    /// `response_bytes`.
    ResponseSize,
    /// `tcp_connections_opened_total`.
    TcpOpenedConnections,
    /// `tcp_connections_closed_total`.
    TcpClosedConnections,
    /// `tcp_sent_bytes_total`.
    TcpSentBytes,
    /// `tcp_received_bytes_total`.
    TcpReceivedBytes,
    /// `request_messages_total`.
    GrpcRequestMessages,
    /// `response_messages_total`.
    GrpcResponseMessages,
}

/// Selects the metric an override applies to (at most one of `metric` and `customMetric`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MetricSelector {
    /// A standard metric.
    pub metric: Option<IstioMetric>,
    /// A custom metric name.
    pub custom_metric: Option<String>,
    /// Traffic direction.
    pub mode: TelemetryMode,
}

/// Changes to one or more metrics.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MetricsOverrides {
    /// Which metrics; absent means all.
    #[serde(rename = "match")]
    pub match_: Option<MetricSelector>,
    /// Turn the selected metrics off.
    pub disabled: Option<bool>,
    /// Tag changes, by tag name.
    pub tag_overrides: BTreeMap<String, TagOverride>,
}

/// One tag change.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TagOverride {
    /// Add/replace (default) or remove the tag.
    pub operation: Option<TagOperation>,
    /// CEL expression for the value; required for UPSERT, forbidden for REMOVE.
    pub value: Option<String>,
}

/// What a tag override does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TagOperation {
    /// Insert or replace the tag.
    #[default]
    Upsert,
    /// Remove the tag.
    Remove,
}

/// Access-logging settings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AccessLogging {
    /// Traffic direction.
    #[serde(rename = "match")]
    pub match_: Option<ModeSelector>,
    /// Logging providers.
    pub providers: Vec<ProviderRef>,
    /// Turn access logging off.
    pub disabled: Option<bool>,
    /// Only log requests for which this filter holds.
    pub filter: Option<LogFilter>,
}

/// An access-log filter.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LogFilter {
    /// CEL expression over Envoy attributes.
    pub expression: String,
}
