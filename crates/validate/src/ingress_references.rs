//! Ingress references (pure): takes the config and an Ingress, yields IST0101 findings for what it names that the
//! config does not have: a backend Service (the path answers 503, or goes to the `default-backend`), a Service
//! port name (Higress drops the path: `PortNameResolveError`), a TLS Secret (HTTPS is not served for its hosts),
//! the Services `default-backend` and `mirror-target-service` name (Higress then ignores them), and, for a canary
//! Ingress, the main Ingress with the same host and path (Higress drops the canary path).

use k8s_openapi::api::networking::v1::{IngressBackend, IngressSpec};

use super::references::{Reference, REFERENCED_RESOURCE_NOT_FOUND};
use std::collections::HashSet;

use admitpilot_model::ingress::annotations::{self, ServiceRef};
use admitpilot_model::ingress::{host_of, path_of};
use admitpilot_model::{ConfigObject, Kind, ObjectKey, Snapshot, Spec};

/// An IST0101 finding.
fn finding(field: String, message: String) -> Reference {
    Reference {
        code: REFERENCED_RESOURCE_NOT_FOUND,
        field,
        message,
    }
}

/// The Service `namespace/name`, if the config has it.
fn service<'a>(
    config: &'a Snapshot,
    namespace: &str,
    name: &str,
) -> Option<&'a admitpilot_model::service::Service> {
    match &config
        .get(&ObjectKey::new(Kind::Service, namespace, name))?
        .spec
    {
        Spec::Service(s) => Some(s),
        _ => None,
    }
}

/// The findings of one backend at `field`.
fn backend(
    config: &Snapshot,
    namespace: &str,
    b: &IngressBackend,
    field: &str,
    fallback: bool,
    out: &mut Vec<Reference>,
) {
    let Some(s) = &b.service else {
        return;
    };
    let Some(found) = service(config, namespace, &s.name) else {
        let then = if fallback {
            "its requests go to the default-backend"
        } else {
            "its requests get 503"
        };
        out.push(finding(
            format!("{field}.service.name"),
            format!(
                "Referenced Service not found: \"{namespace}/{}\" ({then})",
                s.name
            ),
        ));
        return;
    };
    if let Some(port) = s.port.as_ref().and_then(|p| p.name.as_deref()) {
        let has = found
            .ports
            .iter()
            .flatten()
            .any(|p| p.name.as_deref() == Some(port));
        if !has {
            out.push(finding(
                format!("{field}.service.port.name"),
                format!(
                    "Referenced Service port not found: \"{namespace}/{}:{port}\" (the path is not served)",
                    s.name
                ),
            ));
        }
    }
}

/// The findings of an annotation naming a Service.
fn annotated(
    config: &Snapshot,
    namespace: &str,
    key: &str,
    r: &ServiceRef,
    out: &mut Vec<Reference>,
) {
    let namespace = r.namespace.as_deref().unwrap_or(namespace);
    if service(config, namespace, &r.name).is_none() {
        out.push(finding(
            format!("metadata.annotations[{key}]"),
            format!(
                "Referenced Service not found: \"{namespace}/{}\" (the annotation is ignored)",
                r.name
            ),
        ));
    }
}

/// The full key an annotation is set under (nginx first), for field paths.
fn key_of(object: &ConfigObject, name: &str) -> String {
    [annotations::NGINX, annotations::HIGRESS]
        .iter()
        .map(|p| format!("{p}{name}"))
        .find(|k| object.metadata.annotations.contains_key(k))
        .unwrap_or_else(|| format!("{}{name}", annotations::NGINX))
}

/// The (host, path) pairs the Ingresses other than `object` that are not canaries serve.
fn main_paths<'a>(config: &'a Snapshot, object: &ConfigObject) -> HashSet<(&'a str, &'a str)> {
    config
        .of_kind(Kind::Ingress)
        .filter(|o| o.key() != object.key() && !annotations::is_canary(&o.metadata.annotations))
        .filter_map(|o| match &o.spec {
            Spec::Ingress(spec) => Some(spec),
            _ => None,
        })
        .flat_map(|spec| spec.rules.iter().flatten())
        .flat_map(|r| {
            r.http
                .iter()
                .flat_map(|h| &h.paths)
                .map(move |p| (host_of(r.host.as_deref()), path_of(p)))
        })
        .collect()
}

/// The reference findings of an Ingress.
pub fn check(
    config: &Snapshot,
    object: &ConfigObject,
    spec: &IngressSpec,
    out: &mut Vec<Reference>,
) {
    let namespace = object.metadata.namespace.as_str();
    let a = annotations::parse(&object.metadata.annotations).annotations;
    let fallback = a.default_backend.is_some();
    let mains = a.canary.as_ref().map(|_| main_paths(config, object));
    for (i, rule) in spec.rules.iter().flatten().enumerate() {
        for (j, path) in rule.http.iter().flat_map(|h| &h.paths).enumerate() {
            let field = format!("spec.rules[{i}].http.paths[{j}].backend");
            backend(config, namespace, &path.backend, &field, fallback, out);
            let host = host_of(rule.host.as_deref());
            let value = path_of(path);
            if mains.as_ref().is_some_and(|m| !m.contains(&(host, value))) {
                out.push(finding(
                    format!("spec.rules[{i}].http.paths[{j}].path"),
                    format!(
                        "Referenced main Ingress not found: no Ingress serves host {host:?} path {value:?} (the \
                         canary takes no traffic)"
                    ),
                ));
            }
        }
    }
    if let Some(b) = &spec.default_backend {
        backend(config, namespace, b, "spec.defaultBackend", fallback, out);
    }
    for (i, tls) in spec.tls.iter().flatten().enumerate() {
        let Some(secret) = tls.secret_name.as_deref() else {
            continue;
        };
        if config
            .get(&ObjectKey::new(Kind::Secret, namespace, secret))
            .is_none()
        {
            out.push(finding(
                format!("spec.tls[{i}].secretName"),
                format!("Referenced Secret not found: \"{namespace}/{secret}\" (HTTPS is not served for its hosts)"),
            ));
        }
    }
    if let Some(r) = &a.default_backend {
        annotated(
            config,
            namespace,
            &key_of(object, "default-backend"),
            r,
            out,
        );
    }
    if let Some(m) = &a.mirror {
        annotated(
            config,
            namespace,
            &key_of(object, "mirror-target-service"),
            &m.service,
            out,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use admitpilot_model::snapshot::snapshot_from_yaml;

    #[test]
    fn missing_services_secrets_and_main_ingresses_are_reported() {
        let config = snapshot_from_yaml(
            r#"
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: canary
  namespace: default
  annotations: {nginx.ingress.kubernetes.io/canary: "true", nginx.ingress.kubernetes.io/mirror-target-service: gone}
spec:
  tls: [{hosts: [a.example], secretName: cert}]
  rules:
  - host: a.example
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {name: grpc}}}}
      - {path: /x, pathType: Prefix, backend: {service: {name: nowhere, port: {number: 80}}}}
"#,
        );
        let object = config
            .get(&ObjectKey::new(Kind::Ingress, "default", "canary"))
            .expect("the Ingress");
        let Spec::Ingress(spec) = &object.spec else {
            panic!("not an Ingress");
        };
        let mut out = Vec::new();
        check(&config, object, spec, &mut out);
        let fields: Vec<&str> = out.iter().map(|r| r.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.rules[0].http.paths[0].backend.service.port.name",
                "spec.rules[0].http.paths[0].path",
                "spec.rules[0].http.paths[1].backend.service.name",
                "spec.rules[0].http.paths[1].path",
                "spec.tls[0].secretName",
                "metadata.annotations[nginx.ingress.kubernetes.io/mirror-target-service]",
            ]
        );
        assert!(
            out[2]
                .message
                .contains("\"default/nowhere\" (its requests get 503)"),
            "{}",
            out[2].message
        );
    }
}
