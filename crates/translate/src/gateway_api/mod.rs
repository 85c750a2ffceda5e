//! Gateway API as Istio config (pure): takes a snapshot and one proxy, yields the snapshot with the proxy's Gateway
//! API Gateway turned into the Istio objects the rest of the translator already serves (istiod's design: it
//! converts Gateway API into its internal Gateway and VirtualService model too, `pilot/pkg/config/kube/gateway`).
//! So the effect check, the push guard, enforcement warnings, `/debug/configz`, `analyze` and the MCP feed cover
//! Gateway API objects through the one pipeline.
//!
//! A proxy serves the Gateway its node metadata names (label `gateway.networking.k8s.io/gateway-name`, in the
//! proxy's namespace), when the Gateway's GatewayClass names admitpilot's controller ([`Options`]). Each
//! listener becomes one Istio Gateway (`gateway-api~<gateway>~<listener>`, one server, selecting that label); the
//! routes attached to it become one VirtualService per listener host name
//! (`gateway-api~<gateway>~<listener>~<host>`, `*` kept; `model::gateway_api::attachment` decides attachment and host names,
//! [`http_route`] the routes and their order, [`backends`] the destinations). GRPCRoutes join HTTPRoutes on the
//! same host names, their rules first rewritten as HTTPRoute rules ([`grpc_route`]). A TLS passthrough or TCP
//! listener gets one VirtualService (`gateway-api~<gateway>~<listener>~stream`) with its TLSRoutes or TCPRoutes
//! ([`stream_route`]); a TLS listener that terminates gets an Istio Gateway and VirtualService per TLSRoute, so
//! its connections go by SNI. BackendTLSPolicies become DestinationRules ([`backend_tls`]). Synthesized objects equal to the
//! previous call's are the previous call's `Arc`s, so the translator's per-object caches keep working.

pub mod backend_tls;
pub mod backends;
pub mod frontend_tls;
pub mod grpc_route;
pub mod http_route;
pub mod stream_route;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::naming;
use crate::synthesized::Synthesized;
use crate::types::{Options, Proxy, GATEWAY_NAME_LABEL};
use admitpilot_model::gateway_api::attachment::{self, Owner};
use admitpilot_model::gateway_api::gateway::Listener;
use admitpilot_model::gateway_api::http_route::HttpRouteRule;
use admitpilot_model::gateway_api::{gateway::conflict, listener_set};
use admitpilot_model::istio::gateway::{
    AnsweredHost, Gateway, Port, Server, ServerTlsMode, ServerTlsSettings,
};
use admitpilot_model::istio::VirtualService;
use admitpilot_model::{ConfigObject, Kind, ObjectKey, ObjectMeta, Snapshot, Spec};

/// Prefix of the names of every object synthesized from Gateway API objects.
pub const SYNTHESIZED: &str = "gateway-api~";

/// The objects a previous call synthesized, by key, to hand back the same `Arc` for an equal object; and what each
/// synthesized VirtualService was built from, so one whose inputs are the same objects (compared by pointer) is not
/// built again: a change converts only the host names whose routes, Gateway or Services changed.
#[derive(Debug, Default)]
pub struct Converted {
    previous: Synthesized,
    inputs: HashMap<ObjectKey, HostInputs>,
}

/// What one synthesized VirtualService was built from: the Gateway, every Service and ReferenceGrant (backends
/// resolve against them) and the attached matches in order (route, rule index, match index).
#[derive(Debug, Clone)]
struct HostInputs {
    gateway: Arc<ConfigObject>,
    backends: Arc<Vec<Arc<ConfigObject>>>,
    attached: Vec<(Arc<ConfigObject>, usize, usize)>,
}

impl HostInputs {
    /// The same objects (by pointer; the `Arc`s held here keep their addresses from being reused).
    fn same(&self, other: &HostInputs) -> bool {
        let same_list = |a: &[Arc<ConfigObject>], b: &[Arc<ConfigObject>]| {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| Arc::ptr_eq(x, y))
        };
        Arc::ptr_eq(&self.gateway, &other.gateway)
            && (Arc::ptr_eq(&self.backends, &other.backends)
                || same_list(&self.backends, &other.backends))
            && self.attached.len() == other.attached.len()
            && self
                .attached
                .iter()
                .zip(&other.attached)
                .all(|((a, ai, am), (b, bi, bm))| Arc::ptr_eq(a, b) && ai == bi && am == bm)
    }
}

impl Converted {
    /// The snapshot `proxy` is translated from: `snapshot` plus the Istio objects of its Gateway API Gateway, or
    /// `None` when the proxy serves none (then `snapshot` is used as it is).
    pub fn apply(
        &mut self,
        snapshot: &Snapshot,
        proxy: &Proxy,
        options: &Options,
    ) -> Option<Snapshot> {
        let objects = self.synthesize(snapshot, proxy, options);
        self.previous.merge(snapshot, objects)
    }
}

/// The GatewayClass and Gateway `proxy` serves, when the class is admitpilot's.
fn served_gateway<'a>(
    snapshot: &'a Snapshot,
    proxy: &Proxy,
    options: &Options,
) -> Option<(
    &'a Arc<ConfigObject>,
    &'a admitpilot_model::gateway_api::Gateway,
)> {
    let name = proxy.labels.get(GATEWAY_NAME_LABEL)?;
    let object = snapshot.get(&ObjectKey::new(
        Kind::KubernetesGateway,
        proxy.namespace.clone(),
        name.clone(),
    ))?;
    let Spec::KubernetesGateway(gateway) = &object.spec else {
        return None;
    };
    // Not served: a Gateway not accepted for what it says alone. Parameters that do not resolve (a ConfigMap) are
    // about its deployment, not its routes: its proxies keep being served (status says what is wrong).
    if gateway.not_accepted().is_some() {
        return None;
    }
    let class = snapshot.get(&ObjectKey::new(
        Kind::GatewayClass,
        "",
        gateway.gateway_class_name.clone(),
    ))?;
    match &class.spec {
        Spec::GatewayClass(class) if class.controller_name == options.gateway_controller => {
            Some((object, gateway))
        }
        _ => None,
    }
}

fn synthesized_meta(gateway: &ConfigObject, name: String) -> ObjectMeta {
    ObjectMeta {
        name,
        namespace: gateway.metadata.namespace.clone(),
        creation_timestamp: gateway.metadata.creation_timestamp.clone(),
        ..ObjectMeta::default()
    }
}

/// The Istio server of a listener of a Gateway in `namespace`, or `None` for a protocol admitpilot does not
/// serve (UDP, or a domain-prefixed one) or a terminating listener without a usable certificate. HTTP and HTTPS
/// become HTTP and HTTPS servers; TLS becomes a TLS server, passing the connection through or terminating it
/// ([`terminating_tls`]); TCP a TCP server.
fn server(
    snapshot: &Snapshot,
    listener: &Listener,
    owner: Owner<'_>,
    namespace: &str,
) -> Option<Server> {
    let hostname = listener.hostname.as_deref().filter(|h| !h.is_empty());
    let (protocol, tls) = match listener.protocol.as_str() {
        "HTTP" => ("HTTP", None),
        "HTTPS" => (
            "HTTPS",
            Some(terminating_tls(snapshot, listener, owner, namespace)?),
        ),
        "TLS" if listener.terminates() => (
            "TLS",
            Some(terminating_tls(snapshot, listener, owner, namespace)?),
        ),
        "TLS" => (
            "TLS",
            Some(ServerTlsSettings {
                mode: Some(ServerTlsMode::Passthrough),
                ..ServerTlsSettings::default()
            }),
        ),
        "TCP" => ("TCP", None),
        _ => return None,
    };
    Some(Server {
        port: Some(Port {
            number: Some(listener.port),
            protocol: protocol.into(),
            name: listener.name.clone(),
            target_port: None,
        }),
        hosts: vec![format!("*/{}", hostname.unwrap_or("*"))],
        tls,
        ..Server::default()
    })
}

/// The TLS settings of a listener that terminates TLS with its first certificate, a core Secret (in the namespace
/// of the listener's Gateway or ListenerSet, `owner`, unless it names one). One outside the Gateway's `namespace`
/// becomes the credential `kubernetes-gateway://<namespace>/<name>` (Istio's name for it). The listener's owner
/// must be allowed the Secret ([`super::secret::listener_may_use`]: its own namespace, or a ReferenceGrant to its
/// kind and namespace): grants are not inherited, so a set cannot borrow what its Gateway may use, and a set's
/// Secret of its own namespace needs no grant (the gateway's SDS lookup, `translate::secret`, allows what an
/// attached set may use). A Secret that exists but holds no PEM certificate with its key is not used
/// ([`super::secret::unusable_certificate`]).
fn terminating_tls(
    snapshot: &Snapshot,
    listener: &Listener,
    owner: Owner<'_>,
    namespace: &str,
) -> Option<ServerTlsSettings> {
    let certificate = listener.tls.as_ref()?.certificates().first()?;
    if !certificate.is_core_secret() {
        return None;
    }
    let secret_namespace = certificate.namespace_or(owner.namespace);
    let owner_may =
        super::secret::listener_may_use(snapshot, owner, (secret_namespace, &certificate.name));
    if !owner_may {
        return None;
    }
    // A Secret holding no certificate Envoy could load is not sent (Envoy would refuse it; istiod does the same).
    let key = ObjectKey::new(Kind::Secret, secret_namespace, certificate.name.clone());
    let malformed = snapshot.get(&key).is_some_and(
        |o| matches!(&o.spec, Spec::Secret(s) if super::secret::unusable_certificate(s).is_some()),
    );
    if malformed {
        return None;
    }
    let credential_name = if secret_namespace == namespace {
        certificate.name.clone()
    } else {
        naming::gateway_credential(secret_namespace, &certificate.name)
    };
    Some(ServerTlsSettings {
        mode: Some(ServerTlsMode::Simple),
        credential_name,
        ..ServerTlsSettings::default()
    })
}

/// The TLSRoutes and TCPRoutes attached to `listener`, with the host names each serves there.
fn attached_stream<'a>(
    snapshot: &'a Snapshot,
    owner: Owner<'_>,
    listener: &Listener,
) -> Vec<stream_route::AttachedStream<'a>> {
    let routes = snapshot
        .of_kind(Kind::TlsRoute)
        .chain(snapshot.of_kind(Kind::TcpRoute));
    let mut out = Vec::new();
    for object in routes {
        let (Spec::TlsRoute(route) | Spec::TcpRoute(route)) = &object.spec else {
            continue;
        };
        let kind = object.kind().info().kind;
        let namespace = object.metadata.namespace.as_str();
        let attaches = route
            .parent_refs
            .iter()
            .any(|p| attachment::names_listener(p, namespace, owner, listener));
        if !attaches || !attachment::admits(snapshot, listener, kind, namespace, owner.namespace) {
            continue;
        }
        let hosts = if object.kind() == Kind::TcpRoute {
            vec!["*".to_string()]
        } else {
            attachment::intersect(listener.hostname.as_deref(), &route.hostnames)
        };
        if !hosts.is_empty() {
            out.push(stream_route::AttachedStream {
                object,
                route,
                hosts,
            });
        }
    }
    out
}

/// The Istio objects of a TLS listener that terminates: per attached TLSRoute, an Istio Gateway whose server is the
/// listener's with the route's host names (`<listener gateway>~<route namespace>~<route name>`), so the gateway
/// picks the route by SNI (a filter chain per route, each terminating with the listener's certificate), and a
/// VirtualService binding the route's TCP route to it.
fn terminated_tls(
    snapshot: &Snapshot,
    gateway: &ConfigObject,
    served: &ServedListener<'_>,
    (server, selector): (&Server, &BTreeMap<String, String>),
    domain_suffix: &str,
) -> Vec<Arc<ConfigObject>> {
    let mut out = Vec::new();
    for attached in attached_stream(snapshot, served.owner, served.listener) {
        let name = format!(
            "{}~{}~{}",
            served.name, attached.object.metadata.namespace, attached.object.metadata.name
        );
        let hosts = attached.hosts.clone();
        let tcp = stream_route::tcp_routes(
            snapshot,
            vec![attached],
            served.listener.port,
            domain_suffix,
        );
        if tcp.is_empty() {
            continue;
        }
        let mut server = server.clone();
        server.hosts = hosts.iter().map(|h| format!("*/{h}")).collect();
        out.push(Arc::new(ConfigObject {
            api_version: Kind::Gateway.api_version(),
            metadata: synthesized_meta(gateway, name.clone()),
            spec: Spec::Gateway(Gateway {
                servers: vec![server],
                selector: selector.clone(),
            }),
        }));
        out.push(Arc::new(ConfigObject {
            api_version: Kind::VirtualService.api_version(),
            metadata: synthesized_meta(gateway, format!("{name}~stream")),
            spec: Spec::VirtualService(VirtualService {
                hosts,
                gateways: vec![format!("{}/{name}", gateway.metadata.namespace)],
                tcp,
                ..VirtualService::default()
            }),
        }));
    }
    out
}

/// The VirtualService of a TLS or TCP listener (`<gateway name>~stream`), binding its TLSRoutes and TCPRoutes to
/// the listener's Istio Gateway `gateway_name`; `None` when no route has a valid backend.
fn stream_virtual_service(
    snapshot: &Snapshot,
    gateway: &ConfigObject,
    served: &ServedListener<'_>,
    domain_suffix: &str,
) -> Option<Arc<ConfigObject>> {
    let (listener, gateway_name) = (served.listener, &served.name);
    let attached = attached_stream(snapshot, served.owner, listener);
    let mut hosts: Vec<String> = attached.iter().flat_map(|a| a.hosts.clone()).collect();
    hosts.sort();
    hosts.dedup();
    let mut spec = VirtualService {
        hosts,
        gateways: vec![format!("{}/{gateway_name}", gateway.metadata.namespace)],
        ..VirtualService::default()
    };
    if listener.protocol == "TLS" && !listener.terminates() {
        spec.tls = stream_route::tls_routes(snapshot, attached, listener.port, domain_suffix);
    } else {
        spec.tcp = stream_route::tcp_routes(snapshot, attached, listener.port, domain_suffix);
    }
    if spec.tls.is_empty() && spec.tcp.is_empty() {
        return None;
    }
    Some(Arc::new(ConfigObject {
        api_version: Kind::VirtualService.api_version(),
        metadata: synthesized_meta(gateway, format!("{gateway_name}~stream")),
        spec: Spec::VirtualService(spec),
    }))
}

/// One listener a proxy serves: the Gateway's own, or one of a ListenerSet the Gateway takes.
struct ServedListener<'a> {
    /// The Gateway or ListenerSet object the listener is part of.
    object: &'a Arc<ConfigObject>,
    /// What routes name to attach to it.
    owner: Owner<'a>,
    /// The listener.
    listener: &'a Listener,
    /// The name of its Istio Gateway: `gateway-api~<gateway>~<listener>`, or
    /// `gateway-api~<gateway>~<set namespace>~<set name>~<listener>` for a ListenerSet's.
    name: String,
}

/// The listeners of the Gateway `object` and of the ListenerSets it takes, in the spec's precedence (the Gateway's,
/// then the sets' oldest first); a set's listener that conflicts with one before it is left out (its status says
/// Conflicted).
fn served_listeners<'a>(
    snapshot: &'a Snapshot,
    object: &'a Arc<ConfigObject>,
    gateway: &'a admitpilot_model::gateway_api::Gateway,
) -> Vec<ServedListener<'a>> {
    let gateway_name = &object.metadata.name;
    let mut out: Vec<ServedListener<'a>> = gateway
        .listeners
        .iter()
        .map(|listener| ServedListener {
            object,
            owner: Owner::gateway(object),
            listener,
            name: format!("{SYNTHESIZED}{gateway_name}~{}", listener.name),
        })
        .collect();
    for (set, spec) in listener_set::attached(snapshot, object, gateway) {
        for listener in &spec.listeners {
            if conflict(out.iter().map(|s| s.listener), listener).is_some() {
                continue;
            }
            out.push(ServedListener {
                object: set,
                owner: Owner::listener_set(set),
                listener,
                name: format!(
                    "{SYNTHESIZED}{gateway_name}~{}~{}~{}",
                    set.metadata.namespace, set.metadata.name, listener.name
                ),
            });
        }
    }
    out
}

/// A route whose rules are HTTPRoute rules: an HTTPRoute's own, or a GRPCRoute's rewritten ([`grpc_route`]).
struct HttpRules<'a> {
    object: &'a Arc<ConfigObject>,
    kind: &'static str,
    parent_refs: &'a [admitpilot_model::gateway_api::common::ParentReference],
    hostnames: &'a [String],
    rules: std::borrow::Cow<'a, [HttpRouteRule]>,
}

/// Every HTTPRoute and GRPCRoute of `snapshot`, with HTTPRoute rules.
fn http_rules(snapshot: &Snapshot) -> Vec<HttpRules<'_>> {
    let http = snapshot
        .of_kind(Kind::HttpRoute)
        .filter_map(|object| match &object.spec {
            Spec::HttpRoute(route) => Some(HttpRules {
                object,
                kind: "HTTPRoute",
                parent_refs: &route.parent_refs,
                hostnames: &route.hostnames,
                rules: std::borrow::Cow::Borrowed(&route.rules),
            }),
            _ => None,
        });
    let grpc = snapshot
        .of_kind(Kind::GrpcRoute)
        .filter_map(|object| match &object.spec {
            Spec::GrpcRoute(route) => Some(HttpRules {
                object,
                kind: "GRPCRoute",
                parent_refs: &route.parent_refs,
                hostnames: &route.hostnames,
                rules: std::borrow::Cow::Owned(grpc_route::as_http_rules(route)),
            }),
            _ => None,
        });
    http.chain(grpc).collect()
}

/// The HTTP rules (HTTPRoutes and GRPCRoutes) attached to `listener`, by host name; a host name a more specific
/// listener of the port claims (`others`: the host names of the port's other HTTP and HTTPS listeners) is left to
/// it (listener isolation, [`attachment::claimed_by_narrower_listener`]).
fn attached_http<'a>(
    snapshot: &Snapshot,
    routes: &'a [HttpRules<'a>],
    (owner, listener): (Owner<'_>, &Listener),
    others: &[&str],
) -> BTreeMap<String, Vec<http_route::Attached<'a>>> {
    let mut by_host: BTreeMap<String, Vec<http_route::Attached<'a>>> = BTreeMap::new();
    for route in routes {
        let namespace = route.object.metadata.namespace.as_str();
        let attaches = route
            .parent_refs
            .iter()
            .any(|p| attachment::names_listener(p, namespace, owner, listener));
        if !attaches
            || !attachment::admits(snapshot, listener, route.kind, namespace, owner.namespace)
        {
            continue;
        }
        for host in attachment::intersect(listener.hostname.as_deref(), route.hostnames) {
            if attachment::claimed_by_narrower_listener(listener.hostname.as_deref(), &host, others)
            {
                continue;
            }
            let list = by_host.entry(host).or_default();
            for (rule_index, rule) in route.rules.iter().enumerate() {
                push_rule(list, route.object, rule, rule_index);
            }
        }
    }
    by_host
}

fn push_rule<'a>(
    list: &mut Vec<http_route::Attached<'a>>,
    route: &'a Arc<ConfigObject>,
    rule: &'a HttpRouteRule,
    rule_index: usize,
) {
    if rule.matches.is_empty() {
        list.push(http_route::Attached {
            route,
            rule,
            rule_index,
            matched: None,
        });
    }
    for (i, m) in rule.matches.iter().enumerate() {
        list.push(http_route::Attached {
            route,
            rule,
            rule_index,
            matched: Some((i, m)),
        });
    }
}

impl Converted {
    /// Every Istio object `proxy` gets from its Gateway API Gateway; a VirtualService whose inputs are the previous
    /// call's is the previous call's `Arc`, not built again.
    fn synthesize(
        &mut self,
        snapshot: &Snapshot,
        proxy: &Proxy,
        options: &Options,
    ) -> Vec<Arc<ConfigObject>> {
        let mut inputs = HashMap::new();
        let out = self.synthesize_with(snapshot, proxy, options, &mut inputs);
        self.inputs = inputs;
        out
    }

    fn synthesize_with(
        &self,
        snapshot: &Snapshot,
        proxy: &Proxy,
        options: &Options,
        inputs: &mut HashMap<ObjectKey, HostInputs>,
    ) -> Vec<Arc<ConfigObject>> {
        let Some((object, gateway)) = served_gateway(snapshot, proxy, options) else {
            return Vec::new();
        };
        let selector: BTreeMap<String, String> =
            [(GATEWAY_NAME_LABEL.to_string(), object.metadata.name.clone())].into();
        let backends: Arc<Vec<Arc<ConfigObject>>> = Arc::new(
            snapshot
                .of_kind(Kind::Service)
                .chain(snapshot.of_kind(Kind::ReferenceGrant))
                .cloned()
                .collect(),
        );
        let mut out = Vec::new();
        let routes = http_rules(snapshot);
        let all_served = served_listeners(snapshot, object, gateway);
        // Each listener's Istio server and client certificate validation, once: `None` for a listener that is not
        // served (no server, or client certificates it should validate but cannot: status says Accepted False,
        // NoValidCACertificate). Only served listeners claim hosts from wider ones and make narrower ones answer 421.
        let prepared: Vec<Option<(Server, frontend_tls::Verdict)>> = all_served
            .iter()
            .map(|served| {
                let server = server(
                    snapshot,
                    served.listener,
                    served.owner,
                    &object.metadata.namespace,
                )?;
                let frontend =
                    frontend_tls::client_validation(snapshot, (object, gateway), served.listener);
                (!frontend.refused()).then_some((server, frontend))
            })
            .collect();
        let serving: Vec<bool> = prepared.iter().map(Option::is_some).collect();
        for (served, prepared) in all_served.iter().zip(prepared) {
            let listener = served.listener;
            let Some((mut server, frontend)) = prepared else {
                continue;
            };
            // The host names of the port's other HTTP(S) listeners (HTTPS ones for what an HTTPS listener answers
            // 421 for).
            let others = |protocols: &[&str]| -> Vec<&str> {
                all_served
                    .iter()
                    .zip(&serving)
                    .filter(|(_, serving)| **serving)
                    .map(|(other, _)| other)
                    .filter(|other| {
                        other.name != served.name
                            && other.listener.port == listener.port
                            && protocols.contains(&other.listener.protocol.as_str())
                    })
                    .filter_map(|other| other.listener.hostname.as_deref())
                    .collect()
            };
            if let (Some(validation), Some(tls)) = (frontend.validation, server.tls.as_mut()) {
                tls.mode = Some(if validation.insecure_fallback {
                    ServerTlsMode::OptionalMutual
                } else {
                    ServerTlsMode::Mutual
                });
                tls.ca_cert_credential_name = validation.ca_credential;
                tls.accept_untrusted_client_certificates = validation.insecure_fallback;
            }
            let answered = match listener.protocol.as_str() {
                "HTTPS" => {
                    attachment::misdirected(listener.hostname.as_deref(), &others(&["HTTPS"]))
                }
                // Its own host name answers 404 where no route of it matches, rather than falling through to a
                // wider listener's routes (isolation).
                "HTTP" => listener
                    .hostname
                    .iter()
                    .filter(|h| !h.is_empty())
                    .map(|h| (h.clone(), 404))
                    .collect(),
                _ => Vec::new(),
            };
            server.answered_hosts = answered
                .into_iter()
                .map(|(host, status)| AnsweredHost { host, status })
                .collect();
            if listener.protocol == "TLS" && listener.terminates() {
                out.extend(terminated_tls(
                    snapshot,
                    object,
                    served,
                    (&server, &selector),
                    &options.domain_suffix,
                ));
                continue;
            }
            let gateway_name = served.name.clone();
            out.push(Arc::new(ConfigObject {
                api_version: Kind::Gateway.api_version(),
                metadata: synthesized_meta(object, gateway_name.clone()),
                spec: Spec::Gateway(Gateway {
                    servers: vec![server],
                    selector: selector.clone(),
                }),
            }));
            if matches!(listener.protocol.as_str(), "TLS" | "TCP") {
                out.extend(stream_virtual_service(
                    snapshot,
                    object,
                    served,
                    &options.domain_suffix,
                ));
                continue;
            }
            let attached = attached_http(
                snapshot,
                &routes,
                (served.owner, listener),
                &others(&["HTTP", "HTTPS"]),
            );
            for (host, attached) in attached {
                // The host name as it is: `*` cannot be part of a host name, so `*.a` and a literal host never share a name.
                let name = format!("{gateway_name}~{host}");
                let key = ObjectKey::new(
                    Kind::VirtualService,
                    object.metadata.namespace.clone(),
                    name.clone(),
                );
                let these = HostInputs {
                    gateway: Arc::clone(served.object),
                    backends: Arc::clone(&backends),
                    attached: attached
                        .iter()
                        .map(|a| {
                            (
                                Arc::clone(a.route),
                                a.rule_index,
                                a.matched.map_or(usize::MAX, |(i, _)| i),
                            )
                        })
                        .collect(),
                };
                let unchanged = self
                    .inputs
                    .get(&key)
                    .filter(|before| before.same(&these))
                    .and_then(|_| self.previous.get(&key));
                if let Some(previous) = unchanged {
                    out.push(Arc::clone(previous));
                    inputs.insert(key, these);
                    continue;
                }
                let http = http_route::routes(snapshot, attached, &options.domain_suffix);
                if http.is_empty() {
                    continue;
                }
                inputs.insert(key, these);
                out.push(Arc::new(ConfigObject {
                    api_version: Kind::VirtualService.api_version(),
                    metadata: synthesized_meta(object, name),
                    spec: Spec::VirtualService(VirtualService {
                        hosts: vec![host],
                        gateways: vec![format!("{}/{gateway_name}", object.metadata.namespace)],
                        http,
                        ..VirtualService::default()
                    }),
                }));
            }
        }
        let presented = backend_tls::client_certificate(snapshot, object, gateway)
            .ok()
            .flatten();
        out.extend(backend_tls::destination_rules(
            snapshot,
            &options.domain_suffix,
            presented.as_deref(),
        ));
        out
    }
}

/// Every Istio object `proxy` gets from its Gateway API Gateway, built anew.
#[cfg(test)]
fn synthesize(snapshot: &Snapshot, proxy: &Proxy, options: &Options) -> Vec<Arc<ConfigObject>> {
    Converted::default().synthesize(snapshot, proxy, options)
}

#[cfg(test)]
mod tests {
    use super::*;
    use admitpilot_model::decode::test_object;
    use serde_json::{json, Value};

    fn snapshot(controller: &str, extra: &[Value]) -> Snapshot {
        let mut docs = vec![
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
                "metadata": {"name": "c"}, "spec": {"controllerName": controller}}),
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                "metadata": {"name": "gw", "namespace": "ns"},
                "spec": {"gatewayClassName": "c", "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}}),
        ];
        docs.extend(extra.iter().cloned());
        Snapshot {
            version: 1,
            objects: docs
                .into_iter()
                .map(|d| {
                    let o = test_object(d);
                    (o.key(), o)
                })
                .collect(),
        }
    }

    fn proxy(namespace: &str) -> Proxy {
        Proxy {
            namespace: namespace.into(),
            labels: [(GATEWAY_NAME_LABEL.to_string(), "gw".to_string())].into(),
            ..Proxy::default()
        }
    }

    fn route() -> Value {
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "r", "namespace": "ns"},
            "spec": {"parentRefs": [{"name": "gw"}], "rules": [{"backendRefs": [{"name": "s", "port": 80}]}]}})
    }

    #[test]
    fn only_the_proxys_gateway_of_admitpilots_class_is_converted() {
        let options = Options::default();
        let mine = snapshot(
            admitpilot_model::gateway_api::DEFAULT_CONTROLLER_NAME,
            &[route()],
        );
        let names: Vec<String> = synthesize(&mine, &proxy("ns"), &options)
            .iter()
            .map(|o| o.metadata.name.clone())
            .collect();
        assert_eq!(names, ["gateway-api~gw~http", "gateway-api~gw~http~*"]);
        assert!(synthesize(&mine, &proxy("other"), &options).is_empty());
        let theirs = snapshot("istio.io/gateway-controller", &[route()]);
        assert!(synthesize(&theirs, &proxy("ns"), &options).is_empty());
        let istio = Options {
            gateway_controller: "istio.io/gateway-controller".into(),
            ..Options::default()
        };
        assert_eq!(synthesize(&theirs, &proxy("ns"), &istio).len(), 2);
    }

    #[test]
    fn only_the_host_names_whose_inputs_changed_are_converted_again() {
        let options = Options::default();
        let on_host = |name: &str, host: &str, port: u16| {
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
                "metadata": {"name": name, "namespace": "ns"},
                "spec": {"parentRefs": [{"name": "gw"}], "hostnames": [host],
                    "rules": [{"backendRefs": [{"name": "s", "port": port}]}]}})
        };
        let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "ns"},
            "spec": {"ports": [{"port": 80}]}});
        let controller = admitpilot_model::gateway_api::DEFAULT_CONTROLLER_NAME;
        let before = snapshot(
            controller,
            &[
                on_host("a", "a.example", 80),
                on_host("b", "b.example", 80),
                service.clone(),
            ],
        );
        let mut converted = Converted::default();
        let first = converted.apply(&before, &proxy("ns"), &options).unwrap();
        let vs = |snapshot: &Snapshot, host: &str| {
            Arc::clone(
                snapshot
                    .get(&ObjectKey::new(
                        Kind::VirtualService,
                        "ns",
                        format!("gateway-api~gw~http~{host}"),
                    ))
                    .unwrap(),
            )
        };
        // Route `a` now points at a port the Service lacks: only a.example's VirtualService is built again.
        let mut after = before.clone();
        let changed = test_object(on_host("a", "a.example", 81));
        after.objects.insert(changed.key(), changed);
        let second = converted.apply(&after, &proxy("ns"), &options).unwrap();
        assert!(Arc::ptr_eq(
            &vs(&first, "b.example"),
            &vs(&second, "b.example")
        ));
        assert!(!Arc::ptr_eq(
            &vs(&first, "a.example"),
            &vs(&second, "a.example")
        ));
        assert_ne!(vs(&first, "a.example"), vs(&second, "a.example"));
        // The Service gains port 81: the routes resolve differently, so both are looked at again (b's is equal, so
        // it keeps its Arc through the equality check).
        let mut wider = after.clone();
        let mut service = service;
        service["spec"]["ports"] = json!([{"port": 80}, {"port": 81}]);
        let service = test_object(service);
        wider.objects.insert(service.key(), service);
        let third = converted.apply(&wider, &proxy("ns"), &options).unwrap();
        assert_ne!(vs(&second, "a.example"), vs(&third, "a.example"));
        assert!(Arc::ptr_eq(
            &vs(&second, "b.example"),
            &vs(&third, "b.example")
        ));
    }

    #[test]
    fn unchanged_objects_keep_their_arcs() {
        let options = Options::default();
        let config = snapshot(
            admitpilot_model::gateway_api::DEFAULT_CONTROLLER_NAME,
            &[route()],
        );
        let mut converted = Converted::default();
        let first = converted
            .apply(&config, &proxy("ns"), &options)
            .unwrap_or_default();
        let second = converted
            .apply(&config, &proxy("ns"), &options)
            .unwrap_or_default();
        let key = ObjectKey::new(Kind::VirtualService, "ns", "gateway-api~gw~http~*");
        assert!(Arc::ptr_eq(
            first.get(&key).unwrap(),
            second.get(&key).unwrap()
        ));
        assert!(Converted::default()
            .apply(&Snapshot::default(), &proxy("ns"), &options)
            .is_none());
    }

    #[test]
    fn a_listener_set_cannot_borrow_its_gateways_certificates() {
        let options = Options::default();
        let set = |cert_namespace: &str| {
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "ListenerSet",
                "metadata": {"name": "team", "namespace": "team"},
                "spec": {"parentRef": {"name": "gw", "namespace": "ns"}, "listeners": [{"name": "https",
                    "port": 443, "protocol": "HTTPS", "hostname": "bank.example",
                    "tls": {"certificateRefs": [{"name": "bank-cert", "namespace": cert_namespace}]}}]}})
        };
        let mut config = snapshot(
            admitpilot_model::gateway_api::DEFAULT_CONTROLLER_NAME,
            &[set("ns")],
        );
        let gateway = test_object(
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": "ns"},
            "spec": {"gatewayClassName": "c", "allowedListeners": {"namespaces": {"from": "All"}},
                "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}}),
        );
        config.objects.insert(gateway.key(), gateway);
        let names = |config: &Snapshot| -> Vec<String> {
            synthesize(config, &proxy("ns"), &options)
                .iter()
                .map(|o| o.metadata.name.clone())
                .collect()
        };
        // The Gateway's namespace holds the Secret; nothing lets ListenerSets of `team` use it.
        assert_eq!(names(&config), ["gateway-api~gw~http"]);
        // A ReferenceGrant to ListenerSets of `team` does.
        let grant = test_object(
            json!({"apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
            "metadata": {"name": "team-certs", "namespace": "ns"},
            "spec": {"from": [{"group": "gateway.networking.k8s.io", "kind": "ListenerSet", "namespace": "team"}],
                "to": [{"group": "", "kind": "Secret", "name": "bank-cert"}]}}),
        );
        config.objects.insert(grant.key(), grant);
        assert_eq!(
            names(&config),
            ["gateway-api~gw~http", "gateway-api~gw~team~team~https"]
        );
    }
}
