//! The resource kinds admitpilot understands: takes a group/version/kind and yields a [`Kind`] with its metadata.

use std::fmt;

/// Every kind of object admitpilot decodes, validates or translates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum Kind {
    /// networking.istio.io VirtualService.
    VirtualService,
    /// networking.istio.io DestinationRule.
    DestinationRule,
    /// networking.istio.io Gateway.
    Gateway,
    /// networking.istio.io ServiceEntry.
    ServiceEntry,
    /// networking.istio.io Sidecar.
    Sidecar,
    /// networking.istio.io EnvoyFilter.
    EnvoyFilter,
    /// networking.istio.io WorkloadEntry.
    WorkloadEntry,
    /// networking.istio.io WorkloadGroup.
    WorkloadGroup,
    /// networking.istio.io ProxyConfig.
    ProxyConfig,
    /// security.istio.io AuthorizationPolicy.
    AuthorizationPolicy,
    /// security.istio.io PeerAuthentication.
    PeerAuthentication,
    /// security.istio.io RequestAuthentication.
    RequestAuthentication,
    /// telemetry.istio.io Telemetry.
    Telemetry,
    /// extensions.istio.io WasmPlugin.
    IstioWasmPlugin,
    /// extensions.istio.io TrafficExtension (a Wasm module or inline Lua).
    TrafficExtension,
    /// networking.higress.io McpBridge.
    McpBridge,
    /// networking.higress.io Http2Rpc.
    Http2Rpc,
    /// extensions.higress.io WasmPlugin.
    HigressWasmPlugin,
    /// The core/v1 ConfigMap `higress-config` (other ConfigMaps are not admitpilot's business).
    HigressConfig,
    /// The core/v1 ConfigMap `istio` of Istio's namespace: the mesh config (its `mesh` key).
    MeshConfig,
    /// A core/v1 ConfigMap whose data other objects reference: a CA bundle under `ca.crt` (what BackendTLSPolicy
    /// `caCertificateRefs` name) or gateway parameters (what a Gateway's or GatewayClass's `parametersRef` names,
    /// [`crate::gateway_api::parameters`]); other ConfigMaps are not admitpilot's business.
    ReferencedConfigMap,
    /// core/v1 Namespace (its labels: what Gateway API `allowedRoutes` namespace selectors match).
    Namespace,
    /// core/v1 Service.
    Service,
    /// discovery.k8s.io/v1 EndpointSlice.
    EndpointSlice,
    /// core/v1 Secret (TLS credentials referenced by Gateways).
    Secret,
    /// gateway.networking.k8s.io GatewayClass.
    GatewayClass,
    /// gateway.networking.k8s.io Gateway (Istio names it KubernetesGateway to tell it from its own).
    KubernetesGateway,
    /// gateway.networking.k8s.io HTTPRoute.
    HttpRoute,
    /// gateway.networking.k8s.io GRPCRoute.
    GrpcRoute,
    /// gateway.networking.k8s.io ReferenceGrant.
    ReferenceGrant,
    /// gateway.networking.k8s.io TLSRoute.
    TlsRoute,
    /// gateway.networking.k8s.io TCPRoute.
    TcpRoute,
    /// gateway.networking.k8s.io BackendTLSPolicy.
    BackendTlsPolicy,
    /// gateway.networking.k8s.io ListenerSet.
    ListenerSet,
    /// networking.k8s.io Ingress (with Higress's annotations).
    Ingress,
    /// networking.k8s.io IngressClass (cluster-scoped): which Ingresses are admitpilot's (its `controller`).
    IngressClass,
}

/// Static facts about a [`Kind`]: where it lives in the Kubernetes API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindInfo {
    /// API group; empty for the core group.
    pub group: &'static str,
    /// The `kind` field as Kubernetes spells it.
    pub kind: &'static str,
    /// Lower-case plural used in API paths (`virtualservices`).
    pub plural: &'static str,
    /// Served versions, newest first.
    pub versions: &'static [&'static str],
}

impl KindInfo {
    /// The resource's full name, `plural.group` (`gateways.networking.istio.io`; `services` for the core group): unlike
    /// the `kind`, unique across groups (Istio's and the Gateway API's `Gateway`, Istio's and Higress's `WasmPlugin`).
    pub fn resource_name(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
}

const NETWORKING_VERSIONS: &[&str] = &["v1", "v1beta1", "v1alpha3"];
/// The API group of the Kubernetes Gateway API kinds.
const GATEWAY_API_GROUP: &str = crate::istio::types::GATEWAY_API_GROUP;

impl Kind {
    /// Lists every kind, in a stable order.
    pub const ALL: [Kind; 36] = [
        Kind::VirtualService,
        Kind::DestinationRule,
        Kind::Gateway,
        Kind::ServiceEntry,
        Kind::Sidecar,
        Kind::EnvoyFilter,
        Kind::WorkloadEntry,
        Kind::WorkloadGroup,
        Kind::ProxyConfig,
        Kind::AuthorizationPolicy,
        Kind::PeerAuthentication,
        Kind::RequestAuthentication,
        Kind::Telemetry,
        Kind::IstioWasmPlugin,
        Kind::TrafficExtension,
        Kind::McpBridge,
        Kind::Http2Rpc,
        Kind::HigressWasmPlugin,
        Kind::HigressConfig,
        Kind::MeshConfig,
        Kind::ReferencedConfigMap,
        Kind::Namespace,
        Kind::Service,
        Kind::EndpointSlice,
        Kind::Secret,
        Kind::GatewayClass,
        Kind::KubernetesGateway,
        Kind::HttpRoute,
        Kind::GrpcRoute,
        Kind::ReferenceGrant,
        Kind::TlsRoute,
        Kind::TcpRoute,
        Kind::BackendTlsPolicy,
        Kind::ListenerSet,
        Kind::Ingress,
        Kind::IngressClass,
    ];

    /// Whether the kind is a custom resource (an Istio, Higress or Gateway API kind), not a ConfigMap or a built-in
    /// kind (Service, EndpointSlice, Secret, Ingress…).
    pub fn is_custom_resource(self) -> bool {
        !matches!(
            self.info().group,
            "" | "discovery.k8s.io" | "networking.k8s.io"
        )
    }

    /// Every custom resource kind ([`Kind::is_custom_resource`]), in [`Kind::ALL`]'s order.
    pub fn custom_resources() -> impl Iterator<Item = Kind> {
        Kind::ALL
            .into_iter()
            .filter(|kind| kind.is_custom_resource())
    }

    /// Returns where this kind lives in the Kubernetes API.
    pub const fn info(self) -> KindInfo {
        const fn info(
            group: &'static str,
            kind: &'static str,
            plural: &'static str,
            versions: &'static [&'static str],
        ) -> KindInfo {
            KindInfo {
                group,
                kind,
                plural,
                versions,
            }
        }
        const fn gateway_api(
            kind: &'static str,
            plural: &'static str,
            versions: &'static [&'static str],
        ) -> KindInfo {
            info(GATEWAY_API_GROUP, kind, plural, versions)
        }
        match self {
            Kind::VirtualService => info(
                "networking.istio.io",
                "VirtualService",
                "virtualservices",
                NETWORKING_VERSIONS,
            ),
            Kind::DestinationRule => info(
                "networking.istio.io",
                "DestinationRule",
                "destinationrules",
                NETWORKING_VERSIONS,
            ),
            Kind::Gateway => info(
                "networking.istio.io",
                "Gateway",
                "gateways",
                NETWORKING_VERSIONS,
            ),
            Kind::ServiceEntry => info(
                "networking.istio.io",
                "ServiceEntry",
                "serviceentries",
                NETWORKING_VERSIONS,
            ),
            Kind::Sidecar => info(
                "networking.istio.io",
                "Sidecar",
                "sidecars",
                NETWORKING_VERSIONS,
            ),
            Kind::EnvoyFilter => info(
                "networking.istio.io",
                "EnvoyFilter",
                "envoyfilters",
                &["v1alpha3"],
            ),
            Kind::WorkloadEntry => info(
                "networking.istio.io",
                "WorkloadEntry",
                "workloadentries",
                NETWORKING_VERSIONS,
            ),
            Kind::WorkloadGroup => info(
                "networking.istio.io",
                "WorkloadGroup",
                "workloadgroups",
                NETWORKING_VERSIONS,
            ),
            Kind::ProxyConfig => info(
                "networking.istio.io",
                "ProxyConfig",
                "proxyconfigs",
                &["v1beta1"],
            ),
            Kind::AuthorizationPolicy => info(
                "security.istio.io",
                "AuthorizationPolicy",
                "authorizationpolicies",
                &["v1", "v1beta1"],
            ),
            Kind::PeerAuthentication => info(
                "security.istio.io",
                "PeerAuthentication",
                "peerauthentications",
                &["v1", "v1beta1"],
            ),
            Kind::RequestAuthentication => info(
                "security.istio.io",
                "RequestAuthentication",
                "requestauthentications",
                &["v1", "v1beta1"],
            ),
            Kind::Telemetry => info(
                "telemetry.istio.io",
                "Telemetry",
                "telemetries",
                &["v1", "v1alpha1"],
            ),
            Kind::IstioWasmPlugin => info(
                "extensions.istio.io",
                "WasmPlugin",
                "wasmplugins",
                &["v1alpha1"],
            ),
            Kind::TrafficExtension => info(
                "extensions.istio.io",
                "TrafficExtension",
                "trafficextensions",
                &["v1alpha1"],
            ),
            Kind::McpBridge => info("networking.higress.io", "McpBridge", "mcpbridges", &["v1"]),
            Kind::Http2Rpc => info("networking.higress.io", "Http2Rpc", "http2rpcs", &["v1"]),
            Kind::HigressWasmPlugin => info(
                "extensions.higress.io",
                "WasmPlugin",
                "wasmplugins",
                &["v1alpha1"],
            ),
            Kind::HigressConfig | Kind::MeshConfig => info("", "ConfigMap", "configmaps", &["v1"]),
            Kind::Service => info("", "Service", "services", &["v1"]),
            Kind::EndpointSlice => info(
                "discovery.k8s.io",
                "EndpointSlice",
                "endpointslices",
                &["v1"],
            ),
            Kind::Secret => info("", "Secret", "secrets", &["v1"]),
            Kind::ReferencedConfigMap => info("", "ConfigMap", "configmaps", &["v1"]),
            Kind::Namespace => info("", "Namespace", "namespaces", &["v1"]),
            Kind::GatewayClass => gateway_api("GatewayClass", "gatewayclasses", &["v1", "v1beta1"]),
            Kind::KubernetesGateway => gateway_api("Gateway", "gateways", &["v1", "v1beta1"]),
            Kind::HttpRoute => gateway_api("HTTPRoute", "httproutes", &["v1", "v1beta1"]),
            Kind::GrpcRoute => gateway_api("GRPCRoute", "grpcroutes", &["v1"]),
            Kind::ReferenceGrant => {
                gateway_api("ReferenceGrant", "referencegrants", &["v1", "v1beta1"])
            }
            Kind::TlsRoute => gateway_api("TLSRoute", "tlsroutes", &["v1", "v1alpha3", "v1alpha2"]),
            Kind::TcpRoute => gateway_api("TCPRoute", "tcproutes", &["v1", "v1alpha2"]),
            Kind::BackendTlsPolicy => gateway_api(
                "BackendTLSPolicy",
                "backendtlspolicies",
                &["v1", "v1alpha3"],
            ),
            Kind::ListenerSet => gateway_api("ListenerSet", "listenersets", &["v1"]),
            Kind::Ingress => info("networking.k8s.io", "Ingress", "ingresses", &["v1"]),
            Kind::IngressClass => info(
                "networking.k8s.io",
                "IngressClass",
                "ingressclasses",
                &["v1"],
            ),
        }
    }

    /// Finds the kind for an API group and kind name, ignoring the version like Istio's webhook does.
    /// A ConfigMap maps to [`Kind::HigressConfig`]; the caller decides by name whether it is *the* higress-config,
    /// the mesh config ([`Kind::MeshConfig`]) or none of admitpilot's business.
    pub fn from_group_kind(group: &str, kind: &str) -> Option<Kind> {
        Kind::ALL
            .into_iter()
            .find(|k| k.info().group == group && k.info().kind == kind)
    }

    /// Splits an `apiVersion` (`networking.istio.io/v1`, `v1`) into group and version.
    pub fn split_api_version(api_version: &str) -> (&str, &str) {
        match api_version.rsplit_once('/') {
            Some((group, version)) => (group, version),
            None => ("", api_version),
        }
    }

    /// Whether objects of the kind have no namespace (GatewayClass, Namespace, IngressClass).
    pub fn is_cluster_scoped(self) -> bool {
        matches!(
            self,
            Kind::GatewayClass | Kind::Namespace | Kind::IngressClass
        )
    }

    /// Whether the kind is one of the Kubernetes Gateway API's (gateway.networking.k8s.io).
    pub fn is_gateway_api(self) -> bool {
        self.info().group == GATEWAY_API_GROUP
    }

    /// Returns the `apiVersion` to write for this kind (its group and newest version).
    pub fn api_version(self) -> String {
        let info = self.info();
        if info.group.is_empty() {
            info.versions[0].to_string()
        } else {
            format!("{}/{}", info.group, info.versions[0])
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.info().kind)
    }
}

/// Where `kind` at `version` lives in the API (what the Kubernetes source watches and the status writer patches).
pub fn api_resource(kind: Kind, version: &str) -> kube_core::ApiResource {
    let info = kind.info();
    kube_core::ApiResource {
        group: info.group.to_string(),
        version: version.to_string(),
        api_version: if info.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{version}", info.group)
        },
        kind: info.kind.to_string(),
        plural: info.plural.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_api_resources_from_kind_info() {
        let resource = api_resource(Kind::VirtualService, "v1beta1");
        assert_eq!(resource.api_version, "networking.istio.io/v1beta1");
        assert_eq!(resource.plural, "virtualservices");
        let resource = api_resource(Kind::Service, "v1");
        assert_eq!(
            (resource.api_version.as_str(), resource.group.as_str()),
            ("v1", "")
        );
    }

    #[test]
    fn group_kind_round_trips_for_every_kind() {
        for kind in Kind::ALL {
            let info = kind.info();
            // Both ConfigMap kinds read as HigressConfig; decoding tells them apart by name.
            let expected = match kind {
                Kind::MeshConfig | Kind::ReferencedConfigMap => Kind::HigressConfig,
                kind => kind,
            };
            assert_eq!(Kind::from_group_kind(info.group, info.kind), Some(expected));
        }
    }

    #[test]
    fn wasm_plugin_is_told_apart_by_group() {
        assert_eq!(
            Kind::from_group_kind("extensions.higress.io", "WasmPlugin"),
            Some(Kind::HigressWasmPlugin)
        );
        assert_eq!(
            Kind::from_group_kind("extensions.istio.io", "WasmPlugin"),
            Some(Kind::IstioWasmPlugin)
        );
    }

    #[test]
    fn gateway_api_gateway_is_told_apart_by_group() {
        assert_eq!(
            Kind::from_group_kind("gateway.networking.k8s.io", "Gateway"),
            Some(Kind::KubernetesGateway)
        );
        assert_eq!(
            Kind::from_group_kind("networking.istio.io", "Gateway"),
            Some(Kind::Gateway)
        );
        assert!(Kind::HttpRoute.is_gateway_api() && !Kind::Gateway.is_gateway_api());
    }

    #[test]
    fn splits_api_versions() {
        assert_eq!(
            Kind::split_api_version("networking.istio.io/v1"),
            ("networking.istio.io", "v1")
        );
        assert_eq!(Kind::split_api_version("v1"), ("", "v1"));
    }
}
