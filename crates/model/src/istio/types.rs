//! Shared `istio.type.v1beta1` messages used by the security, telemetry and extensions kinds: takes nothing,
//! defines the policy target reference, port selector and workload mode types (the `matchLabels` selector of the
//! same package is [`super::proxy_config::TypeWorkloadSelector`]).

use serde::{Deserialize, Serialize};

/// Names the resource a policy attaches to (`targetRef` / `targetRefs[]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PolicyTargetReference {
    /// API group of the target; empty means the core group.
    pub group: String,
    /// Kind of the target (`Service`, `ServiceEntry`, `Gateway`, `GatewayClass`).
    pub kind: String,
    /// Name of the target.
    pub name: String,
    /// Namespace of the target; must be empty (cross-namespace references are not supported).
    pub namespace: String,
}

/// The API group of Kubernetes Gateway API objects (Gateway, HTTPRoute…).
pub const GATEWAY_API_GROUP: &str = "gateway.networking.k8s.io";

impl PolicyTargetReference {
    /// Whether the reference names a Kubernetes Gateway API Gateway.
    pub fn is_gateway_api_gateway(&self) -> bool {
        self.group == GATEWAY_API_GROUP && self.kind == "Gateway"
    }
}

/// A policy's target references: `targetRefs`, or else its single `targetRef` (Istio's `GetTargetRefs`).
pub fn target_refs<'a>(
    target_ref: Option<&'a PolicyTargetReference>,
    target_refs: &'a [PolicyTargetReference],
) -> &'a [PolicyTargetReference] {
    match target_ref {
        Some(single) if target_refs.is_empty() => std::slice::from_ref(single),
        _ => target_refs,
    }
}

/// Selects one port by number.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PortSelector {
    /// Port number; required, 1..65535.
    pub number: Option<u32>,
}

/// Which side of a connection a plugin or filter applies to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum WorkloadMode {
    /// Not specified (both sides).
    #[default]
    #[serde(rename = "UNDEFINED")]
    Undefined,
    /// Outbound traffic only.
    #[serde(rename = "CLIENT")]
    Client,
    /// Inbound traffic only.
    #[serde(rename = "SERVER")]
    Server,
    /// Both directions.
    #[serde(rename = "CLIENT_AND_SERVER")]
    ClientAndServer,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gateway(name: &str) -> PolicyTargetReference {
        PolicyTargetReference {
            group: GATEWAY_API_GROUP.into(),
            kind: "Gateway".into(),
            name: name.into(),
            namespace: String::new(),
        }
    }

    #[test]
    fn target_refs_take_the_list_or_else_the_single_reference() {
        let (one, two) = (gateway("one"), gateway("two"));
        assert_eq!(target_refs(Some(&one), &[]), std::slice::from_ref(&one));
        assert_eq!(
            target_refs(Some(&one), std::slice::from_ref(&two)),
            std::slice::from_ref(&two)
        );
        assert!(target_refs(None, &[]).is_empty());
    }

    #[test]
    fn only_gateway_api_gateways_are_gateway_api_gateways() {
        assert!(gateway("gw").is_gateway_api_gateway());
        let istio = PolicyTargetReference {
            group: "networking.istio.io".into(),
            ..gateway("gw")
        };
        assert!(!istio.is_gateway_api_gateway());
    }
}
