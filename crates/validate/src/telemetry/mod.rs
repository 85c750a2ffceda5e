//! Telemetry rules: takes a decoded istio Telemetry spec and its metadata, records findings with field paths.
//! Follows Istio's webhook (`ValidateTelemetry`) and the CRD's OpenAPI/CEL rules: attachment, provider names,
//! sampling percentage, custom tags, metric overrides and tag overrides, reporting interval, and access-log
//! filters, which must parse as CEL ([`cel`]).

mod cel;

use admitpilot_model::istio::telemetry::{
    AccessLogging, CustomTag, Metrics, ProviderRef, TagOperation, Tracing,
};
use admitpilot_model::{istio::Telemetry, Findings, ObjectMeta};

use super::common::{parse_duration_nanos, validate_policy_attachment};

/// Validates one Telemetry.
pub fn validate(spec: &Telemetry, _meta: &ObjectMeta, out: &mut Findings) {
    validate_policy_attachment(
        spec.selector.as_ref(),
        spec.target_ref.as_ref(),
        &spec.target_refs,
        out,
    );
    // Istio's `validateTelemetryTracing` (pkg/config/validation/validation.go) warns, with this text.
    if spec.tracing.len() > 1 {
        out.warning(
            "spec.tracing",
            "multiple tracing is not currently supported",
        );
    }
    for (i, tracing) in spec.tracing.iter().enumerate() {
        validate_tracing(tracing, &format!("spec.tracing[{i}]"), out);
    }
    for (i, metrics) in spec.metrics.iter().enumerate() {
        validate_metrics(metrics, &format!("spec.metrics[{i}]"), out);
    }
    for (i, logging) in spec.access_logging.iter().enumerate() {
        validate_access_logging(logging, &format!("spec.accessLogging[{i}]"), out);
    }
}

/// Provider names must not be empty. Mirrors Istio's `validateTelemetryProviders`
/// (pkg/config/validation/validation.go), with its text (it stops at the first; each is reported here).
fn validate_providers(providers: &[ProviderRef], path: &str, out: &mut Findings) {
    for (i, provider) in providers.iter().enumerate() {
        if provider.name.as_deref().unwrap_or_default().is_empty() {
            out.error(
                format!("{path}[{i}].name"),
                "providers.name may not be empty",
            );
        }
    }
}

/// Mirrors Istio's `validateTelemetryTracing` (pkg/config/validation/validation.go), with its texts.
fn validate_tracing(tracing: &Tracing, path: &str, out: &mut Findings) {
    if tracing.providers.len() > 1 {
        out.warning(
            format!("{path}.providers"),
            "multiple providers is not currently supported",
        );
    }
    validate_providers(&tracing.providers, &format!("{path}.providers"), out);
    if let Some(pct) = tracing.random_sampling_percentage {
        if !(0.0..=100.0).contains(&pct) {
            out.error(
                format!("{path}.randomSamplingPercentage"),
                "randomSamplingPercentage must be in range [0.0, 100.0]",
            );
        }
    }
    for (name, tag) in &tracing.custom_tags {
        let tag_path = format!("{path}.customTags.{name}");
        if name.is_empty() {
            out.error(&tag_path, "tag name may not be empty");
        }
        validate_custom_tag(tag, &tag_path, out);
    }
}

/// One custom tag: at most one kind (the CRD's `oneOf`), and a non-empty value or name. Istio's
/// `validateTelemetryTracing` checks literal, header and environment tags, with the texts used here; the formatter
/// value is checked by the CRD's `minLength: 1` only.
fn validate_custom_tag(tag: &CustomTag, path: &str, out: &mut Findings) {
    let set = usize::from(tag.literal.is_some())
        + usize::from(tag.environment.is_some())
        + usize::from(tag.header.is_some())
        + usize::from(tag.formatter.is_some());
    if set > 1 {
        out.error(
            path,
            "a custom tag takes only one of literal, environment, header and formatter",
        );
    }
    for (field, value, what) in [
        (
            "literal.value",
            tag.literal.as_ref().map(|t| &t.value),
            "literal tag value",
        ),
        (
            "formatter.value",
            tag.formatter.as_ref().map(|t| &t.value),
            "formatter tag value",
        ),
        (
            "environment.name",
            tag.environment.as_ref().map(|t| &t.name),
            "environment tag name",
        ),
        (
            "header.name",
            tag.header.as_ref().map(|t| &t.name),
            "header tag name",
        ),
    ] {
        if let Some(value) = value {
            if value.as_deref().unwrap_or_default().is_empty() {
                out.error(
                    format!("{path}.{field}"),
                    format!("{what} may not be empty"),
                );
            }
        }
    }
}

/// Mirrors Istio's `validateTelemetryMetrics` (pkg/config/validation/validation.go), with its texts, and the CRD's
/// rules on the reporting interval and tag overrides.
fn validate_metrics(metrics: &Metrics, path: &str, out: &mut Findings) {
    validate_providers(&metrics.providers, &format!("{path}.providers"), out);
    if let Some(interval) = &metrics.reporting_interval {
        // Only the CRD checks this field (at least 1ms; finer precision is allowed).
        if parse_duration_nanos(interval).is_none_or(|ns| ns < 1_000_000) {
            out.error(
                format!("{path}.reportingInterval"),
                format!("reportingInterval {interval:?} must be a duration of at least 1ms"),
            );
        }
    }
    for (i, o) in metrics.overrides.iter().enumerate() {
        let o_path = format!("{path}.overrides[{i}]");
        if let Some(selector) = &o.match_ {
            if selector.metric.is_some() && selector.custom_metric.is_some() {
                out.error(
                    format!("{o_path}.match"),
                    "only one of metric and customMetric may be set",
                );
            }
            if selector.custom_metric.as_deref() == Some("") {
                out.error(
                    format!("{o_path}.match.customMetric"),
                    "customMetric may not be empty",
                );
            }
        }
        for (name, tag) in &o.tag_overrides {
            let tag_path = format!("{o_path}.tagOverrides.{name}");
            // Istio warns (`validateTelemetryMetrics`); the CRD does not check the name.
            if name.is_empty() {
                out.warning(&tag_path, "tagOverrides.name may not be empty");
            }
            // The CRD's CEL rules, with their texts: the API server applies them before any webhook, and the
            // REMOVE rule (`!has(self.value)`) also refuses an empty value, which Istio's webhook lets through.
            match tag.operation.unwrap_or_default() {
                TagOperation::Upsert if tag.value.as_deref().unwrap_or_default().is_empty() => {
                    out.error(
                        format!("{tag_path}.value"),
                        "value must be set when operation is UPSERT",
                    );
                }
                TagOperation::Remove if tag.value.is_some() => out.error(
                    format!("{tag_path}.value"),
                    "value must not be set when operation is REMOVE",
                ),
                _ => {}
            }
        }
    }
}

fn validate_access_logging(logging: &AccessLogging, path: &str, out: &mut Findings) {
    validate_providers(&logging.providers, &format!("{path}.providers"), out);
    if let Some(filter) = &logging.filter {
        if let Err(e) = cel::check_syntax(&filter.expression) {
            out.error(
                format!("{path}.filter.expression"),
                format!("filter is not a valid CEL expression: {e}"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    fn findings(spec: serde_json::Value) -> Vec<(String, bool)> {
        crate::testing::findings_of(
            "telemetry.istio.io/v1",
            "Telemetry",
            json!({"name": "t"}),
            spec,
        )
    }

    fn error_paths(spec: serde_json::Value) -> Vec<String> {
        crate::testing::error_fields(findings(spec))
    }

    #[test]
    fn accepts_typical_telemetry() {
        let spec = json!({
            "selector": {"matchLabels": {"app": "a"}},
            "tracing": [{"providers": [{"name": "zipkin"}], "randomSamplingPercentage": 10.5,
                "customTags": {"a": {"literal": {"value": "x"}}, "b": {"header": {"name": "h", "defaultValue": "d"}}}}],
            "metrics": [{"providers": [{"name": "prometheus"}], "reportingInterval": "1500us",
                "overrides": [{"match": {"metric": "REQUEST_COUNT", "mode": "CLIENT"}, "disabled": true,
                    "tagOverrides": {"a": {"value": "upstream_peer.labels['x']"}, "b": {"operation": "REMOVE"}}}]}],
            "accessLogging": [{"providers": [{"name": "envoy"}], "filter": {"expression": "response.code >= 400"}}]
        });
        assert!(findings(spec).is_empty());
    }

    #[test]
    fn reports_each_bad_field() {
        let spec = json!({
            "tracing": [{"providers": [{"name": ""}], "randomSamplingPercentage": 101,
                "customTags": {"t": {"literal": {"value": ""}, "environment": {"name": "E"}}}}],
            "metrics": [{"reportingInterval": "999us", "overrides": [{"match": {"customMetric": ""},
                "tagOverrides": {"u": {"operation": "UPSERT"}, "r": {"operation": "REMOVE", "value": "oops"}}}]}],
            "accessLogging": [{"providers": [{}], "filter": {"expression": "response.code >="}}]
        });
        assert_eq!(
            error_paths(spec),
            vec![
                "spec.tracing[0].providers[0].name",
                "spec.tracing[0].randomSamplingPercentage",
                "spec.tracing[0].customTags.t",
                "spec.tracing[0].customTags.t.literal.value",
                "spec.metrics[0].reportingInterval",
                "spec.metrics[0].overrides[0].match.customMetric",
                "spec.metrics[0].overrides[0].tagOverrides.r.value",
                "spec.metrics[0].overrides[0].tagOverrides.u.value",
                "spec.accessLogging[0].providers[0].name",
                "spec.accessLogging[0].filter.expression",
            ]
        );
        // `tracing` is a list: a map there is a decode error at the field.
        assert_eq!(
            error_paths(json!({"tracing": {"a": "b"}})),
            vec!["spec.tracing"]
        );
    }

    /// Istio's `validateTelemetryProviders`, `validateTelemetryTracing` and `validateTelemetryMetrics` texts.
    #[test]
    fn texts_follow_validate_telemetry() {
        let spec = json!({
            "tracing": [{"providers": [{"name": ""}, {"name": "b"}], "randomSamplingPercentage": -1,
                "customTags": {"": {"literal": {"value": ""}}, "h": {"header": {"name": ""}},
                    "e": {"environment": {"name": ""}}}}, {}],
            "metrics": [{"providers": [{}], "overrides": [{"match": {"customMetric": ""},
                "tagOverrides": {"": {"value": "v"}}}]}]
        });
        let (errors, warnings) =
            crate::testing::run_rules(spec, &crate::testing::meta("t", "ns"), super::validate);
        assert_eq!(
            errors,
            [
                "spec.tracing[0].providers[0].name: providers.name may not be empty",
                "spec.tracing[0].randomSamplingPercentage: randomSamplingPercentage must be in range [0.0, 100.0]",
                "spec.tracing[0].customTags.: tag name may not be empty",
                "spec.tracing[0].customTags..literal.value: literal tag value may not be empty",
                "spec.tracing[0].customTags.e.environment.name: environment tag name may not be empty",
                "spec.tracing[0].customTags.h.header.name: header tag name may not be empty",
                "spec.metrics[0].providers[0].name: providers.name may not be empty",
                "spec.metrics[0].overrides[0].match.customMetric: customMetric may not be empty",
            ]
        );
        assert_eq!(
            warnings,
            [
                "spec.tracing: multiple tracing is not currently supported",
                "spec.tracing[0].providers: multiple providers is not currently supported",
                "spec.metrics[0].overrides[0].tagOverrides.: tagOverrides.name may not be empty",
            ]
        );
    }

    #[test]
    fn warns_on_several_tracing_entries_or_providers() {
        let f = findings(json!({"tracing": [{"providers": [{"name": "a"}, {"name": "b"}]}, {}]}));
        assert_eq!(
            f,
            vec![
                ("spec.tracing".to_string(), false),
                ("spec.tracing[0].providers".to_string(), false)
            ]
        );
    }
}
