//! Gateway API reference warnings (pure): takes the config a Gateway API object joins and the object, yields what
//! it names that the config lacks or does not allow, as [`Reference`]s with code [`GATEWAY_API_REFERENCE`].
//! These are always warnings, never denials (objects arrive in any order; the spec reports them as status
//! conditions, `Accepted`/`ResolvedRefs`): a parent Gateway that does not exist, a parent whose listeners do not
//! admit the route (section, port, kind, namespace, host names, as [`attachment`] decides for translation), a
//! backend that is not a Service, a Service or port that does not exist, a reference into another namespace no
//! ReferenceGrant allows, a Gateway whose GatewayClass or certificate Secret is missing, and listeners that
//! conflict on one port.

use crate::references::Reference;
use admitpilot_model::gateway_api::attachment::{parent_verdict, Owner, ParentVerdict};
use admitpilot_model::gateway_api::common::{BackendRef, ParentReference};
use admitpilot_model::gateway_api::listener_set;
use admitpilot_model::gateway_api::reference_grant::granted;
use admitpilot_model::gateway_api::{Gateway, GROUP};
use admitpilot_model::service::infer_protocol;
use admitpilot_model::{ConfigObject, Kind, ObjectKey, Snapshot, Spec};

/// The code of Gateway API reference findings (no Istio analyzer code fits; they never deny).
pub const GATEWAY_API_REFERENCE: &str = "GWAPI-REF";

/// What a route names: parents, host names and each rule's backends.
type RouteRefs<'a> = (&'a [ParentReference], &'a [String], Vec<&'a [BackendRef]>);

/// The backendRefs of each of a route's `rules`.
fn per_rule<'a, R>(
    rules: &'a [R],
    refs: impl Fn(&'a R) -> &'a Vec<BackendRef>,
) -> Vec<&'a [BackendRef]> {
    rules.iter().map(|rule| refs(rule).as_slice()).collect()
}

fn warn(out: &mut Vec<Reference>, field: String, message: String) {
    out.push(Reference {
        code: GATEWAY_API_REFERENCE,
        field,
        message,
    });
}

/// The reference warnings of a Gateway API `object` within `config`.
pub fn check(config: &Snapshot, object: &ConfigObject, out: &mut Vec<Reference>) {
    let namespace = object.metadata.namespace.as_str();
    let kind = object.kind().info().kind;
    let route: Option<RouteRefs<'_>> = match &object.spec {
        Spec::HttpRoute(r) => Some((
            &r.parent_refs,
            &r.hostnames,
            per_rule(&r.rules, |x| &x.backend_refs),
        )),
        Spec::GrpcRoute(r) => Some((
            &r.parent_refs,
            &r.hostnames,
            per_rule(&r.rules, |x| &x.backend_refs),
        )),
        Spec::TlsRoute(r) | Spec::TcpRoute(r) => Some((
            &r.parent_refs,
            &r.hostnames,
            per_rule(&r.rules, |x| &x.backend_refs),
        )),
        _ => None,
    };
    if let Some((parents, hostnames, rules)) = route {
        route_refs(config, (kind, namespace), parents, hostnames, out);
        for (i, refs) in rules.into_iter().enumerate() {
            backends(
                config,
                (kind, namespace),
                refs,
                &format!("spec.rules[{i}]"),
                out,
            );
        }
        return;
    }
    match &object.spec {
        Spec::KubernetesGateway(gateway) => gateway_refs(config, namespace, gateway, out),
        Spec::ListenerSet(set) => {
            let parent = &set.parent_ref;
            let key = set.gateway_key(namespace);
            let parent_namespace = key.namespace.as_str();
            match config.get(&key).map(|g| &g.spec) {
                Some(Spec::KubernetesGateway(gateway)) => {
                    if !listener_set::admitted(config, gateway, parent_namespace, namespace) {
                        warn(
                            out,
                            "spec.parentRef".into(),
                            format!(
                                "Gateway {parent_namespace}/{} does not allow ListenerSets from namespace \
                                 {namespace:?} (its spec.allowedListeners): these listeners are not served",
                                parent.name
                            ),
                        );
                    }
                }
                _ => warn(
                    out,
                    "spec.parentRef".into(),
                    format!("Gateway {parent_namespace}/{} does not exist", parent.name),
                ),
            }
        }
        Spec::BackendTlsPolicy(policy) => backend_tls_refs(config, namespace, policy, out),
        _ => {}
    }
}

/// A BackendTLSPolicy's targets (a Service, and the port its `sectionName` names) and CA reference (a core
/// ConfigMap with `ca.crt`, the first one only): what does not resolve leaves the backend without traffic
/// (`translate::gateway_api::backend_tls`).
fn backend_tls_refs(
    config: &Snapshot,
    namespace: &str,
    policy: &admitpilot_model::gateway_api::BackendTlsPolicy,
    out: &mut Vec<Reference>,
) {
    for (i, target) in policy.target_refs.iter().enumerate() {
        if !target.group.is_empty() || target.kind != "Service" {
            continue;
        }
        let key = ObjectKey::new(Kind::Service, namespace, target.name.clone());
        let Some(service) = config.get(&key) else {
            warn(
                out,
                format!("spec.targetRefs[{i}]"),
                format!("Service {namespace}/{} does not exist", target.name),
            );
            continue;
        };
        let Spec::Service(spec) = &service.spec else {
            continue;
        };
        if let Some(section) = &target.section_name {
            let named = spec
                .ports
                .iter()
                .flatten()
                .any(|p| p.name.as_deref() == Some(section.as_str()));
            if !named {
                warn(
                    out,
                    format!("spec.targetRefs[{i}].sectionName"),
                    format!(
                        "Service {namespace}/{} has no port named {section:?}: the policy applies to no port",
                        target.name
                    ),
                );
            }
        }
    }
    let refs = &policy.validation.ca_certificate_refs;
    if let Some(first) = refs.first() {
        let field = "spec.validation.caCertificateRefs[0]".to_string();
        if !first.group.is_empty() || first.kind != "ConfigMap" {
            warn(
                out,
                field,
                format!(
                    "admitpilot reads CA certificates from core ConfigMaps only, not {}: the backends of this \
                     policy get no traffic",
                    first.kind
                ),
            );
        } else if config
            .get(&ObjectKey::new(
                Kind::ReferencedConfigMap,
                namespace,
                first.name.clone(),
            ))
            .is_none()
        {
            warn(
                out,
                field,
                format!(
                    "ConfigMap {namespace}/{} with a ca.crt key does not exist: the backends of this policy get \
                     no traffic until it does",
                    first.name
                ),
            );
        }
    }
    if refs.len() > 1 {
        warn(
            out,
            "spec.validation.caCertificateRefs".into(),
            "only the first CA certificate reference is used".into(),
        );
    }
}

/// Whether the ListenerSet `set` of `namespace` is attached: its Gateway exists and admits it.
fn listener_set_attached(
    config: &Snapshot,
    namespace: &str,
    set: &admitpilot_model::gateway_api::ListenerSet,
) -> bool {
    let key = set.gateway_key(namespace);
    match config.get(&key).map(|g| &g.spec) {
        Some(Spec::KubernetesGateway(gateway)) => {
            listener_set::admitted(config, gateway, &key.namespace, namespace)
        }
        _ => false,
    }
}

fn route_refs(
    config: &Snapshot,
    (kind, namespace): (&str, &str),
    parents: &[ParentReference],
    hostnames: &[String],
    out: &mut Vec<Reference>,
) {
    for (i, parent) in parents.iter().enumerate() {
        let (owner_kind, kind_name) = match (parent.group() == GROUP, parent.kind()) {
            (true, "Gateway") => (Kind::KubernetesGateway, "Gateway"),
            (true, "ListenerSet") => (Kind::ListenerSet, "ListenerSet"),
            _ => continue,
        };
        let field = format!("spec.parentRefs[{i}]");
        let gateway_namespace = parent.namespace_or(namespace);
        let key = ObjectKey::new(owner_kind, gateway_namespace, parent.name.clone());
        let found = config.get(&key);
        let listeners = match found.map(|o| &o.spec) {
            Some(Spec::KubernetesGateway(gateway)) => &gateway.listeners,
            Some(Spec::ListenerSet(set)) => {
                if !listener_set_attached(config, gateway_namespace, set) {
                    warn(
                        out,
                        field,
                        format!(
                            "ListenerSet {gateway_namespace}/{} is not attached to its Gateway (missing, or its \
                             spec.allowedListeners does not admit the set's namespace): the route is not served \
                             there",
                            parent.name
                        ),
                    );
                    continue;
                }
                &set.listeners
            }
            _ => {
                warn(
                    out,
                    field,
                    format!(
                        "{} {gateway_namespace}/{} does not exist: the route is not served",
                        parent.kind(),
                        parent.name
                    ),
                );
                continue;
            }
        };
        let owner = Owner {
            kind: kind_name,
            namespace: gateway_namespace,
            name: &parent.name,
        };
        let verdict = parent_verdict(
            config,
            listeners,
            parent,
            (kind, namespace),
            owner,
            hostnames,
        );
        let message = match verdict {
            ParentVerdict::Attached => None,
            ParentVerdict::NoMatchingParent => Some(format!(
                "names no listener of the {} (sectionName/port)",
                parent.kind()
            )),
            ParentVerdict::NotAllowedByListeners => Some(format!(
                "no listener it names admits {kind}s from namespace {namespace:?} (allowedRoutes: kinds, \
                 namespaces; a namespace Selector is matched against the Namespace's labels)"
            )),
            ParentVerdict::NoMatchingListenerHostname => Some(
                "no listener it names has a hostname that intersects the route's hostnames".to_string(),
            ),
        };
        if let Some(why) = message {
            warn(
                out,
                field,
                format!(
                    "{} {gateway_namespace}/{}: {why}; the route is not served there",
                    parent.kind(),
                    parent.name
                ),
            );
        }
    }
}

fn backends(
    config: &Snapshot,
    (kind, namespace): (&str, &str),
    refs: &[BackendRef],
    at: &str,
    out: &mut Vec<Reference>,
) {
    for (j, backend) in refs.iter().enumerate() {
        let field = format!("{at}.backendRefs[{j}]");
        if !backend.is_service() {
            warn(
                out,
                field,
                format!(
                    "backend kind {}/{} is not supported (only core Services): requests for it get 500",
                    backend.group(),
                    backend.kind()
                ),
            );
            continue;
        }
        let target = backend.namespace_or(namespace);
        if target != namespace
            && !granted(
                config,
                (kind, namespace),
                ("", "Service", target, &backend.name),
            )
        {
            warn(
                out,
                field,
                format!(
                    "Service {target}/{} is in another namespace and no ReferenceGrant there allows {kind}s from \
                     {namespace:?}: requests for it get 500",
                    backend.name
                ),
            );
            continue;
        }
        let key = ObjectKey::new(Kind::Service, target, backend.name.clone());
        let Some(Spec::Service(service)) = config.get(&key).map(|s| &s.spec) else {
            warn(
                out,
                field,
                format!(
                    "Service {target}/{} does not exist: requests for it get 500",
                    backend.name
                ),
            );
            continue;
        };
        if let Some(port) = backend.port {
            let found = service
                .ports
                .iter()
                .flatten()
                .find(|p| u32::try_from(p.port).ok() == Some(port));
            match found {
                None => warn(
                    out,
                    format!("{field}.port"),
                    format!(
                        "Service {target}/{} has no port {port}: requests for it get 500",
                        backend.name
                    ),
                ),
                // gRPC needs HTTP/2 to the backend; the gateway speaks what the port says (as Istio's do).
                Some(p)
                    if kind == "GRPCRoute"
                        && !matches!(
                            infer_protocol(
                                &p.name.clone().unwrap_or_default(),
                                p.app_protocol.as_deref()
                            )
                            .as_str(),
                            "GRPC" | "HTTP2"
                        ) =>
                {
                    warn(
                        out,
                        format!("{field}.port"),
                        format!(
                            "port {port} of Service {target}/{} does not say it speaks HTTP/2 (appProtocol \
                             kubernetes.io/h2c or grpc, or a name starting grpc- or http2-): the gateway calls it \
                             over HTTP/1.1 and gRPC calls fail",
                            backend.name
                        ),
                    );
                }
                Some(_) => {}
            }
        }
    }
}

/// Protocols that may share a port (the spec's listener compatibility: HTTP with HTTP; HTTPS and TLS together).
fn compatible(a: &str, b: &str) -> bool {
    let group = |p: &str| match p {
        "HTTP" => 0,
        "HTTPS" | "TLS" => 1,
        "TCP" => 2,
        "UDP" => 3,
        _ => 4,
    };
    group(a) == group(b)
}

fn gateway_refs(config: &Snapshot, namespace: &str, gateway: &Gateway, out: &mut Vec<Reference>) {
    let class = ObjectKey::new(Kind::GatewayClass, "", gateway.gateway_class_name.clone());
    if config.get(&class).is_none() {
        warn(
            out,
            "spec.gatewayClassName".into(),
            format!(
                "GatewayClass {:?} does not exist: the Gateway is not served",
                gateway.gateway_class_name
            ),
        );
    }
    for (i, listener) in gateway.listeners.iter().enumerate() {
        if let Some(other) = gateway.listeners[..i]
            .iter()
            .find(|o| o.port == listener.port && !compatible(&o.protocol, &listener.protocol))
        {
            warn(
                out,
                format!("spec.listeners[{i}]"),
                format!(
                    "conflicts with listener {:?}: {} and {} cannot share port {}",
                    other.name, other.protocol, listener.protocol, listener.port
                ),
            );
        }
        let Some(tls) = &listener.tls else { continue };
        for (j, cert) in tls.certificates().iter().enumerate() {
            let field = format!("spec.listeners[{i}].tls.certificateRefs[{j}]");
            let target = cert
                .namespace
                .as_deref()
                .filter(|n| !n.is_empty())
                .unwrap_or(namespace);
            if target != namespace
                && !granted(
                    config,
                    ("Gateway", namespace),
                    ("", "Secret", target, &cert.name),
                )
            {
                warn(
                    out,
                    field,
                    format!("Secret {target}/{} is in another namespace and no ReferenceGrant there allows it", cert.name),
                );
                continue;
            }
            if config
                .get(&ObjectKey::new(Kind::Secret, target, cert.name.clone()))
                .is_none()
            {
                warn(
                    out,
                    field,
                    format!(
                        "Secret {target}/{} does not exist: the listener is not served",
                        cert.name
                    ),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use admitpilot_model::snapshot::snapshot_from_yaml;

    #[test]
    fn a_grpc_backend_port_must_say_it_speaks_http2() {
        let config = snapshot_from_yaml(
            "apiVersion: v1
kind: Service
metadata: {name: plain, namespace: default}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: h2c, namespace: default}
spec: {ports: [{name: web, port: 80, appProtocol: kubernetes.io/h2c}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: echo, namespace: default}
spec:
  rules:
  - backendRefs: [{name: plain, port: 80}]
  - backendRefs: [{name: h2c, port: 80}]
",
        );
        let route = &config.objects[&ObjectKey::new(Kind::GrpcRoute, "default", "echo")];
        let mut out = Vec::new();
        check(&config, route, &mut out);
        let fields: Vec<&str> = out
            .iter()
            .filter(|r| r.message.contains("HTTP/2"))
            .map(|r| r.field.as_str())
            .collect();
        assert_eq!(fields, ["spec.rules[0].backendRefs[0].port"], "{out:?}");
    }

    #[test]
    fn backend_tls_policies_name_what_does_not_resolve() {
        let config = snapshot_from_yaml(
            "apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec: {ports: [{name: https, port: 443}]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: ca, namespace: default}
data: {ca.crt: pem}
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: good, namespace: default}
spec:
  targetRefs: [{group: '', kind: Service, name: web, sectionName: https}]
  validation: {caCertificateRefs: [{group: '', kind: ConfigMap, name: ca}], hostname: web.example}
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: bad, namespace: default}
spec:
  targetRefs:
  - {group: '', kind: Service, name: web, sectionName: admin}
  - {group: '', kind: Service, name: gone}
  validation: {caCertificateRefs: [{group: '', kind: ConfigMap, name: missing}], hostname: web.example}
",
        );
        let fields = |name: &str| {
            let policy = &config.objects[&ObjectKey::new(Kind::BackendTlsPolicy, "default", name)];
            let mut out = Vec::new();
            check(&config, policy, &mut out);
            out.into_iter().map(|r| r.field).collect::<Vec<_>>()
        };
        assert!(fields("good").is_empty());
        assert_eq!(
            fields("bad"),
            [
                "spec.targetRefs[0].sectionName",
                "spec.targetRefs[1]",
                "spec.validation.caCertificateRefs[0]"
            ]
        );
    }
}
