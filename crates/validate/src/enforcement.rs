//! What the translator does not enforce on gateways (pure): takes an object, yields the field and the sentence that
//! tell the user so. admitpilot validates these objects (a bad one is still denied) but does not turn them (or that
//! part of them) into gateway config; the webhook returns the sentence as a warning, the watch loop logs and counts
//! such objects (`admitpilot_unenforced_objects{kind}`) and `/debug/configz` marks them, so none is silently ignored.

use std::borrow::Cow;

use admitpilot_model::istio::request_authentication::jwks_upstream;
use admitpilot_model::istio::types::target_refs as target_refs_of;
use admitpilot_model::istio::PolicyTargetReference;
use admitpilot_model::{ConfigObject, Kind, Spec};

/// What of an object gateways do not enforce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unenforced {
    /// The field path (`spec`, `spec.action`…).
    pub field: &'static str,
    /// Why, in a sentence containing "is not enforced on gateways by admitpilot".
    pub why: Cow<'static, str>,
}

impl std::fmt::Display for Unenforced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.why)
    }
}

/// Why target references other than Gateway API Gateways do nothing on gateways.
const TARGET_REFS_WHY: &str = "a targetRef to anything but a Gateway API Gateway (gateway.networking.k8s.io/Gateway) \
    is not enforced on gateways by admitpilot: such references attach policies to waypoints and services; use a \
    selector naming the gateway's labels, or a targetRef to its Gateway";

/// Whether a policy's target references name something other than a Gateway API Gateway.
fn targets_other_than_gateways(
    target_ref: Option<&PolicyTargetReference>,
    target_refs: &[PolicyTargetReference],
) -> bool {
    target_refs_of(target_ref, target_refs)
        .iter()
        .any(|r| !r.is_gateway_api_gateway())
}

/// What of `object` gateways do not enforce, or `None` when the translator enforces all of it.
pub fn unenforced(object: &ConfigObject) -> Option<Unenforced> {
    if let Spec::MeshConfig(mesh) = &object.spec {
        return (!mesh.unapplied.is_empty()).then(|| Unenforced {
            field: "data.mesh",
            why: Cow::Owned(format!(
                "{} is not enforced on gateways by admitpilot: of the mesh config it reads only extensionProviders, \
                 defaultProviders.accessLogging, rootNamespace and pathNormalization (the other settings configure \
                 istiod and its sidecars)",
                mesh.unapplied.join(", ")
            )),
        });
    }
    if let Some((reason, message)) = match &object.spec {
        Spec::KubernetesGateway(gateway) => gateway.not_accepted(),
        _ => None,
    } {
        return Some(Unenforced {
            field: if reason == "InvalidParameters" {
                "spec.infrastructure.parametersRef"
            } else {
                "spec.addresses"
            },
            why: Cow::Owned(format!(
                "the Gateway is not enforced on gateways by admitpilot (Accepted False, {reason}): {message}"
            )),
        });
    }
    if let Spec::AuthorizationPolicy(policy) = &object.spec {
        let part = targets_other_than_gateways(policy.target_ref.as_ref(), &policy.target_refs)
            .then_some(("spec.targetRefs", TARGET_REFS_WHY));
        return part.map(|(field, why)| Unenforced {
            field,
            why: Cow::Borrowed(why),
        });
    }
    if let Spec::RequestAuthentication(ra) = &object.spec {
        let part = if targets_other_than_gateways(ra.target_ref.as_ref(), &ra.target_refs) {
            Some(("spec.targetRefs", TARGET_REFS_WHY))
        } else if ra.jwt_rules.iter().any(|rule| {
            rule.jwks.as_deref().is_none_or(str::is_empty)
                && rule.jwks_uri.as_deref().and_then(jwks_upstream).is_none()
        }) {
            Some((
                "spec.jwtRules.jwksUri",
                "a JWT rule with neither inline `jwks` nor a `jwksUri` of the form http(s)://host[:port]/path is not \
                 enforced on gateways by admitpilot (it does not discover keys from the issuer's OpenID \
                 configuration): tokens of that issuer are rejected",
            ))
        } else {
            None
        };
        return part.map(|(field, why)| Unenforced {
            field,
            why: Cow::Borrowed(why),
        });
    }
    if let Some((field, why)) = unenforced_gateway_api(&object.spec) {
        return Some(Unenforced {
            field,
            why: Cow::Borrowed(why),
        });
    }
    if let Spec::Telemetry(telemetry) = &object.spec {
        return unenforced_telemetry(telemetry).map(|(field, why)| Unenforced {
            field,
            why: Cow::Borrowed(why),
        });
    }
    unenforced_kind(object.kind()).map(|why| Unenforced {
        field: "spec",
        why: Cow::Borrowed(why),
    })
}

/// What of a translated Gateway API object gateways do not get: UDP and domain-prefixed listeners, session
/// persistence and filters that name extensions.
fn unenforced_gateway_api(spec: &Spec) -> Option<(&'static str, &'static str)> {
    match spec {
        Spec::KubernetesGateway(gateway) => gateway
            .listeners
            .iter()
            .any(|l| !matches!(l.protocol.as_str(), "HTTP" | "HTTPS" | "TLS" | "TCP"))
            .then_some((
                "spec.listeners",
                "a UDP or implementation-specific listener is not enforced on gateways by admitpilot: only HTTP, \
                 HTTPS, TLS and TCP listeners are served",
            )),
        Spec::HttpRoute(route) => route
            .rules
            .iter()
            .any(|rule| {
                rule.session_persistence.is_some()
                    || rule
                        .filters
                        .iter()
                        .chain(rule.backend_refs.iter().flat_map(|b| b.filters.iter()))
                        .any(|f| f.extension_ref.is_some() || f.external_auth.is_some())
            })
            .then_some((
                "spec.rules",
                "sessionPersistence and ExtensionRef or ExternalAuth filters are not enforced on gateways by \
                 admitpilot: the rest of the rule is served without them",
            )),
        _ => None,
    }
}

/// What of a Telemetry gateways do not get: access logging is translated (`translate::telemetry`), tracing and
/// metrics are not.
fn unenforced_telemetry(
    telemetry: &admitpilot_model::istio::telemetry::Telemetry,
) -> Option<(&'static str, &'static str)> {
    if targets_other_than_gateways(telemetry.target_ref.as_ref(), &telemetry.target_refs) {
        Some(("spec.targetRefs", TARGET_REFS_WHY))
    } else if !telemetry.tracing.is_empty() {
        Some((
            "spec.tracing",
            "Telemetry tracing is not enforced on gateways by admitpilot: only access logging is (configure \
             tracing in higress-config instead)",
        ))
    } else if !telemetry.metrics.is_empty() {
        Some((
            "spec.metrics",
            "Telemetry metrics are not enforced on gateways by admitpilot: Istio's stats filter is not part of \
             Envoy",
        ))
    } else {
        None
    }
}

/// Why objects of `kind` have no effect on the gateways admitpilot serves, or `None` when the translator turns
/// them (or some of them) into gateway config. Every sentence says "is not enforced on gateways by admitpilot", so
/// users can search for it.
fn unenforced_kind(kind: Kind) -> Option<&'static str> {
    let why = match kind {
        Kind::PeerAuthentication => {
            "PeerAuthentication is not enforced on gateways by admitpilot: its mTLS mode does not change how \
             gateways accept connections"
        }
        Kind::IstioWasmPlugin | Kind::HigressWasmPlugin | Kind::TrafficExtension => {
            "This Wasm plugin is not enforced on gateways by admitpilot: it is not loaded"
        }
        Kind::McpBridge => {
            "McpBridge is not enforced on gateways by admitpilot: the registries it names are not watched, so \
             their services are not routable"
        }
        Kind::Http2Rpc => {
            "Http2Rpc is not enforced on gateways by admitpilot: HTTP requests are not converted to Dubbo or gRPC"
        }
        Kind::Sidecar => {
            "Sidecar is not enforced on gateways by admitpilot (as in Istio, it configures sidecars, not gateways)"
        }
        Kind::ProxyConfig => {
            "ProxyConfig is not enforced on gateways by admitpilot: its concurrency, environment and image \
             settings are not applied"
        }
        Kind::WorkloadGroup => {
            "WorkloadGroup is not enforced on gateways by admitpilot: only WorkloadEntry objects become endpoints"
        }
        Kind::TlsRoute
        | Kind::TcpRoute
        | Kind::BackendTlsPolicy
        | Kind::ListenerSet
        | Kind::AuthorizationPolicy
        | Kind::RequestAuthentication
        | Kind::Telemetry
        | Kind::VirtualService
        | Kind::DestinationRule
        | Kind::Gateway
        | Kind::ServiceEntry
        | Kind::EnvoyFilter
        | Kind::WorkloadEntry
        | Kind::HigressConfig
        | Kind::MeshConfig
        | Kind::Service
        | Kind::EndpointSlice
        | Kind::Secret
        | Kind::ReferencedConfigMap
        | Kind::Namespace
        | Kind::GatewayClass
        | Kind::KubernetesGateway
        | Kind::HttpRoute
        | Kind::GrpcRoute
        | Kind::ReferenceGrant
        | Kind::Ingress
        | Kind::IngressClass => return None,
    };
    Some(why)
}

#[cfg(test)]
mod tests {
    use super::*;
    use admitpilot_model::decode::test_object;
    use serde_json::json;

    #[test]
    fn every_unenforced_kind_says_so_in_the_same_words() {
        let kinds: Vec<Kind> = Kind::ALL
            .iter()
            .copied()
            .filter(|kind| unenforced_kind(*kind).is_some())
            .collect();
        assert_eq!(kinds.len(), 9, "{kinds:?}");
        for kind in kinds {
            let why = unenforced_kind(kind).unwrap_or_default();
            assert!(
                why.contains("is not enforced on gateways by admitpilot"),
                "{why}"
            );
        }
        assert_eq!(unenforced_kind(Kind::VirtualService), None);
    }

    #[test]
    fn a_gateway_admitpilot_does_not_accept_is_reported_as_not_enforced() {
        let gateway = |spec: serde_json::Value| {
            test_object(
                json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
                "metadata": {"name": "gw", "namespace": "default"}, "spec": spec}),
            )
        };
        let listeners = json!([{"name": "http", "port": 80, "protocol": "HTTP"}]);
        let params = unenforced(&gateway(
            json!({"gatewayClassName": "ap", "listeners": listeners,
            "infrastructure": {"parametersRef": {"group": "g", "kind": "K", "name": "n"}}}),
        ))
        .expect("warned");
        assert_eq!(params.field, "spec.infrastructure.parametersRef");
        assert!(params.why.contains("InvalidParameters"), "{}", params.why);
        let address = unenforced(&gateway(
            json!({"gatewayClassName": "ap", "listeners": listeners,
            "addresses": [{"type": "example.com/custom", "value": "x"}]}),
        ))
        .expect("warned");
        assert_eq!(address.field, "spec.addresses");
        assert!(
            address.why.contains("UnsupportedAddress"),
            "{}",
            address.why
        );
    }

    #[test]
    fn authorization_policies_are_enforced_except_target_refs_to_other_than_gateways() {
        let policy = |spec: serde_json::Value| {
            test_object(
                json!({"apiVersion": "security.istio.io/v1", "kind": "AuthorizationPolicy",
                "metadata": {"name": "p", "namespace": "default"}, "spec": spec}),
            )
        };
        assert_eq!(
            unenforced(&policy(json!({"action": "DENY", "rules": [{}]}))),
            None
        );
        let custom = json!({"action": "CUSTOM", "provider": {"name": "x"}, "rules": [{}]});
        assert_eq!(unenforced(&policy(custom)), None);
        let on_gateway = json!({"targetRefs": [
            {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"}]});
        assert_eq!(unenforced(&policy(on_gateway)), None);
        let legacy_on_gateway = json!({"targetRef":
            {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"}});
        assert_eq!(unenforced(&policy(legacy_on_gateway)), None);
        for target in [
            json!({"kind": "Service", "name": "reviews"}),
            json!({"group": "networking.istio.io", "kind": "Gateway", "name": "gw"}),
            json!({"group": "gateway.networking.k8s.io", "kind": "GatewayClass", "name": "istio"}),
        ] {
            let attached = unenforced(&policy(json!({ "targetRefs": [target] })));
            assert_eq!(
                attached.map(|u| u.field),
                Some("spec.targetRefs"),
                "{target}"
            );
        }
    }

    #[test]
    fn mesh_settings_admitpilot_does_not_read_are_named() {
        let mesh = |text: &str| {
            unenforced(&test_object(
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "istio", "namespace": "istio-system"}, "data": {"mesh": text}}),
            ))
        };
        assert_eq!(
            mesh("extensionProviders: []\ndefaultProviders: {accessLogging: [envoy]}\n"),
            None
        );
        let part = mesh("accessLogFile: /dev/stdout\nextensionProviders: []\n").unwrap();
        assert_eq!(part.field, "data.mesh");
        assert!(
            part.why
                .starts_with("accessLogFile is not enforced on gateways by admitpilot"),
            "{part}"
        );
    }

    #[test]
    fn telemetry_access_logging_is_enforced_tracing_and_metrics_are_not() {
        let telemetry = |spec: serde_json::Value| {
            unenforced(&test_object(
                json!({"apiVersion": "telemetry.istio.io/v1", "kind": "Telemetry",
                "metadata": {"name": "t", "namespace": "default"}, "spec": spec}),
            ))
            .map(|u| u.field)
        };
        assert_eq!(
            telemetry(json!({"accessLogging": [{"providers": [{"name": "envoy"}]}]})),
            None
        );
        assert_eq!(
            telemetry(json!({"accessLogging": [{"disabled": true}]})),
            None
        );
        assert_eq!(
            telemetry(json!({"accessLogging": [{"providers": [{"name": "otel"}]}]})),
            None
        );
        assert_eq!(
            telemetry(
                json!({"accessLogging": [{"filter": {"expression": "response.code >= 400"}}]})
            ),
            None
        );
        assert_eq!(
            telemetry(json!({"metrics": [{"providers": [{"name": "prometheus"}]}]})),
            Some("spec.metrics")
        );
        assert_eq!(
            telemetry(json!({"tracing": [{"randomSamplingPercentage": 10}]})),
            Some("spec.tracing")
        );
    }
}
