//! Istio `WorkloadGroup` spec: takes Kubernetes camelCase JSON, yields the template and readiness probe shared by
//! auto-registered VM workloads.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::workload_entry::WorkloadEntry;

/// The `spec` of a WorkloadGroup.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WorkloadGroup {
    /// Labels and annotations copied onto generated WorkloadEntries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<WorkloadGroupMeta>,
    /// Template for generated WorkloadEntries (required).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template: Option<Box<WorkloadEntry>>,
    /// Readiness probe run by the VM agent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe: Option<Box<ReadinessProbe>>,
}

/// Metadata applied to generated WorkloadEntries.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WorkloadGroupMeta {
    /// Labels.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// Readiness probe: counters plus exactly one check method.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ReadinessProbe {
    /// Seconds before the first probe.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initial_delay_seconds: Option<i32>,
    /// Probe timeout in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i32>,
    /// Probe period in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub period_seconds: Option<i32>,
    /// Successes needed to become ready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub success_threshold: Option<i32>,
    /// Failures needed to become unready.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_threshold: Option<i32>,
    /// HTTP GET check (oneof).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_get: Option<HttpHealthCheckConfig>,
    /// TCP connect check (oneof).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_socket: Option<TcpHealthCheckConfig>,
    /// Command check (oneof).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exec: Option<ExecHealthCheckConfig>,
    /// gRPC health check (oneof).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grpc: Option<GrpcHealthCheckConfig>,
}

/// HTTP GET health check.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpHealthCheckConfig {
    /// Request path.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub path: String,
    /// Port (required).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u32>,
    /// Host to connect to.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub host: String,
    /// `HTTP` or `HTTPS`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub scheme: String,
    /// Extra request headers.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub http_headers: Vec<HttpHeader>,
}

/// One request header.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HttpHeader {
    /// Header name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Header value.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub value: String,
}

/// TCP connect health check.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TcpHealthCheckConfig {
    /// Host to connect to.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub host: String,
    /// Port (required).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u32>,
}

/// Command health check.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ExecHealthCheckConfig {
    /// Command and arguments (required).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
}

/// gRPC health check.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GrpcHealthCheckConfig {
    /// Port.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u32>,
    /// Service name to check.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub service: String,
}
