//! Output form (pure): takes [`GatewayResources`] and yields one JSON document (proto-JSON per resource,
//! snake_case field names, `@type` on every `Any`), as `admitpilot render` prints it and goldens store it.

use prost::{Message, Name};
use serde_json::{Map, Value};

use super::types::GatewayResources;
use admitpilot_envoy_proto::json::{self, message_to_json};

/// Placeholder printed instead of private key material.
pub const REDACTED: &str = "[redacted]";

fn list<M: Message + Name>(items: &[M]) -> Result<Value, json::Error> {
    items
        .iter()
        .map(message_to_json)
        .collect::<Result<Vec<_>, _>>()
        .map(Value::Array)
}

/// Converts the resources to one JSON object with keys `listeners`, `route_configs`, `clusters`,
/// `endpoints`, `secrets` and `extension_configs` (empty lists omitted). With `redact`, every secret's
/// `private_key` is replaced by [`REDACTED`].
pub fn to_json(resources: &GatewayResources, redact: bool) -> Result<Value, json::Error> {
    let mut out = Map::new();
    let mut put = |key: &str, value: Value| {
        if value.as_array().is_some_and(|a| !a.is_empty()) {
            out.insert(key.to_string(), value);
        }
    };
    put("listeners", list(&resources.listeners)?);
    put("route_configs", list(&resources.route_configs)?);
    put("clusters", list(&resources.clusters)?);
    put("endpoints", list(&resources.endpoints)?);
    let mut secrets = list(&resources.secrets)?;
    if redact {
        for secret in secrets.as_array_mut().into_iter().flatten() {
            if let Some(key) = secret
                .get_mut("tls_certificate")
                .and_then(|c| c.get_mut("private_key"))
            {
                *key = Value::String(REDACTED.into());
            }
        }
    }
    put("secrets", secrets);
    put("extension_configs", list(&resources.extension_configs)?);
    Ok(Value::Object(out))
}
