//! What the translator does not enforce on gateways (pure): takes a kind, yields the sentence that tells the user
//! so. admitpilot validates these kinds (a bad one is still denied) but does not turn them into gateway config;
//! the webhook returns the sentence as a warning, the watch loop logs and counts such objects
//! (`admitpilot_unenforced_objects{kind}`) and `/debug/configz` marks them, so none is silently ignored.

use crate::model::Kind;

/// Why objects of `kind` have no effect on the gateways admitpilot serves, or `None` when the translator turns
/// them into gateway config. Every sentence says "is not enforced on gateways by admitpilot", so users can search
/// for it.
pub fn unenforced(kind: Kind) -> Option<&'static str> {
    let why = match kind {
        Kind::AuthorizationPolicy => {
            "AuthorizationPolicy is not enforced on gateways by admitpilot: no RBAC or ext_authz filter is \
             generated, so gateways neither allow nor deny requests by it"
        }
        Kind::RequestAuthentication => {
            "RequestAuthentication is not enforced on gateways by admitpilot: no JWT filter is generated, so \
             gateways do not check tokens"
        }
        Kind::PeerAuthentication => {
            "PeerAuthentication is not enforced on gateways by admitpilot: its mTLS mode does not change how \
             gateways accept connections"
        }
        Kind::Telemetry => {
            "Telemetry is not enforced on gateways by admitpilot: its access logging, tracing and metrics \
             settings are not applied"
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
        Kind::VirtualService
        | Kind::DestinationRule
        | Kind::Gateway
        | Kind::ServiceEntry
        | Kind::EnvoyFilter
        | Kind::WorkloadEntry
        | Kind::HigressConfig
        | Kind::Service
        | Kind::EndpointSlice
        | Kind::Secret => return None,
    };
    Some(why)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unenforced_kind_says_so_in_the_same_words() {
        let kinds: Vec<Kind> = Kind::ALL
            .iter()
            .copied()
            .filter(|kind| unenforced(*kind).is_some())
            .collect();
        assert_eq!(kinds.len(), 12, "{kinds:?}");
        for kind in kinds {
            let why = unenforced(kind).unwrap_or_default();
            assert!(
                why.contains("is not enforced on gateways by admitpilot"),
                "{why}"
            );
        }
        assert_eq!(unenforced(Kind::VirtualService), None);
    }
}
