//! Envoy's protobuf descriptors (pure): the `FileDescriptorSet` shipped by the `envoy-types` crate, loaded once
//! into a [`prost_reflect::DescriptorPool`], for JSON ↔ proto conversion and protoc-gen-validate rules.

use std::sync::LazyLock;

use prost_reflect::DescriptorPool;

/// The encoded descriptor set, copied from `envoy-types` by `build.rs`.
const ENCODED: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/envoy_descriptors.bin"));

static POOL: LazyLock<DescriptorPool> = LazyLock::new(|| {
    // The bytes are a build input from a pinned crate, not runtime input: failing here is a build defect.
    #[allow(clippy::expect_used)]
    DescriptorPool::decode(ENCODED).expect("envoy-types ships a valid FileDescriptorSet")
});

/// Returns the pool of every Envoy, xDS, udpa, validate and well-known-type descriptor.
pub fn pool() -> &'static DescriptorPool {
    &POOL
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_knows_listener_and_validate_rules() {
        assert!(pool()
            .get_message_by_name("envoy.config.listener.v3.Listener")
            .is_some());
        assert!(pool().get_extension_by_name("validate.rules").is_some());
    }
}
