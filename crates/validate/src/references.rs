//! Reference analysis (pure): takes the config an object joins (a snapshot that holds it) and the object, and yields
//! what the object names that the config does not have, or claims that another object claims too, as
//! [`Reference`] findings carrying Istio's analyzer codes so users can look them up:
//!
//! | code | what | mirrors (istio `pkg/config/analysis/analyzers/…`) |
//! |---|---|---|
//! | IST0101 | a VirtualService names a Gateway that does not exist | `virtualservice/gateways.go` `analyzeVirtualService` |
//! | IST0101 | a route destination names a host no Service or ServiceEntry provides | `virtualservice/destinationhosts.go` `analyzeVirtualService` |
//! | IST0101 | a route destination names a subset no DestinationRule for its host defines | `virtualservice/destinationrules.go` `analyzeVirtualService` |
//! | IST0101 | a Gateway server's `credentialName` names no Secret in the Gateway's namespace | `gateway/secret.go` `Analyze` |
//! | IST0101 | higress-config tracing names a collector service that does not exist (Higress builds its cluster from it) | — |
//! | IST0101 | a CUSTOM AuthorizationPolicy names an extension provider the mesh config does not define (istiod then denies what its rules match) | `authz/authorizationpolicies.go` (provider check) |
//! | IST0101 | a mesh config extension provider names a service no Service or ServiceEntry provides | — |
//! | IST0101 | a Telemetry access-logging block names a provider the mesh config does not define (nothing is logged there), or one that is not an access-log provider | — |
//! | IST0109 | two VirtualServices bound to one Gateway claim the same host | `virtualservice/conflictingmeshgatewayhosts.go` (there: the mesh gateway) |
//! | IST0132 | a VirtualService host that no server of its Gateway accepts | `virtualservice/gateways.go` `analyzeVirtualService` |
//! | IST0101 | an Ingress names a Service, Service port name, TLS Secret or (canary) main Ingress the config lacks ([`super::ingress_references`]) | — |
//! | GWAPI-REF | a Gateway API object names what the config lacks or does not allow (never denies; see [`super::gateway_api::references`]) | — |
//!
//! An object silences codes with Istio's `galley.istio.io/analyze-suppress` annotation (comma-separated codes).
//! Each check looks at what the object names, so its cost grows with the object plus, for IST0109, the
//! VirtualServices that claim its hosts on its Gateways (found in [`HostClaims`], built once per config).

use std::cell::OnceCell;
use std::collections::HashSet;
use std::fmt;

use ahash::{AHashMap, AHashSet};

use admitpilot_model::istio::authorization_policy::Action;
use admitpilot_model::istio::virtual_service::Destination;
use admitpilot_model::istio::{Gateway, VirtualService};
use admitpilot_model::mesh_config::{Provider, BUILTIN_ACCESS_LOG_PROVIDER};
use admitpilot_model::{ConfigObject, Kind, ObjectKey, Snapshot, Spec};

use super::common::go_quote;
use super::host_index::HostIndex;

/// Istio's annotation listing analyzer codes not to report for the object.
pub const SUPPRESS_ANNOTATION: &str = "galley.istio.io/analyze-suppress";

/// Istio's code for "a resource being referenced does not exist".
pub const REFERENCED_RESOURCE_NOT_FOUND: &str = "IST0101";
/// Istio's code for "VirtualServices define the same host" (for the mesh gateway there; any gateway here).
pub const CONFLICTING_VIRTUAL_SERVICE_HOSTS: &str = "IST0109";
/// Istio's code for "a VirtualService host is not found in its Gateway".
pub const HOST_NOT_FOUND_IN_GATEWAY: &str = "IST0132";

/// One reference problem of an object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Reference {
    /// The analyzer code, e.g. `IST0101`.
    pub code: &'static str,
    /// Field path in the object.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl Reference {
    /// Whether the finding may deny an object (with `--deny-broken-references`): Gateway API reference findings
    /// never do, as the spec reports them as status conditions.
    pub fn may_deny(&self) -> bool {
        self.code != super::gateway_api::references::GATEWAY_API_REFERENCE
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}: {}", self.code, self.field, self.message)
    }
}

/// Which VirtualServices claim which host on which Gateway (hosts resolved), what IST0109 looks up: built once per
/// config rather than walking every VirtualService for each object checked.
#[derive(Debug, Default)]
pub struct HostClaims(AHashMap<ObjectKey, AHashMap<String, Vec<ObjectKey>>>);

impl HostClaims {
    /// The claims of the VirtualServices of `config`; `domain_suffix` completes short Service names.
    pub fn new(config: &Snapshot, domain_suffix: &str) -> Self {
        let mut claims = HostClaims::default();
        for object in config.of_kind(Kind::VirtualService) {
            let Spec::VirtualService(vs) = &object.spec else {
                continue;
            };
            let namespace = &object.metadata.namespace;
            for gateway in &vs.gateways {
                let hosts = claims.0.entry(gateway_key(gateway, namespace)).or_default();
                for host in &vs.hosts {
                    let claimants = hosts
                        .entry(resolve(host, namespace, domain_suffix))
                        .or_default();
                    if claimants.last() != Some(&object.key()) {
                        claimants.push(object.key());
                    }
                }
            }
        }
        claims
    }

    /// The VirtualServices that claim `host` (resolved) on `gateway`.
    fn claimants(&self, gateway: &ObjectKey, host: &str) -> &[ObjectKey] {
        self.0
            .get(gateway)
            .and_then(|hosts| hosts.get(host))
            .map_or(&[], Vec::as_slice)
    }
}

/// The reference problems of `object` within `config` (which should hold it), minus the codes its
/// [`SUPPRESS_ANNOTATION`] silences. `domain_suffix` completes short Service names (`cluster.local`). `claims`, when
/// given, must have been built from `config`, or from a config that differs from it only in `object`'s key (as the
/// live config differs from a candidate); otherwise they are built from `config` when needed.
pub fn check_references(
    config: &Snapshot,
    object: &ConfigObject,
    domain_suffix: &str,
    claims: Option<&HostClaims>,
) -> Vec<Reference> {
    let registry = Registry {
        config,
        domain_suffix,
        entry_hosts: OnceCell::new(),
        subsets: OnceCell::new(),
        given_claims: claims,
        claims: OnceCell::new(),
    };
    let mut out = Vec::new();
    if object.kind().is_gateway_api() {
        super::gateway_api::references::check(config, object, &mut out);
    }
    match &object.spec {
        Spec::Ingress(spec) => super::ingress_references::check(config, object, spec, &mut out),
        Spec::VirtualService(vs) => registry.virtual_service(object, vs, &mut out),
        Spec::Gateway(gateway) => registry.gateway_secrets(object, gateway, &mut out),
        Spec::AuthorizationPolicy(policy) => {
            if let Some(provider) = policy
                .provider
                .as_ref()
                .filter(|_| policy.action == Action::Custom)
            {
                let known = config
                    .mesh_config()
                    .is_some_and(|mesh| mesh.provider(&provider.name).is_some());
                if !known {
                    let mut reference = not_found(
                        "spec.provider.name".into(),
                        "extension provider",
                        &provider.name,
                    );
                    reference.message.push_str(
                        " in the mesh config (the `istio` ConfigMap): requests this policy's rules match are denied",
                    );
                    out.push(reference);
                }
            }
        }
        Spec::Telemetry(telemetry) => {
            let mesh = config.mesh_config();
            for (i, block) in telemetry.access_logging.iter().enumerate() {
                for (j, provider) in block.providers.iter().enumerate() {
                    let Some(name) = provider.name.as_deref() else {
                        continue;
                    };
                    let field = format!("spec.accessLogging[{i}].providers[{j}].name");
                    match mesh.and_then(|m| m.provider(name)).map(|p| &p.provider) {
                        Some(Provider::EnvoyFileAccessLog(_) | Provider::EnvoyOtelAls(_)) => {}
                        Some(other) => out.push(Reference {
                            code: REFERENCED_RESOURCE_NOT_FOUND,
                            field,
                            message: format!(
                                "extension provider {name:?} is {}, not an access-log provider: nothing is logged \
                                 through it",
                                other.key()
                            ),
                        }),
                        None if name.eq_ignore_ascii_case(BUILTIN_ACCESS_LOG_PROVIDER) => {}
                        None => {
                            let mut reference = not_found(field, "extension provider", name);
                            reference
                                .message
                                .push_str(" in the mesh config (the `istio` ConfigMap): nothing is logged through it");
                            out.push(reference);
                        }
                    }
                }
            }
        }
        Spec::MeshConfig(mesh) => {
            for (index, provider) in mesh.extension_providers.iter().enumerate() {
                let Some((service, _)) = provider.provider.server() else {
                    continue;
                };
                let key = provider.provider.key();
                let host = service.rsplit_once('/').map_or(service, |(_, host)| host);
                if !registry.has_host(host) {
                    out.push(not_found(
                        format!("data.mesh.extensionProviders[{index}].{key}.service"),
                        "extension provider service",
                        service,
                    ));
                }
            }
        }
        Spec::HigressConfig(higress) => {
            if let Some(tracing) = &higress.tracing {
                let collectors = [
                    ("zipkin", tracing.zipkin.as_ref().map(|z| &z.service)),
                    (
                        "skywalking",
                        tracing.skywalking.as_ref().map(|s| &s.service),
                    ),
                    (
                        "opentelemetry",
                        tracing.opentelemetry.as_ref().map(|o| &o.service),
                    ),
                ];
                for (name, service) in collectors {
                    let Some(service) = service.filter(|s| !s.is_empty()) else {
                        continue;
                    };
                    if !registry.has_host(service) {
                        out.push(not_found(
                            format!("data.higress.tracing.{name}.service"),
                            "tracing service",
                            service,
                        ));
                    }
                }
            }
        }
        _ => {}
    }
    let silenced: HashSet<&str> = object
        .metadata
        .annotations
        .get(SUPPRESS_ANNOTATION)
        .map(|codes| codes.split(',').map(str::trim).collect())
        .unwrap_or_default();
    out.retain(|reference| !silenced.contains(reference.code));
    out.sort();
    out.dedup();
    out
}

/// IST0101 with Istio's template `Referenced %s not found: %q` (`ReferencedResourceNotFound` in
/// `pkg/config/analysis/msg/messages.yaml`), the name quoted as Go's `%q` does.
fn not_found(field: String, what: &str, name: &str) -> Reference {
    Reference {
        code: REFERENCED_RESOURCE_NOT_FOUND,
        field,
        message: format!("Referenced {what} not found: {}", go_quote(name)),
    }
}

/// Looks names up in the config; the indexes are built on first use, once per object checked.
struct Registry<'a> {
    config: &'a Snapshot,
    domain_suffix: &'a str,
    /// Every ServiceEntry host.
    entry_hosts: OnceCell<HostIndex>,
    /// The subsets DestinationRules define.
    subsets: OnceCell<Subsets>,
    /// The host claims the caller built.
    given_claims: Option<&'a HostClaims>,
    /// The host claims of `config`, when none were given.
    claims: OnceCell<HostClaims>,
}

/// The subsets DestinationRules define, by (resolved host in lower case, subset) for exact hosts and by subset for
/// wildcards.
#[derive(Default)]
struct Subsets {
    exact: AHashSet<(String, String)>,
    wildcard: AHashMap<String, Vec<String>>,
}

impl<'a> Registry<'a> {
    fn resolve(&self, host: &str, namespace: &str) -> String {
        resolve(host, namespace, self.domain_suffix)
    }

    fn claims(&self) -> &HostClaims {
        self.given_claims.unwrap_or_else(|| {
            self.claims
                .get_or_init(|| HostClaims::new(self.config, self.domain_suffix))
        })
    }

    /// Whether a Service (by its FQDN) or a ServiceEntry host provides `host` (already resolved).
    fn has_host(&self, host: &str) -> bool {
        let service = host
            .strip_suffix(self.domain_suffix)
            .and_then(|rest| rest.strip_suffix(".svc."))
            .and_then(|rest| rest.split_once('.'));
        if let Some((name, namespace)) = service {
            if self
                .config
                .get(&ObjectKey::new(Kind::Service, namespace, name))
                .is_some()
            {
                return true;
            }
        }
        let config = self.config;
        self.entry_hosts
            .get_or_init(|| {
                HostIndex::new(
                    config
                        .of_kind(Kind::ServiceEntry)
                        .filter_map(|entry| match &entry.spec {
                            Spec::ServiceEntry(se) => Some(se.hosts.iter()),
                            _ => None,
                        })
                        .flatten()
                        .map(|h| (h.as_str(), 0)),
                )
            })
            .covering(host)
            .is_some()
    }

    /// Whether a DestinationRule for `host` (resolved, or one of its wildcards) defines `subset`.
    fn has_subset(&self, host: &str, subset: &str) -> bool {
        let subsets = self.subsets.get_or_init(|| {
            let mut out = Subsets::default();
            for object in self.config.of_kind(Kind::DestinationRule) {
                let Spec::DestinationRule(dr) = &object.spec else {
                    continue;
                };
                let resolved = self.resolve(&dr.host, &object.metadata.namespace);
                for s in &dr.subsets {
                    match resolved.strip_prefix('*') {
                        Some(suffix) => out
                            .wildcard
                            .entry(s.name.clone())
                            .or_default()
                            .push(suffix.to_ascii_lowercase()),
                        None => {
                            out.exact
                                .insert((resolved.to_ascii_lowercase(), s.name.clone()));
                        }
                    }
                }
            }
            out
        });
        let host = host.to_ascii_lowercase();
        subsets.exact.contains(&(host.clone(), subset.to_string()))
            || subsets.wildcard.get(subset).is_some_and(|suffixes| {
                suffixes
                    .iter()
                    .any(|suffix| host.ends_with(suffix.as_str()))
            })
    }

    fn virtual_service(
        &self,
        object: &ConfigObject,
        vs: &VirtualService,
        out: &mut Vec<Reference>,
    ) {
        let namespace = &object.metadata.namespace;
        for (index, name) in vs.gateways.iter().enumerate() {
            if name == "mesh" {
                continue;
            }
            let key = gateway_key(name, namespace);
            // Istio's `virtualservice/gateways.go` prints the gateway name as the VirtualService writes it.
            let Some(Spec::Gateway(gateway)) = self.config.get(&key).map(|g| &g.spec) else {
                out.push(not_found(
                    format!("spec.gateways[{index}]"),
                    "gateway",
                    name,
                ));
                continue;
            };
            let accepted = gateway_hosts(gateway, &key.namespace, namespace);
            if vs
                .hosts
                .iter()
                .any(|host| accepted.overlapping(host).is_none())
            {
                // Deliberately stricter than Istio's `vsHostInGateway` (`virtualservice/gateways.go`), which reports
                // only when *no* host of the VirtualService matches a server host (and, besides IST0101, when the
                // Gateway is missing): a single host no server accepts is silently never served, which is what this
                // check exists to say. The text is Istio's.
                // `VirtualServiceHostNotFoundInGateway`'s template (`messages.yaml`): `one or more host %v defined in
                // VirtualService %s not found in Gateway %s.`, where `%v` prints all of the VirtualService's hosts
                // as a Go `[]string` and both names are `namespace/name`.
                out.push(Reference {
                    code: HOST_NOT_FOUND_IN_GATEWAY,
                    field: "spec.hosts".into(),
                    message: format!(
                        "one or more host [{}] defined in VirtualService {namespace}/{} not found in Gateway {}/{}.",
                        vs.hosts.join(" "),
                        object.metadata.name,
                        key.namespace,
                        key.name
                    ),
                });
            }
            self.conflicts(object, vs, &key, out);
        }
        // Istio's `virtualservice/destinationhosts.go` and `destinationrules.go` print the host as written
        // (`d.GetHost()`), and call a mirror's "mirror host" / "mirror+subset in destinationrule".
        for (field, destination, mirror) in destinations(vs) {
            let host = self.resolve(&destination.host, namespace);
            if host.contains('*') {
                continue;
            }
            let (what_host, what_subset) = if mirror {
                ("mirror host", "mirror+subset in destinationrule")
            } else {
                ("host", "host+subset in destinationrule")
            };
            if !self.has_host(&host) {
                out.push(not_found(
                    format!("{field}.host"),
                    what_host,
                    &destination.host,
                ));
            } else if !destination.subset.is_empty() && !self.has_subset(&host, &destination.subset)
            {
                out.push(not_found(
                    format!("{field}.subset"),
                    what_subset,
                    &format!("{}+{}", destination.host, destination.subset),
                ));
            }
        }
    }

    /// IST0109: other VirtualServices bound to the Gateway `gateway` that claim one of `vs`'s hosts.
    fn conflicts(
        &self,
        object: &ConfigObject,
        vs: &VirtualService,
        gateway: &ObjectKey,
        out: &mut Vec<Reference>,
    ) {
        let namespace = &object.metadata.namespace;
        // Each resolved host of `vs`, with its index (the last one when a host repeats).
        let own: AHashMap<String, usize> = vs
            .hosts
            .iter()
            .enumerate()
            .map(|(index, h)| (self.resolve(h, namespace), index))
            .collect();
        for (resolved, index) in &own {
            for other in self.claims().claimants(gateway, resolved) {
                if (&other.namespace, &other.name) == (namespace, &object.metadata.name) {
                    continue;
                }
                out.push(Reference {
                    code: CONFLICTING_VIRTUAL_SERVICE_HOSTS,
                    field: format!("spec.hosts[{index}]"),
                    message: format!(
                        "The VirtualServices {namespace}/{}, {}/{} associated with gateway {}/{} define the \
                         same host {resolved} which can lead to undefined behavior. This can be fixed by merging \
                         the conflicting VirtualServices into a single resource.",
                        object.metadata.name,
                        other.namespace,
                        other.name,
                        gateway.namespace,
                        gateway.name
                    ),
                });
            }
        }
    }

    fn gateway_secrets(&self, object: &ConfigObject, gateway: &Gateway, out: &mut Vec<Reference>) {
        let namespace = &object.metadata.namespace;
        for (index, server) in gateway.servers.iter().enumerate() {
            let Some(tls) = &server.tls else { continue };
            let names = std::iter::once(("credentialName".to_string(), &tls.credential_name))
                .chain(
                    tls.credential_names
                        .iter()
                        .enumerate()
                        .map(|(i, name)| (format!("credentialNames[{i}]"), name)),
                )
                .filter(|(_, name)| !name.is_empty());
            for (field, name) in names {
                let (secret_ns, secret) = name.split_once('/').unwrap_or((namespace, name));
                if self
                    .config
                    .get(&ObjectKey::new(Kind::Secret, secret_ns, secret))
                    .is_none()
                {
                    out.push(not_found(
                        format!("spec.servers[{index}].tls.{field}"),
                        "credentialName",
                        name,
                    ));
                }
            }
        }
    }
}

/// A name without dots is a Service in `namespace` (as Istio resolves destination hosts).
fn resolve(host: &str, namespace: &str, domain_suffix: &str) -> String {
    if host.contains('.') || host.contains('*') {
        host.to_string()
    } else {
        format!("{host}.{namespace}.svc.{domain_suffix}")
    }
}

/// The key of the Gateway a VirtualService in `namespace` names (`name` or `namespace/name`).
fn gateway_key(name: &str, namespace: &str) -> ObjectKey {
    match name.split_once('/') {
        Some((ns, name)) => ObjectKey::new(Kind::Gateway, ns, name),
        None => ObjectKey::new(Kind::Gateway, namespace, name),
    }
}

/// The host parts of the server hosts of `gateway` (in `gateway_ns`) whose namespace part admits a VirtualService in
/// `vs_ns` (`*`, `.` for the Gateway's own, or `vs_ns`): a VirtualService host is accepted when one of them overlaps
/// it.
fn gateway_hosts(gateway: &Gateway, gateway_ns: &str, vs_ns: &str) -> HostIndex {
    HostIndex::new(
        gateway
            .servers
            .iter()
            .flat_map(|s| &s.hosts)
            .filter_map(|server_host| {
                let (ns, name) = server_host.split_once('/').unwrap_or(("*", server_host));
                let admits = ns == "*" || ns == vs_ns || (ns == "." && gateway_ns == vs_ns);
                admits.then_some((name, 0))
            }),
    )
}

/// Every destination of a VirtualService with its field path and whether it is a mirror: HTTP, TLS and TCP routes
/// and HTTP mirrors.
fn destinations(vs: &VirtualService) -> Vec<(String, &Destination, bool)> {
    let mut out = Vec::new();
    for (i, route) in vs.http.iter().enumerate() {
        for (j, to) in route.route.iter().enumerate() {
            if let Some(destination) = &to.destination {
                out.push((
                    format!("spec.http[{i}].route[{j}].destination"),
                    destination,
                    false,
                ));
            }
        }
        if let Some(mirror) = &route.mirror {
            out.push((format!("spec.http[{i}].mirror"), mirror, true));
        }
        for (j, mirror) in route.mirrors.iter().enumerate() {
            if let Some(destination) = &mirror.destination {
                out.push((
                    format!("spec.http[{i}].mirrors[{j}].destination"),
                    destination,
                    true,
                ));
            }
        }
    }
    for (kind, routes) in [
        ("tls", vs.tls.iter().map(|r| &r.route).collect::<Vec<_>>()),
        ("tcp", vs.tcp.iter().map(|r| &r.route).collect()),
    ] {
        for (i, route) in routes.into_iter().enumerate() {
            for (j, to) in route.iter().enumerate() {
                if let Some(destination) = &to.destination {
                    out.push((
                        format!("spec.{kind}[{i}].route[{j}].destination"),
                        destination,
                        false,
                    ));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::{json, Value};

    use super::*;
    use admitpilot_model::decode::test_object as object;

    fn config(objects: &[Arc<ConfigObject>]) -> Snapshot {
        let mut snapshot = Snapshot::default();
        for object in objects {
            snapshot.objects.insert(object.key(), object.clone());
        }
        snapshot
    }

    fn gateway(hosts: Value, tls: Value) -> Arc<ConfigObject> {
        object(
            json!({"apiVersion": "networking.istio.io/v1", "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": "shop"},
            "spec": {"selector": {"istio": "ingressgateway"}, "servers": [
                {"port": {"number": 443, "name": "https", "protocol": "HTTPS"}, "hosts": hosts, "tls": tls}]}}),
        )
    }

    fn vs(name: &str, hosts: Value, route: Value) -> Arc<ConfigObject> {
        object(
            json!({"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"hosts": hosts, "gateways": ["gw"], "http": [{"route": route}]}}),
        )
    }

    fn service(name: &str) -> Arc<ConfigObject> {
        object(
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "shop"},
            "spec": {"ports": [{"port": 80}]}}),
        )
    }

    fn codes(found: &[Reference]) -> Vec<(&str, &str)> {
        found.iter().map(|r| (r.code, r.field.as_str())).collect()
    }

    #[test]
    fn a_fully_resolved_virtual_service_has_no_findings() {
        let gw = gateway(
            json!(["*.example.com"]),
            json!({"mode": "SIMPLE", "credentialName": "cert"}),
        );
        let dr = object(
            json!({"apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"host": "web", "subsets": [{"name": "v1", "labels": {"version": "v1"}}]}}),
        );
        let secret = object(
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "cert", "namespace": "shop"}}),
        );
        let api = vs(
            "api",
            json!(["api.example.com"]),
            json!([{"destination": {"host": "web", "subset": "v1"}}]),
        );
        let snapshot = config(&[gw.clone(), dr, secret, service("web"), api.clone()]);
        assert_eq!(
            check_references(&snapshot, &api, "cluster.local", None),
            Vec::new()
        );
        assert_eq!(
            check_references(&snapshot, &gw, "cluster.local", None),
            Vec::new()
        );
    }

    #[test]
    fn missing_gateway_host_subset_and_secret_are_ist0101() {
        let api = vs(
            "api",
            json!(["api.example.com"]),
            json!([{"destination": {"host": "nowhere"}}, {"destination": {"host": "web", "subset": "v9"}}]),
        );
        let alone = config(&[service("web"), api.clone()]);
        let found = check_references(&alone, &api, "cluster.local", None);
        assert_eq!(
            codes(&found),
            [
                ("IST0101", "spec.gateways[0]"),
                ("IST0101", "spec.http[0].route[0].destination.host"),
                ("IST0101", "spec.http[0].route[1].destination.subset"),
            ]
        );
        assert_eq!(found[0].message, r#"Referenced gateway not found: "gw""#);
        assert_eq!(found[1].message, r#"Referenced host not found: "nowhere""#);
        assert_eq!(
            found[2].message,
            r#"Referenced host+subset in destinationrule not found: "web+v9""#
        );
        let gw = gateway(
            json!(["*"]),
            json!({"mode": "SIMPLE", "credentialName": "cert"}),
        );
        let found = check_references(
            &config(std::slice::from_ref(&gw)),
            &gw,
            "cluster.local",
            None,
        );
        assert_eq!(
            codes(&found),
            [("IST0101", "spec.servers[0].tls.credentialName")]
        );
    }

    /// Istio's `virtualservice/destinationhosts.go` and `destinationrules.go` name mirrors "mirror host" and
    /// "mirror+subset in destinationrule", with the host as written.
    #[test]
    fn mirrors_are_named_as_istio_names_them() {
        let api = object(
            json!({"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
            "metadata": {"name": "api", "namespace": "shop"},
            "spec": {"hosts": ["api"], "http": [{"route": [{"destination": {"host": "web"}}],
                "mirror": {"host": "shadow"},
                "mirrors": [{"destination": {"host": "web", "subset": "v2"}}]}]}}),
        );
        let found = check_references(
            &config(&[service("web"), api.clone()]),
            &api,
            "cluster.local",
            None,
        );
        let messages: Vec<(&str, &str)> = found
            .iter()
            .map(|r| (r.field.as_str(), r.message.as_str()))
            .collect();
        assert_eq!(
            messages,
            [
                (
                    "spec.http[0].mirror.host",
                    r#"Referenced mirror host not found: "shadow""#
                ),
                (
                    "spec.http[0].mirrors[0].destination.subset",
                    r#"Referenced mirror+subset in destinationrule not found: "web+v2""#
                ),
            ]
        );
        // Go's `%q`: control characters are escaped as Go escapes them.
        assert_eq!(
            not_found("f".into(), "gateway", "a\u{7f}b").message,
            r#"Referenced gateway not found: "a\x7fb""#
        );
    }

    /// Claims built from the live config serve a candidate that replaces one object: the object's own claims there
    /// (from its old version) are not conflicts, and the answer is the one of claims built from the candidate.
    #[test]
    fn claims_of_the_live_config_answer_for_a_candidate() {
        let gw = gateway(
            json!(["*"]),
            json!({"mode": "SIMPLE", "credentialName": "cert"}),
        );
        let to = json!([{"destination": {"host": "web"}}]);
        let first = vs("first", json!(["a.example.com"]), to.clone());
        let old = vs("second", json!(["b.example.com"]), to.clone());
        let live = config(&[gw.clone(), service("web"), first.clone(), old]);
        let claims = HostClaims::new(&live, "cluster.local");
        for hosts in [
            json!(["a.example.com"]),
            json!(["b.example.com"]),
            json!(["web"]),
        ] {
            let second = vs("second", hosts, to.clone());
            let candidate = config(&[gw.clone(), service("web"), first.clone(), second.clone()]);
            assert_eq!(
                check_references(&candidate, &second, "cluster.local", Some(&claims)),
                check_references(&candidate, &second, "cluster.local", None),
            );
        }
    }

    #[test]
    fn a_host_the_gateway_does_not_serve_is_ist0132_and_a_shared_host_is_ist0109() {
        let gw = gateway(
            json!(["shop/*.example.com"]),
            json!({"mode": "SIMPLE", "credentialName": "cert"}),
        );
        let to = json!([{"destination": {"host": "web"}}]);
        let first = vs("first", json!(["a.example.com"]), to.clone());
        let second = vs("second", json!(["a.example.com", "b.other.org"]), to);
        let snapshot = config(&[gw, service("web"), first, second.clone()]);
        let found = check_references(&snapshot, &second, "cluster.local", None);
        assert_eq!(
            codes(&found),
            [("IST0109", "spec.hosts[0]"), ("IST0132", "spec.hosts")]
        );
        assert!(
            found[0].message.contains("shop/second, shop/first"),
            "{}",
            found[0].message
        );
        assert_eq!(
            found[1].message,
            "one or more host [a.example.com b.other.org] defined in VirtualService shop/second not found in Gateway shop/gw."
        );
    }

    #[test]
    fn the_suppress_annotation_silences_a_code() {
        let api = object(
            json!({"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
            "metadata": {"name": "api", "namespace": "shop",
                "annotations": {SUPPRESS_ANNOTATION: "IST0132, IST0101"}},
            "spec": {"hosts": ["x"], "gateways": ["gw"], "http": [{"route": [{"destination": {"host": "nowhere"}}]}]}}),
        );
        assert_eq!(
            check_references(
                &config(std::slice::from_ref(&api)),
                &api,
                "cluster.local",
                None
            ),
            Vec::new()
        );
    }

    #[test]
    fn higress_tracing_naming_a_missing_service_is_ist0101() {
        let higress = object(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "higress-config", "namespace": "higress-system"},
            "data": {"higress": "tracing:\n  enable: true\n  zipkin:\n    service: zipkin.istio-system.svc.cluster.local\n    port: \"9411\"\n"}}));
        let found = check_references(
            &config(std::slice::from_ref(&higress)),
            &higress,
            "cluster.local",
            None,
        );
        assert_eq!(
            codes(&found),
            [("IST0101", "data.higress.tracing.zipkin.service")]
        );
    }

    #[test]
    fn extension_providers_are_looked_up_in_the_mesh_config() {
        let mesh = object(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "istio", "namespace": "istio-system"},
            "data": {"mesh": "extensionProviders:\n- name: authz\n  envoyExtAuthzGrpc: {service: authz.foo.svc.cluster.local, port: 9000}\n- name: otel\n  envoyOtelAls: {service: otel.foo.svc.cluster.local, port: 4317}\n- name: zipkin\n  zipkin: {service: zipkin.foo.svc.cluster.local, port: 9411}\n"}}));
        let custom = |provider: &str| {
            object(
                json!({"apiVersion": "security.istio.io/v1", "kind": "AuthorizationPolicy",
                "metadata": {"name": "p", "namespace": "default"},
                "spec": {"action": "CUSTOM", "provider": {"name": provider}, "rules": [{}]}}),
            )
        };
        let telemetry = object(
            json!({"apiVersion": "telemetry.istio.io/v1", "kind": "Telemetry",
            "metadata": {"name": "t", "namespace": "default"},
            "spec": {"accessLogging": [{"providers": [{"name": "otel"}, {"name": "envoy"}, {"name": "zipkin"}, {"name": "nope"}]}]}}),
        );
        let all = [mesh.clone(), custom("authz"), telemetry.clone()];
        let cfg = config(&all);
        let check = |o: &ConfigObject| check_references(&cfg, o, "cluster.local", None);
        assert!(check(&custom("authz")).is_empty());
        assert_eq!(
            codes(&check(&custom("other"))),
            [("IST0101", "spec.provider.name")]
        );
        assert_eq!(
            codes(&check(&telemetry)),
            [
                ("IST0101", "spec.accessLogging[0].providers[2].name"),
                ("IST0101", "spec.accessLogging[0].providers[3].name"),
            ]
        );
        // Neither server's service exists.
        assert_eq!(
            codes(&check(&mesh)),
            [
                (
                    "IST0101",
                    "data.mesh.extensionProviders[0].envoyExtAuthzGrpc.service"
                ),
                (
                    "IST0101",
                    "data.mesh.extensionProviders[1].envoyOtelAls.service"
                ),
            ]
        );
    }
}
