//! Small Envoy building blocks (pure): takes plain values and yields the protobuf pieces every translator
//! uses (ADS config sources, socket addresses, durations, typed extension configs).

use envoy_types::pb::envoy::config::core::v3::Address;
use envoy_types::pb::envoy::config::core::v3::{
    address, config_source, socket_address, AggregatedConfigSource, ApiVersion, ConfigSource,
    SocketAddress,
};
use envoy_types::pb::google::protobuf::{Any, Duration};
use envoy_types::util::pack_any;
use prost::{Message, Name};

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

/// Returns a protobuf duration of whole milliseconds.
pub fn millis(ms: u64) -> Duration {
    Duration {
        seconds: i64::try_from(ms / 1000).unwrap_or(i64::MAX),
        nanos: i32::try_from((ms % 1000) * 1_000_000).unwrap_or(0),
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
