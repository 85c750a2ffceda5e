//! Node identity: takes the Envoy `Node` of a stream's first request and yields the proxy's id and its
//! [`Proxy`] group key (namespace and labels), the way Istio identifies gateway pods.

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::google::protobuf::{value::Kind as ValueKind, Struct, Value};

use admitpilot_translate::Proxy;

/// Namespace used when neither the node metadata nor the node id names one.
pub const DEFAULT_NAMESPACE: &str = "default";

/// Who is on the other end of a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeIdentity {
    /// The node id as sent (`router~IP~POD.NAMESPACE~NAMESPACE.svc.cluster.local` for Istio-style gateways).
    pub id: String,
    /// The group key: proxies with equal keys receive identical resources.
    pub proxy: Proxy,
}

impl NodeIdentity {
    /// Derives the identity. Namespace: metadata `NAMESPACE`, else the id's `POD.NAMESPACE` part, else
    /// [`DEFAULT_NAMESPACE`]. Labels: metadata `LABELS` (a struct of strings; numbers and booleans are
    /// written out, other values skipped). Trusted proxies: metadata
    /// `PROXY_CONFIG.gatewayTopology.numTrustedProxies` (a whole number), else 0.
    pub fn from_node(node: &Node) -> Self {
        let metadata = node.metadata.as_ref();
        let namespace = metadata
            .and_then(|m| string_field(m, "NAMESPACE"))
            .filter(|ns| !ns.is_empty())
            .or_else(|| namespace_from_id(&node.id))
            .unwrap_or_else(|| DEFAULT_NAMESPACE.to_string());
        let labels = metadata
            .and_then(|m| m.fields.get("LABELS"))
            .map(labels_from_value)
            .unwrap_or_default();
        let trusted_proxies = metadata
            .and_then(|m| m.fields.get("PROXY_CONFIG"))
            .and_then(|v| struct_field(v, "gatewayTopology"))
            .and_then(|v| struct_field(v, "numTrustedProxies"))
            .and_then(|v| match v.kind.as_ref()? {
                ValueKind::NumberValue(n)
                    if n.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(n) =>
                {
                    Some(*n as u32)
                }
                _ => None,
            })
            .unwrap_or(0);
        NodeIdentity {
            id: node.id.clone(),
            proxy: Proxy {
                namespace,
                labels,
                trusted_proxies,
            },
        }
    }
}

/// The service account a node claims in its metadata (`SERVICE_ACCOUNT`, as Istio's proxies send), if any.
pub fn service_account(node: &Node) -> Option<String> {
    node.metadata
        .as_ref()
        .and_then(|m| string_field(m, "SERVICE_ACCOUNT"))
        .filter(|sa| !sa.is_empty())
}

/// `router~10.0.0.1~gw-abc.higress-system~higress-system.svc.cluster.local` → `higress-system`.
fn namespace_from_id(id: &str) -> Option<String> {
    let parts: Vec<&str> = id.split('~').collect();
    let [_kind, _ip, pod, domain] = parts.as_slice() else {
        return None;
    };
    let from_pod = pod
        .split_once('.')
        .map(|(_, ns)| ns)
        .filter(|ns| !ns.is_empty());
    let from_domain = domain.split('.').next().filter(|ns| !ns.is_empty());
    from_pod.or(from_domain).map(str::to_string)
}

/// The field `key` of a struct value.
fn struct_field<'v>(value: &'v Value, key: &str) -> Option<&'v Value> {
    match value.kind.as_ref()? {
        ValueKind::StructValue(fields) => fields.fields.get(key),
        _ => None,
    }
}

fn string_field(metadata: &Struct, key: &str) -> Option<String> {
    match metadata.fields.get(key)?.kind.as_ref()? {
        ValueKind::StringValue(s) => Some(s.clone()),
        _ => None,
    }
}

fn labels_from_value(value: &Value) -> BTreeMap<String, String> {
    let Some(ValueKind::StructValue(labels)) = value.kind.as_ref() else {
        return BTreeMap::new();
    };
    labels
        .fields
        .iter()
        .filter_map(|(key, value)| {
            let text = match value.kind.as_ref()? {
                ValueKind::StringValue(s) => s.clone(),
                ValueKind::BoolValue(b) => b.to_string(),
                ValueKind::NumberValue(n) => n.to_string(),
                _ => return None,
            };
            Some((key.clone(), text))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string(s: &str) -> Value {
        Value {
            kind: Some(ValueKind::StringValue(s.into())),
        }
    }

    fn node(id: &str, fields: Vec<(&str, Value)>) -> Node {
        Node {
            id: id.into(),
            metadata: Some(Struct {
                fields: fields
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect(),
            }),
            ..Default::default()
        }
    }

    fn object(fields: Vec<(&str, Value)>) -> Value {
        Value {
            kind: Some(ValueKind::StructValue(Struct {
                fields: fields
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect(),
            })),
        }
    }

    #[test]
    fn trusted_proxies_come_from_the_gateway_topology() {
        let number = |n: f64| Value {
            kind: Some(ValueKind::NumberValue(n)),
        };
        let with = |value: Value| {
            let config = object(vec![(
                "gatewayTopology",
                object(vec![("numTrustedProxies", value)]),
            )]);
            NodeIdentity::from_node(&node("router~x", vec![("PROXY_CONFIG", config)]))
                .proxy
                .trusted_proxies
        };
        assert_eq!(with(number(2.0)), 2);
        assert_eq!(with(number(1.5)), 0, "not a whole number");
        assert_eq!(with(number(-1.0)), 0);
        assert_eq!(with(string("2")), 0);
        assert_eq!(
            NodeIdentity::from_node(&node("router~x", vec![]))
                .proxy
                .trusted_proxies,
            0
        );
    }

    #[test]
    fn istio_router_id_gives_namespace() {
        let identity = NodeIdentity::from_node(&node(
            "router~10.1.2.3~higress-gateway-7d9.higress-system~higress-system.svc.cluster.local",
            vec![],
        ));
        assert_eq!(identity.proxy.namespace, "higress-system");
        assert!(identity.proxy.labels.is_empty());
    }

    #[test]
    fn metadata_namespace_and_labels_win() {
        let labels = Value {
            kind: Some(ValueKind::StructValue(Struct {
                fields: [
                    ("app".to_string(), string("gw")),
                    (
                        "replicas".to_string(),
                        Value {
                            kind: Some(ValueKind::NumberValue(2.0)),
                        },
                    ),
                ]
                .into_iter()
                .collect(),
            })),
        };
        let identity = NodeIdentity::from_node(&node(
            "router~10.1.2.3~gw.a~a.svc.cluster.local",
            vec![("NAMESPACE", string("b")), ("LABELS", labels)],
        ));
        assert_eq!(identity.proxy.namespace, "b");
        assert_eq!(identity.proxy.labels["app"], "gw");
        assert_eq!(identity.proxy.labels["replicas"], "2");
    }

    #[test]
    fn unknown_id_falls_back_to_default() {
        let identity = NodeIdentity::from_node(&node("gw-1", vec![]));
        assert_eq!(identity.proxy.namespace, DEFAULT_NAMESPACE);
        assert_eq!(identity.id, "gw-1");
        let no_metadata = NodeIdentity::from_node(&Node {
            id: "a~b~c~".into(),
            ..Default::default()
        });
        assert_eq!(no_metadata.proxy.namespace, DEFAULT_NAMESPACE);
    }
}
