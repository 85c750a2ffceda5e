//! Small Envoy building blocks (pure): takes plain values and yields the protobuf pieces every translator
//! uses (ADS config sources, socket addresses, durations, typed extension configs), and a walk over the HTTP
//! connection managers of finished listeners.

use envoy_types::pb::envoy::config::core::v3::Address;
use envoy_types::pb::envoy::config::core::v3::{
    address, config_source, socket_address, AggregatedConfigSource, ApiVersion, ConfigSource,
    SocketAddress,
};
use envoy_types::pb::envoy::config::listener::v3::{filter, Listener};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;
use envoy_types::pb::google::protobuf::{value, Any, Duration, ListValue, Struct, Value};
use envoy_types::util::pack_any;
use prost::{Message, Name};

use admitpilot_model::duration::parse_duration_nanos;

/// Name of the downstream/upstream TLS transport socket.
pub const TLS_TRANSPORT: &str = "envoy.transport_sockets.tls";

/// Returns a config source that fetches over the ADS stream (xDS v3).
pub fn ads() -> ConfigSource {
    ConfigSource {
        resource_api_version: ApiVersion::V3 as i32,
        config_source_specifier: Some(config_source::ConfigSourceSpecifier::Ads(
            AggregatedConfigSource {},
        )),
        ..Default::default()
    }
}

/// Returns a TCP socket address.
pub fn socket_address(ip: &str, port: u32) -> Address {
    Address {
        address: Some(address::Address::SocketAddress(SocketAddress {
            address: ip.to_string(),
            port_specifier: Some(socket_address::PortSpecifier::PortValue(port)),
            ..Default::default()
        })),
    }
}

/// Returns the protobuf `Struct` of a JSON object (numbers as doubles, as protobuf JSON reads them).
pub fn json_struct(object: &serde_json::Map<String, serde_json::Value>) -> Struct {
    Struct {
        fields: object
            .iter()
            .map(|(key, v)| (key.clone(), json_value(v)))
            .collect(),
    }
}

fn json_value(v: &serde_json::Value) -> Value {
    let kind = match v {
        serde_json::Value::Null => value::Kind::NullValue(0),
        serde_json::Value::Bool(b) => value::Kind::BoolValue(*b),
        serde_json::Value::Number(n) => value::Kind::NumberValue(n.as_f64().unwrap_or_default()),
        serde_json::Value::String(s) => value::Kind::StringValue(s.clone()),
        serde_json::Value::Array(items) => value::Kind::ListValue(ListValue {
            values: items.iter().map(json_value).collect(),
        }),
        serde_json::Value::Object(object) => value::Kind::StructValue(json_struct(object)),
    };
    Value { kind: Some(kind) }
}

/// Returns a protobuf duration of whole milliseconds.
pub fn millis(ms: u64) -> Duration {
    Duration {
        seconds: i64::try_from(ms / 1000).unwrap_or(i64::MAX),
        nanos: i32::try_from((ms % 1000) * 1_000_000).unwrap_or(0),
    }
}

/// Parses a duration as Istio accepts it (Go's syntax, [`parse_duration_nanos`]: `1.5s`, `1h30m`, `250ms`,
/// `10us`) into a protobuf duration. Returns `None` for malformed or negative input (validation rejects those
/// before translation).
pub fn parse_duration(text: &str) -> Option<Duration> {
    let nanos = u64::try_from(parse_duration_nanos(text)?).ok()?;
    Some(Duration {
        seconds: i64::try_from(nanos / 1_000_000_000).ok()?,
        nanos: i32::try_from(nanos % 1_000_000_000).ok()?,
    })
}

/// Calls `change` with every HTTP connection manager of `listeners` (decoded, with its listener's name) and
/// stores it back when `change` returns `true`. A connection manager that does not decode is skipped.
pub fn for_each_hcm(
    listeners: &mut [Listener],
    mut change: impl FnMut(&str, &mut HttpConnectionManager) -> bool,
) {
    for listener in listeners {
        let chains = listener
            .filter_chains
            .iter_mut()
            .chain(listener.default_filter_chain.iter_mut());
        for network_filter in chains.flat_map(|chain| chain.filters.iter_mut()) {
            let Some(filter::ConfigType::TypedConfig(any)) = network_filter.config_type.as_mut()
            else {
                continue;
            };
            if any.type_url != HttpConnectionManager::type_url() {
                continue;
            }
            let Ok(mut hcm) = HttpConnectionManager::decode(any.value.as_slice()) else {
                continue;
            };
            if change(&listener.name, &mut hcm) {
                any.value = hcm.encode_to_vec();
            }
        }
    }
}

/// Packs a message into `Any` (re-exported so translators need one import).
pub fn any<T: Name + Message>(message: T) -> Any {
    pack_any(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_istio_durations() {
        assert_eq!(parse_duration("1.5s"), Some(millis(1500)));
        assert_eq!(parse_duration("1m30s"), Some(millis(90_000)));
        assert_eq!(parse_duration("250ms"), Some(millis(250)));
        assert_eq!(parse_duration("0s"), Some(millis(0)));
        assert_eq!(parse_duration("0"), Some(millis(0)));
        assert_eq!(parse_duration("1.0000001s").map(|d| d.nanos), Some(100));
        assert_eq!(parse_duration("5"), None);
        assert_eq!(parse_duration("-1s"), None);
    }

    #[test]
    fn millis_splits_seconds_and_nanos() {
        assert_eq!(
            millis(1500),
            Duration {
                seconds: 1,
                nanos: 500_000_000
            }
        );
    }
}
