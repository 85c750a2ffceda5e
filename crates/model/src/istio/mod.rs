//! Istio specs: one file per kind, typed serde structs in Kubernetes camelCase JSON.

pub mod authorization_policy;
pub mod destination_rule;
pub mod envoy_filter;
pub mod gateway;
pub mod peer_authentication;
pub mod proxy_config;
pub mod request_authentication;
pub mod service_entry;
pub mod sidecar;
pub mod telemetry;
pub mod traffic_extension;
pub mod types;
pub mod virtual_service;
pub mod wasm_plugin;
pub mod workload_entry;
pub mod workload_group;

pub use authorization_policy::AuthorizationPolicy;
pub use destination_rule::DestinationRule;
pub use envoy_filter::EnvoyFilter;
pub use gateway::Gateway;
pub use peer_authentication::PeerAuthentication;
pub use proxy_config::ProxyConfig;
pub use request_authentication::RequestAuthentication;
pub use service_entry::ServiceEntry;
pub use sidecar::Sidecar;
pub use telemetry::Telemetry;
pub use traffic_extension::TrafficExtension;
pub use types::{PolicyTargetReference, PortSelector, WorkloadMode};
pub use virtual_service::VirtualService;
pub use wasm_plugin::WasmPlugin;
pub use workload_entry::WorkloadEntry;
pub use workload_group::WorkloadGroup;
