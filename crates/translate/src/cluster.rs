//! Clusters and endpoints (pure): takes one upstream (name, discovery type, endpoints) and yields the Envoy
//! `Cluster` with Istio's defaults plus, for EDS clusters, its `ClusterLoadAssignment`.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use envoy_types::pb::envoy::config::cluster::v3::{
    circuit_breakers, cluster, CircuitBreakers, Cluster,
};
use envoy_types::pb::envoy::config::core::v3::Locality;
use envoy_types::pb::envoy::config::endpoint::v3::{
    lb_endpoint, ClusterLoadAssignment, Endpoint as EnvoyEndpoint, LbEndpoint, LocalityLbEndpoints,
};
use envoy_types::pb::google::protobuf::UInt32Value;

use super::authn::JwksUpstream;
use super::envoy::{ads, millis, socket_address};
use super::policy::{apply_tls, subset_selects, Policies};
use super::services::{Registry, Service, ServicePort};
use super::types::{ClusterRef, Discovery, Endpoint, GatewayResources};
use admitpilot_model::istio::destination_rule::{ClientTlsMode, ClientTlsSettings, Subset};

/// Istio's default upstream connect timeout.
pub const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 10_000;

/// Builds a cluster with Istio's defaults: 10 s connect timeout, unlimited circuit-breaker thresholds,
/// LEAST_REQUEST balancing; EDS clusters take endpoints from ADS, DNS clusters carry them inline.
pub fn cluster(name: &str, discovery: Discovery, endpoints: &[Endpoint]) -> Cluster {
    let kind = match discovery {
        Discovery::Eds => cluster::DiscoveryType::Eds,
        Discovery::StrictDns => cluster::DiscoveryType::StrictDns,
        Discovery::LogicalDns => cluster::DiscoveryType::LogicalDns,
        Discovery::OriginalDst => cluster::DiscoveryType::OriginalDst,
    };
    let mut out = Cluster {
        name: name.to_string(),
        cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(kind as i32)),
        connect_timeout: Some(millis(DEFAULT_CONNECT_TIMEOUT_MS)),
        lb_policy: cluster::LbPolicy::LeastRequest as i32,
        circuit_breakers: Some(unlimited_circuit_breakers()),
        ..Default::default()
    };
    match discovery {
        Discovery::Eds => {
            out.eds_cluster_config = Some(cluster::EdsClusterConfig {
                eds_config: Some(ads()),
                service_name: name.to_string(),
            });
        }
        Discovery::StrictDns | Discovery::LogicalDns => {
            out.dns_lookup_family = cluster::DnsLookupFamily::V4Only as i32;
            out.load_assignment = Some(load_assignment(name, endpoints));
        }
        Discovery::OriginalDst => {
            out.lb_policy = cluster::LbPolicy::ClusterProvided as i32;
        }
    }
    out
}

/// Istio's default thresholds: effectively unlimited, so only DestinationRules impose limits.
fn unlimited_circuit_breakers() -> CircuitBreakers {
    let max = Some(UInt32Value { value: u32::MAX });
    CircuitBreakers {
        thresholds: vec![circuit_breakers::Thresholds {
            max_connections: max,
            max_pending_requests: max,
            max_requests: max,
            max_retries: max,
            track_remaining: true,
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// Builds the load assignment of a cluster: endpoints grouped by locality (in order), each locality
/// weighted by the sum of its endpoint weights.
pub fn load_assignment(cluster_name: &str, endpoints: &[Endpoint]) -> ClusterLoadAssignment {
    let mut by_zone: BTreeMap<(&str, &str, &str), Vec<&Endpoint>> = BTreeMap::new();
    for endpoint in endpoints {
        by_zone
            .entry((&endpoint.region, &endpoint.zone, &endpoint.subzone))
            .or_default()
            .push(endpoint);
    }
    let localities = by_zone
        .into_iter()
        .map(|((region, zone, subzone), members)| {
            let total: u32 = members
                .iter()
                .fold(0u32, |sum, e| sum.saturating_add(e.weight.max(1)));
            LocalityLbEndpoints {
                locality: Some(Locality {
                    region: region.to_string(),
                    zone: zone.to_string(),
                    sub_zone: subzone.to_string(),
                }),
                lb_endpoints: members
                    .into_iter()
                    .map(|e| LbEndpoint {
                        host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(
                            EnvoyEndpoint {
                                address: Some(socket_address(&e.address, e.port)),
                                ..Default::default()
                            },
                        )),
                        load_balancing_weight: Some(UInt32Value {
                            value: e.weight.max(1),
                        }),
                        ..Default::default()
                    })
                    .collect(),
                load_balancing_weight: Some(UInt32Value { value: total }),
                ..Default::default()
            }
        })
        .collect();
    ClusterLoadAssignment {
        cluster_name: cluster_name.to_string(),
        endpoints: localities,
        ..Default::default()
    }
}

/// A cluster for a JWKS server no service defines: its host resolved by DNS, and for `https` TLS checked against
/// the system's roots (and, for a host name, its name as SNI and subject alternative name); adds the secrets that
/// TLS needs to `credentials`.
pub(crate) fn jwks_cluster(upstream: &JwksUpstream, credentials: &mut BTreeSet<String>) -> Cluster {
    let endpoint = Endpoint {
        address: upstream.host.clone(),
        port: upstream.port,
        region: String::new(),
        zone: String::new(),
        subzone: String::new(),
        weight: 1,
        labels: BTreeMap::new(),
    };
    let mut out = cluster(
        &super::authn::jwks_cluster_name(upstream),
        Discovery::LogicalDns,
        &[endpoint],
    );
    if upstream.tls {
        // An IP address is neither sent as SNI nor checked as a DNS name.
        let name = upstream
            .host
            .parse::<std::net::IpAddr>()
            .is_err()
            .then(|| upstream.host.clone());
        credentials.extend(apply_tls(
            &mut out,
            &ClientTlsSettings {
                mode: Some(ClientTlsMode::Simple),
                sni: name.clone().unwrap_or_default(),
                subject_alt_names: name.into_iter().collect(),
                ..Default::default()
            },
        ));
    }
    out
}

/// Calls `f` for every cluster a service visible to `namespace` defines: per port, the whole service
/// (subset `None`) and then each DestinationRule subset, with the cluster's reference.
pub(crate) fn for_each_service_cluster<'r>(
    registry: &'r Registry,
    policies: &'r Policies,
    namespace: &str,
    mut f: impl FnMut(&'r Service, &'r ServicePort, Option<&'r Subset>, ClusterRef),
) {
    for service in registry.services.values() {
        if !service.visible_to(namespace) {
            continue;
        }
        let subsets = policies.subsets(&service.hostname, &service.namespace);
        for port in &service.ports {
            let variants = std::iter::once(None).chain(subsets.iter().map(Some));
            for subset in variants {
                let reference = ClusterRef {
                    host: service.hostname.clone(),
                    port: port.number,
                    subset: subset.map(|s| s.name.clone()).unwrap_or_default(),
                };
                f(service, port, subset, reference);
            }
        }
    }
}

/// Builds the clusters (and load assignments) of every visible service port and DestinationRule subset,
/// plus an empty EDS cluster for each of `extra` and a DNS cluster for each JWKS server no service defines,
/// sorted by name into `out`; returns the credentials the clusters' upstream TLS names.
pub(crate) fn build_clusters(
    registry: &Registry,
    policies: &Policies,
    namespace: &str,
    defined: &HashSet<String>,
    extra: &BTreeSet<ClusterRef>,
    jwks: &[JwksUpstream],
    out: &mut GatewayResources,
) -> BTreeSet<String> {
    let mut credentials = BTreeSet::new();
    let mut clusters = Vec::new();
    let mut endpoints = Vec::new();
    for_each_service_cluster(
        registry,
        policies,
        namespace,
        |service, port, subset, reference| {
            let all = service
                .endpoints
                .get(&port.number)
                .map(Vec::as_slice)
                .unwrap_or_default();
            let members: Vec<Endpoint> = match subset {
                None => all.to_vec(),
                Some(subset) => all
                    .iter()
                    .filter(|e| subset_selects(subset, &e.labels))
                    .cloned()
                    .collect(),
            };
            let name = reference.name();
            let mut c = cluster(&name, service.discovery, &members);
            credentials.extend(policies.apply(
                &mut c,
                &reference,
                &service.namespace,
                &port.protocol,
            ));
            if c.eds_cluster_config.is_some() {
                endpoints.push(load_assignment(&name, &members));
            }
            clusters.push(c);
        },
    );
    let mut names: HashSet<String> = HashSet::new();
    for reference in extra {
        let name = reference.name();
        if names.insert(name.clone()) {
            clusters.push(cluster(&name, Discovery::Eds, &[]));
            endpoints.push(load_assignment(&name, &[]));
        }
    }
    for upstream in jwks {
        let name = super::authn::jwks_cluster_name(upstream);
        if !defined.contains(&name) && names.insert(name) {
            clusters.push(jwks_cluster(upstream, &mut credentials));
        }
    }
    clusters.sort_by(|a, b| a.name.cmp(&b.name));
    endpoints.sort_by(|a, b| a.cluster_name.cmp(&b.cluster_name));
    out.clusters = clusters;
    out.endpoints = endpoints;
    credentials
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(address: &str, zone: &str) -> Endpoint {
        Endpoint {
            address: address.into(),
            port: 8080,
            region: String::new(),
            zone: zone.into(),
            subzone: String::new(),
            weight: 1,
            labels: BTreeMap::new(),
        }
    }

    #[test]
    fn eds_cluster_points_at_ads() {
        let c = cluster("outbound|80||a.b", Discovery::Eds, &[]);
        let eds = c.eds_cluster_config.unwrap();
        assert_eq!(eds.service_name, "outbound|80||a.b");
        assert!(c.load_assignment.is_none());
    }

    #[test]
    fn dns_cluster_carries_endpoints() {
        let c = cluster("x", Discovery::StrictDns, &[ep("example.com", "")]);
        assert_eq!(c.load_assignment.unwrap().endpoints.len(), 1);
    }

    #[test]
    fn endpoints_group_by_zone() {
        let cla = load_assignment(
            "x",
            &[
                ep("10.0.0.2", "b"),
                ep("10.0.0.1", "a"),
                ep("10.0.0.3", "b"),
            ],
        );
        assert_eq!(cla.endpoints.len(), 2);
        assert_eq!(
            cla.endpoints[1].load_balancing_weight,
            Some(UInt32Value { value: 2 })
        );
    }
}
