//! The descriptor set `build.rs` compiles from `proto/` describes the same API as the `envoy-types` crate in
//! `Cargo.lock`: every message of the `types.bin` that crate ships (outside `google.protobuf`, whose newest
//! descriptor.proto additions protox does not carry) is present, each field with the same type and options.
//! The crate's folder is found with `cargo metadata`, which a test may run (build scripts do not); limited to the
//! host platform, so packages only other platforms need (never downloaded here) are not required.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;

use admitpilot::envoy_proto::pool;
use prost::Message;
use prost_reflect::DescriptorPool;

/// The platform `rustc` builds for by default (`host:` of `rustc -vV`).
fn host_triple() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let output = Command::new(rustc)
        .arg("-vV")
        .output()
        .expect("run rustc -vV");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("host: "))
        .expect("rustc -vV names the host")
        .to_string()
}

/// The source folder of the `envoy-types` package this workspace resolved.
fn envoy_types_dir() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--offline"])
        .args(["--filter-platform", &host_triple()])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo metadata");
    assert!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let manifest = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "envoy-types")
        .and_then(|p| p["manifest_path"].as_str())
        .expect("envoy-types is a dependency");
    PathBuf::from(manifest).parent().unwrap().to_path_buf()
}

#[test]
fn compiled_descriptors_match_the_envoy_types_crate() {
    let shipped = std::fs::read(envoy_types_dir().join("src/generated/types.bin")).unwrap();
    let shipped = DescriptorPool::decode(shipped.as_slice()).unwrap();
    let ours = pool();
    let mut compared_fields = 0;
    let mut fields_with_rules = 0;
    let rules = ours.get_extension_by_name("validate.rules").unwrap();
    for message in shipped
        .all_messages()
        .filter(|m| !m.full_name().starts_with("google.protobuf."))
    {
        let Some(compiled) = ours.get_message_by_name(message.full_name()) else {
            panic!("{} is missing from proto/", message.full_name());
        };
        assert_eq!(
            message.options().encode_to_vec(),
            compiled.options().encode_to_vec(),
            "options of {}",
            message.full_name()
        );
        for field in message.fields() {
            let Some(other) = compiled.get_field_by_name(field.name()) else {
                panic!("{} is missing from proto/", field.full_name());
            };
            assert_eq!(field.number(), other.number(), "{}", field.full_name());
            assert_eq!(
                format!("{:?}", field.kind()),
                format!("{:?}", other.kind()),
                "type of {}",
                field.full_name()
            );
            assert_eq!(
                field.options().encode_to_vec(),
                other.options().encode_to_vec(),
                "options of {}",
                field.full_name()
            );
            compared_fields += 1;
            fields_with_rules += usize::from(other.options().has_extension(&rules));
        }
    }
    assert!(compared_fields > 5_000, "compared {compared_fields} fields");
    assert!(
        fields_with_rules > 1_000,
        "{fields_with_rules} fields carry validate.rules"
    );
}
