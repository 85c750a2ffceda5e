//! Backend references (pure): takes a route's `backendRefs` entry, its namespace and kind and the snapshot, yields
//! the Istio destination it becomes (`<name>.<namespace>.svc.<suffix>` and the port), or nothing when the
//! reference is invalid: not a core Service, a Service or port that does not exist, or another namespace without
//! a ReferenceGrant allowing it (the spec's `ResolvedRefs` conditions; the webhook warns about each).

use crate::naming;
use admitpilot_model::gateway_api::common::BackendRef;
use admitpilot_model::gateway_api::reference_grant::granted;
use admitpilot_model::istio::virtual_service::{Destination, PortSelector};
use admitpilot_model::{Kind, ObjectKey, Snapshot, Spec};

/// The destination of a valid backend reference of a `route_kind` in `route_namespace`.
pub fn destination(
    snapshot: &Snapshot,
    backend: &BackendRef,
    (route_kind, route_namespace): (&str, &str),
    domain_suffix: &str,
) -> Option<Destination> {
    if !backend.is_service() {
        return None;
    }
    let namespace = backend.namespace_or(route_namespace);
    if namespace != route_namespace
        && !granted(
            snapshot,
            (route_kind, route_namespace),
            ("", "Service", namespace, &backend.name),
        )
    {
        return None;
    }
    let port = backend.port?;
    let service = snapshot.get(&ObjectKey::new(
        Kind::Service,
        namespace,
        backend.name.clone(),
    ))?;
    let Spec::Service(spec) = &service.spec else {
        return None;
    };
    let has_port = spec
        .ports
        .iter()
        .flatten()
        .any(|p| u32::try_from(p.port).ok() == Some(port));
    has_port.then(|| Destination {
        host: naming::service_fqdn(&backend.name, namespace, domain_suffix),
        subset: String::new(),
        port: Some(PortSelector { number: Some(port) }),
    })
}
