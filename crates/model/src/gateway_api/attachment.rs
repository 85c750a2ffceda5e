//! Which listeners of a Gateway a route attaches to (pure): takes a listener and a route's parent reference, kind,
//! namespace and host names, answers whether the route attaches and with which host names. Translation and the
//! webhook's reference warnings both read it, so what is served and what is warned about agree. Mirrors
//! the spec's attachment rules (and istiod's `referenceAllowed`/`computeHostnames`): the parent reference names
//! the Gateway (and, with `sectionName`/`port`, the listener), the listener's protocol supports the route kind
//! and `allowedRoutes.kinds` lists it, `allowedRoutes.namespaces` admits the route's namespace, and the route's
//! host names intersect the listener's.

use std::collections::BTreeMap;

use super::common::ParentReference;
use super::gateway::Listener;
use super::GROUP;
use crate::{Kind, ObjectKey, Snapshot};

/// The route kinds a listener carries: HTTPRoute and GRPCRoute on HTTP and HTTPS; TLSRoute on TLS (passing
/// through or terminating; since v1.5 TCPRoute no longer attaches to TLS listeners, gateway-api #4427); TCPRoute
/// on TCP. `allowedRoutes.kinds` narrows these; when it is empty they are the listener's kinds.
pub fn default_kinds(listener: &Listener) -> &'static [&'static str] {
    match listener.protocol.as_str() {
        "HTTP" | "HTTPS" => &["HTTPRoute", "GRPCRoute"],
        "TLS" => &["TLSRoute"],
        "TCP" => &["TCPRoute"],
        _ => &[],
    }
}

/// The labels of the namespace `name`: its Namespace object's, plus `kubernetes.io/metadata.name: <name>`, which
/// the API server gives every namespace (so a selector on it works where Namespaces are not in the config).
pub fn namespace_labels(snapshot: &Snapshot, name: &str) -> BTreeMap<String, String> {
    let mut labels = snapshot
        .get(&ObjectKey::new(Kind::Namespace, "", name))
        .map(|o| o.metadata.labels.clone())
        .unwrap_or_default();
    labels.insert(NAMESPACE_NAME_LABEL.to_string(), name.to_string());
    labels
}

/// The label the API server puts on every namespace, naming it.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Whether `listener` accepts routes of `kind` (`HTTPRoute`…) from `route_namespace`, its Gateway (or ListenerSet)
/// being in `gateway_namespace`; a namespace `Selector` is matched against the route namespace's labels in `snapshot`
/// ([`namespace_labels`]).
pub fn admits(
    snapshot: &Snapshot,
    listener: &Listener,
    kind: &str,
    route_namespace: &str,
    gateway_namespace: &str,
) -> bool {
    let supported = default_kinds(listener);
    let allowed = listener.allowed_routes.as_ref();
    let kinds = allowed.map(|a| a.kinds.as_slice()).unwrap_or_default();
    let kind_ok = if kinds.is_empty() {
        supported.contains(&kind)
    } else {
        supported.contains(&kind)
            && kinds
                .iter()
                .any(|k| k.kind == kind && k.group.as_deref().unwrap_or(GROUP) == GROUP)
    };
    let from = allowed
        .and_then(|a| a.namespaces.as_ref())
        .and_then(|n| n.from.as_deref())
        .unwrap_or("Same");
    let namespace_ok = match from {
        "All" => true,
        "Selector" => allowed
            .and_then(|a| a.namespaces.as_ref())
            .and_then(|n| n.selector.as_ref())
            .is_some_and(|selector| selector.matches(&namespace_labels(snapshot, route_namespace))),
        _ => route_namespace == gateway_namespace,
    };
    kind_ok && namespace_ok
}

/// What a route's parent reference names and whose listeners the route attaches to: a Gateway, or a ListenerSet
/// (whose listeners join its Gateway's, [`super::listener_set`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner<'a> {
    /// `Gateway` or `ListenerSet`.
    pub kind: &'static str,
    /// Its namespace.
    pub namespace: &'a str,
    /// Its name.
    pub name: &'a str,
}

impl<'a> Owner<'a> {
    /// The Gateway `object`.
    pub fn gateway(object: &'a crate::ConfigObject) -> Owner<'a> {
        Owner {
            kind: "Gateway",
            namespace: &object.metadata.namespace,
            name: &object.metadata.name,
        }
    }

    /// The ListenerSet `object`.
    pub fn listener_set(object: &'a crate::ConfigObject) -> Owner<'a> {
        Owner {
            kind: "ListenerSet",
            namespace: &object.metadata.namespace,
            name: &object.metadata.name,
        }
    }
}

/// Whether the parent reference names this owner (a Gateway or a ListenerSet) and, through `sectionName` and
/// `port`, this listener of it.
pub fn names_listener(
    parent: &ParentReference,
    route_namespace: &str,
    owner: Owner<'_>,
    listener: &Listener,
) -> bool {
    parent.group() == GROUP
        && parent.kind() == owner.kind
        && parent.name == owner.name
        && parent.namespace_or(route_namespace) == owner.namespace
        && parent
            .section_name
            .as_deref()
            .is_none_or(|s| s.is_empty() || s == listener.name)
        && parent.port.is_none_or(|p| p == 0 || p == listener.port)
}

/// Whether a parent reference attaches a route to a Gateway, or the first reason it does not (the spec's route
/// `Accepted` reasons, in the order they are decided).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParentVerdict {
    /// Some listener it names admits the route and shares a host name with it.
    Attached,
    /// No listener matches its `sectionName` or `port`.
    NoMatchingParent,
    /// The listeners it names do not admit the route's kind or namespace.
    NotAllowedByListeners,
    /// No admitting listener's host name intersects the route's (never for a TCPRoute, which has none).
    NoMatchingListenerHostname,
}

/// Whether `parent`, in a `route_kind` of `route_namespace` with `hostnames`, attaches the route to `owner` (a
/// Gateway or ListenerSet) whose listeners are `listeners`. Translation, status and the webhook's reference
/// warnings all decide attachment with it.
pub fn parent_verdict<'a>(
    snapshot: &Snapshot,
    listeners: impl IntoIterator<Item = &'a Listener>,
    parent: &ParentReference,
    (route_kind, route_namespace): (&str, &str),
    owner: Owner<'_>,
    hostnames: &[String],
) -> ParentVerdict {
    let named: Vec<&Listener> = listeners
        .into_iter()
        .filter(|l| names_listener(parent, route_namespace, owner, l))
        .collect();
    let mut admitting = named
        .iter()
        .filter(|l| admits(snapshot, l, route_kind, route_namespace, owner.namespace))
        .peekable();
    if named.is_empty() {
        ParentVerdict::NoMatchingParent
    } else if admitting.peek().is_none() {
        ParentVerdict::NotAllowedByListeners
    } else if admitting.any(|l| {
        route_kind == "TCPRoute" || !intersect(l.hostname.as_deref(), hostnames).is_empty()
    }) {
        ParentVerdict::Attached
    } else {
        ParentVerdict::NoMatchingListenerHostname
    }
}

/// Whether `wildcard` (`*.example.com`) covers `host` (one or more labels in place of the `*`).
fn covers(wildcard: &str, host: &str) -> bool {
    wildcard
        .strip_prefix('*')
        .is_some_and(|suffix| host.len() > suffix.len() && host.ends_with(suffix))
}

/// Whether `host`, which a route attached to a listener named `listener` (its host name) serves, belongs to a more
/// specific listener of the same port (`others`: the host names of the port's other HTTP listeners). A request goes
/// to the most specific listener whose host name matches it, and only that listener's routes answer it
/// (GatewayHTTPListenerIsolation, GEP-1713): the route does not serve such a host on this listener.
pub fn claimed_by_narrower_listener(listener: Option<&str>, host: &str, others: &[&str]) -> bool {
    let listener = listener.filter(|h| !h.is_empty());
    others
        .iter()
        .filter(|other| !other.is_empty())
        .any(|other| {
            let narrower = listener.is_none_or(|l| *other != l && covers(l, other));
            narrower && (host == *other || covers(other, host))
        })
}

/// What an HTTPS listener named `listener` (its host name) answers without routing, the other HTTPS listeners of its
/// port being named `others` (GatewayHTTPSListenerDetectMisdirectedRequests): a request that reached it by SNI but
/// whose Host another, more specific listener serves, or that its own host name does not cover, gets 421
/// Misdirected Request (RFC 9110 §15.5.20: the client may retry on a new connection); a request for its own host
/// name that no route covers keeps 404. Each entry is a host name and its status; a route's host names take
/// precedence over them.
pub fn misdirected(listener: Option<&str>, others: &[&str]) -> Vec<(String, u32)> {
    let listener = listener.filter(|h| !h.is_empty());
    let mut out: Vec<(String, u32)> = others
        .iter()
        .filter(|other| {
            !other.is_empty() && listener.is_none_or(|l| **other != l && covers(l, other))
        })
        .map(|other| (other.to_string(), 421))
        .collect();
    if let Some(own) = listener {
        out.push((own.to_string(), 404));
        out.push(("*".to_string(), 421));
    }
    out
}

/// The host names a route serves on a listener (the spec's hostname intersection): the route's names the
/// listener's name matches, narrowed to the more specific of the two; `*` when neither names any. Empty when
/// they do not intersect (the route does not attach).
pub fn intersect(listener: Option<&str>, route: &[String]) -> Vec<String> {
    let listener = listener.filter(|h| !h.is_empty());
    match (listener, route.is_empty()) {
        (None, true) => vec!["*".to_string()],
        (None, false) => route.to_vec(),
        (Some(l), true) => vec![l.to_string()],
        (Some(l), false) => {
            let mut hosts: Vec<String> = route
                .iter()
                .filter_map(|r| {
                    if r == l || covers(l, r) {
                        Some(r.clone())
                    } else if covers(r, l) {
                        Some(l.to_string())
                    } else {
                        None
                    }
                })
                .collect();
            hosts.sort();
            hosts.dedup();
            hosts
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(list: &[&str]) -> Vec<String> {
        list.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_more_specific_listener_claims_its_hosts() {
        let others = ["*.example.com", "*.foo.example.com", "abc.foo.example.com"];
        // On the listener without a host name, every host a named listener covers is that listener's.
        assert!(!claimed_by_narrower_listener(None, "bar.com", &others));
        assert!(claimed_by_narrower_listener(None, "*.example.com", &others));
        assert!(claimed_by_narrower_listener(
            None,
            "abc.foo.example.com",
            &others
        ));
        // On `*.example.com`, only what a narrower one covers.
        let wide = Some("*.example.com");
        assert!(!claimed_by_narrower_listener(
            wide,
            "*.example.com",
            &others
        ));
        assert!(!claimed_by_narrower_listener(
            wide,
            "x.example.com",
            &others
        ));
        assert!(claimed_by_narrower_listener(
            wide,
            "*.foo.example.com",
            &others
        ));
        assert!(claimed_by_narrower_listener(
            wide,
            "x.foo.example.com",
            &others
        ));
        // The most specific keeps its own.
        let exact = Some("abc.foo.example.com");
        assert!(!claimed_by_narrower_listener(
            exact,
            "abc.foo.example.com",
            &others
        ));
        // A wider host is not claimed: the narrower listener's own host name wins in the route table.
        assert!(!claimed_by_narrower_listener(None, "*.com", &others));
    }

    #[test]
    fn an_https_listener_answers_421_for_what_it_does_not_serve() {
        let others = ["second.example", "*.wild.example", "four.wild.example"];
        assert_eq!(
            misdirected(None, &others),
            [
                ("second.example".to_string(), 421),
                ("*.wild.example".to_string(), 421),
                ("four.wild.example".to_string(), 421)
            ]
        );
        assert_eq!(
            misdirected(Some("*.wild.example"), &others),
            [
                ("four.wild.example".to_string(), 421),
                ("*.wild.example".to_string(), 404),
                ("*".to_string(), 421)
            ]
        );
        assert_eq!(
            misdirected(Some("second.example"), &others),
            [("second.example".to_string(), 404), ("*".to_string(), 421)]
        );
    }

    #[test]
    fn hostnames_intersect_as_the_spec_says() {
        assert_eq!(intersect(None, &[]), ["*"]);
        assert_eq!(intersect(Some("a.example"), &[]), ["a.example"]);
        assert_eq!(
            intersect(
                Some("*.example"),
                &hosts(&["a.example", "b.a.example", "example", "x.other"])
            ),
            ["a.example", "b.a.example"]
        );
        assert_eq!(
            intersect(Some("a.example"), &hosts(&["*.example"])),
            ["a.example"]
        );
        assert_eq!(
            intersect(Some("*.a.example"), &hosts(&["*.example"])),
            ["*.a.example"]
        );
        assert!(intersect(Some("a.example"), &hosts(&["b.example"])).is_empty());
    }

    #[test]
    fn listeners_admit_by_kind_and_namespace() {
        let config = crate::snapshot::snapshot_from_yaml(
            "apiVersion: v1
kind: Namespace
metadata: {name: team-a, labels: {shared-gateway: 'yes'}}
",
        );
        let admits = |listener: &Listener, kind: &str, namespace: &str| {
            admits(&config, listener, kind, namespace, "ns")
        };
        let mut listener = Listener {
            name: "http".into(),
            port: 80,
            protocol: "HTTP".into(),
            ..Listener::default()
        };
        assert!(admits(&listener, "HTTPRoute", "ns"));
        assert!(!admits(&listener, "HTTPRoute", "other"));
        assert!(!admits(&listener, "TCPRoute", "ns"));
        listener.allowed_routes = serde_json::from_value(serde_json::json!(
            {"namespaces": {"from": "All"}, "kinds": [{"kind": "GRPCRoute"}]}))
        .ok();
        assert!(admits(&listener, "GRPCRoute", "other"));
        assert!(!admits(&listener, "HTTPRoute", "ns"));
        // A selector matches the Namespace's labels, and the name label every namespace has.
        listener.allowed_routes = serde_json::from_value(serde_json::json!(
            {"namespaces": {"from": "Selector", "selector": {"matchLabels": {"shared-gateway": "yes"}}}}))
        .ok();
        assert!(admits(&listener, "HTTPRoute", "team-a"));
        assert!(!admits(&listener, "HTTPRoute", "ns"));
        assert!(!admits(&listener, "HTTPRoute", "team-b"));
        listener.allowed_routes = serde_json::from_value(serde_json::json!(
            {"namespaces": {"from": "Selector", "selector": {"matchExpressions":
                [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-b"]}]}}}))
        .ok();
        assert!(admits(&listener, "HTTPRoute", "team-b"));
        assert!(!admits(&listener, "HTTPRoute", "team-a"));
    }
}
