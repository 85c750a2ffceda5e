//! Status (pure): takes a snapshot, admitpilot's GatewayClass controller name and what the gateways have done with
//! the config, and yields the `status` each object admitpilot manages should carry: Gateway API objects with the
//! spec's conditions and reasons ([`gateway_api`]), Istio objects as istiod writes it ([`istio`]), both from the
//! replicas' reports on what their gateways acknowledged ([`programmed`]). `render --status` and `/debug/configz`
//! show it; the status writer patches it onto the objects.

pub mod backend_tls;
pub mod gateway_api;
pub mod istio;
pub mod programmed;
pub mod refused;

pub use gateway_api::{gateway_api_status, Programmed, Served, StatusUpdate};

use std::collections::BTreeMap;

use admitpilot_model::gateway_api::gateway::AddressPools;
use admitpilot_model::refusal::Refusal;
use admitpilot_model::{ObjectKey, Snapshot};
use programmed::{
    combine, held_back_id, istio_id, no_gateway_of, ReplicaReport, NO_GATEWAY_SELECTS,
};

/// Computes the status of a snapshot's objects, as this process's gateways give it (the status writer's
/// `local_view`); `/debug/configz` shows it.
pub type StatusView = std::sync::Arc<dyn Fn(&Snapshot) -> Vec<StatusUpdate> + Send + Sync>;

/// Which status to compute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusScope {
    /// The GatewayClass controllerName admitpilot answers for.
    pub controller: String,
    /// Whether the Gateway API objects of `controller` get a status.
    pub gateway_api: bool,
    /// With Istio objects' status: the DNS suffix of Services, for the reference analysis.
    pub istio_domain_suffix: Option<String>,
    /// The addresses a provisioned gateway's load balancer can give (`--gateway-address-pool`).
    pub address_pools: AddressPools,
}

/// Gateways whose provisioned proxies are not available yet (their Deployment has no available replica), with why.
pub type Unready = BTreeMap<ObjectKey, String>;

/// The status of every object in `scope`, from every replica's report on what its gateways did (this replica's
/// included), the objects stored although validation refuses them (`refusals`, [`refused`]), the Gateways whose
/// provisioned proxies are not available (`unready`: not Programmed, `Pending`, even when every connected proxy
/// acknowledged the config) and the installed Gateway API CRDs' `bundle_version` (when known); `now` (RFC 3339)
/// stamps the conditions.
pub fn from_reports(
    snapshot: &Snapshot,
    scope: &StatusScope,
    (reports, refusals, unready): (&[ReplicaReport], &[Refusal], &Unready),
    bundle_version: Option<&str>,
    now: &str,
) -> Vec<StatusUpdate> {
    let generation_of = |key: &ObjectKey| {
        snapshot
            .objects
            .get(key)
            .and_then(|object| object.metadata.generation)
            .unwrap_or_default()
    };
    let programmed_of = |key: &ObjectKey| {
        let id = format!("{}/{}", key.namespace, key.name);
        let of_it: Vec<_> = reports.iter().filter_map(|r| r.gateways.get(&id)).collect();
        let acknowledged = combine(
            generation_of(key),
            &of_it,
            no_gateway_of(&key.namespace, &key.name),
        );
        match (acknowledged, unready.get(key)) {
            (Programmed::Served, Some(why)) => Programmed::Pending(why.clone()),
            (programmed, _) => programmed,
        }
    };
    let held_back_of = |route: &ObjectKey, gateway: &ObjectKey| {
        let route = held_back_id(route);
        let gateway = format!("{}/{}", gateway.namespace, gateway.name);
        reports
            .iter()
            .filter_map(|r| r.gateways.get(&gateway))
            .find_map(|report| report.held_back.get(&route).cloned())
    };
    let served = Served {
        programmed: &programmed_of,
        held_back: &held_back_of,
        bundle_version,
        address_pools: &scope.address_pools,
    };
    let mut updates = if scope.gateway_api {
        let mut updates = gateway_api_status(snapshot, &scope.controller, &served, now);
        // A refused object's status says why, over what its last valid version (if still served) would get.
        let refused = refused::refused_status(snapshot, &scope.controller, refusals, now);
        updates.retain(|update| !refused.iter().any(|r| r.key == update.key));
        updates.extend(refused);
        updates
    } else {
        Vec::new()
    };
    if let Some(domain_suffix) = &scope.istio_domain_suffix {
        let reconciled_of = |key: &ObjectKey| {
            if reports.iter().any(|r| r.istio_truncated) {
                return Programmed::Pending(
                    "a replica's report was too large to carry its Istio objects".to_string(),
                );
            }
            let id = istio_id(key);
            let of_it: Vec<_> = reports.iter().filter_map(|r| r.istio.get(&id)).collect();
            combine(generation_of(key), &of_it, NO_GATEWAY_SELECTS.to_string())
        };
        let mut istio = istio::istio_status(snapshot, &reconciled_of, domain_suffix, now);
        // As for Gateway API objects: a refused object's status says why, over its last valid version's.
        let refused = refused::refused_istio_status(refusals, now);
        istio.retain(|update| !refused.iter().any(|r| r.key == update.key));
        updates.extend(istio);
        updates.extend(refused);
    }
    updates
}
