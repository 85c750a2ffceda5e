//! Credential redaction for debug output: takes any JSON value (an object as `/debug/configz` shows it) and
//! replaces, at any depth, the value of every field known to hold a secret with `"<redacted>"`. Known means: a
//! field Envoy marks `udpa.annotations.sensitive` (private keys, passwords, tokens, in EnvoyFilter patches), or
//! one Istio and Higress treat as a credential (higress-config's tracing `access_token`, Wasm plugin API keys and
//! tokens). Names match in any spelling (`access_token`, `accessToken`, `access-token`).

use std::collections::BTreeSet;
use std::sync::LazyLock;

use serde_json::Value;

/// What a redacted value is replaced with.
pub const REDACTED: &str = "<redacted>";

/// Credential field names of Istio's and Higress's own config, beyond Envoy's: higress-config's
/// `tracing.skywalking.access_token` (Higress's `Skywalking.AccessToken`), and the keys Higress's Wasm plugins
/// (key-auth, jwt-auth, ai-proxy, oauth) and Istio's WasmPlugin configurations carry credentials under.
const CONFIG_CREDENTIALS: &[&str] = &[
    "access_token",
    "api_key",
    "api_keys",
    "api_token",
    "api_tokens",
    "auth_token",
    "bearer_token",
    "client_secret",
    "credential",
    "credentials",
    "password",
    "private_key",
    "secret",
    "secret_key",
    "token",
];

/// Lower case without `_` or `-`: `access_token`, `accessToken` and `access-token` read the same.
fn normalized(name: &str) -> String {
    name.chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect()
}

static SECRET_FIELDS: LazyLock<BTreeSet<String>> = LazyLock::new(|| {
    admitpilot_envoy_proto::sensitive::field_names()
        .iter()
        .map(String::as_str)
        .chain(CONFIG_CREDENTIALS.iter().copied())
        .map(normalized)
        .collect()
});

/// Whether a field of this name holds a credential.
pub fn is_secret_field(name: &str) -> bool {
    SECRET_FIELDS.contains(&normalized(name))
}

/// Replaces the value of every secret field in `value`, at any depth, with [`REDACTED`].
pub fn credentials(value: &mut Value) {
    match value {
        Value::Object(fields) => {
            for (name, field) in fields.iter_mut() {
                if is_secret_field(name) && !field.is_null() {
                    *field = Value::String(REDACTED.into());
                } else {
                    credentials(field);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(credentials),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn envoy_sensitive_fields_and_config_credentials_are_redacted_at_any_depth() {
        let mut value = json!({
            "tracing": {"skywalking": {"service": "sw", "access_token": "sw-token"}},
            "configPatches": [{"patch": {"value": {"typed_config": {
                "private_key": {"inline_string": "PEM"},
                "generic_secret": {"secret": {"inline_string": "k"}},
                "apiKey": "abc",
                "cluster": "outbound|80||a"
            }}}}],
        });
        credentials(&mut value);
        let text = value.to_string();
        for leaked in ["sw-token", "PEM", "\"k\"", "abc"] {
            assert!(!text.contains(leaked), "{leaked} leaked: {text}");
        }
        assert_eq!(value["tracing"]["skywalking"]["service"], "sw");
        assert_eq!(
            value["configPatches"][0]["patch"]["value"]["typed_config"]["cluster"],
            "outbound|80||a"
        );
    }

    #[test]
    fn names_match_in_every_spelling() {
        for name in ["access_token", "accessToken", "access-token", "PrivateKey"] {
            assert!(is_secret_field(name), "{name}");
        }
        assert!(!is_secret_field("imagePullSecret"));
        assert!(!is_secret_field("credentialName"));
    }
}
