//! Proto-JSON conversions (pure): takes JSON values (or prost messages) and yields
//! [`prost_reflect::DynamicMessage`]s resolved through [`super::pool`], and back.
//!
//! Decoding is strict: unknown fields, unknown `@type` URLs and type mismatches are errors that carry the JSON
//! path of the offending field (`typed_config.http_filters[0].name`). `Any` payloads are resolved through the
//! pool, so a `typed_config` is checked against its real Envoy message.

use prost::Message;
use prost_reflect::{DeserializeOptions, DynamicMessage, MessageDescriptor, SerializeOptions};

use super::pool;

/// A failed conversion, located by the JSON path of the offending field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The pool has no message of this name.
    #[error("unknown message type {0}")]
    UnknownMessage(String),
    /// The JSON does not fit the message.
    #[error("{}{message}", if path.is_empty() { String::new() } else { format!("{path}: ") })]
    Invalid {
        /// Dotted JSON path below the converted value; empty when the value itself is at fault.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// Protobuf bytes did not decode as the expected message.
    #[error("cannot decode {message_type}: {reason}")]
    Decode {
        /// The expected message.
        message_type: String,
        /// The decoder's explanation.
        reason: String,
    },
}

/// The result of this module's fallible functions.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Returns the JSON path of the offending field (empty for the value itself or non-JSON errors).
    pub fn path(&self) -> &str {
        match self {
            Error::Invalid { path, .. } => path,
            _ => "",
        }
    }

    /// Returns the message without the path.
    pub fn reason(&self) -> String {
        match self {
            Error::Invalid { message, .. } => message.clone(),
            other => other.to_string(),
        }
    }
}

/// Looks up a message descriptor by full name (`envoy.config.listener.v3.Listener`).
pub fn message_descriptor(name: &str) -> Result<MessageDescriptor, Error> {
    pool()
        .get_message_by_name(name)
        .ok_or_else(|| Error::UnknownMessage(name.to_string()))
}

/// Converts proto-JSON into a message of type `message_name`, strictly (see the module docs).
pub fn from_json(message_name: &str, value: &serde_json::Value) -> Result<DynamicMessage, Error> {
    from_json_as(message_descriptor(message_name)?, value)
}

/// Converts proto-JSON into a message of the given descriptor, strictly.
pub fn from_json_as(
    desc: MessageDescriptor,
    value: &serde_json::Value,
) -> Result<DynamicMessage, Error> {
    from_json_with(desc, value, true)
}

/// The two `TypedStruct`s, whose `value` Envoy converts into the message `type_url` names.
pub const TYPED_STRUCTS: [&str; 2] = ["udpa.type.v1.TypedStruct", "xds.type.v3.TypedStruct"];

/// The message a `TypedStruct`'s value converts into: the type its `type_url` names, when the descriptors know it
/// (a Wasm or Go plugin's own config type they do not).
pub fn typed_struct_target(typed_struct: &DynamicMessage) -> Option<MessageDescriptor> {
    let type_url = typed_struct.get_field_by_name("type_url")?;
    pool().get_message_by_name(type_url.as_str()?.rsplit('/').next()?)
}

/// A `TypedStruct`'s value converted into `target` as Envoy converts it ([`from_json_ignoring_unknown`]); `None`
/// when it has no value.
pub fn typed_struct_value(
    typed_struct: &DynamicMessage,
    target: MessageDescriptor,
) -> Option<Result<DynamicMessage, Error>> {
    match typed_struct.get_field_by_name("value").as_deref() {
        Some(prost_reflect::Value::Message(value)) => {
            Some(from_json_ignoring_unknown(target, &to_json(value)))
        }
        _ => None,
    }
}

/// Converts proto-JSON into a message of the given descriptor as Envoy converts a `TypedStruct`'s value for
/// dynamic config: unknown fields are ignored, everything else is strict.
pub fn from_json_ignoring_unknown(
    desc: MessageDescriptor,
    value: &serde_json::Value,
) -> Result<DynamicMessage, Error> {
    from_json_with(desc, value, false)
}

fn from_json_with(
    desc: MessageDescriptor,
    value: &serde_json::Value,
    deny_unknown: bool,
) -> Result<DynamicMessage, Error> {
    let options = DeserializeOptions::new().deny_unknown_fields(deny_unknown);
    let mut track = serde_path_to_error::Track::new();
    let deserializer = serde_path_to_error::Deserializer::new(value, &mut track);
    match DynamicMessage::deserialize_with_options(desc, deserializer, &options) {
        Ok(message) => Ok(message),
        Err(error) => {
            let mut path = format_path(&track.path());
            let message = reword(&error.to_string());
            // The tracker stops at the object holding an unknown key; name the key itself.
            if let Some(key) = message.strip_prefix("unknown field ") {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(key);
            }
            Err(Error::Invalid { path, message })
        }
    }
}

/// Renders a serde path as `a.b[0].c` (serde_path_to_error renders `?` for unknown segments).
fn format_path(path: &serde_path_to_error::Path) -> String {
    let text = path.to_string();
    if text == "." || text == "?" {
        String::new()
    } else {
        text
    }
}

/// Turns prost-reflect's wording into messages that name the problem plainly.
fn reword(message: &str) -> String {
    if let Some(rest) = message.strip_prefix("unrecognized field name ") {
        return format!("unknown field {}", rest.trim_matches('\''));
    }
    if let Some(name) = message
        .strip_prefix("message '")
        .and_then(|m| m.strip_suffix("' not found"))
    {
        return format!("referenced type unknown: {name}");
    }
    message.to_string()
}

/// Converts a message to proto-JSON with the original (snake_case) field names, omitting default values.
pub fn to_json(message: &DynamicMessage) -> serde_json::Value {
    let options = SerializeOptions::new()
        .use_proto_field_name(true)
        .skip_default_fields(true);
    // Serializing a DynamicMessage into a serde_json::Value cannot fail: every proto value has a JSON form
    // and the Any payloads it holds were produced from the same pool.
    message
        .serialize_with_options(serde_json::value::Serializer, &options)
        .unwrap_or(serde_json::Value::Null)
}

/// Converts a generated prost message into its dynamic twin from the pool.
pub fn to_dynamic<M: Message + prost::Name>(message: &M) -> Result<DynamicMessage, Error> {
    let name = M::full_name();
    let desc = message_descriptor(&name)?;
    DynamicMessage::decode(desc, message.encode_to_vec().as_slice()).map_err(|e| Error::Decode {
        message_type: name,
        reason: e.to_string(),
    })
}

/// Converts a generated prost message to proto-JSON (snake_case names, defaults omitted).
pub fn message_to_json<M: Message + prost::Name>(message: &M) -> Result<serde_json::Value, Error> {
    Ok(to_json(&to_dynamic(message)?))
}

/// Converts a dynamic message into the generated prost type `M` (by encoding and decoding).
pub fn from_dynamic<M: Message + Default + prost::Name>(
    message: &DynamicMessage,
) -> Result<M, Error> {
    M::decode(message.encode_to_vec().as_slice()).map_err(|e| Error::Decode {
        message_type: M::full_name(),
        reason: e.to_string(),
    })
}

/// Converts proto-JSON straight into the generated prost type `M`, strictly.
pub fn message_from_json<M: Message + Default + prost::Name>(
    value: &serde_json::Value,
) -> Result<M, Error> {
    from_dynamic(&from_json(&M::full_name(), value)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::config::listener::v3::Filter;
    use serde_json::json;

    #[test]
    fn decodes_typed_config_through_the_pool() {
        let value = json!({"name": "envoy.filters.network.http_connection_manager",
            "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                "stat_prefix": "in", "http_filters": [{"name": "envoy.filters.http.router"}]}});
        let message = from_json("envoy.config.listener.v3.Filter", &value).unwrap();
        let back = to_json(&message);
        assert_eq!(back["typed_config"]["stat_prefix"], "in");
        let filter: Filter = from_dynamic(&message).unwrap();
        assert_eq!(filter.name, "envoy.filters.network.http_connection_manager");
        assert_eq!(message_to_json(&filter).unwrap(), back);
    }

    #[test]
    fn unknown_field_names_its_path() {
        let value = json!({"name": "x",
            "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                "http_filters": [{"name": "r", "bogus": 1}]}});
        let err = from_json("envoy.config.listener.v3.Filter", &value).unwrap_err();
        assert_eq!(err.path(), "typed_config.http_filters[0].bogus", "{err}");
        assert!(err.reason().contains("unknown field bogus"), "{err}");
    }

    #[test]
    fn unknown_type_url_is_an_error() {
        let value = json!({"name": "x", "typed_config": {"@type": "type.googleapis.com/envoy.config.filter.http.lua.v2.Lua"}});
        let err = from_json("envoy.config.listener.v3.Filter", &value).unwrap_err();
        assert_eq!(err.path(), "typed_config", "{err}");
        assert!(err.reason().contains("referenced type unknown"), "{err}");
    }

    #[test]
    fn wrong_types_and_struct_values() {
        let err = from_json("envoy.config.listener.v3.Listener", &json!({"name": 3})).unwrap_err();
        assert_eq!(err.path(), "name");
        let md = json!({"filter_metadata": {"a": {"k": [1.5, "x", null, {"n": true}]}}});
        let message = from_json("envoy.config.core.v3.Metadata", &md).unwrap();
        assert_eq!(to_json(&message), md);
    }

    #[test]
    fn typed_struct_is_known() {
        let value = json!({"name": "x", "typed_config": {"@type": "type.googleapis.com/udpa.type.v1.TypedStruct",
            "type_url": "type.googleapis.com/a.B", "value": {"k": "v"}}});
        from_json("envoy.config.listener.v3.Filter", &value).unwrap();
    }
}
