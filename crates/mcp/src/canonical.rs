//! Canonical protobuf encoding (pure): takes a [`DynamicMessage`] and yields its bytes with fields in number order
//! and map entries in key order, at every depth, so the same message always encodes to the same bytes.
//!
//! prost-reflect keeps map fields (and so `google.protobuf.Struct`) in a `HashMap` and encodes them in its
//! iteration order, which changes from one map to the next; MCP bodies feed resource versions and change
//! detection, so they must not.

use prost::bytes::BufMut;
use prost::encoding::{encode_key, encode_varint, WireType};
use prost::Message;
use prost_reflect::{
    DynamicMessage, FieldDescriptor, MapKey, ReflectMessage, SetFieldError, Value,
};

/// Why a message could not be encoded; only a value that does not fit its own field, which prost-reflect does
/// not produce.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("field {field} holds a value of the wrong type")]
pub struct Error {
    /// Full name of the field.
    pub field: String,
}

/// The result of this module's fallible functions.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Encodes `message` canonically.
pub fn encode(message: &DynamicMessage) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(message.encoded_len());
    encode_into(message, &mut out)?;
    Ok(out)
}

fn encode_into(message: &DynamicMessage, out: &mut Vec<u8>) -> Result<()> {
    // `fields()` yields the set fields in field-number order.
    for (field, value) in message.fields() {
        match value {
            Value::Map(map) => {
                let mut entries: Vec<(&MapKey, &Value)> = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                for (key, value) in entries {
                    let entry = map_entry(&field, key, value)?;
                    nested(field.number(), &entry, out)?;
                }
            }
            Value::Message(inner) => nested(field.number(), inner, out)?,
            Value::List(items) if field.kind().as_message().is_some() => {
                for item in items {
                    if let Value::Message(inner) = item {
                        nested(field.number(), inner, out)?;
                    }
                }
            }
            // Scalars, enums, strings, bytes and their lists: prost-reflect's own encoding of this one field
            // (packed where the schema says so) is already deterministic.
            scalar => {
                let mut single = DynamicMessage::new(message.descriptor());
                single
                    .try_set_field(&field, scalar.clone())
                    .map_err(|e| mismatch(&field, e))?;
                single.encode_raw(out);
            }
        }
    }
    Ok(())
}

/// Writes `message` as the length-delimited field `number`.
fn nested(number: u32, message: &DynamicMessage, out: &mut Vec<u8>) -> Result<()> {
    let mut body = Vec::with_capacity(message.encoded_len());
    encode_into(message, &mut body)?;
    encode_key(number, WireType::LengthDelimited, out);
    encode_varint(body.len() as u64, out);
    out.put_slice(&body);
    Ok(())
}

/// Builds the entry message (`key` = 1, `value` = 2) of one map item.
fn map_entry(field: &FieldDescriptor, key: &MapKey, value: &Value) -> Result<DynamicMessage> {
    let kind = field.kind();
    let Some(entry_desc) = kind.as_message() else {
        return Err(Error {
            field: field.full_name().to_string(),
        });
    };
    let mut entry = DynamicMessage::new(entry_desc.clone());
    entry
        .try_set_field(&entry_desc.map_entry_key_field(), Value::from(key.clone()))
        .map_err(|e| mismatch(field, e))?;
    entry
        .try_set_field(&entry_desc.map_entry_value_field(), value.clone())
        .map_err(|e| mismatch(field, e))?;
    Ok(entry)
}

fn mismatch(field: &FieldDescriptor, _error: SetFieldError) -> Error {
    Error {
        field: field.full_name().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use admitpilot_envoy_proto::{from_json, pool};
    use serde_json::json;

    fn struct_with_many_keys() -> DynamicMessage {
        let fields: serde_json::Map<String, serde_json::Value> = (0..40)
            .map(|i| {
                (
                    format!("key{i}"),
                    json!({"n": i, "nested": {"a": i, "b": [i, "x"]}}),
                )
            })
            .collect();
        from_json("google.protobuf.Struct", &serde_json::Value::Object(fields))
            .expect("a Struct accepts any object")
    }

    #[test]
    fn maps_encode_in_key_order_every_time() {
        let first = encode(&struct_with_many_keys()).unwrap();
        for _ in 0..5 {
            assert_eq!(encode(&struct_with_many_keys()).unwrap(), first);
        }
    }

    #[test]
    fn canonical_bytes_decode_to_the_same_message() {
        let message = struct_with_many_keys();
        let bytes = encode(&message).unwrap();
        assert_eq!(bytes.len(), message.encoded_len());
        let desc = pool()
            .get_message_by_name("google.protobuf.Struct")
            .unwrap();
        assert_eq!(
            DynamicMessage::decode(desc, bytes.as_slice()).unwrap(),
            message
        );
    }

    /// Scalars, packed lists and nested messages come out exactly as prost-reflect writes them.
    #[test]
    fn messages_without_maps_encode_as_prost_does() {
        let message = from_json(
            "envoy.config.cluster.v3.Cluster",
            &json!({"name": "c", "connect_timeout": "1.5s", "type": "STRICT_DNS",
                "load_assignment": {"cluster_name": "c", "endpoints": [{"lb_endpoints": [
                    {"endpoint": {"address": {"socket_address": {"address": "a", "port_value": 80}}}},
                    {"endpoint": {"address": {"socket_address": {"address": "b", "port_value": 81}}}}]}]},
                "outlier_detection": {"consecutive_5xx": 3}}),
        )
        .unwrap();
        assert_eq!(encode(&message).unwrap(), message.encode_to_vec());
        let packed = from_json(
            "istio.networking.v1alpha3.OutlierDetection",
            &json!({"outlierDetectionHttpErrorCodes": [500, 503], "interval": "1s", "consecutive5xxErrors": 3}),
        )
        .unwrap();
        assert_eq!(encode(&packed).unwrap(), packed.encode_to_vec());
    }
}
