//! Resource bodies (pure): takes a served kind and its spec as Kubernetes JSON (the typed spec serialized with
//! serde) and yields the canonical bytes of the kind's Istio or Higress message; and takes such bytes back to
//! proto JSON with camelCase names, as the project's decoder reads specs.
//!
//! Both directions go through the descriptors `build.rs` compiles from `proto/admitpilot` (prost-reflect), looked
//! up once. Both are strict: a spec field the message does not have is an error, not dropped, because the body
//! must carry every field that was validated; a received body with fields this schema does not know is an error
//! too, for the same reason in the other direction (the object would be checked and served without them).

use std::collections::BTreeMap;
use std::sync::LazyLock;

use prost_reflect::{DynamicMessage, MessageDescriptor, SerializeOptions, Value as ProtoValue};
use serde_json::Value;

use super::{canonical, collection, crd_json};
use admitpilot_envoy_proto as envoy_proto;
use admitpilot_model::Kind;

/// Why a body could not be built or read. Paths start at `spec`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// The kind is not served over MCP, so it has no body message.
    #[error("{0} is not served over MCP")]
    NotServed(Kind),
    /// The descriptor set lacks the kind's message (a build defect).
    #[error("the descriptor set has no message {0}")]
    MissingDescriptor(&'static str),
    /// The spec does not fit the message.
    #[error("{path}: {reason}")]
    Field {
        /// JSON path of the offending field (`spec.http[0].route[0].destination.bogus`).
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The bytes are not a valid encoding of the message.
    #[error("{0}")]
    Bytes(String),
    /// The bytes hold a field the message does not have.
    #[error("{path}: field number {number} is not in the schema")]
    UnknownField {
        /// JSON path of the message holding it (`spec.http[0].route[0].destination`).
        path: String,
        /// The field's number.
        number: u32,
    },
    /// A value does not fit its own field while encoding (not produced by prost-reflect).
    #[error("{0}")]
    Canonical(#[from] canonical::Error),
}

/// The result of this module's fallible functions.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The body message descriptor of every served kind, looked up once in the descriptor pool.
static DESCRIPTORS: LazyLock<BTreeMap<Kind, MessageDescriptor>> = LazyLock::new(|| {
    collection::SERVED
        .iter()
        .filter_map(|&kind| {
            let name = collection::body_message(kind)?;
            Some((kind, envoy_proto::pool().get_message_by_name(name)?))
        })
        .collect()
});

/// Returns the descriptor of a served kind's body message.
pub fn descriptor(kind: Kind) -> Result<&'static MessageDescriptor> {
    let name = collection::body_message(kind).ok_or(Error::NotServed(kind))?;
    DESCRIPTORS.get(&kind).ok_or(Error::MissingDescriptor(name))
}

/// Builds the body of a `kind` object from its spec as Kubernetes stores it (Istio's CRD JSON, see
/// [`crd_json`]) and encodes it canonically.
pub fn encode(kind: Kind, mut spec: Value) -> Result<Vec<u8>> {
    let desc = descriptor(kind)?;
    crd_json::to_proto_json(desc, &mut spec);
    let message = envoy_proto::from_json_as(desc.clone(), &spec).map_err(|e| Error::Field {
        path: spec_path(e.path()),
        reason: e.reason(),
    })?;
    Ok(canonical::encode(&message)?)
}

/// `spec`, followed by a path below it.
fn spec_path(below: &str) -> String {
    match below {
        "" => "spec".to_string(),
        below if below.starts_with('[') => format!("spec{below}"),
        below => format!("spec.{below}"),
    }
}

/// Decodes the body bytes of a `kind` object into its spec as proto JSON (camelCase names, default values left
/// out, 64-bit integers as numbers, whole doubles as integers).
pub fn decode(kind: Kind, bytes: &[u8]) -> Result<Value> {
    let message = DynamicMessage::decode(descriptor(kind)?.clone(), bytes)
        .map_err(|e| Error::Bytes(e.to_string()))?;
    reject_unknown(&message, "spec")?;
    let options = SerializeOptions::new()
        .skip_default_fields(true)
        .stringify_64_bit_integers(false);
    // Serializing into a serde_json::Value does not fail: every proto value has a JSON form, and the schema holds
    // no Any whose payload could be unknown.
    let mut spec = message
        .serialize_with_options(serde_json::value::Serializer, &options)
        .map_err(|e| Error::Bytes(e.to_string()))?;
    whole_numbers_as_integers(&mut spec);
    Ok(spec)
}

/// Fails on the first field (at any depth) the schema does not know, naming the message that holds it.
fn reject_unknown(message: &DynamicMessage, path: &str) -> Result<()> {
    if let Some(unknown) = message.unknown_fields().next() {
        return Err(Error::UnknownField {
            path: path.to_string(),
            number: unknown.number(),
        });
    }
    for (field, value) in message.fields() {
        let here = format!("{path}.{}", field.json_name());
        match value {
            ProtoValue::Message(inner) => reject_unknown(inner, &here)?,
            ProtoValue::List(items) => {
                for (i, item) in items.iter().enumerate() {
                    if let ProtoValue::Message(inner) = item {
                        reject_unknown(inner, &format!("{here}[{i}]"))?;
                    }
                }
            }
            ProtoValue::Map(entries) => {
                for (key, item) in entries {
                    if let ProtoValue::Message(inner) = item {
                        reject_unknown(inner, &format!("{here}[{key:?}]"))?;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Writes every double that holds a whole number (and fits an `i64` exactly) as an integer, as Go's protojson
/// prints it: `google.protobuf.Struct` numbers are doubles, so without this an `8080` in an EnvoyFilter patch or
/// a plugin config would come back as `8080.0`.
fn whole_numbers_as_integers(value: &mut Value) {
    /// 2^53: every integer of smaller magnitude is exact in a double.
    const EXACT: f64 = 9_007_199_254_740_992.0;
    match value {
        Value::Number(number) if number.is_f64() => {
            if let Some(float) = number.as_f64() {
                if float.fract() == 0.0 && float.abs() < EXACT {
                    // In range and whole, so the conversion is exact.
                    #[allow(clippy::cast_possible_truncation)]
                    let whole = float as i64;
                    *value = Value::from(whole);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(whole_numbers_as_integers),
        Value::Object(fields) => fields.values_mut().for_each(whole_numbers_as_integers),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use serde_json::json;

    #[test]
    fn every_served_kind_has_its_message() {
        for &kind in collection::SERVED.iter() {
            let desc = descriptor(kind).unwrap();
            assert_eq!(Some(desc.full_name()), collection::body_message(kind));
        }
        assert_eq!(
            descriptor(Kind::Secret),
            Err(Error::NotServed(Kind::Secret))
        );
    }

    #[test]
    fn spec_round_trips_through_the_bytes() {
        let spec = json!({"hosts": ["a.example.com"], "gateways": ["mesh"],
            "http": [{"name": "r", "match": [{"uri": {"prefix": "/api"}, "headers": {"x-b": {"exact": "1"}, "x-a": {"regex": "v.*"}}}],
                "route": [{"destination": {"host": "a", "port": {"number": 8080}}, "weight": 90},
                          {"destination": {"host": "b", "subset": "v2"}, "weight": 10}],
                "timeout": "1.500s", "retries": {"attempts": 3, "retryOn": "5xx"}}],
            "exportTo": ["."]});
        let bytes = encode(Kind::VirtualService, spec.clone()).unwrap();
        assert_eq!(decode(Kind::VirtualService, &bytes).unwrap(), spec);
    }

    #[test]
    fn unknown_spec_fields_are_errors_with_their_path() {
        let spec = json!({"hosts": ["a"], "http": [{"route": [{"destination": {"host": "a", "bogus": 1}}]}]});
        let err = encode(Kind::VirtualService, spec).unwrap_err();
        let Error::Field { path, reason } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(path, "spec.http[0].route[0].destination.bogus", "{err}");
        assert_eq!(reason, "unknown field bogus");
    }

    #[test]
    fn type_mismatches_name_the_field() {
        let err = encode(
            Kind::Gateway,
            json!({"servers": [{"port": {"number": "eighty"}}]}),
        )
        .unwrap_err();
        assert!(
            err.to_string().starts_with("spec.servers[0].port.number: "),
            "{err}"
        );
    }

    #[test]
    fn sixty_four_bit_integers_and_struct_numbers_stay_numbers() {
        let rule = json!({"host": "a", "trafficPolicy": {"loadBalancer": {"consistentHash": {
            "httpHeaderName": "x", "ringHash": {"minimumRingSize": "1024"}}}}});
        let back = decode(
            Kind::DestinationRule,
            &encode(Kind::DestinationRule, rule).unwrap(),
        )
        .unwrap();
        assert_eq!(
            back["trafficPolicy"]["loadBalancer"]["consistentHash"]["ringHash"]["minimumRingSize"],
            json!(1024)
        );
        let plugin = json!({"url": "oci://x", "pluginConfig": {"port": 8080, "ratio": 0.5, "list": [1, -2]}});
        let back = decode(
            Kind::IstioWasmPlugin,
            &encode(Kind::IstioWasmPlugin, plugin.clone()).unwrap(),
        )
        .unwrap();
        assert_eq!(back, plugin);
    }

    #[test]
    fn bytes_that_are_not_the_message_are_errors() {
        let err = decode(Kind::VirtualService, &[0x0a, 0x05, b'a']).unwrap_err();
        assert!(matches!(err, Error::Bytes(_)), "{err:?}");
    }

    #[test]
    fn unknown_body_fields_are_errors_naming_where() {
        // A Destination (inside http[0].route[0]) with field 9, which the schema does not define.
        let mut destination = b"\x0a\x01a".to_vec();
        destination.extend([0x48, 0x01]);
        let mut route_destination = vec![0x0a, destination.len() as u8];
        route_destination.extend(destination);
        let mut http = vec![0x12, route_destination.len() as u8];
        http.extend(route_destination);
        let mut body = vec![0x1a, http.len() as u8];
        body.extend(http);
        let err = decode(Kind::VirtualService, &body).unwrap_err();
        assert_eq!(
            err.to_string(),
            "spec.http[0].route[0].destination: field number 9 is not in the schema"
        );
    }

    #[test]
    fn bodies_with_maps_encode_the_same_every_time() {
        let spec = json!({"selector": {"matchLabels": {"a": "1", "b": "2", "c": "3", "d": "4"}},
            "url": "oci://x", "pluginConfig": {"z": 1, "y": {"x": [1, 2], "w": "v"}, "u": true, "t": null}});
        let first = encode(Kind::IstioWasmPlugin, spec.clone()).unwrap();
        for _ in 0..5 {
            assert_eq!(encode(Kind::IstioWasmPlugin, spec.clone()).unwrap(), first);
        }
        // `null` inside a Struct is a value, kept.
        let message =
            envoy_proto::from_json_as(descriptor(Kind::IstioWasmPlugin).unwrap().clone(), &spec)
                .unwrap();
        assert_eq!(first.len(), message.encoded_len());
    }
}
