//! Copies the Envoy `FileDescriptorSet` that the `envoy-types` crate ships (`src/generated/types.bin`,
//! including protoc-gen-validate's `validate.proto`) into `OUT_DIR`, so `src/envoy_proto` can embed it.
//! The descriptors therefore come from a crates.io dependency and a fresh machine needs no protoc.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let src = envoy_types_dir().join("src/generated/types.bin");
    std::fs::copy(&src, out.join("envoy_descriptors.bin"))
        .unwrap_or_else(|e| panic!("copy {}: {e}", src.display()));
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=Cargo.lock");
}

/// Finds the source folder of the `envoy-types` package this build resolved, through `cargo metadata`.
fn envoy_types_dir() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let target = std::env::var("TARGET").expect("cargo sets TARGET");
    // Offline and for this target only: the build has downloaded exactly these packages, not those of other
    // platforms, which a full `cargo metadata` would need.
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--offline"])
        .args(["--filter-platform", &target])
        .current_dir(&manifest_dir)
        .output()
        .expect("run cargo metadata");
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON");
    let packages = metadata["packages"]
        .as_array()
        .expect("metadata has packages");
    let manifest = packages
        .iter()
        .find(|p| p["name"] == "envoy-types")
        .and_then(|p| p["manifest_path"].as_str())
        .expect("envoy-types is a dependency");
    PathBuf::from(manifest)
        .parent()
        .expect("manifest has a parent folder")
        .to_path_buf()
}
