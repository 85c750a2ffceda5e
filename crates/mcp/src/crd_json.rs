//! Istio's CRD JSON to proto JSON (pure): takes a spec as Kubernetes stores it and the project's model writes it,
//! with the message it belongs to, and yields the same spec in the proto JSON that prost-reflect reads strictly.
//!
//! istiod reads CRD specs with golang/protobuf's `jsonpb` (istio/api's `*_json.gen.go`), which is more lenient than
//! proto JSON in two ways that valid objects use: a `google.protobuf.Duration` is parsed with Go's
//! `time.ParseDuration` (`1m`, `1h30m`, `250ms`, not only `60s`), and a field set to `null` counts as unset. So a
//! Go-style duration is rewritten as seconds (`60s`) and a `null` field is dropped, except where `null` is a value
//! (`google.protobuf.Value`, and everything inside a `Struct`, which is free JSON). A `null` under a name the message
//! does not have is dropped too: it carries nothing to lose. Anything else is left for the strict conversion to
//! accept or to reject with its path.

use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};
use serde_json::Value;

use admitpilot_model::duration::parse_duration_nanos;

/// Well-known messages whose JSON is free-form: their contents are values, not fields.
const FREE_FORM: &[&str] = &[
    "google.protobuf.Struct",
    "google.protobuf.Value",
    "google.protobuf.ListValue",
];

/// Rewrites `value`, the JSON of a `message`, in place.
pub fn to_proto_json(message: &MessageDescriptor, value: &mut Value) {
    let Value::Object(fields) = value else {
        return;
    };
    fields.retain(|name, item| {
        let field = message
            .get_field_by_json_name(name)
            .or_else(|| message.get_field_by_name(name));
        match field {
            Some(field) if item.is_null() => keeps_null(&field),
            Some(field) => {
                rewrite_field(&field, item);
                true
            }
            None => !item.is_null(),
        }
    });
}

/// `null` is a value only for a singular `google.protobuf.Value` field.
fn keeps_null(field: &FieldDescriptor) -> bool {
    !field.is_list()
        && field
            .kind()
            .as_message()
            .is_some_and(|m| m.full_name() == "google.protobuf.Value")
}

fn rewrite_field(field: &FieldDescriptor, value: &mut Value) {
    let Kind::Message(message) = field.kind() else {
        return;
    };
    if field.is_map() {
        let value_field = message.map_entry_value_field();
        if let Value::Object(entries) = value {
            for item in entries.values_mut() {
                rewrite_single(&value_field, item);
            }
        }
    } else if field.is_list() {
        if let Value::Array(items) = value {
            for item in items {
                rewrite_single(field, item);
            }
        }
    } else {
        rewrite_single(field, value);
    }
}

/// Rewrites one value of a field (one list item or map value).
fn rewrite_single(field: &FieldDescriptor, value: &mut Value) {
    let Kind::Message(message) = field.kind() else {
        return;
    };
    match message.full_name() {
        "google.protobuf.Duration" => {
            if let Some(seconds) = value.as_str().and_then(go_duration_as_seconds) {
                *value = Value::String(seconds);
            }
        }
        name if FREE_FORM.contains(&name) => {}
        _ => to_proto_json(&message, value),
    }
}

/// Writes a Go-style duration (`1m30s`, `250ms`) as proto JSON seconds (`90s`, `0.250000000s`); `None` when it
/// does not parse, leaving the text for the strict conversion to reject.
fn go_duration_as_seconds(text: &str) -> Option<String> {
    const NANOS_PER_SECOND: i128 = 1_000_000_000;
    let nanos = parse_duration_nanos(text)?;
    let sign = if nanos < 0 { "-" } else { "" };
    let magnitude = nanos.abs();
    let (seconds, fraction) = (magnitude / NANOS_PER_SECOND, magnitude % NANOS_PER_SECOND);
    Some(if fraction == 0 {
        format!("{sign}{seconds}s")
    } else {
        format!("{sign}{seconds}.{fraction:09}s")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use admitpilot_envoy_proto::pool;
    use serde_json::json;

    fn rewritten(message: &str, mut value: Value) -> Value {
        let desc = pool().get_message_by_name(message).unwrap();
        to_proto_json(&desc, &mut value);
        value
    }

    #[test]
    fn go_durations_become_seconds_at_any_depth() {
        let rule = json!({"host": "a", "trafficPolicy": {
            "outlierDetection": {"interval": "8ms", "baseEjectionTime": "1m"},
            "portLevelSettings": [{"connectionPool": {"tcp": {"connectTimeout": "1h30m"}}}],
            "loadBalancer": {"warmupDurationSecs": "1.5s"}}});
        let back = rewritten("istio.networking.v1alpha3.DestinationRule", rule);
        let policy = &back["trafficPolicy"];
        assert_eq!(policy["outlierDetection"]["interval"], "0.008000000s");
        assert_eq!(policy["outlierDetection"]["baseEjectionTime"], "60s");
        assert_eq!(
            policy["portLevelSettings"][0]["connectionPool"]["tcp"]["connectTimeout"],
            "5400s"
        );
        assert_eq!(policy["loadBalancer"]["warmupDurationSecs"], "1.500000000s");
    }

    #[test]
    fn negative_and_unparsable_durations() {
        assert_eq!(
            go_duration_as_seconds("-0.5s").as_deref(),
            Some("-0.500000000s")
        );
        assert_eq!(go_duration_as_seconds("0").as_deref(), Some("0s"));
        assert_eq!(go_duration_as_seconds("soon"), None);
        let back = rewritten(
            "istio.networking.v1alpha3.HTTPRoute",
            json!({"timeout": "soon"}),
        );
        assert_eq!(
            back,
            json!({"timeout": "soon"}),
            "left for the strict conversion to reject"
        );
    }

    #[test]
    fn nulls_are_dropped_except_as_values() {
        let plugin = json!({"url": "oci://x", "sha256": null, "priority": null, "selector": null,
            "match": [{"mode": null, "ports": null}], "notAField": null,
            "pluginConfig": {"keep": null, "nested": {"also": null}}});
        let back = rewritten("istio.extensions.v1alpha1.WasmPlugin", plugin);
        assert_eq!(
            back,
            json!({"url": "oci://x", "match": [{}], "pluginConfig": {"keep": null, "nested": {"also": null}}})
        );
    }

    #[test]
    fn unknown_fields_with_values_are_left_for_the_strict_conversion() {
        let back = rewritten(
            "istio.networking.v1alpha3.Destination",
            json!({"host": "a", "bogus": 1}),
        );
        assert_eq!(back, json!({"host": "a", "bogus": 1}));
    }

    #[test]
    fn durations_inside_maps_and_free_form_json() {
        // Map values that are messages are rewritten; strings inside a Struct are values, never durations.
        let telemetry = json!({"metrics": [{"reportingInterval": "2m"}],
            "tracing": [{"customTags": {"t": {"literal": {"value": "1m"}}}}]});
        let back = rewritten("istio.telemetry.v1alpha1.Telemetry", telemetry.clone());
        assert_eq!(back["metrics"][0]["reportingInterval"], "120s");
        assert_eq!(back["tracing"], telemetry["tracing"]);
        let patch = json!({"configPatches": [{"patch": {"value": {"timeout": "1m"}}}]});
        let back = rewritten("istio.networking.v1alpha3.EnvoyFilter", patch.clone());
        assert_eq!(back, patch);
    }
}
