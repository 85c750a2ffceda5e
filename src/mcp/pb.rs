//! The MCP wire messages: nothing in, the Rust types `build.rs` generates with tonic-prost-build from
//! `proto/admitpilot/istio/mcp/v1alpha1` out: [`Resource`] (metadata and an `Any` body) and [`Metadata`]. Their
//! `Any` and `Timestamp` are envoy-types' and their maps are `BTreeMap`s, so a resource always encodes the same.

include!(concat!(env!("OUT_DIR"), "/istio.mcp.v1alpha1.rs"));
