//! Envoy's secret-bearing fields (pure): takes the descriptor pool and yields the names of every field Envoy marks
//! `(udpa.annotations.sensitive) = true` (private keys, passwords, tokens, credentials), in proto and JSON
//! spelling, so debug output can redact them wherever they appear.

use std::collections::BTreeSet;
use std::sync::LazyLock;

use prost_reflect::{Kind, Value};

/// The extension Envoy's protos use to mark a field as holding secret data.
const SENSITIVE: &str = "udpa.annotations.sensitive";

static NAMES: LazyLock<BTreeSet<String>> = LazyLock::new(|| {
    let pool = super::pool();
    let Some(extension) = pool.get_extension_by_name(SENSITIVE) else {
        return BTreeSet::new();
    };
    pool.all_messages()
        .flat_map(|message| message.fields().collect::<Vec<_>>())
        .filter(|field| {
            matches!(
                field.options().get_extension(&extension).as_ref(),
                Value::Bool(true)
            )
        })
        // An `Any` marked sensitive (a credential provider's typed config) holds a whole extension's config,
        // whose own secret fields are marked where they are declared.
        .filter(|field| !matches!(field.kind(), Kind::Message(m) if m.full_name() == "google.protobuf.Any"))
        .flat_map(|field| [field.name().to_string(), field.json_name().to_string()])
        .collect()
});

/// Names of the fields Envoy marks sensitive, as written in proto (`private_key`) and in JSON (`privateKey`).
pub fn field_names() -> &'static BTreeSet<String> {
    &NAMES
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_keys_and_passwords_are_sensitive_and_listener_fields_are_not() {
        let names = field_names();
        for name in ["private_key", "privateKey", "password", "secret"] {
            assert!(names.contains(name), "{name} missing from {names:?}");
        }
        for name in ["typed_config", "name", "address", "cluster"] {
            assert!(!names.contains(name), "{name} should not be sensitive");
        }
    }
}
