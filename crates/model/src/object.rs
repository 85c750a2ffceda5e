//! Decoded config objects: takes nothing, defines [`ConfigObject`] (metadata + typed spec) and its [`ObjectKey`].

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::higress_config::HigressConfig;
use super::mesh_config::MeshConfig;
use super::{gateway_api, higress, istio, Kind};

/// Identifies one object: kind, namespace and name. Orders by kind, then namespace, then name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ObjectKey {
    /// The object's kind.
    pub kind: Kind,
    /// Namespace; empty for cluster-scoped objects.
    pub namespace: String,
    /// Object name.
    pub name: String,
}

impl ObjectKey {
    /// Builds a key.
    pub fn new(kind: Kind, namespace: impl Into<String>, name: impl Into<String>) -> Self {
        ObjectKey {
            kind,
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// The parts of Kubernetes `metadata` that admitpilot reads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ObjectMeta {
    /// Object name.
    pub name: String,
    /// Namespace; empty when not given (the source fills in a default).
    pub namespace: String,
    /// Labels.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// RFC 3339 creation time, used to order EnvoyFilters and break ties between conflicting objects.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<String>,
    /// API server resource version, when the object came from a cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// Generation, when the object came from a cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// UID, when the object came from a cluster (used to attach Events).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

/// The typed body of an object, one variant per [`Kind`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Spec {
    /// VirtualService spec.
    VirtualService(istio::VirtualService),
    /// DestinationRule spec.
    DestinationRule(istio::DestinationRule),
    /// Gateway spec.
    Gateway(istio::Gateway),
    /// ServiceEntry spec.
    ServiceEntry(istio::ServiceEntry),
    /// Sidecar spec.
    Sidecar(istio::Sidecar),
    /// EnvoyFilter spec.
    EnvoyFilter(istio::EnvoyFilter),
    /// WorkloadEntry spec.
    WorkloadEntry(istio::WorkloadEntry),
    /// WorkloadGroup spec.
    WorkloadGroup(istio::WorkloadGroup),
    /// ProxyConfig spec.
    ProxyConfig(istio::ProxyConfig),
    /// AuthorizationPolicy spec.
    AuthorizationPolicy(istio::AuthorizationPolicy),
    /// PeerAuthentication spec.
    PeerAuthentication(istio::PeerAuthentication),
    /// RequestAuthentication spec.
    RequestAuthentication(istio::RequestAuthentication),
    /// Telemetry spec.
    Telemetry(istio::Telemetry),
    /// extensions.istio.io WasmPlugin spec.
    IstioWasmPlugin(istio::WasmPlugin),
    /// TrafficExtension spec.
    TrafficExtension(istio::TrafficExtension),
    /// McpBridge spec.
    McpBridge(higress::McpBridge),
    /// Http2Rpc spec.
    Http2Rpc(higress::Http2Rpc),
    /// extensions.higress.io WasmPlugin spec.
    HigressWasmPlugin(higress::WasmPlugin),
    /// The decoded `higress` key of the higress-config ConfigMap (defaults applied).
    HigressConfig(Box<HigressConfig>),
    /// What admitpilot reads of Istio's mesh config (the `istio` ConfigMap).
    MeshConfig(Box<MeshConfig>),
    /// A Kubernetes Service (its spec, and its load balancer addresses).
    Service(Box<super::service::Service>),
    /// A Kubernetes EndpointSlice (the whole object minus metadata).
    EndpointSlice(Box<k8s_openapi::api::discovery::v1::EndpointSlice>),
    /// A Kubernetes Secret: its type and base64-decoded data.
    Secret(Box<k8s_openapi::api::core::v1::Secret>),
    /// A Kubernetes Namespace (what matters of it, its labels, is in the metadata).
    Namespace,
    /// A Kubernetes ConfigMap holding a CA bundle under `ca.crt`.
    ReferencedConfigMap(Box<k8s_openapi::api::core::v1::ConfigMap>),
    /// Gateway API GatewayClass spec.
    GatewayClass(gateway_api::GatewayClass),
    /// Gateway API Gateway spec.
    KubernetesGateway(Box<gateway_api::Gateway>),
    /// HTTPRoute spec.
    HttpRoute(Box<gateway_api::HttpRoute>),
    /// GRPCRoute spec.
    GrpcRoute(Box<gateway_api::GrpcRoute>),
    /// ReferenceGrant spec.
    ReferenceGrant(gateway_api::ReferenceGrant),
    /// TLSRoute spec.
    TlsRoute(gateway_api::StreamRoute),
    /// TCPRoute spec.
    TcpRoute(gateway_api::StreamRoute),
    /// BackendTLSPolicy spec.
    BackendTlsPolicy(gateway_api::BackendTlsPolicy),
    /// ListenerSet spec.
    ListenerSet(gateway_api::ListenerSet),
    /// networking.k8s.io/v1 Ingress spec (its annotations are in the metadata).
    Ingress(Box<k8s_openapi::api::networking::v1::IngressSpec>),
    /// networking.k8s.io/v1 IngressClass spec.
    IngressClass(Box<k8s_openapi::api::networking::v1::IngressClassSpec>),
}

impl Spec {
    /// Returns the kind this spec belongs to.
    pub fn kind(&self) -> Kind {
        match self {
            Spec::VirtualService(_) => Kind::VirtualService,
            Spec::DestinationRule(_) => Kind::DestinationRule,
            Spec::Gateway(_) => Kind::Gateway,
            Spec::ServiceEntry(_) => Kind::ServiceEntry,
            Spec::Sidecar(_) => Kind::Sidecar,
            Spec::EnvoyFilter(_) => Kind::EnvoyFilter,
            Spec::WorkloadEntry(_) => Kind::WorkloadEntry,
            Spec::WorkloadGroup(_) => Kind::WorkloadGroup,
            Spec::ProxyConfig(_) => Kind::ProxyConfig,
            Spec::AuthorizationPolicy(_) => Kind::AuthorizationPolicy,
            Spec::PeerAuthentication(_) => Kind::PeerAuthentication,
            Spec::RequestAuthentication(_) => Kind::RequestAuthentication,
            Spec::Telemetry(_) => Kind::Telemetry,
            Spec::IstioWasmPlugin(_) => Kind::IstioWasmPlugin,
            Spec::TrafficExtension(_) => Kind::TrafficExtension,
            Spec::McpBridge(_) => Kind::McpBridge,
            Spec::Http2Rpc(_) => Kind::Http2Rpc,
            Spec::HigressWasmPlugin(_) => Kind::HigressWasmPlugin,
            Spec::HigressConfig(_) => Kind::HigressConfig,
            Spec::MeshConfig(_) => Kind::MeshConfig,
            Spec::Service(_) => Kind::Service,
            Spec::EndpointSlice(_) => Kind::EndpointSlice,
            Spec::Secret(_) => Kind::Secret,
            Spec::ReferencedConfigMap(_) => Kind::ReferencedConfigMap,
            Spec::Namespace => Kind::Namespace,
            Spec::GatewayClass(_) => Kind::GatewayClass,
            Spec::KubernetesGateway(_) => Kind::KubernetesGateway,
            Spec::HttpRoute(_) => Kind::HttpRoute,
            Spec::GrpcRoute(_) => Kind::GrpcRoute,
            Spec::ReferenceGrant(_) => Kind::ReferenceGrant,
            Spec::TlsRoute(_) => Kind::TlsRoute,
            Spec::TcpRoute(_) => Kind::TcpRoute,
            Spec::BackendTlsPolicy(_) => Kind::BackendTlsPolicy,
            Spec::ListenerSet(_) => Kind::ListenerSet,
            Spec::Ingress(_) => Kind::Ingress,
            Spec::IngressClass(_) => Kind::IngressClass,
        }
    }
}

/// One decoded object: its `apiVersion`, metadata and typed spec.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigObject {
    /// The `apiVersion` it was written with.
    pub api_version: String,
    /// Metadata.
    pub metadata: ObjectMeta,
    /// Typed spec.
    pub spec: Spec,
}

impl ConfigObject {
    /// Returns the object's kind.
    pub fn kind(&self) -> Kind {
        self.spec.kind()
    }

    /// Returns the object's key.
    pub fn key(&self) -> ObjectKey {
        ObjectKey::new(
            self.kind(),
            self.metadata.namespace.clone(),
            self.metadata.name.clone(),
        )
    }
}
