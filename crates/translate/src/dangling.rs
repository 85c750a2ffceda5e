//! Dangling cluster references (pure): takes the finished [`GatewayResources`] of one proxy and the listeners it
//! was last given, makes the output closed (no listener or route names a cluster the output lacks) and yields what
//! it changed, for the proxy's log and metric. Envoy resolves the clusters a listener's filters name when it loads
//! the listener and rejects the whole listener when one is missing (e.g. higress-config tracing pointing at a
//! collector Service not created yet, or an EnvoyFilter adding ext_authz before its cluster exists).
//!
//! What happens to a reference to a missing cluster:
//! * **tracing and access logs** are left out: they change what is observed, not what is allowed, and come back by
//!   themselves once the cluster exists;
//! * **any other filter** (ext_authz, rate limits, remote JWKS, …) holds its listener back: the proxy keeps the
//!   version of the listener it was last given (closed again against today's clusters), or does not get the
//!   listener yet. Never the listener without the filter, which could let through what the filter would stop;
//! * **a route** whose cluster is missing answers 503, as Envoy answers for an unknown cluster, and a mirror
//!   policy naming a missing cluster is left out.

use envoy_types::pb::envoy::config::accesslog::v3::{access_log, AccessLog};
use envoy_types::pb::envoy::config::listener::v3::{filter, Listener};
use envoy_types::pb::envoy::config::route::v3::{
    route, route_action, DirectResponseAction, RouteConfiguration,
};
use envoy_types::pb::envoy::config::trace::v3::tracing::http::ConfigType as TracerConfig;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    http_filter, HttpConnectionManager,
};
use envoy_types::pb::google::protobuf::Any;
use prost::{Message, Name};

use super::envoy::for_each_hcm;
pub use super::types::{Effect, LeftOut};
use super::types::{FastSet, GatewayResources, RebuiltHosts};
use admitpilot_envoy_proto::references::clusters_named;
use admitpilot_model::{Kind, Snapshot};

/// The names of the clusters an output has.
type ClusterNames<'a> = FastSet<&'a str>;

/// What to say of a [`LeftOut`] (in logs, with its fields).
pub const LEFT_OUT_MESSAGE: &str =
    "config naming clusters this gateway does not get was not sent as is (Envoy would reject it)";

impl Effect {
    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::LeftOut => "left_out",
            Effect::HeldBack => "listener_held_back",
            Effect::NotSent => "listener_not_sent",
            Effect::Answers503 => "route_answers_503",
        }
    }
}

impl std::fmt::Display for Effect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Effect::LeftOut => "left out until the clusters exist",
            Effect::HeldBack => "listener kept at the version last sent until the clusters exist",
            Effect::NotSent => "listener not sent until the clusters exist",
            Effect::Answers503 => "route answers 503 until the clusters exist",
        })
    }
}

/// Virtual hosts already closed by the call before, against the same clusters: the route pass skips them and
/// keeps their changes from that call.
#[derive(Debug, Clone, Copy)]
pub struct AlreadyClosed<'a> {
    /// The virtual hosts that are *not* already closed (built anew by this call).
    pub rebuilt: &'a RebuiltHosts,
    /// What the call before changed (its `left_out`).
    pub previous: &'a [LeftOut],
}

/// Makes `out` closed against its own clusters (see the module docs); `previous` are the listeners the proxy was
/// last given; `already` lets the route pass skip virtual hosts that are closed already. Returns the changes,
/// sorted.
pub fn close(
    out: &mut GatewayResources,
    previous: &[Listener],
    already: Option<AlreadyClosed<'_>>,
) -> Vec<LeftOut> {
    let GatewayResources {
        listeners,
        route_configs,
        clusters,
        ..
    } = out;
    let clusters: ClusterNames<'_> = clusters.iter().map(|c| c.name.as_str()).collect();
    let mut changes = Vec::new();
    for mut listener in std::mem::take(listeners) {
        leave_out_observability(std::slice::from_mut(&mut listener), &clusters, &mut changes);
        let dangling = dangling_filters(&listener, &clusters);
        if dangling.is_empty() {
            listeners.push(listener);
            continue;
        }
        let kept = previous
            .iter()
            .find(|p| p.name == listener.name)
            .and_then(|p| {
                let mut p = p.clone();
                leave_out_observability(std::slice::from_mut(&mut p), &clusters, &mut Vec::new());
                dangling_filters(&p, &clusters).is_empty().then_some(p)
            });
        let effect = if kept.is_some() {
            Effect::HeldBack
        } else {
            Effect::NotSent
        };
        for (feature, missing) in dangling {
            changes.push(change(
                format!("listener {}", listener.name),
                feature,
                missing,
                effect,
            ));
        }
        listeners.extend(kept);
    }
    for config in route_configs {
        close_routes(config, &clusters, already, &mut changes);
    }
    changes.sort();
    changes.dedup();
    changes
}

/// Names the objects behind each change: EnvoyFilters whose patches mention a missing cluster, and the
/// higress-config ConfigMap for tracing (its tracing item names the collector).
pub fn blame(changes: &mut [LeftOut], snapshot: &Snapshot) {
    if changes.is_empty() {
        return;
    }
    let filters: Vec<(String, String)> = snapshot
        .of_kind(Kind::EnvoyFilter)
        .map(|object| {
            let spec = serde_json::to_string(&object.spec).unwrap_or_default();
            (object.key().to_string(), spec)
        })
        .collect();
    let higress = snapshot
        .of_kind(Kind::HigressConfig)
        .next()
        .map(|object| object.key().to_string());
    for change in changes {
        change.blame = filters
            .iter()
            .filter(|(_, spec)| change.missing.iter().any(|m| spec.contains(m.as_str())))
            .map(|(key, _)| key.clone())
            .collect();
        if change.blame.is_empty() && change.feature.starts_with("tracing") {
            change.blame.extend(higress.clone());
        }
    }
}

fn change(resource: String, feature: String, missing: Vec<String>, effect: Effect) -> LeftOut {
    LeftOut {
        resource,
        feature,
        missing,
        effect,
        blame: Vec::new(),
    }
}

/// Leaves out tracing and access logs naming missing clusters.
fn leave_out_observability(
    listeners: &mut [Listener],
    clusters: &ClusterNames<'_>,
    changes: &mut Vec<LeftOut>,
) {
    for listener in listeners.iter_mut() {
        let name = format!("listener {}", listener.name);
        retain_access_logs(&mut listener.access_log, clusters, &name, changes);
    }
    for_each_hcm(listeners, |listener, hcm| {
        let name = format!("listener {listener}");
        let mut changed = retain_access_logs(&mut hcm.access_log, clusters, &name, changes);
        if let Some((feature, missing)) = dangling_tracing(hcm, clusters) {
            hcm.tracing = None;
            changes.push(change(name, feature, missing, Effect::LeftOut));
            changed = true;
        }
        changed
    });
}

/// Drops the access logs naming missing clusters; returns whether any was dropped.
fn retain_access_logs(
    logs: &mut Vec<AccessLog>,
    clusters: &ClusterNames<'_>,
    resource: &str,
    changes: &mut Vec<LeftOut>,
) -> bool {
    let before = logs.len();
    logs.retain(|log| {
        let Some(access_log::ConfigType::TypedConfig(config)) = &log.config_type else {
            return true;
        };
        let missing = missing(config, clusters);
        if missing.is_empty() {
            return true;
        }
        let feature = format!("access log {}", log.name);
        changes.push(change(
            resource.to_string(),
            feature,
            missing,
            Effect::LeftOut,
        ));
        false
    });
    logs.len() != before
}

/// What the tracing of `hcm` is and the clusters it names that are not in `clusters`, if any are missing.
fn dangling_tracing(
    hcm: &HttpConnectionManager,
    clusters: &ClusterNames<'_>,
) -> Option<(String, Vec<String>)> {
    let provider = hcm.tracing.as_ref()?.provider.as_ref()?;
    let Some(TracerConfig::TypedConfig(tracer)) = provider.config_type.as_ref() else {
        return None;
    };
    let missing = missing(tracer, clusters);
    (!missing.is_empty()).then(|| (format!("tracing ({})", provider.name), missing))
}

/// The filters of `listener` (network filters, and HTTP filters of its connection managers) naming missing
/// clusters, each with those clusters.
fn dangling_filters(
    listener: &Listener,
    clusters: &ClusterNames<'_>,
) -> Vec<(String, Vec<String>)> {
    let mut found = Vec::new();
    let chains = listener
        .filter_chains
        .iter()
        .chain(listener.default_filter_chain.iter());
    for network_filter in chains.flat_map(|chain| chain.filters.iter()) {
        let Some(filter::ConfigType::TypedConfig(config)) = &network_filter.config_type else {
            continue;
        };
        if config.type_url != HttpConnectionManager::type_url() {
            let missing = missing(config, clusters);
            if !missing.is_empty() {
                found.push((format!("network filter {}", network_filter.name), missing));
            }
            continue;
        }
        let Ok(hcm) = HttpConnectionManager::decode(config.value.as_slice()) else {
            continue;
        };
        for http in &hcm.http_filters {
            let Some(http_filter::ConfigType::TypedConfig(config)) = &http.config_type else {
                continue;
            };
            let missing = missing(config, clusters);
            if !missing.is_empty() {
                found.push((format!("http filter {}", http.name), missing));
            }
        }
    }
    found
}

/// Makes every route of `config` name only existing clusters (skipping, with their earlier changes kept, the
/// virtual hosts `already` closed).
fn close_routes(
    config: &mut RouteConfiguration,
    clusters: &ClusterNames<'_>,
    already: Option<AlreadyClosed<'_>>,
    changes: &mut Vec<LeftOut>,
) {
    let resource = format!("route {}", config.name);
    let is_closed = |vhost: &str| already.is_some_and(|a| !a.rebuilt.contains(&config.name, vhost));
    if let Some(already) = already {
        let kept = already.previous.iter().filter(|change| {
            change.resource == resource
                && change
                    .feature
                    .strip_prefix("virtual host ")
                    .and_then(|rest| rest.split_once(" route "))
                    .is_some_and(|(vhost, _)| {
                        is_closed(vhost) && config.virtual_hosts.iter().any(|h| h.name == vhost)
                    })
        });
        changes.extend(kept.cloned());
    }
    // Runs over every route of every virtual host to close: nothing is allocated for a route whose clusters all
    // exist.
    let to_close: Vec<usize> = match already {
        Some(already) => already.rebuilt.positions(&config.name).collect(),
        None => (0..config.virtual_hosts.len()).collect(),
    };
    for at in to_close {
        let Some(host) = config.virtual_hosts.get_mut(at) else {
            continue;
        };
        for entry in &mut host.routes {
            let Some(route::Action::Route(action)) = &mut entry.action else {
                continue;
            };
            let feature = || format!("virtual host {} route {}", host.name, entry.name);
            let mirrors = &mut action.request_mirror_policies;
            if mirrors
                .iter()
                .any(|m| !clusters.contains(m.cluster.as_str()))
            {
                let what = format!("{} mirror", feature());
                mirrors.retain(|mirror| {
                    if clusters.contains(mirror.cluster.as_str()) {
                        return true;
                    }
                    changes.push(change(
                        resource.clone(),
                        what.clone(),
                        vec![mirror.cluster.clone()],
                        Effect::LeftOut,
                    ));
                    false
                });
            }
            let mut missing: Vec<String> = match &action.cluster_specifier {
                Some(route_action::ClusterSpecifier::Cluster(name))
                    if !clusters.contains(name.as_str()) =>
                {
                    vec![name.clone()]
                }
                Some(route_action::ClusterSpecifier::WeightedClusters(weighted)) => weighted
                    .clusters
                    .iter()
                    .filter(|c| !clusters.contains(c.name.as_str()))
                    .map(|c| c.name.clone())
                    .collect(),
                _ => Vec::new(),
            };
            if missing.is_empty() {
                continue;
            }
            missing.sort();
            missing.dedup();
            let feature = feature();
            entry.action = Some(route::Action::DirectResponse(DirectResponseAction {
                status: 503,
                ..Default::default()
            }));
            changes.push(change(
                resource.clone(),
                feature,
                missing,
                Effect::Answers503,
            ));
        }
    }
}

/// The clusters `config` names that are not in `clusters`, sorted and without repeats.
fn missing(config: &Any, clusters: &ClusterNames<'_>) -> Vec<String> {
    let mut missing: Vec<String> = clusters_named(config)
        .into_iter()
        .filter(|cluster| !clusters.contains(cluster.as_str()))
        .collect();
    missing.sort();
    missing.dedup();
    missing
}

#[cfg(test)]
mod tests {
    use super::*;
    use admitpilot_envoy_proto::json::{message_from_json, message_to_json};
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use serde_json::{json, Value};

    const HCM: &str =
        "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";

    /// A listener whose connection manager has `extra` merged in (tracing, access logs, HTTP filters).
    fn listener(name: &str, extra: Value) -> Listener {
        let mut hcm = json!({"@type": HCM, "stat_prefix": "http", "rds": {"route_config_name": "http.80",
            "config_source": {"ads": {}, "resource_api_version": "V3"}},
            "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}]});
        for (key, value) in extra.as_object().unwrap() {
            hcm[key] = value.clone();
        }
        message_from_json(&json!({"name": name, "filter_chains": [{"filters": [
            {"name": "envoy.filters.network.http_connection_manager", "typed_config": hcm}]}]}))
        .unwrap()
    }

    fn gateway(listeners: Vec<Listener>, clusters: &[&str]) -> GatewayResources {
        GatewayResources {
            listeners,
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

    fn zipkin(cluster: &str) -> Value {
        json!({"tracing": {"provider": {"name": "envoy.tracers.zipkin", "typed_config": {
            "@type": "type.googleapis.com/envoy.config.trace.v3.ZipkinConfig",
            "collector_cluster": cluster, "collector_endpoint": "/api/v2/spans",
            "collector_endpoint_version": "HTTP_JSON"}}}})
    }

    fn ext_authz(cluster: &str) -> Value {
        json!({"http_filters": [
            {"name": "envoy.filters.http.ext_authz", "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthz",
                "grpc_service": {"envoy_grpc": {"cluster_name": cluster}}}},
            {"name": "envoy.filters.http.router", "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}]})
    }

    fn hcm_json(listener: &Listener) -> Value {
        message_to_json(listener).unwrap()["filter_chains"][0]["filters"][0]["typed_config"].clone()
    }

    fn left_out(resource: &str, feature: &str, missing: &str, effect: Effect) -> LeftOut {
        change(
            resource.into(),
            feature.into(),
            vec![missing.into()],
            effect,
        )
    }

    #[test]
    fn tracing_naming_a_missing_collector_is_left_out_and_reported() {
        let collector = "outbound|9411||zipkin.tracing.svc.cluster.local";
        let mut out = gateway(vec![listener("0.0.0.0_80", zipkin(collector))], &["web"]);
        let changes = close(&mut out, &[], None);
        let expected = left_out(
            "listener 0.0.0.0_80",
            "tracing (envoy.tracers.zipkin)",
            collector,
            Effect::LeftOut,
        );
        assert_eq!(changes, [expected]);
        assert!(hcm_json(&out.listeners[0])["tracing"].is_null());
    }

    #[test]
    fn config_whose_clusters_exist_is_kept_as_it_is() {
        let mut out = gateway(
            vec![listener(
                "0.0.0.0_80",
                json!({"tracing": zipkin("zipkin")["tracing"],
                "http_filters": ext_authz("authz")["http_filters"]}),
            )],
            &["zipkin", "authz"],
        );
        let before = out.clone();
        assert!(close(&mut out, &[], None).is_empty());
        assert_eq!(out, before);
    }

    #[test]
    fn access_logs_naming_a_missing_cluster_are_left_out() {
        let log = json!({"access_log": [{"name": "envoy.access_loggers.http_grpc", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.access_loggers.grpc.v3.HttpGrpcAccessLogConfig",
            "common_config": {"log_name": "al", "transport_api_version": "V3",
                "grpc_service": {"envoy_grpc": {"cluster_name": "als"}}}}}]});
        let mut out = gateway(vec![listener("0.0.0.0_80", log)], &[]);
        let changes = close(&mut out, &[], None);
        assert_eq!(
            changes[0].feature,
            "access log envoy.access_loggers.http_grpc"
        );
        assert_eq!(changes[0].effect, Effect::LeftOut);
        assert!(hcm_json(&out.listeners[0])["access_log"].is_null());
    }

    #[test]
    fn a_filter_naming_a_missing_cluster_holds_its_listener_back() {
        let previous = listener("0.0.0.0_80", json!({}));
        let mut out = gateway(vec![listener("0.0.0.0_80", ext_authz("authz"))], &[]);
        let changes = close(&mut out, std::slice::from_ref(&previous), None);
        let feature = "http filter envoy.filters.http.ext_authz";
        assert_eq!(
            changes,
            [left_out(
                "listener 0.0.0.0_80",
                feature,
                "authz",
                Effect::HeldBack
            )]
        );
        assert_eq!(out.listeners, [previous]);

        // Never sent before: not sent at all (never without the filter).
        let mut out = gateway(vec![listener("0.0.0.0_80", ext_authz("authz"))], &[]);
        let changes = close(&mut out, &[], None);
        assert_eq!(changes[0].effect, Effect::NotSent);
        assert!(out.listeners.is_empty());
    }

    #[test]
    fn routes_to_missing_clusters_answer_503_and_mirrors_are_left_out() {
        let mut out = gateway(Vec::new(), &["web"]);
        out.route_configs = vec![
            message_from_json(&json!({"name": "http.80", "virtual_hosts": [
            {"name": "all", "domains": ["*"], "routes": [
                {"name": "gone", "match": {"prefix": "/gone"}, "route": {"cluster": "missing"}},
                {"name": "web", "match": {"prefix": "/"}, "route": {"cluster": "web",
                    "request_mirror_policies": [{"cluster": "shadow"}]}}]}]}))
            .unwrap(),
        ];
        let changes = close(&mut out, &[], None);
        let routes = &out.route_configs[0].virtual_hosts[0].routes;
        assert_eq!(
            routes[0].action,
            Some(route::Action::DirectResponse(DirectResponseAction {
                status: 503,
                ..Default::default()
            }))
        );
        let Some(route::Action::Route(web)) = &routes[1].action else {
            panic!("route kept");
        };
        assert!(web.request_mirror_policies.is_empty());
        assert_eq!(
            changes,
            [
                left_out(
                    "route http.80",
                    "virtual host all route gone",
                    "missing",
                    Effect::Answers503
                ),
                left_out(
                    "route http.80",
                    "virtual host all route web mirror",
                    "shadow",
                    Effect::LeftOut
                ),
            ]
        );
    }

    /// With [`AlreadyClosed`], a virtual host the call did not rebuild is not walked (its routes stay as they
    /// are) and its earlier reports are kept; a rebuilt one is closed; reports of gone virtual hosts are dropped.
    #[test]
    fn virtual_hosts_closed_before_keep_their_reports_and_are_not_walked() {
        let host = |name: &str| {
            json!({"name": name, "domains": [name], "routes": [
                {"name": "r", "match": {"prefix": "/"}, "route": {"cluster": "missing"}}]})
        };
        let mut out = gateway(Vec::new(), &["web"]);
        out.route_configs = vec![message_from_json(&json!({"name": "http.80",
            "virtual_hosts": [host("kept"), host("new")]}))
        .unwrap()];
        let report = |vhost: &str| {
            left_out(
                "route http.80",
                &format!("virtual host {vhost} route r"),
                "missing",
                Effect::Answers503,
            )
        };
        let previous = [report("kept"), report("gone")];
        let mut rebuilt = RebuiltHosts::default();
        rebuilt.insert("http.80", 1, "new");
        let already = AlreadyClosed {
            rebuilt: &rebuilt,
            previous: &previous,
        };
        let changes = close(&mut out, &[], Some(already));
        assert_eq!(changes, [report("kept"), report("new")]);
        let routes = |i: usize| {
            out.route_configs[0].virtual_hosts[i].routes[0]
                .action
                .clone()
        };
        assert!(matches!(routes(0), Some(route::Action::Route(_))));
        assert!(matches!(routes(1), Some(route::Action::DirectResponse(_))));
    }

    #[test]
    fn envoy_filters_mentioning_a_missing_cluster_are_blamed() {
        let snapshot = admitpilot_model::Snapshot::default();
        let mut changes = vec![left_out(
            "listener x",
            "tracing (zipkin)",
            "authz",
            Effect::LeftOut,
        )];
        blame(&mut changes, &snapshot);
        assert!(changes[0].blame.is_empty());
        let text = "apiVersion: networking.istio.io/v1alpha3\nkind: EnvoyFilter\nmetadata: {name: authz, namespace: istio-system}\nspec:\n  configPatches:\n  - applyTo: HTTP_FILTER\n    patch:\n      operation: INSERT_BEFORE\n      value: {name: envoy.filters.http.ext_authz, typed_config: {\"@type\": type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthz, grpc_service: {envoy_grpc: {cluster_name: authz}}}}\n";
        let value = admitpilot_model::document::parse_documents(text)
            .remove(0)
            .value
            .unwrap();
        let report = admitpilot_validate::validate_document(&value, &Default::default());
        let object = report.object.unwrap();
        let mut snapshot = admitpilot_model::Snapshot::default();
        snapshot
            .objects
            .insert(object.key(), std::sync::Arc::new(object));
        blame(&mut changes, &snapshot);
        assert_eq!(changes[0].blame, ["EnvoyFilter istio-system/authz"]);
    }
}
