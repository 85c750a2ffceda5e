//! The translation's value types (pure, importing nothing else of `translate`): the proxy a translation is for,
//! the resources it produces, its options, the clusters routes name, the upstream endpoints
//! clusters are built from and what was left out. Every other
//! translate module builds on these; behaviour lives beside the code that uses them.

use std::collections::{BTreeMap, HashMap, HashSet};

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::TypedExtensionConfig;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret;

use crate::model::istio::proxy_config::TypeWorkloadSelector;

/// A gateway proxy as the control plane sees it (parsed from the Envoy node by the xDS server).
/// Proxies with equal `namespace`, `labels` and `trusted_proxies` receive identical resources.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Proxy {
    /// Namespace the gateway pod runs in (node metadata `NAMESPACE`, else from the node id).
    pub namespace: String,
    /// Pod labels (node metadata `LABELS`); Gateways select proxies by these.
    pub labels: BTreeMap<String, String>,
    /// Proxies in front of the gateway that append to `X-Forwarded-For` (node metadata
    /// `PROXY_CONFIG.gatewayTopology.numTrustedProxies`, which Istio's agent fills from the pod's
    /// `proxy.istio.io/config` annotation and the mesh default); the client address is read that many hops back.
    pub trusted_proxies: u32,
}

impl Proxy {
    /// Whether the proxy carries every label of `selector` (an empty selector selects every proxy).
    pub fn has_labels(&self, selector: &BTreeMap<String, String>) -> bool {
        selector.iter().all(|(k, v)| self.labels.get(k) == Some(v))
    }

    /// Whether a security policy in `namespace` applies to this proxy: in the proxy's namespace or a root namespace,
    /// not attached by `targetRefs` (not enforced), and selecting the proxy's labels (no selector: every workload).
    pub fn is_selected(
        &self,
        namespace: &str,
        selector: Option<&TypeWorkloadSelector>,
        attached: bool,
        root_namespaces: &[String],
    ) -> bool {
        (namespace == self.namespace || root_namespaces.iter().any(|root| root == namespace))
            && !attached
            && selector.is_none_or(|selector| self.has_labels(&selector.match_labels))
    }
}

/// Every Envoy resource one proxy group receives, each list sorted by resource name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GatewayResources {
    /// LDS.
    pub listeners: Vec<Listener>,
    /// RDS.
    pub route_configs: Vec<RouteConfiguration>,
    /// CDS.
    pub clusters: Vec<Cluster>,
    /// EDS.
    pub endpoints: Vec<ClusterLoadAssignment>,
    /// SDS.
    pub secrets: Vec<Secret>,
    /// ECDS, when EnvoyFilters use EXTENSION_CONFIG.
    pub extension_configs: Vec<TypedExtensionConfig>,
    /// Changes made because resources named clusters this proxy does not get (see `dangling`); not a
    /// resource, reported by whoever serves or renders these.
    pub left_out: Vec<LeftOut>,
}

/// Translation settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// DNS suffix of Kubernetes Services (`cluster.local`).
    pub domain_suffix: String,
    /// Namespaces whose EnvoyFilters apply to every proxy: Istio's root namespace and Higress's namespace.
    pub root_namespaces: Vec<String>,
}

/// A hash map for the translator's per-call lookups: aHash with per-process random keys, several times faster
/// than the standard SipHash on short keys and still keyed, so user-chosen names cannot be made to collide.
pub(crate) type FastMap<K, V> = HashMap<K, V, ahash::RandomState>;

/// The set counterpart of [`FastMap`].
pub(crate) type FastSet<T> = HashSet<T, ahash::RandomState>;

/// A cluster a route names: destination host, port and subset.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClusterRef {
    /// Fully qualified destination host.
    pub host: String,
    /// Destination port.
    pub port: u32,
    /// DestinationRule subset, empty for the whole service.
    pub subset: String,
}

/// One change made because a resource named clusters the proxy does not get.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LeftOut {
    /// The resource, e.g. `listener 0.0.0.0_80` or `route http.80`.
    pub resource: String,
    /// The part naming them, e.g. `tracing (envoy.tracers.zipkin)` or `http filter envoy.filters.http.ext_authz`.
    pub feature: String,
    /// The clusters it names that do not exist.
    pub missing: Vec<String>,
    /// What was done.
    pub effect: Effect,
    /// The objects that put the reference there, when known (`EnvoyFilter ns/name`, `ConfigMap ns/higress-config`).
    pub blame: Vec<String>,
}

/// What was done to a part naming missing clusters, until they exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Effect {
    /// Tracing, an access log or a mirror policy is left out.
    LeftOut,
    /// The listener stays at the version last sent.
    HeldBack,
    /// The listener is not sent (none was sent before).
    NotSent,
    /// The route answers 503.
    Answers503,
}

/// How Envoy learns a cluster's endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Discovery {
    /// Endpoints pushed over EDS.
    Eds,
    /// Every address resolved by DNS is an endpoint.
    StrictDns,
    /// The first address DNS returns is used per new connection.
    LogicalDns,
    /// Connections go to the original destination address (Istio `resolution: NONE`).
    OriginalDst,
}

/// One upstream endpoint.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Endpoint {
    /// IP address or DNS name.
    pub address: String,
    /// Port.
    pub port: u32,
    /// Locality region (empty when unknown).
    pub region: String,
    /// Locality zone (empty when unknown).
    pub zone: String,
    /// Locality sub-zone (empty when unknown).
    pub subzone: String,
    /// Load-balancing weight (≥ 1).
    pub weight: u32,
    /// Labels used by DestinationRule subsets.
    pub labels: BTreeMap<String, String>,
}
