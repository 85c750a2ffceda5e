//! Ingress annotations that are not route settings, as Istio policies (pure): takes the served Ingresses, yields a
//! DestinationRule per backend Service for `backend-protocol`, `load-balance`, `upstream-hash-by` and cookie
//! affinity (Higress's `ConvertTrafficPolicy` with `upstreamtls.go` and `loadbalance.go`: the oldest Ingress
//! naming a Service port decides), and one DENY AuthorizationPolicy for `whitelist-source-range` (Higress's fork
//! builds a per-route RBAC filter denying other clients; here a rule per host and path).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::{meta, Context, Served, SYNTHESIZED};
use admitpilot_model::ingress::annotations::{Annotations, BackendProtocol, LoadBalance};
use admitpilot_model::ingress::path_of;
use admitpilot_model::istio::authorization_policy::{
    Action, AuthorizationPolicy, From, Operation, Rule, Source, To,
};
use admitpilot_model::istio::proxy_config::TypeWorkloadSelector;
use admitpilot_model::istio::DestinationRule;
use admitpilot_model::{ConfigObject, Kind, Spec};

/// Whether an Ingress's annotations ask for a port-level traffic policy (cheap; [`port_policy`] builds it).
fn asks_for_policy(a: &Annotations) -> bool {
    a.load_balance.is_some()
        || a.backend_protocol
            .is_some_and(|p| p != BackendProtocol::Http)
}

/// The port-level traffic policy an Ingress's annotations ask for, `None` when they ask for none.
fn port_policy(port: u32, a: &Annotations) -> Option<Value> {
    let mut policy = json!({"port": {"number": port}});
    let mut any = false;
    if let Some(protocol) = a.backend_protocol {
        if matches!(
            protocol,
            BackendProtocol::Http2 | BackendProtocol::Grpc | BackendProtocol::Grpcs
        ) {
            policy["connectionPool"] = json!({"http": {"h2UpgradePolicy": "UPGRADE"}});
            any = true;
        }
        if matches!(protocol, BackendProtocol::Https | BackendProtocol::Grpcs) {
            // `upstreamtls.go`: TLS without verification, as ingress-nginx's `proxy-ssl-verify: off` default.
            policy["tls"] = json!({"mode": "SIMPLE", "insecureSkipVerify": true});
            any = true;
        }
    }
    if let Some(lb) = &a.load_balance {
        policy["loadBalancer"] = match lb {
            LoadBalance::Simple(simple) => json!({"simple": simple}),
            LoadBalance::Cookie { name, path, ttl } => {
                json!({"consistentHash": {"httpCookie": {"name": name, "path": path, "ttl": format!("{ttl}s")}}})
            }
            LoadBalance::SourceIp => json!({"consistentHash": {"useSourceIp": true}}),
            LoadBalance::Header(h) => json!({"consistentHash": {"httpHeaderName": h}}),
            LoadBalance::Query(q) => json!({"consistentHash": {"httpQueryParameterName": q}}),
        };
        any = true;
    }
    any.then_some(policy)
}

/// One DestinationRule per backend Service with port-level settings (`ingress~<service>.<namespace>`, in the
/// proxy's namespace); the oldest Ingress naming a Service port decides its settings.
pub(super) fn destination_rules(
    cx: &Context<'_>,
    namespace: &str,
    served: &[Served<'_>],
) -> Vec<ConfigObject> {
    let mut ports: BTreeMap<String, BTreeMap<u32, Value>> = BTreeMap::new();
    for s in served {
        let backends = s
            .spec
            .rules
            .iter()
            .flatten()
            .flat_map(|r| r.http.iter().flat_map(|h| &h.paths))
            .map(|p| &p.backend)
            .chain(s.spec.default_backend.as_ref());
        for backend in backends {
            if !asks_for_policy(&s.annotations) {
                break;
            }
            let Some((ns, name, port)) = cx.backend(s.namespace(), backend) else {
                continue;
            };
            let Some(policy) = port_policy(port, &s.annotations) else {
                continue;
            };
            ports
                .entry(cx.host(&ns, &name))
                .or_default()
                .entry(port)
                .or_insert(policy);
        }
    }
    ports
        .into_iter()
        .filter_map(|(host, ports)| {
            let rule = serde_json::from_value::<DestinationRule>(json!({
                "host": host,
                "trafficPolicy": {"portLevelSettings": ports.into_values().collect::<Vec<_>>()},
            }))
            .ok()?;
            Some(ConfigObject {
                api_version: Kind::DestinationRule.api_version(),
                metadata: meta(namespace, format!("{SYNTHESIZED}{host}")),
                spec: Spec::DestinationRule(rule),
            })
        })
        .collect()
}

/// The AuthorizationPolicy paths of an Ingress path: Exact as is, Prefix as itself and `<path>/*`; `None` for a
/// regex path or `ignore-path-case`, which Istio paths cannot express (the rule then covers the whole host:
/// stricter, never looser).
fn policy_paths(path: &str, path_type: &str, a: &Annotations) -> Option<Vec<String>> {
    // Istio reads `*` and `{…}` in paths as wildcards and URI templates.
    if a.ignore_path_case || path.contains(['*', '{', '}']) {
        return None;
    }
    match super::routes::path_kind(path, path_type, a) {
        super::routes::PathKind::Exact => Some(vec![path.to_string()]),
        super::routes::PathKind::Prefix => {
            let p = path.trim_end_matches('/');
            if p.is_empty() {
                None
            } else {
                Some(vec![p.to_string(), format!("{p}/*")])
            }
        }
        _ => None,
    }
}

/// One DENY AuthorizationPolicy (`ingress~whitelist`) for the gateway: a request to a host and path of an Ingress
/// with `whitelist-source-range` from a client outside its ranges is denied (403).
pub(super) fn whitelist(
    cx: &Context<'_>,
    namespace: &str,
    served: &[Served<'_>],
) -> Vec<ConfigObject> {
    let mut rules = Vec::new();
    // A rule of no host applies to the `*` virtual host only: requests for a host some Ingress names are not its.
    let named: Vec<String> = served
        .iter()
        .flat_map(|s| s.spec.rules.iter().flatten())
        .filter_map(|r| r.host.clone().filter(|h| !h.is_empty()))
        .flat_map(|h| [h.clone(), format!("{h}:*")])
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    // A canary's own route annotations do not apply (it takes the main route's, as in Higress).
    for s in served.iter().filter(|s| s.annotations.canary.is_none()) {
        let Some(ranges) = &s.annotations.whitelist else {
            continue;
        };
        for rule in s.spec.rules.iter().flatten() {
            let host = rule.host.clone().filter(|h| !h.is_empty());
            let (hosts, not_hosts) = match host {
                Some(h) => (vec![h.clone(), format!("{h}:*")], Vec::new()),
                None => (Vec::new(), named.clone()),
            };
            let paths: Option<Vec<String>> = rule
                .http
                .iter()
                .flat_map(|h| &h.paths)
                .map(|p| policy_paths(path_of(p), &p.path_type, &s.annotations))
                .collect::<Option<Vec<Vec<String>>>>()
                .map(|p| p.into_iter().flatten().collect());
            rules.push(Rule {
                from: Some(vec![From {
                    source: Some(Source {
                        not_remote_ip_blocks: ranges.clone(),
                        ..Source::default()
                    }),
                }]),
                to: Some(vec![To {
                    operation: Some(Operation {
                        hosts,
                        not_hosts,
                        paths: paths.unwrap_or_default(),
                        ..Operation::default()
                    }),
                }]),
                when: Vec::new(),
            });
        }
    }
    if rules.is_empty() {
        return Vec::new();
    }
    vec![ConfigObject {
        api_version: Kind::AuthorizationPolicy.api_version(),
        metadata: meta(namespace, format!("{SYNTHESIZED}whitelist")),
        spec: Spec::AuthorizationPolicy(AuthorizationPolicy {
            selector: Some(TypeWorkloadSelector {
                match_labels: cx.options.gateway_selector.clone(),
            }),
            rules,
            action: Action::Deny,
            ..AuthorizationPolicy::default()
        }),
    }]
}
