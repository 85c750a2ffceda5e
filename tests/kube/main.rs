//! Against a real kube-apiserver (scripts/kube-up): watch, webhook, status, Gateway API and Ingress validation differentials, xDS and MCP authentication.
//! One test binary for the area (linked once); each module is one former test file.

mod kube_api;
mod kube_gateway_api;
mod kube_gateway_api_validation;
mod kube_ingress_validation;
mod kube_mcp_auth;
mod kube_provision;
mod kube_status;
mod kube_watch;
mod kube_webhook;
mod kube_xds_auth;
