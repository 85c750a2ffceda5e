//! Cluster patches: takes the proxy's clusters and the prepared patches, applies CLUSTER remove/merge in place
//! and appends added clusters. Cluster names of the form `direction|port|subset|host` are parsed for the
//! `service`, `subset` and `portNumber` matches; `name` matches exactly.

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType as SocketConfig;
use envoy_types::pb::envoy::config::core::v3::TransportSocket;

use super::{Patches, Prepared};
use admitpilot_envoy_proto as envoy_proto;
use admitpilot_model::istio::envoy_filter::{ApplyTo, Operation};

pub(super) fn patch_clusters(clusters: &mut Vec<Cluster>, patches: &Patches<'_>) {
    clusters.retain_mut(|cluster| {
        for patch in patches.of(ApplyTo::Cluster) {
            if !cluster_match(&cluster.name, patch) {
                continue;
            }
            match patch.operation {
                Operation::Remove => return false,
                // The guard merges a matching transport socket itself; only otherwise is the whole value merged.
                op if op.is_merge() && !merge_transport_socket(cluster, patch) => {
                    patch.merge_into(cluster)
                }
                _ => {}
            }
        }
        true
    });
    for patch in patches.of(ApplyTo::Cluster) {
        if patch.operation == Operation::Add {
            clusters.extend(patch.typed::<Cluster>());
        }
    }
}

fn cluster_match(name: &str, patch: &Prepared<'_>) -> bool {
    let Some(m) = patch.cluster() else {
        return true;
    };
    if !m.name.is_empty() {
        return m.name == name;
    }
    let parts: Vec<&str> = name.split('|').collect();
    let (port, subset, host) = match parts.as_slice() {
        [_, port, subset, host] => (port.parse::<u32>().unwrap_or_default(), *subset, *host),
        _ => (0, "", ""),
    };
    (m.subset.is_empty() || m.subset == subset)
        && (m.service.is_empty() || m.service == host)
        && (m.port_number == 0 || m.port_number == port)
}

/// Handles a patch carrying a transport socket the way Istio does; returns whether the patch was consumed
/// (the rest of its value is then not merged).
fn merge_transport_socket(cluster: &mut Cluster, patch: &Prepared<'_>) -> bool {
    let Some(user) = patch.typed::<Cluster>() else {
        return false;
    };
    let Some(src) = user.transport_socket else {
        return false;
    };
    let target: Option<&mut TransportSocket> = if !cluster.transport_socket_matches.is_empty() {
        let found = cluster
            .transport_socket_matches
            .iter_mut()
            .filter_map(|m| m.transport_socket.as_mut())
            .find(|ts| ts.name == src.name);
        match found {
            Some(ts) => Some(ts),
            // No socket of that name among the matches: Istio leaves the cluster as it is.
            None => return true,
        }
    } else {
        cluster
            .transport_socket
            .as_mut()
            .filter(|ts| ts.name == src.name)
    };
    match target {
        Some(dst) => {
            if let (
                Some(SocketConfig::TypedConfig(dst_any)),
                Some(SocketConfig::TypedConfig(src_any)),
            ) = (dst.config_type.as_mut(), src.config_type.as_ref())
            {
                envoy_proto::merge_any(dst_any, src_any);
            }
        }
        None => cluster.transport_socket = Some(src),
    }
    true
}
