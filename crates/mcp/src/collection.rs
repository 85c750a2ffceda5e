//! MCP collections (pure): takes a [`Kind`] and yields the collection names (the xDS type URLs) it is served under
//! and the full name of the proto message that carries its spec; and takes a collection name back to its kind.
//!
//! A collection is `group/version/Kind`, as istiod's MCP client asks for it (`pkg/adsc` in istio/istio: a
//! config schema's `GroupVersionKind().String()`). Since Istio 1.24 that is the kind's newest version
//! (`networking.istio.io/v1/VirtualService`); older istiods ask for `v1alpha3`/`v1beta1` networking,
//! `v1beta1` security and `v1alpha1` telemetry. The Higress kinds follow the same rule with their CRD versions.

use std::sync::LazyLock;

use admitpilot_model::Kind;

/// The kinds served over MCP, in [`Kind::ALL`]'s order: the custom resource kinds (Istio's config kinds istiod reads,
/// the Higress ones, the namespaced Gateway API ones) and Ingress. ConfigMaps (higress-config, mesh config),
/// Services, EndpointSlices, Secrets and the cluster-scoped GatewayClass and IngressClass (MCP resources are named
/// `namespace/name`) are not served.
pub static SERVED: LazyLock<Vec<Kind>> = LazyLock::new(|| {
    Kind::ALL
        .into_iter()
        .filter(|kind| kind.is_custom_resource() || *kind == Kind::Ingress)
        .filter(|kind| *kind != Kind::GatewayClass)
        .collect()
});

/// Every collection name a subscriber may ask for, with its kind: each kind of [`SERVED`] in each API version it is
/// served in, newest first (`networking.istio.io/v1/VirtualService`, then `…/v1beta1/…` and `…/v1alpha3/…`). The
/// body message is the same in all of a kind's versions.
pub fn collections() -> &'static [(Kind, String)] {
    static ALL: LazyLock<Vec<(Kind, String)>> = LazyLock::new(|| {
        SERVED
            .iter()
            .flat_map(|&kind| {
                let info = kind.info();
                info.versions
                    .iter()
                    .map(move |version| (kind, format!("{}/{version}/{}", info.group, info.kind)))
            })
            .collect()
    });
    &ALL
}

/// Returns the collection a kind is served under, its newest version (`networking.istio.io/v1/VirtualService`),
/// or `None` for a kind that is not served.
pub fn collection(kind: Kind) -> Option<&'static str> {
    collections()
        .iter()
        .find(|(served, _)| *served == kind)
        .map(|(_, name)| name.as_str())
}

/// Returns the served kind of a collection name. Every version the kind is served in is accepted
/// (`networking.istio.io/v1alpha3/VirtualService` as well as `…/v1/…`), since an older istiod asks for the older
/// names.
pub fn kind_of(collection: &str) -> Option<Kind> {
    collections()
        .iter()
        .find(|(_, name)| name == collection)
        .map(|(kind, _)| *kind)
}

/// Returns the full name of the proto message that carries a served kind's spec in an MCP resource body
/// (`istio.networking.v1alpha3.VirtualService`), or `None` for a kind that is not served. Gateway API specs have
/// and Ingress specs have no proto message: as istiod's `config.ToProto` does for such specs, they travel as a
/// `google.protobuf.Struct` of their JSON.
pub fn body_message(kind: Kind) -> Option<&'static str> {
    Some(match kind {
        Kind::VirtualService => "istio.networking.v1alpha3.VirtualService",
        Kind::DestinationRule => "istio.networking.v1alpha3.DestinationRule",
        Kind::Gateway => "istio.networking.v1alpha3.Gateway",
        Kind::ServiceEntry => "istio.networking.v1alpha3.ServiceEntry",
        Kind::Sidecar => "istio.networking.v1alpha3.Sidecar",
        Kind::EnvoyFilter => "istio.networking.v1alpha3.EnvoyFilter",
        Kind::WorkloadEntry => "istio.networking.v1alpha3.WorkloadEntry",
        Kind::WorkloadGroup => "istio.networking.v1alpha3.WorkloadGroup",
        Kind::ProxyConfig => "istio.networking.v1beta1.ProxyConfig",
        Kind::AuthorizationPolicy => "istio.security.v1beta1.AuthorizationPolicy",
        Kind::PeerAuthentication => "istio.security.v1beta1.PeerAuthentication",
        Kind::RequestAuthentication => "istio.security.v1beta1.RequestAuthentication",
        Kind::Telemetry => "istio.telemetry.v1alpha1.Telemetry",
        Kind::IstioWasmPlugin => "istio.extensions.v1alpha1.WasmPlugin",
        Kind::TrafficExtension => "istio.extensions.v1alpha1.TrafficExtension",
        Kind::McpBridge => "higress.networking.v1.McpBridge",
        Kind::Http2Rpc => "higress.networking.v1.Http2Rpc",
        Kind::HigressWasmPlugin => "higress.extensions.v1alpha1.WasmPlugin",
        Kind::KubernetesGateway
        | Kind::HttpRoute
        | Kind::GrpcRoute
        | Kind::ReferenceGrant
        | Kind::TlsRoute
        | Kind::TcpRoute
        | Kind::BackendTlsPolicy
        | Kind::ListenerSet
        | Kind::Ingress => "google.protobuf.Struct",
        Kind::HigressConfig
        | Kind::MeshConfig
        | Kind::Service
        | Kind::EndpointSlice
        | Kind::Secret
        | Kind::ReferencedConfigMap
        | Kind::Namespace
        | Kind::GatewayClass
        | Kind::IngressClass => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kind is served under its group, newest version and kind name.
    #[test]
    fn collections_are_group_newest_version_kind() {
        for &kind in SERVED.iter() {
            let info = kind.info();
            let expected = format!("{}/{}/{}", info.group, info.versions[0], info.kind);
            assert_eq!(collection(kind), Some(expected.as_str()));
        }
        assert_eq!(
            collection(Kind::VirtualService),
            Some("networking.istio.io/v1/VirtualService")
        );
        assert_eq!(
            collection(Kind::EnvoyFilter),
            Some("networking.istio.io/v1alpha3/EnvoyFilter")
        );
        assert_eq!(collection(Kind::Secret), None);
        assert!(
            collections().len() < 64,
            "the xDS server keeps sets of collections in a u64"
        );
    }

    #[test]
    fn served_is_exactly_the_kinds_with_a_collection_and_a_body() {
        for kind in Kind::ALL {
            let served = SERVED.contains(&kind);
            assert_eq!(collection(kind).is_some(), served, "{kind:?}");
            assert_eq!(body_message(kind).is_some(), served, "{kind:?}");
        }
        let mut sorted = SERVED.to_vec();
        sorted.dedup();
        assert_eq!(sorted.len(), SERVED.len(), "no kind is listed twice");
    }

    #[test]
    fn kind_of_reverses_collection() {
        for &kind in SERVED.iter() {
            assert_eq!(collection(kind).and_then(kind_of), Some(kind));
        }
    }

    /// Older istiods ask for the versions their Istio read (before 1.24): they name the same kinds.
    #[test]
    fn kind_of_accepts_every_served_version() {
        assert_eq!(
            kind_of("networking.istio.io/v1alpha3/VirtualService"),
            Some(Kind::VirtualService)
        );
        assert_eq!(
            kind_of("security.istio.io/v1beta1/AuthorizationPolicy"),
            Some(Kind::AuthorizationPolicy)
        );
        assert_eq!(
            kind_of("telemetry.istio.io/v1alpha1/Telemetry"),
            Some(Kind::Telemetry)
        );
        assert_eq!(
            kind_of("extensions.higress.io/v1alpha1/WasmPlugin"),
            Some(Kind::HigressWasmPlugin)
        );
    }

    #[test]
    fn kind_of_refuses_unknown_versions_unserved_kinds_and_other_shapes() {
        for name in [
            "networking.istio.io/v2/VirtualService",
            "networking.istio.io/v1/EnvoyFilter",
            "/v1/ConfigMap",
            "v1/Service",
            "discovery.k8s.io/v1/EndpointSlice",
            "networking.istio.io/VirtualService",
            "type.googleapis.com/envoy.config.cluster.v3.Cluster",
            "",
        ] {
            assert_eq!(kind_of(name), None, "{name}");
        }
    }
}
