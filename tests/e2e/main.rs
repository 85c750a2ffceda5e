//! End to end: real Envoy 1.40 fed by admitpilot, real HTTP to backends on 127.0.0.1, every `update_rejected` stat 0.
//! One test binary for the area (linked once); each module is one former test file.

mod e2e_admission_effect;
mod e2e_authz;
mod e2e_authz_istio;
mod e2e_envoy;
mod e2e_ext_authz;
mod e2e_gateway_api;
mod e2e_gateway_api_tls;
mod e2e_grpc_xds;
mod e2e_higress_config;
mod e2e_ingress;
mod e2e_ingress_higress;
mod e2e_jwt;
mod e2e_mcp_chain;
mod e2e_restart;
mod e2e_telemetry;
mod e2e_upstream_tls;
mod e2e_xds_auth;
mod envoy_generated;
mod envoy_regex;
mod envoy_validate;
mod higress_envoy;
