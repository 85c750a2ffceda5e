//! The translation's value types (pure, importing nothing else of `translate`): the proxy a translation is for,
//! the resources it produces, its options, the clusters routes name, the upstream endpoints
//! clusters are built from, what was left out and which virtual hosts a call rebuilt. Every other
//! translate module builds on these; behaviour lives beside the code that uses them.

use std::collections::{BTreeMap, HashMap, HashSet};

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::TypedExtensionConfig;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret;

pub use admitpilot_model::istio::types::{target_refs, GATEWAY_API_GROUP};
use admitpilot_model::istio::PolicyTargetReference;

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

/// The label Kubernetes Gateway API deployments (Istio's included) put on a gateway's pods, naming its Gateway.
pub const GATEWAY_NAME_LABEL: &str = "gateway.networking.k8s.io/gateway-name";

impl Proxy {
    /// Whether the proxy carries every label of `selector` (an empty selector selects every proxy).
    pub fn has_labels(&self, selector: &BTreeMap<String, String>) -> bool {
        selector.iter().all(|(k, v)| self.labels.get(k) == Some(v))
    }

    /// Whether a policy (AuthorizationPolicy, RequestAuthentication, Telemetry) in `namespace` attaches to this
    /// gateway. Mirrors Istio's `WorkloadPolicyMatcher.ShouldAttachPolicy`: the policy is in the proxy's namespace
    /// or the root namespace (the mesh config's `rootNamespace`); without target references its `selector` must select the proxy (none: every
    /// workload); with them (`targetRef` or `targetRefs`), the proxy must be a Gateway API gateway (pods labelled
    /// [`GATEWAY_NAME_LABEL`]), the policy in its namespace, and one reference that Gateway.
    pub fn attaches(
        &self,
        namespace: &str,
        selector: Option<&BTreeMap<String, String>>,
        target_refs: &[PolicyTargetReference],
        root_namespace: &str,
    ) -> bool {
        if namespace != self.namespace && namespace != root_namespace {
            return false;
        }
        if target_refs.is_empty() {
            return selector.is_none_or(|selector| self.has_labels(selector));
        }
        let Some(gateway) = self.labels.get(GATEWAY_NAME_LABEL) else {
            return false;
        };
        namespace == self.namespace
            && target_refs.iter().any(|r| {
                r.is_gateway_api_gateway()
                    && r.name == *gateway
                    && (r.namespace.is_empty() || r.namespace == self.namespace)
            })
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
    /// The GatewayClass `controllerName` admitpilot serves Gateway API Gateways of
    /// (`admitpilot.io/gateway-controller` by default).
    pub gateway_controller: String,
    /// Which Ingresses are served, to which gateways, on which ports.
    pub ingress: admitpilot_model::ingress::IngressOptions,
}

/// A hash map for the translator's per-call lookups: aHash with per-process random keys, several times faster
/// than the standard SipHash on short keys and still keyed, so user-chosen names cannot be made to collide.
pub(crate) type FastMap<K, V> = HashMap<K, V, ahash::RandomState>;

/// The set counterpart of [`FastMap`].
pub(crate) type FastSet<T> = HashSet<T, ahash::RandomState>;

/// The virtual hosts one call of the caching translator built anew, per route configuration; every other virtual
/// host of its output is the call before's, unchanged. Each is known by its position in the configuration's
/// `virtual_hosts` (so passes over the output visit only these) and by its name.
#[derive(Debug, Clone, Default)]
pub struct RebuiltHosts(FastMap<String, Vec<(usize, String)>>);

impl RebuiltHosts {
    /// Records the virtual host `name`, at `position` of the route configuration `route_config`.
    pub fn insert(&mut self, route_config: &str, position: usize, name: &str) {
        match self.0.get_mut(route_config) {
            Some(hosts) => hosts.push((position, name.to_string())),
            None => {
                self.0
                    .insert(route_config.to_string(), vec![(position, name.to_string())]);
            }
        }
    }

    /// The positions of the virtual hosts rebuilt in `route_config`.
    pub fn positions(&self, route_config: &str) -> impl Iterator<Item = usize> + '_ {
        self.0
            .get(route_config)
            .into_iter()
            .flatten()
            .map(|(position, _)| *position)
    }

    /// Whether the virtual host `name` of `route_config` was rebuilt.
    pub fn contains(&self, route_config: &str, name: &str) -> bool {
        self.0
            .get(route_config)
            .is_some_and(|hosts| hosts.iter().any(|(_, host)| host == name))
    }

    /// Every rebuilt virtual host, as (route configuration, position, virtual host name).
    pub fn iter(&self) -> impl Iterator<Item = (&str, usize, &str)> + '_ {
        self.0.iter().flat_map(|(config, hosts)| {
            hosts
                .iter()
                .map(move |(position, host)| (config.as_str(), *position, host.as_str()))
        })
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn proxy(labels: &[(&str, &str)]) -> Proxy {
        Proxy {
            namespace: "gw-ns".into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Proxy::default()
        }
    }

    fn reference(group: &str, kind: &str, name: &str, namespace: &str) -> PolicyTargetReference {
        PolicyTargetReference {
            group: group.into(),
            kind: kind.into(),
            name: name.into(),
            namespace: namespace.into(),
        }
    }

    #[test]
    fn policies_attach_by_selector_or_by_a_target_ref_to_the_gateway_api_gateway() {
        let roots = "istio-system";
        let classic = proxy(&[("istio", "ingressgateway")]);
        let selector: BTreeMap<String, String> =
            [("istio".to_string(), "ingressgateway".to_string())].into();
        let other: BTreeMap<String, String> = [("app".to_string(), "x".to_string())].into();
        // Selectors: own namespace or a root namespace; no selector selects every workload.
        assert!(classic.attaches("gw-ns", Some(&selector), &[], roots));
        assert!(classic.attaches("istio-system", None, &[], roots));
        assert!(!classic.attaches("gw-ns", Some(&other), &[], roots));
        assert!(!classic.attaches("elsewhere", None, &[], roots));

        let gateway = reference(GATEWAY_API_GROUP, "Gateway", "public", "");
        // A proxy that is no Gateway API gateway ignores every policy with target references.
        assert!(!classic.attaches("gw-ns", None, std::slice::from_ref(&gateway), roots));

        let gateway_api = proxy(&[(GATEWAY_NAME_LABEL, "public")]);
        assert!(gateway_api.attaches("gw-ns", None, std::slice::from_ref(&gateway), roots));
        let same_namespace = reference(GATEWAY_API_GROUP, "Gateway", "public", "gw-ns");
        assert!(gateway_api.attaches("gw-ns", None, std::slice::from_ref(&same_namespace), roots));
        // Only the policy's own namespace: a root-namespace policy does not reach it by targetRef.
        assert!(!gateway_api.attaches("istio-system", None, std::slice::from_ref(&gateway), roots));
        for miss in [
            reference(GATEWAY_API_GROUP, "Gateway", "internal", ""),
            reference(GATEWAY_API_GROUP, "Gateway", "public", "other-ns"),
            reference(GATEWAY_API_GROUP, "GatewayClass", "public", ""),
            reference("", "Service", "public", ""),
            reference("networking.istio.io", "Gateway", "public", ""),
        ] {
            assert!(
                !gateway_api.attaches("gw-ns", None, std::slice::from_ref(&miss), roots),
                "{miss:?}"
            );
        }
        // With target references the selector plays no part; one matching reference is enough.
        let miss = reference(GATEWAY_API_GROUP, "Gateway", "internal", "");
        assert!(gateway_api.attaches("gw-ns", Some(&other), &[miss, gateway.clone()], roots));
    }
}
