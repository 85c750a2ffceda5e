//! Generates the Rust types of the MCP resource message (package `istio.mcp.v1alpha1`) into
//! `OUT_DIR/istio.mcp.v1alpha1.rs`, included by `src/pb.rs`: protox compiles the repository's
//! `proto/admitpilot/istio/mcp/v1alpha1` (pure Rust, no `protoc`, no network) and tonic-prost-build writes the
//! prost messages.

use std::collections::HashSet;
use std::path::Path;

/// Where the MCP `.proto` files are, relative to this crate, and the include root their imports start from.
const INCLUDE_ROOT: &str = "../../proto/admitpilot";
const FILES: &[&str] = &[
    "istio/mcp/v1alpha1/metadata.proto",
    "istio/mcp/v1alpha1/resource.proto",
];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={INCLUDE_ROOT}/istio/mcp");
    let mut compiler = protox::Compiler::new([Path::new(INCLUDE_ROOT)])
        .unwrap_or_else(|e| panic!("protox include root {INCLUDE_ROOT}: {e}"));
    compiler.include_imports(true).include_source_info(false);
    if let Err(err) = compiler.open_files(FILES) {
        panic!("compiling the MCP protos: {err}");
    }
    generate_mcp_types(&compiler);
}

/// The package whose messages get Rust types: MCP's `Resource` and `Metadata`.
const MCP_PACKAGE: &str = "istio.mcp.v1alpha1";

/// Writes `OUT_DIR/istio.mcp.v1alpha1.rs`: prost message types (no gRPC code) for [`MCP_PACKAGE`], with
/// `google.protobuf` mapped to envoy-types' `Any` and `Timestamp`, the ones the xDS code already uses. Maps are
/// `BTreeMap`s so that encoding a resource always yields the same bytes.
fn generate_mcp_types(compiler: &protox::Compiler) {
    let mut set = compiler.file_descriptor_set();
    // The MCP files and the well-known types they import (prost-build reads those to derive traits; being
    // extern, they generate no code).
    let imports: HashSet<String> = set
        .file
        .iter()
        .filter(|file| file.package() == MCP_PACKAGE)
        .flat_map(|file| file.dependency.iter().cloned())
        .collect();
    set.file
        .retain(|file| file.package() == MCP_PACKAGE || imports.contains(file.name()));
    let mut config = tonic_prost_build::Config::new();
    config
        .enable_type_names()
        .type_name_domain(["."], "type.googleapis.com");
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(false)
        .btree_map(".")
        // Stops prost-build from mapping `google.protobuf` to prost-types itself, so the mapping below applies;
        // no well-known type is generated, as none is in `set`.
        .compile_well_known_types(true)
        .extern_path(".google.protobuf", "::envoy_types::pb::google::protobuf")
        .compile_fds_with_config(set, config)
        .unwrap_or_else(|e| panic!("generating the {MCP_PACKAGE} types: {e}"));
}
