//! The config sources (folder, Kubernetes double, MCP client) and `serve` from a folder.
//! One test binary for the area (linked once); each module is one former test file.

mod source_folder;
mod source_kube;
mod source_mcp;
mod source_serve;
