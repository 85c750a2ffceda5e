//! Which gateways an Istio object applies to (pure): takes a snapshot, one of its objects and a gateway [`Proxy`],
//! says whether translating that proxy's config reads the object, by the rules the translator itself uses: a
//! Gateway by its `selector`; a VirtualService through the Gateways its `gateways:` bind (a delegate through the
//! VirtualServices that delegate to it); policies (AuthorizationPolicy, RequestAuthentication, Telemetry) by
//! [`Proxy::attaches`]; EnvoyFilters as [`envoy_filter`](super::envoy_filter) selects them; DestinationRules and
//! ServiceEntries shape every gateway's clusters. The Istio status of an object counts these gateways
//! (`Reconciled`: served by every connected gateway that selects it).

use crate::envoy_filter;
use crate::Proxy;
use admitpilot_model::istio::types::target_refs;
use admitpilot_model::{ConfigObject, Kind, ObjectKey, Snapshot, Spec};

/// Whether `object` (of `snapshot`) shapes the config of `proxy`.
pub fn selects(snapshot: &Snapshot, object: &ConfigObject, proxy: &Proxy) -> bool {
    let namespace = object.metadata.namespace.as_str();
    let root = snapshot.mesh_settings().root_namespace().to_string();
    match &object.spec {
        Spec::Gateway(gateway) => proxy.has_labels(&gateway.selector),
        Spec::VirtualService(vs) => {
            binds_selecting_gateway(snapshot, &vs.gateways, namespace, proxy)
                || delegated_by_selected(snapshot, object, proxy)
        }
        Spec::AuthorizationPolicy(policy) => proxy.attaches(
            namespace,
            policy.selector.as_ref().map(|s| &s.match_labels),
            target_refs(policy.target_ref.as_ref(), &policy.target_refs),
            &root,
        ),
        Spec::RequestAuthentication(ra) => proxy.attaches(
            namespace,
            ra.selector.as_ref().map(|s| &s.match_labels),
            target_refs(ra.target_ref.as_ref(), &ra.target_refs),
            &root,
        ),
        Spec::Telemetry(telemetry) => proxy.attaches(
            namespace,
            telemetry.selector.as_ref().map(|s| &s.match_labels),
            target_refs(telemetry.target_ref.as_ref(), &telemetry.target_refs),
            &root,
        ),
        Spec::EnvoyFilter(filter) => {
            envoy_filter::selects(object, filter, namespace == root, proxy)
        }
        Spec::DestinationRule(_) | Spec::ServiceEntry(_) => true,
        _ => false,
    }
}

/// Whether a `gateways:` list (entries `ns/name`, or `name` in `namespace`) names a Gateway selecting `proxy`.
fn binds_selecting_gateway(
    snapshot: &Snapshot,
    entries: &[String],
    namespace: &str,
    proxy: &Proxy,
) -> bool {
    entries.iter().any(|entry| {
        let (ns, name) = entry.split_once('/').unwrap_or((namespace, entry));
        snapshot
            .get(&ObjectKey::new(Kind::Gateway, ns, name))
            .is_some_and(|gateway| selects(snapshot, gateway, proxy))
    })
}

/// Whether a VirtualService bound to a Gateway selecting `proxy` delegates to `delegate`.
fn delegated_by_selected(snapshot: &Snapshot, delegate: &ConfigObject, proxy: &Proxy) -> bool {
    snapshot.of_kind(Kind::VirtualService).any(|root| {
        let Spec::VirtualService(vs) = &root.spec else {
            return false;
        };
        vs.http.iter().filter_map(|r| r.delegate.as_ref()).any(|d| {
            d.name == delegate.metadata.name
                && (if d.namespace.is_empty() {
                    &root.metadata.namespace
                } else {
                    &d.namespace
                }) == &delegate.metadata.namespace
        }) && binds_selecting_gateway(snapshot, &vs.gateways, &root.metadata.namespace, proxy)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use admitpilot_model::snapshot::snapshot_from_yaml as snapshot;

    fn proxy(namespace: &str, labels: &[(&str, &str)]) -> Proxy {
        Proxy {
            namespace: namespace.into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Proxy::default()
        }
    }

    #[test]
    fn objects_select_the_gateways_whose_config_they_shape() {
        let config = snapshot(
            r#"
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: edge, namespace: infra}
spec:
  selector: {istio: edge}
  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ["*"]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: root, namespace: apps}
spec:
  hosts: [a.example.com]
  gateways: [infra/edge]
  http: [{delegate: {name: child}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: child, namespace: apps}
spec:
  http: [{route: [{destination: {host: a}}]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: mesh-only, namespace: apps}
spec:
  hosts: [b]
  http: [{route: [{destination: {host: b}}]}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: deny, namespace: infra}
spec:
  selector: {matchLabels: {istio: other}}
  action: DENY
  rules: [{}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: dr, namespace: apps}
spec: {host: a}
"#,
        );
        let edge = proxy("infra", &[("istio", "edge")]);
        let other = proxy("infra", &[("istio", "other")]);
        let selects = |kind, ns, name, proxy: &Proxy| {
            selects(
                &config,
                &config.objects[&ObjectKey::new(kind, ns, name)],
                proxy,
            )
        };
        assert!(selects(Kind::Gateway, "infra", "edge", &edge));
        assert!(!selects(Kind::Gateway, "infra", "edge", &other));
        assert!(selects(Kind::VirtualService, "apps", "root", &edge));
        assert!(selects(Kind::VirtualService, "apps", "child", &edge));
        assert!(!selects(Kind::VirtualService, "apps", "child", &other));
        assert!(!selects(Kind::VirtualService, "apps", "mesh-only", &edge));
        assert!(!selects(Kind::AuthorizationPolicy, "infra", "deny", &edge));
        assert!(selects(Kind::AuthorizationPolicy, "infra", "deny", &other));
        assert!(selects(Kind::DestinationRule, "apps", "dr", &other));
    }
}
