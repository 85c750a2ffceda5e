//! Gateway API validation (pure): takes a Gateway API document or decoded spec, yields the findings the API server
//! would give for the CRDs' OpenAPI schema ([`schema`]) and CEL rules (one file per kind; TLSRoute and TCPRoute
//! share one, GatewayClass and ReferenceGrant have no CEL rule but `GatewayClass.spec.controllerName`'s
//! immutability, which needs the old object), plus what Envoy would refuse that the CRDs cannot check.
//! Cross-object findings (a parent or backend that is missing, a reference no ReferenceGrant allows) are
//! warnings, made in [`crate::references`].

mod backend_tls_policy;
mod common;
mod gateway;
mod grpc_route;
mod http_route;
pub mod references;
mod schema;
mod tls_route;

use serde_json::Value;

use admitpilot_model::gateway_api::schema::crd;
use admitpilot_model::{Finding, Findings, Kind, Spec};

/// The OpenAPI findings of a Gateway API document of `kind` (none for other kinds or unserved versions, which
/// decoding reports).
pub fn schema_findings(doc: &Value, kind: Kind) -> Vec<Finding> {
    let Some(crd) = crd(kind) else {
        return Vec::new();
    };
    let api_version = doc["apiVersion"].as_str().unwrap_or_default();
    let (_, version) = Kind::split_api_version(api_version);
    let mut out = Findings::default();
    schema::check(
        crd,
        version,
        doc.get("spec").unwrap_or(&Value::Null),
        &mut out,
    );
    out.into_vec()
}

/// Runs the CEL mirrors and Envoy checks of a Gateway API spec; other specs are left alone.
pub fn validate(spec: &Spec, out: &mut Findings) {
    match spec {
        Spec::KubernetesGateway(gateway) => gateway::validate(gateway, out),
        Spec::ListenerSet(set) => gateway::validate_listener_set(set, out),
        Spec::HttpRoute(route) => http_route::validate(route, out),
        Spec::GrpcRoute(route) => grpc_route::validate(route, out),
        Spec::TlsRoute(route) => tls_route::validate(route, true, out),
        Spec::TcpRoute(route) => tls_route::validate(route, false, out),
        Spec::BackendTlsPolicy(policy) => backend_tls_policy::validate(policy, out),
        _ => {}
    }
}

/// Validates a whole document and yields its errors as `field: message` (test builds only).
#[cfg(test)]
pub(crate) fn error_texts(doc: Value) -> Vec<String> {
    let report =
        super::validate_document(&doc, &admitpilot_model::decode::DecodeOptions::default());
    assert!(!report.unrecognized);
    report
        .errors()
        .map(|f| format!("{}: {}", f.field, f.message))
        .collect()
}
