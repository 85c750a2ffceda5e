//! Ingress as Istio config (pure): takes a snapshot and one proxy, yields the Istio objects Higress's ingress
//! controller makes of the Ingresses that proxy serves (`pkg/ingress/kube/ingressv1/controller.go` and
//! `pkg/ingress/config/ingress_config.go`), so the rest of the translator serves them like any Istio config: the
//! effect check, the push guard, `/debug/configz`, `analyze` and the MCP feed cover Ingress through the one
//! pipeline.
//!
//! A proxy whose labels carry the Ingress gateway selector serves the Ingresses of admitpilot's class
//! (`model::ingress`), oldest first. Each host gets an Istio Gateway `ingress~<host>` (HTTP on the HTTP port,
//! HTTPS on the HTTPS port when a TLS entry of the oldest Ingress naming the host gives a Secret) and a
//! VirtualService `ingress~<host>` with the routes of every path for that host in Higress's order ([`routes`]);
//! canary Ingresses join the route of their main Ingress; `spec.defaultBackend` is a catch-all at the end. Backend
//! settings become DestinationRules and `whitelist-source-range` an AuthorizationPolicy ([`policies`]).

pub mod policies;
pub mod routes;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::networking::v1::{IngressBackend, IngressSpec};
use serde_json::{json, Value};

use crate::synthesized::Synthesized;
use crate::types::{Options, Proxy};
use admitpilot_model::ingress::annotations::{self, Annotations, Canary, ServiceRef};
use admitpilot_model::ingress::{self as ingress_model, IngressOptions};
use admitpilot_model::istio::gateway::{Gateway, Port, Server, ServerTlsMode, ServerTlsSettings};
use admitpilot_model::istio::VirtualService;
use admitpilot_model::{ConfigObject, Kind, ObjectKey, ObjectMeta, Snapshot, Spec};
use routes::{PathInput, PathRoute};

/// Prefix of the names of every object synthesized from Ingresses.
pub const SYNTHESIZED: &str = "ingress~";

/// Prefix of the credential of an Ingress TLS Secret (`kubernetes-ingress://<namespace>/<name>`). Only a proxy that
/// serves an Ingress in that namespace naming that Secret gets it.
pub use crate::naming::INGRESS_CREDENTIAL_PREFIX as CREDENTIAL_PREFIX;

/// The namespace and name of a `kubernetes-ingress://<ns>/<name>` credential; `None` for any other.
pub fn parse_credential(credential: &str) -> Option<(&str, &str)> {
    credential.strip_prefix(CREDENTIAL_PREFIX)?.split_once('/')
}

/// What the previous call synthesized, so that a call converts again only what changed: the objects by key (to hand
/// back the same `Arc` for an equal object; the translator's per-object caches compare by address), each Ingress's
/// parsed annotations, and per host the Ingresses it was built from (compared by address) with what it became.
#[derive(Debug, Default)]
pub struct Converted {
    previous: Synthesized,
    /// Parsed annotations by the Ingress object's address (the `Arc` held keeps the address from being reused).
    annotations: HashMap<usize, (Arc<ConfigObject>, Arc<Annotations>)>,
    hosts: HashMap<String, BuiltHost>,
    /// The Services and EndpointSlices the hosts were built from (backends resolve against them).
    services: Vec<Arc<ConfigObject>>,
    /// The TLS Secrets (namespace, name) the served Ingresses name, which the proxy may read.
    pub secrets: BTreeSet<(String, String)>,
}

/// One host as the previous call built it.
#[derive(Debug)]
struct BuiltHost {
    /// The Ingresses that contributed, in order.
    inputs: Vec<Arc<ConfigObject>>,
    /// Its Gateway and VirtualService.
    objects: Vec<Arc<ConfigObject>>,
    /// Its TLS Secret.
    tls: Option<(String, String)>,
}

/// Whether two lists hold the same objects (by address).
fn same(a: &[Arc<ConfigObject>], b: &[Arc<ConfigObject>]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| Arc::ptr_eq(x, y))
}

impl Converted {
    /// The snapshot with the Istio objects of the Ingresses `proxy` serves added; `None` when there are none (now
    /// and before).
    pub fn apply(
        &mut self,
        snapshot: &Snapshot,
        proxy: &Proxy,
        options: &Options,
    ) -> Option<Snapshot> {
        let objects = self.synthesize(snapshot, proxy, options);
        self.previous.merge(snapshot, objects)
    }

    /// The parsed annotations of an Ingress: the previous call's (`previous`, by the object's address) when the
    /// Ingress is the same object, else parsed now; kept in `self.annotations` for the next call.
    fn annotations_of(
        &mut self,
        previous: &mut HashMap<usize, (Arc<ConfigObject>, Arc<Annotations>)>,
        object: &Arc<ConfigObject>,
    ) -> Arc<Annotations> {
        let address = Arc::as_ptr(object) as usize;
        let parsed = match previous.remove(&address) {
            Some((_, parsed)) => parsed,
            None => Arc::new(annotations::parse(&object.metadata.annotations).annotations),
        };
        self.annotations
            .insert(address, (Arc::clone(object), Arc::clone(&parsed)));
        parsed
    }

    /// The Istio objects of the Ingresses `proxy` serves; hosts whose Ingresses, Services and EndpointSlices are
    /// the previous call's are not converted again.
    fn synthesize(
        &mut self,
        snapshot: &Snapshot,
        proxy: &Proxy,
        options: &Options,
    ) -> Vec<Arc<ConfigObject>> {
        let ingress = &options.ingress;
        if !proxy.has_labels(&ingress.gateway_selector) {
            self.hosts.clear();
            self.secrets.clear();
            return Vec::new();
        }
        let cx = Context {
            snapshot,
            options: ingress,
            domain_suffix: &options.domain_suffix,
        };
        let listed = ingress_model::served(snapshot, ingress);
        let mut previous = std::mem::take(&mut self.annotations);
        let served: Vec<Served<'_>> = listed
            .into_iter()
            .map(|(object, spec)| Served {
                object,
                spec,
                annotations: self.annotations_of(&mut previous, object),
            })
            .collect();
        let services: Vec<Arc<ConfigObject>> = snapshot
            .of_kind(Kind::Service)
            .chain(snapshot.of_kind(Kind::EndpointSlice))
            .cloned()
            .collect();
        let services_same = same(&services, &self.services);
        self.services = services;
        let inputs = host_inputs(&served);
        let dirty: BTreeSet<String> = inputs
            .iter()
            .filter(|(host, list)| {
                !services_same
                    || !self
                        .hosts
                        .get(host.as_str())
                        .is_some_and(|built| same(&built.inputs, list))
            })
            .map(|(host, _)| host.clone())
            .collect();
        let mut hosts: BTreeMap<String, Host> = BTreeMap::new();
        for s in served.iter().filter(|s| s.annotations.canary.is_none()) {
            add_rules(&cx, s, &mut hosts, &dirty);
        }
        for s in served.iter().filter(|s| s.annotations.canary.is_some()) {
            add_canary(&cx, s, &mut hosts, &dirty);
        }
        for s in served.iter().filter(|s| s.annotations.canary.is_none()) {
            add_default_backend(&cx, s, &mut hosts, &dirty);
        }
        let namespace = proxy.namespace.as_str();
        let mut built = HashMap::new();
        for (host, list) in inputs {
            let entry = match hosts.remove(&host) {
                Some(h) => {
                    let tls = h.tls.clone();
                    BuiltHost {
                        inputs: list,
                        objects: host_objects(&cx, namespace, &host, h)
                            .into_iter()
                            .map(Arc::new)
                            .collect(),
                        tls,
                    }
                }
                // A changed host that yields nothing (a canary whose main Ingress went) is gone.
                None if dirty.contains(&host) => continue,
                None => match self.hosts.remove(&host) {
                    Some(previous) => previous,
                    None => continue,
                },
            };
            built.insert(host, entry);
        }
        self.hosts = built;
        self.secrets = self.hosts.values().filter_map(|h| h.tls.clone()).collect();
        let mut objects: Vec<Arc<ConfigObject>> = self
            .hosts
            .values()
            .flat_map(|h| h.objects.iter().cloned())
            .collect();
        objects.extend(
            policies::destination_rules(&cx, namespace, &served)
                .into_iter()
                .map(Arc::new),
        );
        objects.extend(
            policies::whitelist(&cx, namespace, &served)
                .into_iter()
                .map(Arc::new),
        );
        objects
    }
}

/// The hosts of the served Ingresses, each with the Ingresses that contribute to it in the order they are applied:
/// rules, then canaries, then default backends (which also answer `*`).
fn host_inputs(served: &[Served<'_>]) -> BTreeMap<String, Vec<Arc<ConfigObject>>> {
    let mut inputs: BTreeMap<String, Vec<Arc<ConfigObject>>> = BTreeMap::new();
    let mut add = |host: String, object: &Arc<ConfigObject>| {
        let list = inputs.entry(host).or_default();
        if !list.last().is_some_and(|last| Arc::ptr_eq(last, object)) {
            list.push(Arc::clone(object));
        }
    };
    let canary = |s: &&Served<'_>| s.annotations.canary.is_some();
    for s in served
        .iter()
        .filter(|s| !canary(s))
        .chain(served.iter().filter(canary))
    {
        for rule in s.spec.rules.iter().flatten() {
            add(rule_host(rule.host.as_deref()), s.object);
        }
    }
    for s in served
        .iter()
        .filter(|s| !canary(s) && s.spec.default_backend.is_some())
    {
        add("*".into(), s.object);
        for rule in s.spec.rules.iter().flatten() {
            add(rule_host(rule.host.as_deref()), s.object);
        }
    }
    inputs
}

/// A rule's host, `*` when it has none.
fn rule_host(host: Option<&str>) -> String {
    ingress_model::host_of(host).to_string()
}

/// What one host collects.
#[derive(Default)]
struct Host {
    /// The TLS Secret (namespace, name) its HTTPS server uses: the oldest Ingress's.
    tls: Option<(String, String)>,
    /// Its routes, in Ingress order.
    routes: Vec<PathRoute>,
    /// `app-root` (the last Ingress's, as Higress records it).
    app_root: Option<String>,
    /// Whether an Ingress default backend already answers here.
    has_default: bool,
}

/// A served Ingress with its parsed annotations.
struct Served<'a> {
    object: &'a Arc<ConfigObject>,
    spec: &'a IngressSpec,
    annotations: Arc<Annotations>,
}

impl Served<'_> {
    fn namespace(&self) -> &str {
        &self.object.metadata.namespace
    }

    fn name(&self) -> String {
        format!(
            "{}/{}",
            self.object.metadata.namespace, self.object.metadata.name
        )
    }
}

/// Everything a conversion reads.
struct Context<'a> {
    snapshot: &'a Snapshot,
    options: &'a IngressOptions,
    domain_suffix: &'a str,
}

impl Context<'_> {
    /// The Service `namespace/name`, if it exists.
    fn service(&self, namespace: &str, name: &str) -> Option<&admitpilot_model::service::Service> {
        match &self
            .snapshot
            .get(&ObjectKey::new(Kind::Service, namespace, name))?
            .spec
        {
            Spec::Service(s) => Some(s),
            _ => None,
        }
    }

    /// The Service's FQDN.
    fn host(&self, namespace: &str, name: &str) -> String {
        format!("{name}.{namespace}.svc.{}", self.domain_suffix)
    }

    /// Whether the Service exists and an EndpointSlice of it has a ready endpoint.
    fn has_endpoints(&self, namespace: &str, name: &str) -> bool {
        self.service(namespace, name).is_some()
            && self.snapshot.of_kind(Kind::EndpointSlice).any(|o| {
                o.metadata.namespace == namespace
                    && o.metadata.labels.get("kubernetes.io/service-name").map(String::as_str) == Some(name)
                    && matches!(&o.spec, Spec::EndpointSlice(slice) if slice.endpoints.iter().any(|e| {
                        e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true)
                    }))
            })
    }

    /// The destination of an Ingress backend: a Service port by number, or by name through the Service; `None`
    /// for a resource backend or a port name no Service port has (Higress drops such routes).
    fn backend(&self, namespace: &str, backend: &IngressBackend) -> Option<(String, String, u32)> {
        let service = backend.service.as_ref()?;
        let port = service.port.as_ref()?;
        let number = match (port.number, port.name.as_deref()) {
            (Some(n), _) => u32::try_from(n).ok()?,
            (None, Some(port_name)) => self
                .service(namespace, &service.name)?
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(port_name))
                .and_then(|p| u32::try_from(p.port).ok())?,
            (None, None) => return None,
        };
        Some((namespace.to_string(), service.name.clone(), number))
    }

    /// A Service an annotation names, at its port or the Service's first port; `None` when it does not exist.
    fn annotated_service(&self, namespace: &str, r: &ServiceRef) -> Option<Value> {
        let namespace = r.namespace.as_deref().unwrap_or(namespace);
        let service = self.service(namespace, &r.name)?;
        let port = match r.port {
            Some(p) => p,
            None => u32::try_from(service.ports.as_ref()?.first()?.port).ok()?,
        };
        Some(routes::destination(&self.host(namespace, &r.name), port))
    }

    /// Where an Ingress backend's requests go: the backend, or the `default-backend` Service when the backend's
    /// Service is missing or has no ready endpoint (`default_backend.go`; Higress's Envoy falls back per request,
    /// admitpilot at each push).
    fn destination(&self, served: &Served<'_>, backend: &IngressBackend) -> Option<Value> {
        let resolved = self.backend(served.namespace(), backend);
        if let Some(fallback) = &served.annotations.default_backend {
            let healthy = resolved
                .as_ref()
                .is_some_and(|(ns, name, _)| self.has_endpoints(ns, name));
            if !healthy {
                if let Some(d) = self.annotated_service(served.namespace(), fallback) {
                    return Some(d);
                }
            }
        }
        let (ns, name, port) = resolved?;
        Some(routes::destination(&self.host(&ns, &name), port))
    }
}

/// The Secret of the Ingress's TLS entry for `host`: a TLS entry listing the host exactly, or one listing none for
/// `*` (Higress's `extractTLSSecretName`).
fn tls_secret<'a>(spec: &'a IngressSpec, host: &str) -> Option<&'a str> {
    spec.tls.iter().flatten().find_map(|tls| {
        let hosts = tls.hosts.as_deref().unwrap_or_default();
        let listed = if hosts.is_empty() {
            host == "*"
        } else {
            hosts.iter().any(|h| h == host)
        };
        listed.then_some(tls.secret_name.as_deref()).flatten()
    })
}

/// Adds the paths of a (non-canary) Ingress to its hosts; a path whose host and key an older Ingress already has
/// is left out (Higress's `DuplicatedRoute`).
fn add_rules(
    cx: &Context<'_>,
    s: &Served<'_>,
    hosts: &mut BTreeMap<String, Host>,
    dirty: &BTreeSet<String>,
) {
    let name = s.name();
    let mirror = s
        .annotations
        .mirror
        .as_ref()
        .and_then(|m| cx.annotated_service(s.namespace(), &m.service));
    for rule in s.spec.rules.iter().flatten() {
        let host_name = rule_host(rule.host.as_deref());
        if !dirty.contains(host_name.as_str()) {
            continue;
        }
        let host = hosts.entry(host_name.clone()).or_default();
        if host.tls.is_none() {
            host.tls = tls_secret(s.spec, &host_name)
                .map(|secret| (s.namespace().to_string(), secret.to_string()));
        }
        if let Some(root) = &s.annotations.app_root {
            host.app_root = Some(root.clone());
        }
        for path in rule.http.iter().flat_map(|h| &h.paths) {
            let Some(destination) = cx.destination(s, &path.backend) else {
                continue;
            };
            let input = PathInput {
                name: &name,
                path: ingress_model::path_of(path),
                path_type: &path.path_type,
                destination,
                mirror: mirror.clone(),
                http_port: cx.options.http_port,
            };
            for route in routes::path_routes(&input, &s.annotations) {
                let taken = host
                    .routes
                    .iter()
                    .any(|r| r.key == route.key && r.route["name"] != route.route["name"]);
                let twin = host
                    .routes
                    .iter()
                    .any(|r| r.key == route.key && r.route == route.route);
                if !taken && !twin {
                    host.routes.push(route);
                }
            }
        }
    }
}

/// Applies a canary Ingress to the routes of its main Ingress (same host and rule key); a canary path without one
/// is left out, as Higress leaves it (`ApplyCanaryIngress`).
fn add_canary(
    cx: &Context<'_>,
    s: &Served<'_>,
    hosts: &mut BTreeMap<String, Host>,
    dirty: &BTreeSet<String>,
) {
    let Some(canary) = &s.annotations.canary else {
        return;
    };
    for rule in s.spec.rules.iter().flatten() {
        let host_name = rule_host(rule.host.as_deref());
        let Some(host) = hosts
            .get_mut(&host_name)
            .filter(|_| dirty.contains(host_name.as_str()))
        else {
            continue;
        };
        for path in rule.http.iter().flat_map(|h| &h.paths) {
            let Some(destination) = cx.destination(s, &path.backend) else {
                continue;
            };
            let key = routes::rule_key(
                ingress_model::path_of(path),
                &path.path_type,
                &s.annotations,
            );
            // The main route proxies (a redirect route has no destination to share).
            let Some(at) = host
                .routes
                .iter()
                .position(|r| r.key == key && !r.canary && r.route.get("route").is_some())
            else {
                continue;
            };
            match canary {
                Canary::Weight { weight, total } => {
                    routes::weight_canary(
                        &mut host.routes[at],
                        *weight,
                        *total,
                        &destination,
                        &s.annotations,
                    );
                }
                _ => {
                    if let Some(c) = routes::header_canary(
                        &host.routes[at],
                        canary,
                        &destination,
                        &s.annotations,
                    ) {
                        host.routes.insert(at, c);
                    }
                }
            }
        }
    }
}

/// Adds an Ingress's `spec.defaultBackend` as the last route of `*` and of each of its hosts without a Prefix `/`
/// route; the oldest Ingress's wins (`ApplyDefaultBackend`).
fn add_default_backend(
    cx: &Context<'_>,
    s: &Served<'_>,
    hosts: &mut BTreeMap<String, Host>,
    dirty: &BTreeSet<String>,
) {
    let Some(backend) = &s.spec.default_backend else {
        return;
    };
    let Some(destination) = cx.destination(s, backend) else {
        return;
    };
    let name = format!("{}-default", s.name());
    let mut targets = vec!["*".to_string()];
    for rule in s.spec.rules.iter().flatten() {
        targets.push(rule_host(rule.host.as_deref()));
    }
    for target in targets {
        if !dirty.contains(target.as_str()) {
            continue;
        }
        let host = hosts.entry(target).or_default();
        let catch_all = host.routes.iter().any(|r| {
            // Higress's `ConfiguredDefaultBackend`: any Prefix `/` path, whatever else it matches.
            r.kind == routes::PathKind::Prefix && r.path == "/"
        });
        if host.has_default || catch_all {
            continue;
        }
        host.has_default = true;
        host.routes.push(PathRoute {
            key: format!("default-{name}"),
            kind: routes::PathKind::Prefix,
            path: "/".into(),
            default_backend: true,
            canary: false,
            route: json!({"name": name, "route": [{"destination": destination}]}),
        });
    }
}

/// Metadata of a synthesized object in the proxy's namespace.
pub(crate) fn meta(namespace: &str, name: String) -> ObjectMeta {
    ObjectMeta {
        name,
        namespace: namespace.to_string(),
        ..ObjectMeta::default()
    }
}

/// The Istio Gateway and VirtualService of one host.
fn host_objects(cx: &Context<'_>, namespace: &str, host: &str, mut h: Host) -> Vec<ConfigObject> {
    let name = format!("{SYNTHESIZED}{host}");
    let mut servers = vec![Server {
        port: Some(Port {
            number: Some(cx.options.http_port),
            protocol: "HTTP".into(),
            name: format!("http-{}-ingress", cx.options.http_port),
            target_port: None,
        }),
        hosts: vec![format!("*/{host}")],
        ..Server::default()
    }];
    if let Some((secret_namespace, secret)) = &h.tls {
        servers.push(Server {
            port: Some(Port {
                number: Some(cx.options.https_port),
                protocol: "HTTPS".into(),
                name: format!("https-{}-ingress", cx.options.https_port),
                target_port: None,
            }),
            hosts: vec![format!("*/{host}")],
            tls: Some(ServerTlsSettings {
                mode: Some(ServerTlsMode::Simple),
                credential_name: format!("{CREDENTIAL_PREFIX}{secret_namespace}/{secret}"),
                ..ServerTlsSettings::default()
            }),
            ..Server::default()
        });
    }
    h.routes.sort_by_key(|r| r.order());
    let mut http: Vec<Value> = Vec::new();
    if let Some(root) = &h.app_root {
        // `applyAppRoot`: `/` redirects to the app root (302) before every other route.
        http.push(
            json!({"name": format!("{host}-app-root"), "match": [{"uri": {"exact": "/"}}],
            "redirect": {"uri": root, "redirectCode": 302}}),
        );
    }
    http.extend(h.routes.into_iter().map(|r| r.route));
    let virtual_service = serde_json::from_value::<VirtualService>(json!({
        "hosts": [host],
        "gateways": [format!("{namespace}/{name}")],
        "http": http,
    }));
    let mut out = vec![ConfigObject {
        api_version: Kind::Gateway.api_version(),
        metadata: meta(namespace, name.clone()),
        spec: Spec::Gateway(Gateway {
            servers,
            selector: cx.options.gateway_selector.clone(),
        }),
    }];
    match virtual_service {
        Ok(vs) => out.push(ConfigObject {
            api_version: Kind::VirtualService.api_version(),
            metadata: meta(namespace, name),
            spec: Spec::VirtualService(vs),
        }),
        Err(e) => {
            tracing::error!(host, error = %e, "an Ingress VirtualService did not convert; its routes are not served")
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use admitpilot_model::snapshot::snapshot_from_yaml;

    const CONFIG: &str = r#"
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: main, namespace: default}
spec:
  ingressClassName: higress
  rules: [{host: a.example, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: canary
  namespace: default
  annotations: {nginx.ingress.kubernetes.io/canary: "true", nginx.ingress.kubernetes.io/canary-by-header: x-canary}
spec:
  ingressClassName: higress
  rules: [{host: a.example, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: next, port: {number: 80}}}}]}}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: other, namespace: default}
spec:
  ingressClassName: higress
  rules: [{host: b.example, http: {paths: [{path: /b, pathType: Exact, backend: {service: {name: web, port: {number: 80}}}}]}}]
"#;

    fn proxy() -> Proxy {
        Proxy {
            namespace: "higress-system".into(),
            labels: IngressOptions::default().gateway_selector,
            ..Proxy::default()
        }
    }

    /// The objects a fresh conversion makes of `snapshot`.
    fn fresh(snapshot: &Snapshot) -> Vec<ConfigObject> {
        let mut objects: Vec<ConfigObject> = Converted::default()
            .synthesize(snapshot, &proxy(), &Options::default())
            .iter()
            .map(|o| (**o).clone())
            .collect();
        objects.sort_by_key(ConfigObject::key);
        objects
    }

    /// A converter reused across changes gives what a fresh one gives, and keeps the objects of unchanged hosts.
    #[test]
    fn reused_conversion_equals_a_fresh_one() {
        let first = snapshot_from_yaml(CONFIG);
        let mut converted = Converted::default();
        let before = converted.synthesize(&first, &proxy(), &Options::default());
        assert_eq!(before.len(), 4, "a Gateway and a VirtualService per host");
        // The main Ingress goes: its canary takes nothing, and a.example is gone; b.example is kept as it was.
        let mut second = first.clone();
        second
            .objects
            .remove(&ObjectKey::new(Kind::Ingress, "default", "main"));
        let mut after = converted.synthesize(&second, &proxy(), &Options::default());
        after.sort_by_key(|o| o.key());
        let plain: Vec<ConfigObject> = after.iter().map(|o| (**o).clone()).collect();
        assert_eq!(plain, fresh(&second));
        assert!(after.iter().all(|o| o.metadata.name == "ingress~b.example"));
        assert!(after
            .iter()
            .all(|o| before.iter().any(|b| Arc::ptr_eq(b, o))));
        // And comes back.
        let mut again = converted.synthesize(&first, &proxy(), &Options::default());
        again.sort_by_key(|o| o.key());
        let plain: Vec<ConfigObject> = again.iter().map(|o| (**o).clone()).collect();
        assert_eq!(plain, fresh(&first));
    }
}
