//! Deprecated header options inside HTTP filter configs (pure): takes an HTTP connection manager after EnvoyFilters
//! were applied and turns every `HeaderValueOption.append` that a filter's config holds (typed, or in a
//! `TypedStruct`'s value, as Istio's own local rate limit example writes it) into the `append_action` with the same
//! effect, so Envoy loads no deprecated field. The configs are read through Envoy's descriptors; only filter types
//! that can hold a header option are decoded at all.

use std::collections::{HashMap, HashSet};
use std::sync::{LazyLock, Mutex, PoisonError};

use envoy_types::pb::envoy::config::core::v3::header_value_option::HeaderAppendAction;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    http_filter, HttpConnectionManager,
};
use prost::Message;
use prost_reflect::{DynamicMessage, Kind, MessageDescriptor, ReflectMessage, Value};

use admitpilot_envoy_proto::{json, pool};

const HEADER_VALUE_OPTION: &str = "envoy.config.core.v3.HeaderValueOption";

/// Upgrades the header options of every HTTP filter config of `hcm`; returns whether any changed.
pub fn upgrade(hcm: &mut HttpConnectionManager) -> bool {
    let mut changed = false;
    for filter in &mut hcm.http_filters {
        let Some(http_filter::ConfigType::TypedConfig(typed)) = filter.config_type.as_mut() else {
            continue;
        };
        let name = typed.type_url.rsplit('/').next().unwrap_or_default();
        let upgraded = if json::TYPED_STRUCTS.contains(&name) {
            upgrade_typed_struct(name, &typed.value)
        } else {
            upgrade_typed(name, &typed.value)
        };
        if let Some(bytes) = upgraded {
            typed.value = bytes;
            changed = true;
        }
    }
    changed
}

/// A typed config: its new bytes when a header option in it changed.
fn upgrade_typed(name: &str, bytes: &[u8]) -> Option<Vec<u8>> {
    let desc = pool().get_message_by_name(name)?;
    if !can_hold_header_option(&desc) {
        return None;
    }
    let mut message = DynamicMessage::decode(desc, bytes).ok()?;
    upgrade_message(&mut message).then(|| message.encode_to_vec())
}

/// A `TypedStruct`: its value read as Envoy reads it (into the message `type_url` names, unknown fields ignored),
/// upgraded, and written back as a `Struct`; its new bytes when a header option changed.
fn upgrade_typed_struct(name: &str, bytes: &[u8]) -> Option<Vec<u8>> {
    let mut typed_struct = DynamicMessage::decode(pool().get_message_by_name(name)?, bytes).ok()?;
    let desc = json::typed_struct_target(&typed_struct)?;
    if !can_hold_header_option(&desc) {
        return None;
    }
    let mut message = json::typed_struct_value(&typed_struct, desc)?.ok()?;
    if !upgrade_message(&mut message) {
        return None;
    }
    let as_struct = json::from_json_as(
        pool().get_message_by_name("google.protobuf.Struct")?,
        &json::to_json(&message),
    )
    .ok()?;
    typed_struct.set_field_by_name("value", Value::Message(as_struct));
    Some(typed_struct.encode_to_vec())
}

/// Upgrades every header option in `message`, at any depth; returns whether any changed.
fn upgrade_message(message: &mut DynamicMessage) -> bool {
    let mut changed = false;
    if message.descriptor().full_name() == HEADER_VALUE_OPTION {
        changed |= upgrade_header_option(message);
    }
    for (_, value) in message.fields_mut() {
        changed |= upgrade_value(value);
    }
    changed
}

fn upgrade_value(value: &mut Value) -> bool {
    match value {
        Value::Message(message) => upgrade_message(message),
        Value::List(items) => items
            .iter_mut()
            .fold(false, |changed, item| upgrade_value(item) | changed),
        Value::Map(entries) => entries
            .values_mut()
            .fold(false, |changed, item| upgrade_value(item) | changed),
        _ => false,
    }
}

/// `append: true` is `APPEND_IF_EXISTS_OR_ADD`, `append: false` `OVERWRITE_IF_EXISTS_OR_ADD`, where `append_action`
/// is left at its default (as `deprecated::upgrade_headers` does for routes).
fn upgrade_header_option(option: &mut DynamicMessage) -> bool {
    if !option.has_field_by_name("append") {
        return false;
    }
    let default_action = option
        .get_field_by_name("append_action")
        .and_then(|v| v.as_enum_number())
        .is_none_or(|n| n == HeaderAppendAction::AppendIfExistsOrAdd as i32);
    if !default_action {
        return false;
    }
    let append = match option.get_field_by_name("append").as_deref() {
        Some(Value::Message(wrapper)) => wrapper
            .get_field_by_name("value")
            .and_then(|v| v.as_bool())
            .unwrap_or(false),
        _ => return false,
    };
    option.clear_field_by_name("append");
    let action = if append {
        HeaderAppendAction::AppendIfExistsOrAdd
    } else {
        HeaderAppendAction::OverwriteIfExistsOrAdd
    };
    option.set_field_by_name("append_action", Value::EnumNumber(action as i32));
    true
}

/// Whether a message of `desc` can hold a `HeaderValueOption` (remembered per type).
fn can_hold_header_option(desc: &MessageDescriptor) -> bool {
    static KNOWN: LazyLock<Mutex<HashMap<String, bool>>> = LazyLock::new(Mutex::default);
    let name = desc.full_name();
    if let Some(known) = KNOWN
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(name)
    {
        return *known;
    }
    let holds = reaches(desc, &mut HashSet::new());
    KNOWN
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(name.to_string(), holds);
    holds
}

fn reaches(desc: &MessageDescriptor, seen: &mut HashSet<String>) -> bool {
    if desc.full_name() == HEADER_VALUE_OPTION {
        return true;
    }
    if !seen.insert(desc.full_name().to_string()) {
        return false;
    }
    desc.fields().any(|field| match field.kind() {
        Kind::Message(inner) => reaches(&inner, seen),
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpFilter;
    use envoy_types::pb::google::protobuf::Any;
    use serde_json::json;

    fn hcm_with(type_url: &str, config: &serde_json::Value) -> HttpConnectionManager {
        let desc = pool()
            .get_message_by_name(type_url.rsplit('/').next().unwrap_or_default())
            .expect("known type");
        let message = json::from_json_as(desc, config).expect("valid config");
        HttpConnectionManager {
            http_filters: vec![HttpFilter {
                name: "f".into(),
                config_type: Some(http_filter::ConfigType::TypedConfig(Any {
                    type_url: type_url.into(),
                    value: message.encode_to_vec(),
                })),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn config_json(hcm: &HttpConnectionManager) -> serde_json::Value {
        let Some(http_filter::ConfigType::TypedConfig(typed)) = &hcm.http_filters[0].config_type
        else {
            panic!("typed config");
        };
        let desc = pool()
            .get_message_by_name(typed.type_url.rsplit('/').next().unwrap_or_default())
            .expect("known type");
        json::to_json(&DynamicMessage::decode(desc, typed.value.as_slice()).expect("decodes"))
    }

    const LOCAL_RATE_LIMIT: &str =
        "type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit";

    /// Found by the generator (seed 20261126): Istio's local rate limit example, as a TypedStruct.
    #[test]
    fn append_in_a_typed_struct_becomes_append_action() {
        let mut hcm = hcm_with(
            "type.googleapis.com/udpa.type.v1.TypedStruct",
            &json!({"type_url": LOCAL_RATE_LIMIT, "value": {
                "stat_prefix": "rl", "unknown_to_envoy": 1,
                "response_headers_to_add": [
                    {"append": false, "header": {"key": "x-local-rate-limit", "value": "true"}},
                    {"append": true, "header": {"key": "x-more", "value": "1"}}]}}),
        );
        assert!(upgrade(&mut hcm));
        let value = &config_json(&hcm)["value"];
        assert_eq!(
            value["response_headers_to_add"],
            json!([
                {"append_action": "OVERWRITE_IF_EXISTS_OR_ADD", "header": {"key": "x-local-rate-limit", "value": "true"}},
                {"header": {"key": "x-more", "value": "1"}}])
        );
        assert_eq!(value["stat_prefix"], "rl");
        assert!(!upgrade(&mut hcm), "nothing left to upgrade");
    }

    #[test]
    fn append_in_a_typed_config_becomes_append_action() {
        let mut hcm = hcm_with(
            LOCAL_RATE_LIMIT,
            &json!({"stat_prefix": "rl", "response_headers_to_add": [
                {"append": false, "header": {"key": "k", "value": "v"}}]}),
        );
        assert!(upgrade(&mut hcm));
        assert_eq!(
            config_json(&hcm)["response_headers_to_add"][0]["append_action"],
            "OVERWRITE_IF_EXISTS_OR_ADD"
        );
        let mut router = hcm_with(
            "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router",
            &json!({}),
        );
        assert!(!upgrade(&mut router));
    }
}
