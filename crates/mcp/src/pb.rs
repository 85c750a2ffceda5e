//! The MCP wire messages: nothing in, the Rust types `build.rs` generates with tonic-prost-build from
//! `proto/admitpilot/istio/mcp/v1alpha1` out: [`Resource`] (metadata and an `Any` body) and [`Metadata`]. Their
//! `Any` and `Timestamp` are envoy-types' and their maps are `BTreeMap`s, so a resource always encodes the same.

include!(concat!(env!("OUT_DIR"), "/istio.mcp.v1alpha1.rs"));

/// The type URL of a packed [`Resource`]: what every resource of an MCP response is.
pub const RESOURCE_TYPE_URL: &str = "type.googleapis.com/istio.mcp.v1alpha1.Resource";
