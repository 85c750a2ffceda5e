//! Gateway provisioning (pure): takes a Gateway of admitpilot's GatewayClasses (with the snapshot it is in) and the
//! provisioning [`Settings`], and yields the Kubernetes objects that run its proxies in the Gateway's namespace, as
//! istiod's gateway deployment controller and Envoy Gateway's infrastructure manager do: a ServiceAccount (the
//! proxies' identity), a Role and RoleBinding that let it read the Secrets of its namespace its config names, by
//! name (admitpilot asks a SubjectAccessReview per Secret before it sends one), a ConfigMap with the Envoy bootstrap ([`bootstrap`]) and the CA of
//! admitpilot's xDS port, a Deployment running Envoy, and a Service with one port per listener port. Every object
//! carries the Gateway's `spec.infrastructure` labels and annotations (GatewayInfrastructurePropagation), the
//! [`MANAGED_BY_LABEL`] that finds them again, and an owner reference to the Gateway, so deleting the Gateway
//! deletes them (the garbage collector). The parameters of the Gateway and of its class (ConfigMaps,
//! [`admitpilot_model::gateway_api::parameters`]) overlay them ([`overlay`]) and may add a PodDisruptionBudget and a
//! HorizontalPodAutoscaler. A Gateway annotated [`MANUAL_ANNOTATION`]`: "true"`, or with a `Hostname` address,
//! is not provisioned ([`provisioned`]).

pub mod bootstrap;
mod objects;
pub mod overlay;

use std::collections::BTreeMap;

use serde_json::Value;

use admitpilot_model::gateway_api::gateway::AddressPools;
use admitpilot_model::gateway_api::Gateway;
use admitpilot_model::ConfigObject;

pub use objects::objects;

/// The label on every provisioned object (value [`MANAGED_BY_VALUE`]).
pub use admitpilot_model::gateway_api::PROVISIONED_LABEL as MANAGED_BY_LABEL;
/// The value of [`MANAGED_BY_LABEL`] on provisioned objects.
pub use admitpilot_model::gateway_api::PROVISIONER as MANAGED_BY_VALUE;
/// The label naming the Gateway an object runs (and, on pods, the label translation selects a Gateway's proxies
/// by).
pub const GATEWAY_NAME_LABEL: &str = "gateway.networking.k8s.io/gateway-name";
/// A Gateway with this annotation set to `"true"` gets no objects: its proxies are deployed by hand (pods
/// labelled [`GATEWAY_NAME_LABEL`]), as before provisioning.
pub const MANUAL_ANNOTATION: &str = "admitpilot.io/manual-deployment";
/// The port of the proxies' readiness endpoint (`/healthz/ready`, Envoy's `/ready`), as Istio's gateways have it.
pub const READINESS_PORT: u16 = 15021;

/// How proxies are run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The Envoy image of the proxies.
    pub image: String,
    /// `host:port` of admitpilot's authenticated xDS port as the proxies reach it (TLS, a token).
    pub xds_address: String,
    /// The audience of the projected service-account token the proxies present.
    pub token_audience: String,
    /// How long a projected token lives, in seconds (the kubelet renews it at 80%).
    pub token_expiration_seconds: i64,
    /// PEM of the CA that signed the certificate of admitpilot's xDS port.
    pub ca_pem: String,
    /// The type of each gateway's Service (`LoadBalancer`, `NodePort` or `ClusterIP`).
    pub service_type: String,
    /// The addresses the load balancer can give: the first requested IP inside them is asked of the Service.
    pub address_pools: AddressPools,
}

/// Whether `gateway` gets provisioned objects: not when it is annotated [`MANUAL_ANNOTATION`]`: "true"`, nor when
/// one of its `spec.addresses` is a `Hostname` (as istiod's `IsManaged`: the host name is the Service of gateways
/// deployed by hand, which admitpilot then serves as it serves any pods labelled [`GATEWAY_NAME_LABEL`]).
pub fn provisioned(gateway: &ConfigObject) -> bool {
    let manual = gateway
        .metadata
        .annotations
        .get(MANUAL_ANNOTATION)
        .is_some_and(|value| value == "true");
    let hostname = match &gateway.spec {
        admitpilot_model::Spec::KubernetesGateway(spec) => spec
            .addresses
            .iter()
            .any(|address| address.get("type").and_then(Value::as_str) == Some("Hostname")),
        _ => false,
    };
    !manual && !hostname
}

/// The name of every object provisioned for Gateway `name` of GatewayClass `class` (istiod's `<gateway>-<class>`),
/// cut to 63 characters (a Service name is a DNS label).
pub fn object_name(name: &str, class: &str) -> String {
    let mut out = format!("{name}-{class}");
    out.truncate(63);
    out.trim_end_matches('-').to_string()
}

/// `spec.infrastructure.labels` and `.annotations` of a Gateway (string values only; the schema allows no other).
pub fn infrastructure(gateway: &Gateway) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let read = |field: &str| -> BTreeMap<String, String> {
        gateway
            .infrastructure
            .as_ref()
            .and_then(|infra| infra.get(field))
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(key, value)| Some((key.clone(), value.as_str()?.to_string())))
            .collect()
    };
    (read("labels"), read("annotations"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_istiods_and_fit_a_dns_label() {
        assert_eq!(object_name("gw", "admitpilot"), "gw-admitpilot");
        let long = object_name(&"a".repeat(60), "class");
        assert_eq!(long.len(), 63);
        assert_eq!(object_name(&"a".repeat(62), "-b"), "a".repeat(62));
    }
}
