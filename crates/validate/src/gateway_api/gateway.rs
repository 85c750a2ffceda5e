//! Gateway, GatewayClass and ListenerSet rules (pure): takes their specs, records the CEL failures of the Gateway
//! and ListenerSet CRDs' `spec.listeners` and `spec.addresses` rules (each named by its message) with the API
//! server's text.

use super::common::{cel, ARRAY, OBJECT};
use admitpilot_model::gateway_api::gateway::Listener;
use admitpilot_model::gateway_api::{Gateway, ListenerSet};
use admitpilot_model::Findings;

/// Checks a Gateway spec.
pub fn validate(gateway: &Gateway, out: &mut Findings) {
    listeners(&gateway.listeners, true, out);
    addresses(&gateway.addresses, out);
}

/// The Gateway CRD's `spec.addresses` CEL rules (v1.6.3): a Hostname value matches the host-name pattern (per
/// item), and IPAddress and Hostname values are unique. The `IPAddress` values' `ipv4`/`ipv6` formats are the
/// schema's `oneOf` ([`super::schema`]).
fn addresses(addresses: &[serde_json::Value], out: &mut Findings) {
    // The CRD defaults `type` to IPAddress.
    let typed = |a: &serde_json::Value| {
        let kind = a["type"].as_str().unwrap_or("IPAddress").to_string();
        (kind, a["value"].as_str().map(str::to_string))
    };
    for (i, address) in addresses.iter().enumerate() {
        if let (kind, Some(value)) = typed(address) {
            if kind == "Hostname" && !is_address_hostname(&value) {
                cel(
                    out,
                    format!("spec.addresses[{i}]"),
                    OBJECT,
                    "Hostname value must be empty or contain only valid characters (matching \
                     ^(\\*\\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$)",
                );
            }
        }
    }
    let all: Vec<(String, Option<String>)> = addresses.iter().map(typed).collect();
    for (kind, message) in [
        ("IPAddress", "IPAddress values must be unique"),
        ("Hostname", "Hostname values must be unique"),
    ] {
        let repeated = all.iter().any(|(k1, v1)| {
            k1 == kind
                && v1.is_some()
                && all.iter().filter(|(k2, v2)| k2 == kind && v2 == v1).count() != 1
        });
        if repeated {
            cel(out, "spec.addresses", ARRAY, message);
        }
    }
}

/// `^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`: DNS labels of lower-case letters,
/// digits and inner hyphens, dot-separated, optionally after `*.`.
fn is_address_hostname(value: &str) -> bool {
    let rest = value.strip_prefix("*.").unwrap_or(value);
    !rest.is_empty()
        && rest.split('.').all(|label| {
            let bytes = label.as_bytes();
            let edge = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
            bytes.first().is_some_and(edge)
                && bytes.last().is_some_and(edge)
                && bytes.iter().all(|b| edge(b) || *b == b'-')
        })
}

/// Checks a ListenerSet spec (its listeners follow the Gateway's rules; a listener without a port is not compared
/// for uniqueness).
pub fn validate_listener_set(set: &ListenerSet, out: &mut Findings) {
    listeners(&set.listeners, false, out);
}

fn listeners(listeners: &[Listener], gateway: bool, out: &mut Findings) {
    let protocol_in = |l: &Listener, list: &[&str]| list.contains(&l.protocol.as_str());
    let rules: [(bool, &str); 4] = [
        (
            listeners
                .iter()
                .any(|l| protocol_in(l, &["HTTP", "TCP", "UDP"]) && l.tls.is_some()),
            "tls must not be specified for protocols ['HTTP', 'TCP', 'UDP']",
        ),
        (
            listeners.iter().any(|l| {
                l.protocol == "HTTPS"
                    && l.tls.as_ref().is_some_and(|t| {
                        !matches!(t.mode.as_deref(), None | Some("" | "Terminate"))
                    })
            }),
            "tls mode must be Terminate for protocol HTTPS",
        ),
        (
            listeners.iter().any(|l| {
                l.protocol == "TLS"
                    && l.tls
                        .as_ref()
                        .is_none_or(|t| t.mode.as_deref().is_none_or(str::is_empty))
            }),
            "tls mode must be set for protocol TLS",
        ),
        (
            listeners.iter().any(|l| {
                protocol_in(l, &["TCP", "UDP"])
                    && l.hostname.as_deref().is_some_and(|h| !h.is_empty())
            }),
            "hostname must not be specified for protocols ['TCP', 'UDP']",
        ),
    ];
    for (_, message) in rules.iter().filter(|(fails, _)| *fails) {
        cel(out, "spec.listeners", ARRAY, message);
    }
    if listeners
        .iter()
        .any(|l1| listeners.iter().filter(|l2| l1.name == l2.name).count() != 1)
    {
        cel(
            out,
            "spec.listeners",
            ARRAY,
            "Listener name must be unique within the Gateway",
        );
    }
    let same = |l1: &Listener, l2: &Listener| {
        l1.port == l2.port && l1.protocol == l2.protocol && l1.hostname == l2.hostname
    };
    let unique = listeners.iter().all(|l1| {
        (!gateway && l1.port == 0) || listeners.iter().filter(|l2| same(l1, l2)).count() == 1
    });
    if !unique {
        cel(
            out,
            "spec.listeners",
            ARRAY,
            "Combination of port, protocol and hostname must be unique for each listener",
        );
    }
    for (i, listener) in listeners.iter().enumerate() {
        let Some(tls) = &listener.tls else { continue };
        let terminate = tls.mode.as_deref().unwrap_or("Terminate") == "Terminate";
        // `size(self.certificateRefs) > 0 || size(self.options) > 0`, as CEL evaluates it: a true side wins, else
        // an absent field is an error ("no such key"), the left one first.
        let sides = [
            (
                "certificateRefs",
                tls.certificate_refs.as_ref().map(|c| !c.is_empty()),
            ),
            ("options", tls.options.as_ref().map(|o| !o.is_empty())),
        ];
        if terminate && !sides.iter().any(|(_, side)| *side == Some(true)) {
            const RULE: &str =
                "certificateRefs or options must be specified when mode is Terminate";
            let message = match sides.iter().find(|(_, side)| side.is_none()) {
                Some((key, _)) => format!("no such key: {key} evaluating rule: {RULE}"),
                None => RULE.to_string(),
            };
            cel(out, format!("spec.listeners[{i}].tls"), OBJECT, &message);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::error_texts;
    use serde_json::{json, Value};

    fn gateway(listeners: Value) -> Vec<String> {
        error_texts(
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": "ns"},
            "spec": {"gatewayClassName": "admitpilot", "listeners": listeners}}),
        )
    }

    /// Texts of kube-apiserver v1.34 with the v1.6.3 CRDs (`kubectl apply --dry-run=server`).
    #[test]
    fn address_rules_give_the_api_servers_text() {
        let with = |addresses: Value| {
            error_texts(
                json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                "metadata": {"name": "gw", "namespace": "ns"},
                "spec": {"gatewayClassName": "admitpilot", "addresses": addresses,
                    "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}}),
            )
        };
        assert_eq!(
            with(json!([{"type": "Hostname", "value": "a.example:80"}])),
            ["spec.addresses[0]: Invalid value: \"object\": Hostname value must be empty or contain only valid \
              characters (matching ^(\\*\\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$)"]
        );
        assert_eq!(
            with(json!([{"value": "1.2.3.4"}, {"type": "IPAddress", "value": "1.2.3.4"}])),
            ["spec.addresses: Invalid value: \"array\": IPAddress values must be unique"]
        );
        assert_eq!(
            with(
                json!([{"type": "Hostname", "value": "*.a.example"}, {"type": "Hostname", "value": "b.example"},
                {"type": "NamedAddress", "value": "b.example"}])
            ),
            Vec::<String>::new()
        );
    }

    #[test]
    fn listener_rules_give_the_api_servers_text() {
        assert_eq!(
            gateway(json!([{"name": "http", "port": 80, "protocol": "HTTP"}])),
            Vec::<String>::new()
        );
        assert_eq!(
            gateway(json!([{"name": "a", "port": 80, "protocol": "HTTP"},
                {"name": "b", "port": 80, "protocol": "HTTP"}])),
            ["spec.listeners: Invalid value: \"array\": Combination of port, protocol and hostname must be \
              unique for each listener"]
        );
        assert_eq!(
            gateway(json!([{"name": "a", "port": 80, "protocol": "HTTP",
                "tls": {"certificateRefs": [{"name": "c"}]}}])),
            ["spec.listeners: Invalid value: \"array\": tls must not be specified for protocols ['HTTP', 'TCP', \
              'UDP']"]
        );
        assert_eq!(
            gateway(json!([{"name": "a", "port": 443, "protocol": "HTTPS", "tls": {}}])),
            // The real API server's words (CEL's error for the absent field), `tests/kube/kube_gateway_api_validation.rs`.
            ["spec.listeners[0].tls: Invalid value: \"object\": no such key: certificateRefs evaluating rule: \
              certificateRefs or options must be specified when mode is Terminate"]
        );
        assert_eq!(
            gateway(json!([{"name": "a", "port": 443, "protocol": "TCP", "hostname": "a.example"}])),
            ["spec.listeners: Invalid value: \"array\": hostname must not be specified for protocols ['TCP', \
              'UDP']"]
        );
    }
}
