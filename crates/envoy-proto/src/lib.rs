//! Envoy's protobuf descriptors (pure): the `FileDescriptorSet` that `build.rs` compiles from `proto/`, loaded once
//! into a [`prost_reflect::DescriptorPool`], for JSON ↔ proto conversion ([`json`]), Istio-style merging
//! ([`merge`]), the fields Envoy marks secret ([`sensitive`]), protoc-gen-validate rules ([`pgv`], with Envoy's URI template grammar, [`uri_template`]) and the clusters a config names ([`references`]).

pub mod json;
pub mod merge;
pub mod pgv;
pub mod references;
pub mod sensitive;
pub mod uri_template;

use std::sync::LazyLock;

use prost_reflect::DescriptorPool;

pub use json::{
    from_dynamic, from_json, from_json_as, message_from_json, message_to_json, to_dynamic, to_json,
    Error,
};
pub use merge::{merge, merge_any, merge_into, ListMerge};
pub use pgv::{validate_message, validate_partial_message, Violation};

/// The encoded descriptor set that `build.rs` compiles from `proto/`.
const ENCODED: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/envoy_descriptors.bin"));

static POOL: LazyLock<DescriptorPool> = LazyLock::new(|| {
    // The bytes are compiled from `proto/` by build.rs, not runtime input: failing here is a build defect.
    #[allow(clippy::expect_used)]
    DescriptorPool::decode(ENCODED).expect("build.rs writes a valid FileDescriptorSet")
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
        assert!(pool()
            .get_message_by_name("udpa.type.v1.TypedStruct")
            .is_some());
        assert!(pool()
            .get_message_by_name("xds.type.v3.TypedStruct")
            .is_some());
    }

    /// build.rs resolves relative names as protoc does: `common.dynamic_forward_proxy.v3.DnsCacheConfig` inside
    /// `envoy.extensions.clusters.dynamic_forward_proxy.v3` names `envoy.extensions.common.…`, although a package
    /// `envoy.extensions.clusters.common` is loaded too (only through an indirect import).
    #[test]
    fn relative_names_resolve_as_protoc_does() {
        let config = pool()
            .get_message_by_name("envoy.extensions.clusters.dynamic_forward_proxy.v3.ClusterConfig")
            .expect("the dynamic forward proxy cluster is described");
        let field = config
            .get_field_by_name("dns_cache_config")
            .expect("ClusterConfig has dns_cache_config");
        let kind = field.kind();
        let message = kind.as_message().expect("dns_cache_config is a message");
        assert_eq!(
            message.full_name(),
            "envoy.extensions.common.dynamic_forward_proxy.v3.DnsCacheConfig"
        );
    }

    /// Custom options survive the build: Envoy's protoc-gen-validate rules are readable from the descriptors.
    #[test]
    fn validate_rules_are_kept() {
        let rules = pool()
            .get_extension_by_name("validate.rules")
            .expect("validate.rules is described");
        let hcm = pool()
            .get_message_by_name(
                "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
            )
            .expect("HCM is described");
        let field = hcm
            .get_field_by_name("max_request_headers_kb")
            .expect("HCM has max_request_headers_kb");
        assert!(field.options().has_extension(&rules));
    }

    /// Every EnvoyFilter `applyTo` (model) names a message this pool describes.
    #[test]
    fn every_envoy_filter_apply_to_names_a_described_message() {
        use admitpilot_model::istio::envoy_filter::ApplyTo;
        for apply_to in [
            ApplyTo::Listener,
            ApplyTo::FilterChain,
            ApplyTo::NetworkFilter,
            ApplyTo::HttpFilter,
            ApplyTo::RouteConfiguration,
            ApplyTo::VirtualHost,
            ApplyTo::HttpRoute,
            ApplyTo::Cluster,
            ApplyTo::ExtensionConfig,
            ApplyTo::Bootstrap,
            ApplyTo::ListenerFilter,
        ] {
            let name = apply_to
                .envoy_message()
                .expect("only Invalid names no message");
            assert!(pool().get_message_by_name(name).is_some(), "{name}");
        }
    }
}
