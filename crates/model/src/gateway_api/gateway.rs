//! Gateway API `Gateway` spec (gateway.networking.k8s.io v1, v1beta1) and `GatewayClass` spec: takes the
//! defaulted `spec` JSON, yields listeners with their TLS and allowed routes, and the class's controller.

use serde::{Deserialize, Serialize};

use super::common::{LabelSelector, ObjectReference};

/// The `spec` of a Gateway.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Gateway {
    /// The GatewayClass this Gateway belongs to.
    pub gateway_class_name: String,
    /// Listeners.
    pub listeners: Vec<Listener>,
    /// Requested addresses: the first `IPAddress` the address pools can give is asked of a provisioned gateway's
    /// load balancer ([`Gateway::requested_ips`], [`AddressPools`]).
    pub addresses: Vec<serde_json::Value>,
    /// Labels and annotations for the provisioned objects, and the parameters that overlay them
    /// ([`super::parameters`]).
    pub infrastructure: Option<serde_json::Value>,
    /// Gateway-wide TLS settings (`frontend` client certificate validation, read by
    /// [`Gateway::frontend_validation`]; `backend`, by [`Gateway::backend_client_certificate`]).
    pub tls: Option<serde_json::Value>,
    /// Which ListenerSets may attach.
    pub allowed_listeners: Option<AllowedListeners>,
    /// `All` or `None` for default-gateway routes (experimental).
    pub default_scope: Option<String>,
}

impl Gateway {
    /// Why the Gateway alone is not accepted as written, with the reason its `Accepted` condition gives (Gateway API
    /// v1.6 `apis/v1/gateway_types.go`); such a Gateway is not served and no proxy is provisioned for it (parameters
    /// whose ConfigMap does not resolve, [`super::parameters::gateway_parameters`], are `InvalidParameters` too, but
    /// leave the Gateway served and its objects as last provisioned):
    /// * `InvalidParameters`: a `spec.infrastructure.parametersRef` to anything but a core ConfigMap (the
    ///   parameters are "invalid or unsupported");
    /// * `UnsupportedAddress`: a `spec.addresses` entry of a type other than `IPAddress` and `Hostname`
    ///   (`GatewayReasonUnsupportedAddress`: "the requested address type is not supported").
    pub fn not_accepted(&self) -> Option<(&'static str, String)> {
        if let Some(reference) = self.parameters_ref() {
            if let Err(why) = super::parameters::configmap_reference(
                reference,
                "spec.infrastructure.parametersRef",
            ) {
                return Some(("InvalidParameters", why));
            }
        }
        self.addresses.iter().enumerate().find_map(|(i, address)| {
            let kind = address.get("type").and_then(|v| v.as_str()).unwrap_or("IPAddress");
            (kind != "IPAddress" && kind != "Hostname").then(|| {
                (
                    "UnsupportedAddress",
                    format!(
                        "spec.addresses[{i}].type {kind}: admitpilot gives Gateways IPAddress (and Hostname) addresses only"
                    ),
                )
            })
        })
    }

    /// The client certificate validation of `spec.tls.frontend` for listeners on `port` (the `perPort` entry for it,
    /// else `default`), when it asks for one (`caCertificateRefs` set); `None` otherwise.
    pub fn frontend_validation(&self, port: u32) -> Option<FrontendValidation> {
        let frontend = self.tls.as_ref()?.get("frontend")?;
        let per_port = frontend
            .get("perPort")
            .and_then(|v| v.as_array())
            .into_iter()
            .flatten()
            .enumerate()
            .find(|(_, entry)| entry.get("port").and_then(|p| p.as_u64()) == Some(u64::from(port)));
        let (field, validation) = match per_port {
            Some((i, entry)) => (
                format!("spec.tls.frontend.perPort[{i}].tls.validation"),
                entry.get("tls")?.get("validation")?,
            ),
            None => (
                "spec.tls.frontend.default.validation".to_string(),
                frontend.get("default")?.get("validation")?,
            ),
        };
        // An entry that does not read as a reference (a folder or MCP source skips the CRD's schema) stays, as one
        // that cannot resolve: validation configured with no usable CA refuses the listener, never serves it open.
        let unreadable = |value: &serde_json::Value| ObjectReference {
            group: None,
            kind: Some("(unreadable)".into()),
            name: value.to_string(),
            namespace: None,
        };
        let ca_refs: Vec<ObjectReference> = match validation.get("caCertificateRefs") {
            None | Some(serde_json::Value::Null) => Vec::new(),
            Some(serde_json::Value::Array(refs)) => refs
                .iter()
                .map(|r| serde_json::from_value(r.clone()).unwrap_or_else(|_| unreadable(r)))
                .collect(),
            Some(other) => vec![unreadable(other)],
        };
        if ca_refs.is_empty() {
            return None;
        }
        let insecure_fallback =
            validation.get("mode").and_then(|m| m.as_str()) == Some("AllowInsecureFallback");
        Some(FrontendValidation {
            field,
            ca_refs,
            insecure_fallback,
        })
    }

    /// Whether some `spec.tls.frontend` validation (default or per port) is `AllowInsecureFallback`: the Gateway then
    /// says so (`InsecureFrontendValidationMode`).
    pub fn insecure_frontend_validation(&self) -> bool {
        let Some(frontend) = self.tls.as_ref().and_then(|tls| tls.get("frontend")) else {
            return false;
        };
        let mode = |validation: Option<&serde_json::Value>| {
            validation
                .and_then(|v| v.get("mode"))
                .and_then(|m| m.as_str())
                == Some("AllowInsecureFallback")
        };
        mode(frontend.get("default").and_then(|d| d.get("validation")))
            || frontend
                .get("perPort")
                .and_then(|v| v.as_array())
                .into_iter()
                .flatten()
                .any(|entry| mode(entry.get("tls").and_then(|t| t.get("validation"))))
    }

    /// `spec.infrastructure.parametersRef`, when set.
    pub fn parameters_ref(&self) -> Option<&serde_json::Value> {
        self.infrastructure.as_ref()?.get("parametersRef")
    }

    /// The values of `spec.addresses` of type `IPAddress` (the default), in order, with their index.
    pub fn requested_ips(&self) -> Vec<(usize, &str)> {
        self.addresses
            .iter()
            .enumerate()
            .filter(|(_, address)| {
                address
                    .get("type")
                    .and_then(|v| v.as_str())
                    .unwrap_or("IPAddress")
                    == "IPAddress"
            })
            .filter_map(|(i, address)| Some((i, address.get("value")?.as_str()?)))
            .collect()
    }

    /// `spec.tls.backend.clientCertificateRef`: the certificate the Gateway presents to backends it connects to
    /// over TLS (`GatewayBackendTLS`); `None` when absent or not an object reference (the schema refuses that).
    pub fn backend_client_certificate(&self) -> Option<ObjectReference> {
        let reference = self
            .tls
            .as_ref()?
            .get("backend")?
            .get("clientCertificateRef")?;
        serde_json::from_value(reference.clone()).ok()
    }
}

/// The client certificate validation a Gateway asks of its HTTPS listeners on one port (`spec.tls.frontend`,
/// Gateway API v1.6 `FrontendTLSValidation`).
#[derive(Debug, Clone, PartialEq)]
pub struct FrontendValidation {
    /// Where it is written (`spec.tls.frontend.default.validation` or a `perPort` entry's), for messages.
    pub field: String,
    /// The CA certificates that validate client certificates (ConfigMaps with `ca.crt`).
    pub ca_refs: Vec<ObjectReference>,
    /// `mode: AllowInsecureFallback`: a connection without a valid client certificate is let through too.
    pub insecure_fallback: bool,
}

/// The IP ranges a provisioned gateway's load balancer can give (`--gateway-address-pool`): a requested address
/// outside them is not usable (`AddressNotUsable`). Empty: every address is taken to be usable.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddressPools(Vec<(std::net::IpAddr, u8)>);

impl AddressPools {
    /// Parses CIDRs (`10.0.0.0/24`, `2001:db8::/64`); the error names the one that does not parse.
    pub fn parse(cidrs: &[String]) -> Result<Self, String> {
        cidrs
            .iter()
            .map(|cidr| {
                let (ip, bits) = cidr
                    .split_once('/')
                    .ok_or_else(|| format!("{cidr}: not a CIDR"))?;
                let ip: std::net::IpAddr = ip.parse().map_err(|_| format!("{cidr}: not an IP"))?;
                let bits: u8 = bits
                    .parse()
                    .map_err(|_| format!("{cidr}: bad prefix length"))?;
                let max = if ip.is_ipv4() { 32 } else { 128 };
                if bits > max {
                    return Err(format!("{cidr}: prefix length above {max}"));
                }
                Ok((ip, bits))
            })
            .collect::<Result<_, _>>()
            .map(AddressPools)
    }

    /// Whether `value` is an IP one of the pools holds (any IP when there are none).
    pub fn usable(&self, value: &str) -> bool {
        let Ok(ip) = value.parse::<std::net::IpAddr>() else {
            return false;
        };
        self.0.is_empty()
            || self.0.iter().any(|(net, bits)| match (net, ip) {
                (std::net::IpAddr::V4(net), std::net::IpAddr::V4(ip)) => {
                    let mask = u32::MAX.checked_shl(32 - u32::from(*bits)).unwrap_or(0);
                    u32::from(*net) & mask == u32::from(ip) & mask
                }
                (std::net::IpAddr::V6(net), std::net::IpAddr::V6(ip)) => {
                    let mask = u128::MAX.checked_shl(128 - u32::from(*bits)).unwrap_or(0);
                    u128::from(*net) & mask == u128::from(ip) & mask
                }
                _ => false,
            })
    }
}

/// `Listener` (also the `ListenerEntry` of a ListenerSet).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Listener {
    /// Unique name within the Gateway.
    pub name: String,
    /// Host name (may start with `*.`); none matches every host.
    pub hostname: Option<String>,
    /// Port.
    pub port: u32,
    /// `HTTP`, `HTTPS`, `TLS`, `TCP`, `UDP` or a domain-prefixed protocol.
    pub protocol: String,
    /// TLS settings for HTTPS and TLS listeners.
    pub tls: Option<ListenerTls>,
    /// Which routes may attach.
    pub allowed_routes: Option<AllowedRoutes>,
}

impl Listener {
    /// Whether the listener terminates TLS (HTTPS, or TLS in `Terminate` mode, the default).
    pub fn terminates(&self) -> bool {
        match self.protocol.as_str() {
            "HTTPS" => true,
            "TLS" => self.tls.as_ref().is_some_and(|t| !t.is_passthrough()),
            _ => false,
        }
    }
}

/// A conflict of `listener` with one of `others` on its port: another protocol (ProtocolConflict; HTTPS and TLS
/// share a port, told apart by SNI), or the same host name with the same protocol, or with HTTPS and TLS (SNI
/// cannot tell them apart) (HostnameConflict). The reason and a message, as the listener's `Conflicted` condition
/// says them.
pub fn conflict<'a>(
    others: impl IntoIterator<Item = &'a Listener>,
    listener: &Listener,
) -> Option<(&'static str, String)> {
    let sni = |protocol: &str| ["HTTPS", "TLS"].contains(&protocol);
    others
        .into_iter()
        .filter(|other| other.port == listener.port)
        .find_map(|other| {
            if other.protocol != listener.protocol
                && !(sni(&other.protocol) && sni(&listener.protocol))
            {
                Some((
                    "ProtocolConflict",
                    format!(
                        "listener {:?} uses {} on port {}",
                        other.name, other.protocol, other.port
                    ),
                ))
            } else if other.hostname == listener.hostname {
                Some((
                    "HostnameConflict",
                    format!("listener {:?} has the same port and host name", other.name),
                ))
            } else {
                None
            }
        })
}

/// `ListenerTLSConfig` (`GatewayTLSConfig` in older versions).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ListenerTls {
    /// `Terminate` (default) or `Passthrough`.
    pub mode: Option<String>,
    /// Certificates (Secrets of type kubernetes.io/tls); `None` when the field is absent (CEL tells the two apart).
    pub certificate_refs: Option<Vec<ObjectReference>>,
    /// Implementation-specific options; `None` when the field is absent.
    pub options: Option<std::collections::BTreeMap<String, String>>,
}

impl ListenerTls {
    /// The certificate references (none when the field is absent).
    pub fn certificates(&self) -> &[ObjectReference] {
        self.certificate_refs.as_deref().unwrap_or_default()
    }

    /// Whether the listener passes TLS through instead of terminating it.
    pub fn is_passthrough(&self) -> bool {
        self.mode.as_deref() == Some("Passthrough")
    }
}

/// `AllowedRoutes`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AllowedRoutes {
    /// Namespaces routes may come from (defaulted to the Gateway's).
    pub namespaces: Option<RouteNamespaces>,
    /// Route kinds allowed; none means the kinds the protocol supports.
    pub kinds: Vec<RouteGroupKind>,
}

/// `RouteNamespaces` / `ListenerNamespaces`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RouteNamespaces {
    /// `All`, `Same`, `Selector` (or `None` for ListenerSets).
    pub from: Option<String>,
    /// The selector, for `Selector`.
    pub selector: Option<LabelSelector>,
}

/// `RouteGroupKind`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RouteGroupKind {
    /// Group (defaulted to `gateway.networking.k8s.io`).
    pub group: Option<String>,
    /// Kind.
    pub kind: String,
}

/// `AllowedListeners`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AllowedListeners {
    /// Namespaces ListenerSets may come from (defaulted to `None`).
    pub namespaces: Option<RouteNamespaces>,
}

/// The `spec` of a GatewayClass.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GatewayClass {
    /// The controller that manages Gateways of this class (`admitpilot.io/gateway-controller`).
    pub controller_name: String,
    /// Implementation parameters.
    pub parameters_ref: Option<serde_json::Value>,
    /// Human-readable description.
    pub description: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_hold_what_their_prefixes_cover() {
        let pools = AddressPools::parse(&["10.244.250.0/24".into(), "2001:db8::/64".into()])
            .expect("valid CIDRs");
        assert!(pools.usable("10.244.250.10"));
        assert!(!pools.usable("10.244.251.10"));
        assert!(pools.usable("2001:db8::5"));
        assert!(!pools.usable("not an ip"));
        assert!(AddressPools::default().usable("192.0.2.1"));
        assert!(AddressPools::parse(&["10.0.0.0/33".into()]).is_err());
        assert!(AddressPools::parse(&["0.0.0.0/0".into()])
            .expect("valid")
            .usable("8.8.8.8"));
    }

    #[test]
    fn unsupported_address_types_and_parameters_are_not_accepted() {
        let gateway = |spec: serde_json::Value| -> Gateway {
            serde_json::from_value(spec).expect("a Gateway spec")
        };
        let fake = gateway(serde_json::json!({"addresses": [
            {"type": "test/fake-invalid-type", "value": "x"},
            {"value": "10.0.0.1"}, {"type": "Hostname", "value": "a.example"}]}));
        assert_eq!(
            fake.not_accepted().map(|(reason, _)| reason),
            Some("UnsupportedAddress")
        );
        assert_eq!(fake.requested_ips(), [(1, "10.0.0.1")]);
        let params = gateway(serde_json::json!({"infrastructure": {"parametersRef": {
            "group": "g", "kind": "K", "name": "n"}}}));
        assert_eq!(
            params.not_accepted().map(|(reason, _)| reason),
            Some("InvalidParameters")
        );
        assert_eq!(gateway(serde_json::json!({})).not_accepted(), None);
        let configmap = gateway(serde_json::json!({"infrastructure": {"parametersRef": {
            "group": "", "kind": "ConfigMap", "name": "n"}}}));
        assert_eq!(
            configmap.not_accepted(),
            None,
            "resolved against the snapshot"
        );
    }

    #[test]
    fn frontend_validation_is_per_port_else_default() {
        let spec: Gateway = serde_json::from_value(serde_json::json!({"tls": {"frontend": {
            "default": {"validation": {"caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "ca"}]}},
            "perPort": [{"port": 8443, "tls": {"validation": {"mode": "AllowInsecureFallback",
                "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "port-ca"}]}}}]}}}))
        .expect("a Gateway spec");
        let default = spec.frontend_validation(443).expect("the default");
        assert_eq!(default.field, "spec.tls.frontend.default.validation");
        assert_eq!(default.ca_refs[0].name, "ca");
        assert!(!default.insecure_fallback);
        let port = spec.frontend_validation(8443).expect("the port's");
        assert_eq!(port.field, "spec.tls.frontend.perPort[0].tls.validation");
        assert!(port.insecure_fallback);
        assert!(spec.insecure_frontend_validation());
        assert_eq!(Gateway::default().frontend_validation(443), None);
        let unreadable: Gateway = serde_json::from_value(serde_json::json!({"tls": {"frontend": {
            "default": {"validation": {"caCertificateRefs": [{"name": 5}]}}}}}))
        .expect("a Gateway spec");
        let refs = unreadable
            .frontend_validation(443)
            .expect("still configured")
            .ca_refs;
        assert_eq!(refs[0].kind.as_deref(), Some("(unreadable)"));
    }
}
