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
    /// Requested addresses (not used: the proxy's own addresses serve).
    pub addresses: Vec<serde_json::Value>,
    /// Infrastructure labels and annotations (not used).
    pub infrastructure: Option<serde_json::Value>,
    /// Gateway-wide TLS settings (`frontend` client validation is not translated; `backend` is read by
    /// [`Gateway::backend_client_certificate`]).
    pub tls: Option<serde_json::Value>,
    /// Which ListenerSets may attach.
    pub allowed_listeners: Option<AllowedListeners>,
    /// `All` or `None` for default-gateway routes (experimental).
    pub default_scope: Option<String>,
}

impl Gateway {
    /// Why the Gateway cannot be served as written: a `spec.infrastructure.parametersRef`, which admitpilot does
    /// not read (Gateway API v1.6 `apis/v1/gateway_types.go`, `GatewayReasonInvalidParameters`: the parameters are
    /// "invalid or unsupported"; istiod refuses a reference it cannot resolve the same way). Such a Gateway is not
    /// accepted: no proxy serves it and none is provisioned for it. `None` when it has none.
    pub fn unsupported_parameters(&self) -> Option<String> {
        let reference = self.infrastructure.as_ref()?.get("parametersRef")?;
        let text = |field: &str| reference.get(field).and_then(|v| v.as_str()).unwrap_or("");
        Some(format!(
            "spec.infrastructure.parametersRef ({}/{} {}): admitpilot reads no infrastructure parameters; set \
             spec.infrastructure.labels and .annotations instead, or remove the reference",
            text("group"),
            text("kind"),
            text("name")
        ))
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
