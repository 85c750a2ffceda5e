//! Envoy's protobuf descriptors (pure): the `FileDescriptorSet` shipped by the `envoy-types` crate, loaded once
//! into a [`prost_reflect::DescriptorPool`], for JSON ↔ proto conversion ([`json`]), Istio-style merging
//! ([`merge`]) and protoc-gen-validate rules ([`pgv`]).

pub mod json;
pub mod merge;
pub mod pgv;

use std::sync::LazyLock;

use prost_reflect::prost_types::field_descriptor_proto::{Label, Type};
use prost_reflect::prost_types::{DescriptorProto, FieldDescriptorProto, FileDescriptorProto};
use prost_reflect::DescriptorPool;

pub use json::{
    from_dynamic, from_json, from_json_as, message_from_json, message_to_json, to_dynamic, to_json,
    ProtoJsonError,
};
pub use merge::{merge, merge_any, merge_into, ListMerge};
pub use pgv::{validate_message, Violation};

/// The encoded descriptor set, copied from `envoy-types` by `build.rs`.
const ENCODED: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/envoy_descriptors.bin"));

static POOL: LazyLock<DescriptorPool> = LazyLock::new(|| {
    // The bytes are a build input from a pinned crate, not runtime input: failing here is a build defect.
    #[allow(clippy::expect_used)]
    let mut pool =
        DescriptorPool::decode(ENCODED).expect("envoy-types ships a valid FileDescriptorSet");
    #[allow(clippy::expect_used)]
    pool.add_file_descriptor_protos(typed_struct_files())
        .expect("the TypedStruct descriptors are well formed");
    pool
});

/// Returns the pool of every Envoy, xDS, udpa, validate and well-known-type descriptor.
pub fn pool() -> &'static DescriptorPool {
    &POOL
}

/// Describes `udpa.type.v1.TypedStruct` and `xds.type.v3.TypedStruct`, which `envoy-types` does not ship but
/// Envoy and Istio accept as a `typed_config` wrapper: `{type_url: string = 1, value: google.protobuf.Struct = 2}`.
fn typed_struct_files() -> Vec<FileDescriptorProto> {
    let file = |name: &str, package: &str| FileDescriptorProto {
        name: Some(name.to_string()),
        package: Some(package.to_string()),
        dependency: vec!["google/protobuf/struct.proto".to_string()],
        message_type: vec![DescriptorProto {
            name: Some("TypedStruct".to_string()),
            field: vec![
                FieldDescriptorProto {
                    name: Some("type_url".to_string()),
                    json_name: Some("typeUrl".to_string()),
                    number: Some(1),
                    label: Some(Label::Optional as i32),
                    r#type: Some(Type::String as i32),
                    ..Default::default()
                },
                FieldDescriptorProto {
                    name: Some("value".to_string()),
                    json_name: Some("value".to_string()),
                    number: Some(2),
                    label: Some(Label::Optional as i32),
                    r#type: Some(Type::Message as i32),
                    type_name: Some(".google.protobuf.Struct".to_string()),
                    ..Default::default()
                },
            ],
            ..Default::default()
        }],
        syntax: Some("proto3".to_string()),
        ..Default::default()
    };
    vec![
        file("udpa/type/v1/typed_struct.proto", "udpa.type.v1"),
        file("xds/type/v3/typed_struct.proto", "xds.type.v3"),
    ]
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
}
