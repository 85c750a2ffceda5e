//! Istio `EnvoyFilter` spec: takes the camelCase JSON of `networking.istio.io` EnvoyFilter and yields typed
//! structs. Enum fields reject unknown names when decoding (the decoder reports the field path); patch values
//! stay JSON here and are converted to Envoy messages by the validator and the patch engine.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The `spec` of an EnvoyFilter.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct EnvoyFilter {
    /// Pods (gateways) the filter applies to; absent means every proxy in scope.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload_selector: Option<WorkloadSelector>,
    /// Policy attachment to Gateways/Services (alternative to `workloadSelector`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub target_refs: Vec<PolicyTargetReference>,
    /// The patches, applied in order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub config_patches: Vec<ConfigPatch>,
    /// Ordering among EnvoyFilters: lower runs first (default 0).
    #[serde(skip_serializing_if = "is_zero")]
    pub priority: i32,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

/// Selects workloads by pod labels.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WorkloadSelector {
    /// Labels the pod must carry (all of them).
    pub labels: BTreeMap<String, String>,
}

/// A reference to the resource a policy attaches to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PolicyTargetReference {
    /// API group (`gateway.networking.k8s.io`, empty for core).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// Kind (`Gateway`, `Service`, `GatewayClass`).
    pub kind: String,
    /// Name of the target.
    pub name: String,
    /// Namespace; must be empty (same namespace as the policy).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
}

/// One patch: what to apply it to, where, and how.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConfigPatch {
    /// The kind of Envoy object patched.
    pub apply_to: ApplyTo,
    /// Which objects of that kind are patched.
    #[serde(rename = "match", skip_serializing_if = "Option::is_none")]
    pub r#match: Option<ObjectMatch>,
    /// The change.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<Patch>,
}

/// The Envoy object kinds a patch can target.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ApplyTo {
    /// Not set (an error).
    #[default]
    Invalid,
    /// `envoy.config.listener.v3.Listener`.
    Listener,
    /// `envoy.config.listener.v3.FilterChain`.
    FilterChain,
    /// A network filter (`envoy.config.listener.v3.Filter`).
    NetworkFilter,
    /// An HTTP filter of the HTTP connection manager.
    HttpFilter,
    /// `envoy.config.route.v3.RouteConfiguration`.
    RouteConfiguration,
    /// `envoy.config.route.v3.VirtualHost`.
    VirtualHost,
    /// `envoy.config.route.v3.Route`.
    HttpRoute,
    /// `envoy.config.cluster.v3.Cluster`.
    Cluster,
    /// `envoy.config.core.v3.TypedExtensionConfig` served over ECDS.
    ExtensionConfig,
    /// `envoy.config.bootstrap.v3.Bootstrap` (not served over xDS).
    Bootstrap,
    /// `envoy.config.listener.v3.ListenerFilter`.
    ListenerFilter,
}

impl ApplyTo {
    /// Returns the Istio name (`HTTP_FILTER`).
    pub fn as_str(self) -> &'static str {
        match self {
            ApplyTo::Invalid => "INVALID",
            ApplyTo::Listener => "LISTENER",
            ApplyTo::FilterChain => "FILTER_CHAIN",
            ApplyTo::NetworkFilter => "NETWORK_FILTER",
            ApplyTo::HttpFilter => "HTTP_FILTER",
            ApplyTo::RouteConfiguration => "ROUTE_CONFIGURATION",
            ApplyTo::VirtualHost => "VIRTUAL_HOST",
            ApplyTo::HttpRoute => "HTTP_ROUTE",
            ApplyTo::Cluster => "CLUSTER",
            ApplyTo::ExtensionConfig => "EXTENSION_CONFIG",
            ApplyTo::Bootstrap => "BOOTSTRAP",
            ApplyTo::ListenerFilter => "LISTENER_FILTER",
        }
    }

    /// Returns the full name of the Envoy message a patch value for this target must be, if any.
    pub fn envoy_message(self) -> Option<&'static str> {
        Some(match self {
            ApplyTo::Invalid => return None,
            ApplyTo::Listener => "envoy.config.listener.v3.Listener",
            ApplyTo::FilterChain => "envoy.config.listener.v3.FilterChain",
            ApplyTo::NetworkFilter => "envoy.config.listener.v3.Filter",
            ApplyTo::HttpFilter => {
                "envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter"
            }
            ApplyTo::RouteConfiguration => "envoy.config.route.v3.RouteConfiguration",
            ApplyTo::VirtualHost => "envoy.config.route.v3.VirtualHost",
            ApplyTo::HttpRoute => "envoy.config.route.v3.Route",
            ApplyTo::Cluster => "envoy.config.cluster.v3.Cluster",
            ApplyTo::ExtensionConfig => "envoy.config.core.v3.TypedExtensionConfig",
            ApplyTo::Bootstrap => "envoy.config.bootstrap.v3.Bootstrap",
            ApplyTo::ListenerFilter => "envoy.config.listener.v3.ListenerFilter",
        })
    }
}

/// Where a patch applies.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ObjectMatch {
    /// Which proxies/traffic direction.
    pub context: PatchContext,
    /// Proxy version and metadata conditions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy: Option<ProxyMatch>,
    /// Listener conditions (listener-class targets).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listener: Option<ListenerMatch>,
    /// Route configuration conditions (route-class targets).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route_configuration: Option<RouteConfigurationMatch>,
    /// Cluster conditions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterMatch>,
    /// Waypoint conditions (only with context WAYPOINT).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waypoint: Option<WaypointMatch>,
}

impl ObjectMatch {
    /// Counts how many of the object-type matches (listener, routeConfiguration, cluster, waypoint) are set.
    pub fn object_type_count(&self) -> usize {
        usize::from(self.listener.is_some())
            + usize::from(self.route_configuration.is_some())
            + usize::from(self.cluster.is_some())
            + usize::from(self.waypoint.is_some())
    }
}

/// The proxy/traffic context a patch applies in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PatchContext {
    /// Any context.
    #[default]
    Any,
    /// Sidecar inbound traffic (never a gateway).
    SidecarInbound,
    /// Sidecar outbound traffic (never a gateway).
    SidecarOutbound,
    /// Gateways.
    Gateway,
    /// Waypoint proxies (never a gateway).
    Waypoint,
}

/// Proxy conditions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProxyMatch {
    /// Regular expression the proxy's Istio version must match.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub proxy_version: String,
    /// Node metadata entries the proxy must carry.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
}

/// Listener conditions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ListenerMatch {
    /// Listener port (0 = any).
    pub port_number: u32,
    /// Port name (deprecated upstream, ignored by Istio today).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub port_name: String,
    /// Filter chain conditions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter_chain: Option<FilterChainMatch>,
    /// Name of a listener filter the listener must have.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub listener_filter: String,
    /// Listener name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
}

/// Filter chain conditions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FilterChainMatch {
    /// Filter chain name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// SNI in the chain's `filter_chain_match.server_names`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub sni: String,
    /// `tls` or `raw_buffer`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub transport_protocol: String,
    /// Comma-separated ALPN values, any of which must be in the chain match.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub application_protocols: String,
    /// Network filter conditions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter: Option<FilterMatch>,
    /// `filter_chain_match.destination_port` (0 = any).
    pub destination_port: u32,
    /// Transport socket name (`tls`, `raw_buffer`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub transport_socket: String,
}

/// Network filter conditions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FilterMatch {
    /// Network filter name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// HTTP filter conditions (only inside the HTTP connection manager).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sub_filter: Option<SubFilterMatch>,
}

/// HTTP filter conditions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SubFilterMatch {
    /// HTTP filter name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
}

/// Route configuration conditions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RouteConfigurationMatch {
    /// Port the route configuration serves (0 = any).
    pub port_number: u32,
    /// Port name (gateways only).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub port_name: String,
    /// Istio Gateway `namespace/name` (gateways only).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub gateway: String,
    /// Virtual host conditions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vhost: Option<VirtualHostMatch>,
    /// Route configuration name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
}

/// Virtual host conditions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct VirtualHostMatch {
    /// Virtual host name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// A domain the virtual host must serve.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub domain_name: String,
    /// Route conditions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route: Option<RouteMatch>,
}

/// Route conditions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RouteMatch {
    /// Route name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The route's action kind.
    pub action: RouteAction,
}

/// Route action kinds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RouteAction {
    /// Any action.
    #[default]
    Any,
    /// Forwards to a cluster.
    Route,
    /// Redirects.
    Redirect,
    /// Responds directly.
    DirectResponse,
}

/// Cluster conditions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClusterMatch {
    /// Service port (0 = any).
    pub port_number: u32,
    /// Service FQDN.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub service: String,
    /// Subset name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subset: String,
    /// Exact cluster name (overrides the other fields).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
}

/// Waypoint conditions (kept for validation; waypoints are never gateways).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WaypointMatch {
    /// Filter conditions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter: Option<FilterMatch>,
    /// Route conditions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route: Option<WaypointRouteMatch>,
    /// Port (1..=65535 when set).
    pub port_number: u32,
}

/// Waypoint route conditions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct WaypointRouteMatch {
    /// Route name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
}

/// The change a patch makes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Patch {
    /// How the value is applied.
    pub operation: Operation,
    /// The Envoy object (proto-JSON); absent for REMOVE.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<serde_json::Value>,
    /// Where an added HTTP filter goes relative to Istio's own filters.
    pub filter_class: FilterClass,
}

/// Patch operations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Operation {
    /// Not set (an error).
    #[default]
    Invalid,
    /// Protobuf-merges the value into the matched object.
    Merge,
    /// Adds the value (listeners, clusters, filter chains, route configurations, virtual hosts, routes...).
    Add,
    /// Removes the matched object.
    Remove,
    /// Inserts before the matched filter/route.
    InsertBefore,
    /// Inserts after the matched filter/route.
    InsertAfter,
    /// Inserts first in the filter/route list.
    InsertFirst,
    /// Replaces the matched object.
    Replace,
    /// Merges, replacing (not appending) repeated fields.
    MergeAndReplaceList,
}

impl Operation {
    /// Returns the Istio name (`INSERT_BEFORE`).
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Invalid => "INVALID",
            Operation::Merge => "MERGE",
            Operation::Add => "ADD",
            Operation::Remove => "REMOVE",
            Operation::InsertBefore => "INSERT_BEFORE",
            Operation::InsertAfter => "INSERT_AFTER",
            Operation::InsertFirst => "INSERT_FIRST",
            Operation::Replace => "REPLACE",
            Operation::MergeAndReplaceList => "MERGE_AND_REPLACE_LIST",
        }
    }

    /// Tells whether the value is merged into an existing object (and so may be partial).
    pub fn is_merge(self) -> bool {
        matches!(self, Operation::Merge | Operation::MergeAndReplaceList)
    }
}

/// Placement classes for added HTTP filters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FilterClass {
    /// Placement follows the operation.
    #[default]
    Unspecified,
    /// After Istio's authentication filter.
    Authn,
    /// After Istio's authorization filter.
    Authz,
    /// Before Istio's stats filter.
    Stats,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::{decode, DecodeOptions, Decoded};
    use crate::Spec;
    use serde_json::json;

    fn doc(spec: serde_json::Value) -> serde_json::Value {
        json!({"apiVersion": "networking.istio.io/v1alpha3", "kind": "EnvoyFilter",
            "metadata": {"name": "f", "namespace": "ns"}, "spec": spec})
    }

    #[test]
    fn decodes_a_full_spec() {
        let spec = json!({"workloadSelector": {"labels": {"app": "gw"}}, "priority": -3,
            "configPatches": [{"applyTo": "HTTP_FILTER",
                "match": {"context": "GATEWAY", "proxy": {"proxyVersion": "^1\\.2.*", "metadata": {"A": "b"}},
                    "listener": {"portNumber": 8080, "name": "l", "filterChain": {"sni": "a.com", "destinationPort": 443,
                        "filter": {"name": "envoy.filters.network.http_connection_manager", "subFilter": {"name": "envoy.filters.http.router"}}}}},
                "patch": {"operation": "INSERT_BEFORE", "filterClass": "AUTHZ", "value": {"name": "x"}}},
              {"applyTo": "HTTP_ROUTE", "match": {"routeConfiguration": {"vhost": {"name": "v", "route": {"action": "DIRECT_RESPONSE"}}}},
                "patch": {"operation": "MERGE_AND_REPLACE_LIST", "value": {}}},
              {"applyTo": "CLUSTER", "match": {"cluster": {"service": "s.ns.svc.cluster.local", "portNumber": 80, "subset": "v1"}},
                "patch": {"operation": "REMOVE"}}]});
        let Decoded::Object {
            object, findings, ..
        } = decode(&doc(spec), &DecodeOptions::default())
        else {
            panic!("did not decode")
        };
        assert!(findings.is_empty(), "{findings:?}");
        let Spec::EnvoyFilter(ef) = object.spec else {
            panic!()
        };
        assert_eq!(ef.priority, -3);
        assert_eq!(ef.config_patches[0].apply_to, ApplyTo::HttpFilter);
        let m = ef.config_patches[0].r#match.as_ref().unwrap();
        assert_eq!(m.context, PatchContext::Gateway);
        assert_eq!(
            m.listener
                .as_ref()
                .unwrap()
                .filter_chain
                .as_ref()
                .unwrap()
                .destination_port,
            443
        );
        assert_eq!(
            ef.config_patches[0].patch.as_ref().unwrap().filter_class,
            FilterClass::Authz
        );
        assert_eq!(
            ef.config_patches[2].patch.as_ref().unwrap().operation,
            Operation::Remove
        );
        assert_eq!(
            ef.config_patches[1]
                .r#match
                .as_ref()
                .unwrap()
                .route_configuration
                .as_ref()
                .unwrap()
                .vhost
                .as_ref()
                .unwrap()
                .route
                .as_ref()
                .unwrap()
                .action,
            RouteAction::DirectResponse
        );
    }

    #[test]
    fn unknown_enum_names_fail_with_their_path() {
        let spec = json!({"configPatches": [{"applyTo": "HTTP_FILTER"}, {"applyTo": "LISTENERS"}]});
        let Decoded::Invalid { findings, .. } = decode(&doc(spec), &DecodeOptions::default())
        else {
            panic!("decoded")
        };
        assert_eq!(
            findings[0].field, "spec.configPatches[1].applyTo",
            "{findings:?}"
        );
        let spec = json!({"configPatches": [{"patch": {"operation": "PATCH"}}]});
        let Decoded::Invalid { findings, .. } = decode(&doc(spec), &DecodeOptions::default())
        else {
            panic!("decoded")
        };
        assert_eq!(findings[0].field, "spec.configPatches[0].patch.operation");
        let spec = json!({"configPatches": [{"match": {"context": "SIDECAR"}}]});
        let Decoded::Invalid { findings, .. } = decode(&doc(spec), &DecodeOptions::default())
        else {
            panic!("decoded")
        };
        assert_eq!(findings[0].field, "spec.configPatches[0].match.context");
    }

    #[test]
    fn every_apply_to_but_invalid_names_an_envoy_type() {
        assert_eq!(ApplyTo::Invalid.envoy_message(), None);
        assert_eq!(ApplyTo::HttpFilter.as_str(), "HTTP_FILTER");
        assert_eq!(
            ApplyTo::HttpFilter.envoy_message(),
            Some("envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter")
        );
    }
}
