//! Translation (pure): takes a valid [`Snapshot`] and one gateway [`Proxy`], yields the Envoy resources that proxy
//! must receive ([`GatewayResources`]). No I/O; the xDS server calls it, so does `admitpilot render`.

pub mod higress;

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::TypedExtensionConfig;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret;

use crate::model::Snapshot;

/// A gateway proxy as the control plane sees it (parsed from the Envoy node by the xDS server).
/// Proxies with equal `namespace` and `labels` receive identical resources.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Proxy {
    /// Namespace the gateway pod runs in (node metadata `NAMESPACE`, else from the node id).
    pub namespace: String,
    /// Pod labels (node metadata `LABELS`); Gateways select proxies by these.
    pub labels: BTreeMap<String, String>,
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
}

/// Translates the snapshot for one proxy (translation rules still to be written).
pub fn translate(_snapshot: &Snapshot, _proxy: &Proxy) -> GatewayResources {
    GatewayResources::default()
}
