//! Higress specs: one file per kind, typed serde structs in Kubernetes camelCase JSON.

pub mod http2rpc;
pub mod mcp_bridge;
pub mod wasm_plugin;

pub use http2rpc::Http2Rpc;
pub use mcp_bridge::McpBridge;
pub use wasm_plugin::WasmPlugin;
