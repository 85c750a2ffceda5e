//! Kubernetes Services as admitpilot reads them (pure): takes a Service document's `spec` and its
//! `status.loadBalancer.ingress`, yields a [`Service`] that reads like its spec (it dereferences to it) and keeps the
//! addresses a load balancer was given, which a Gateway's `status.addresses` reports; and the protocol a Service
//! port speaks, as Istio infers it ([`infer_protocol`]).

use std::ops::Deref;

use k8s_openapi::api::core::v1::{LoadBalancerIngress, ServiceSpec};
use serde::Serialize;
use serde_json::Value;

/// A Service: its spec, and the load balancer addresses its status holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Service {
    /// The spec (what the Service is serialized as: the status is the API server's, not config).
    pub spec: ServiceSpec,
    /// `status.loadBalancer.ingress`: the addresses a load balancer was given.
    #[serde(skip)]
    pub load_balancer_ingress: Vec<LoadBalancerIngress>,
}

impl Service {
    /// The Service of `spec`, with the load balancer addresses of the document's `status` (read leniently: the
    /// status is written by the API server's controllers, and a malformed one gives none).
    pub fn new(spec: ServiceSpec, status: &Value) -> Self {
        let load_balancer_ingress =
            serde_json::from_value(status["loadBalancer"]["ingress"].clone()).unwrap_or_default();
        Service {
            spec,
            load_balancer_ingress,
        }
    }
}

impl Deref for Service {
    type Target = ServiceSpec;

    fn deref(&self) -> &ServiceSpec {
        &self.spec
    }
}

/// Infers a port's protocol the way Istio does: `appProtocol`, else the name's prefix before `-`, else TCP.
pub fn infer_protocol(name: &str, app_protocol: Option<&str>) -> String {
    let candidate = app_protocol
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| name.split('-').next().unwrap_or_default());
    let upper = candidate.to_ascii_uppercase();
    match upper.as_str() {
        "HTTP" | "HTTPS" | "HTTP2" | "GRPC" | "GRPC-WEB" | "TLS" | "MONGO" | "REDIS" | "MYSQL"
        | "TCP" => upper,
        "KUBERNETES.IO/H2C" => "HTTP2".into(),
        _ => "TCP".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn protocols_follow_istio_naming() {
        assert_eq!(infer_protocol("http-web", None), "HTTP");
        assert_eq!(infer_protocol("grpc", None), "GRPC");
        assert_eq!(infer_protocol("web", Some("https")), "HTTPS");
        assert_eq!(infer_protocol("metrics", None), "TCP");
    }

    #[test]
    fn keeps_the_load_balancer_addresses_and_serializes_as_its_spec() {
        let spec = ServiceSpec {
            type_: Some("LoadBalancer".into()),
            ..ServiceSpec::default()
        };
        let status = json!({"loadBalancer": {"ingress": [{"ip": "198.51.100.4"}, {"hostname": "lb.example"}]}});
        let service = Service::new(spec.clone(), &status);
        assert_eq!(service.load_balancer_ingress.len(), 2);
        assert_eq!(service.type_.as_deref(), Some("LoadBalancer"));
        assert_eq!(
            serde_json::to_value(&service).unwrap(),
            serde_json::to_value(&spec).unwrap()
        );
        let malformed = Service::new(spec, &json!({"loadBalancer": {"ingress": "x"}}));
        assert!(malformed.load_balancer_ingress.is_empty());
    }
}
