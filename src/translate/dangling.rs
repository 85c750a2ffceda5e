//! Dangling tracer references (pure): takes the finished [`GatewayResources`] of one proxy, leaves out the
//! tracing of every HTTP connection manager whose tracer names a cluster the output does not have, and yields
//! what it left out. Envoy resolves a tracer's collector cluster when it loads the listener and rejects the whole
//! listener when it is missing (e.g. higress-config tracing points at a collector Service not created yet); left
//! out, the listener still serves traffic, and tracing comes back by itself once the cluster exists.
//!
//! Only tracing is left out this way: it changes what is observed, not what is allowed. Other filters naming a
//! missing cluster (ext_authz, rate limits) are kept, so Envoy rejects them rather than serving without them.

use std::collections::HashSet;

use envoy_types::pb::envoy::config::trace::v3::tracing::http::ConfigType as TracerConfig;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;

use super::envoy::for_each_hcm;
use super::GatewayResources;
use crate::envoy_proto::references::clusters_named;

/// What to say of a [`LeftOut`] (in logs, with its fields).
pub const LEFT_OUT_MESSAGE: &str =
    "left out of the listener until the clusters it names exist (Envoy would reject the listener)";

/// A feature left out of one listener because it names clusters the proxy does not get.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LeftOut {
    /// The listener.
    pub listener: String,
    /// What was left out, e.g. `tracing (envoy.tracers.zipkin)`.
    pub feature: String,
    /// The clusters it names that do not exist.
    pub missing: Vec<String>,
}

/// Leaves out tracing that names missing clusters, in every listener of `out`; returns what was left out.
pub fn leave_out_dangling_tracing(out: &mut GatewayResources) -> Vec<LeftOut> {
    let clusters: HashSet<String> = out.clusters.iter().map(|c| c.name.clone()).collect();
    let mut left_out = Vec::new();
    for_each_hcm(&mut out.listeners, |listener, hcm| {
        let Some((feature, missing)) = dangling_tracing(hcm, &clusters) else {
            return false;
        };
        hcm.tracing = None;
        left_out.push(LeftOut {
            listener: listener.to_string(),
            feature,
            missing,
        });
        true
    });
    left_out.sort();
    left_out.dedup();
    left_out
}

/// What the tracing of `hcm` is and the clusters it names that are not in `clusters`, if any are missing.
fn dangling_tracing(
    hcm: &HttpConnectionManager,
    clusters: &HashSet<String>,
) -> Option<(String, Vec<String>)> {
    let provider = hcm.tracing.as_ref()?.provider.as_ref()?;
    let Some(TracerConfig::TypedConfig(tracer)) = provider.config_type.as_ref() else {
        return None;
    };
    let mut missing: Vec<String> = clusters_named(tracer)
        .into_iter()
        .filter(|cluster| !clusters.contains(cluster))
        .collect();
    if missing.is_empty() {
        return None;
    }
    missing.sort();
    missing.dedup();
    Some((format!("tracing ({})", provider.name), missing))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::envoy::any;
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use envoy_types::pb::envoy::config::listener::v3::{filter, Filter, FilterChain, Listener};
    use envoy_types::pb::envoy::config::trace::v3::{tracing, ZipkinConfig};
    use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager;
    use prost::Message;

    fn gateway(collector: &str, clusters: &[&str]) -> GatewayResources {
        let tracer = ZipkinConfig {
            collector_cluster: collector.into(),
            collector_endpoint: "/api/v2/spans".into(),
            ..Default::default()
        };
        let hcm = HttpConnectionManager {
            stat_prefix: "http".into(),
            tracing: Some(http_connection_manager::Tracing {
                provider: Some(tracing::Http {
                    name: "envoy.tracers.zipkin".into(),
                    config_type: Some(TracerConfig::TypedConfig(any(tracer))),
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        GatewayResources {
            listeners: vec![Listener {
                name: "0.0.0.0_80".into(),
                filter_chains: vec![FilterChain {
                    filters: vec![Filter {
                        name: "envoy.filters.network.http_connection_manager".into(),
                        config_type: Some(filter::ConfigType::TypedConfig(any(hcm))),
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
            clusters: clusters
                .iter()
                .map(|name| Cluster {
                    name: name.to_string(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    fn tracing_of(out: &GatewayResources) -> Option<http_connection_manager::Tracing> {
        let filter = &out.listeners[0].filter_chains[0].filters[0];
        let Some(filter::ConfigType::TypedConfig(any)) = &filter.config_type else {
            panic!("typed config");
        };
        HttpConnectionManager::decode(any.value.as_slice())
            .unwrap()
            .tracing
    }

    #[test]
    fn tracing_naming_a_missing_collector_is_left_out_and_reported() {
        let mut out = gateway("outbound|9411||zipkin.tracing.svc.cluster.local", &["web"]);
        let left_out = leave_out_dangling_tracing(&mut out);
        assert_eq!(
            left_out,
            [LeftOut {
                listener: "0.0.0.0_80".into(),
                feature: "tracing (envoy.tracers.zipkin)".into(),
                missing: vec!["outbound|9411||zipkin.tracing.svc.cluster.local".into()],
            }]
        );
        assert_eq!(tracing_of(&out), None);
    }

    #[test]
    fn tracing_whose_collector_exists_is_kept() {
        let mut out = gateway("zipkin", &["web", "zipkin"]);
        let before = out.clone();
        assert!(leave_out_dangling_tracing(&mut out).is_empty());
        assert_eq!(out, before);
        assert!(tracing_of(&out).is_some());
    }
}
