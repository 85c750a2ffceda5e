//! The xDS server (SotW, Delta, TLS, authentication), the MCP feed with a Python client, and what the ports let out.
//! One test binary for the area (linked once); each module is one former test file.

mod mcp_python_client;
mod port_security;
mod xds_app;
mod xds_auth;
mod xds_delta;
mod xds_sotw;
mod xds_tls;
