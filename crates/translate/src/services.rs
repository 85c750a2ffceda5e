//! Service registry (pure): takes the Kubernetes Services, EndpointSlices and Istio ServiceEntries of a
//! snapshot and yields, per hostname, the ports, discovery type, endpoints and visibility translation needs.
//!
//! Kubernetes endpoints carry no pod labels in an EndpointSlice, so an endpoint's labels (used by
//! DestinationRule subsets) are the labels of the EndpointSlice that lists it; an operator who wants subsets
//! of a Kubernetes Service labels one EndpointSlice per version. ServiceEntry endpoints carry their own labels.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ServiceSpec;

use admitpilot_model::service::infer_protocol;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use super::naming;
use super::types::{Discovery, Endpoint};
use admitpilot_model::istio::service_entry::{Resolution, ServiceEntry};
use admitpilot_model::istio::WorkloadEntry;
use admitpilot_model::{Kind, ObjectMeta, Snapshot, Spec};

/// Annotation restricting a Kubernetes Service's visibility, as Istio reads it.
pub const EXPORT_TO_ANNOTATION: &str = "networking.istio.io/exportTo";
/// Label tying an EndpointSlice to its Service.
const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// One port of a service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServicePort {
    /// Service port number (the number in cluster names).
    pub number: u32,
    /// Port name.
    pub name: String,
    /// Protocol as Istio infers it (`HTTP`, `HTTPS`, `GRPC`, `HTTP2`, `TLS`, `TCP`, …), upper-case.
    pub protocol: String,
}

/// A service known to the gateway: a Kubernetes Service or one host of a ServiceEntry.
#[derive(Debug, Clone, PartialEq)]
pub struct Service {
    /// Fully qualified hostname.
    pub hostname: String,
    /// Namespace of the object that defined it.
    pub namespace: String,
    /// Ports, in declaration order.
    pub ports: Vec<ServicePort>,
    /// How Envoy discovers endpoints.
    pub discovery: Discovery,
    /// Endpoints per service port number.
    pub endpoints: BTreeMap<u32, Vec<Endpoint>>,
    /// `exportTo` namespaces; empty means every namespace.
    pub export_to: Vec<String>,
}

impl Service {
    /// Tells whether the service is visible to workloads in `namespace` (Istio `exportTo` rules).
    pub fn visible_to(&self, namespace: &str) -> bool {
        self.export_to.is_empty()
            || self.export_to.iter().any(|entry| {
                entry == "*" || entry == namespace || (entry == "." && self.namespace == namespace)
            })
    }

    /// Returns the port with this number.
    pub fn port(&self, number: u32) -> Option<&ServicePort> {
        self.ports.iter().find(|p| p.number == number)
    }
}

/// Every service by hostname. On a hostname defined twice, the Kubernetes Service wins over a ServiceEntry,
/// and between ServiceEntries the first in snapshot order (namespace, name) wins.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Registry {
    /// Services by hostname.
    pub services: BTreeMap<String, Service>,
}

impl Registry {
    /// Builds the registry from a snapshot.
    pub fn build(snapshot: &Snapshot, domain_suffix: &str) -> Registry {
        let mut slices: BTreeMap<(&str, &str), Vec<(&ObjectMeta, &EndpointSlice)>> =
            BTreeMap::new();
        for object in snapshot.of_kind(Kind::EndpointSlice) {
            if let Spec::EndpointSlice(slice) = &object.spec {
                if let Some(service) = object.metadata.labels.get(SERVICE_NAME_LABEL) {
                    slices
                        .entry((object.metadata.namespace.as_str(), service.as_str()))
                        .or_default()
                        .push((&object.metadata, slice));
                }
            }
        }
        let mut services = BTreeMap::new();
        for object in snapshot.of_kind(Kind::Service) {
            if let Spec::Service(spec) = &object.spec {
                let meta = &object.metadata;
                let key = (meta.namespace.as_str(), meta.name.as_str());
                let service = kube_service(
                    meta,
                    spec,
                    slices.get(&key).map(Vec::as_slice).unwrap_or_default(),
                    domain_suffix,
                );
                services.insert(service.hostname.clone(), service);
            }
        }
        for object in snapshot.of_kind(Kind::ServiceEntry) {
            if let Spec::ServiceEntry(entry) = &object.spec {
                let workloads = selected_workloads(snapshot, &object.metadata.namespace, entry);
                for service in entry_services(&object.metadata, entry, &workloads) {
                    services.entry(service.hostname.clone()).or_insert(service);
                }
            }
        }
        Registry { services }
    }

    /// Returns the service with this hostname.
    pub fn get(&self, hostname: &str) -> Option<&Service> {
        self.services.get(hostname)
    }

    /// The cluster and host name of an extension provider's server (`service` is `[<namespace>/]<hostname>`), as
    /// a gateway in `namespace` reaches it, or why it cannot (mirrors Istio's `LookupCluster`, which also needs
    /// the service to exist; the port must be one of its ports so the cluster exists).
    pub fn provider_cluster(
        &self,
        service: &str,
        port: u32,
        namespace: &str,
    ) -> Result<(String, String), String> {
        let (owner, host) = match service.split_once('/') {
            Some((owner, host)) => (Some(owner), host),
            None => (None, service),
        };
        let found = self
            .get(host)
            .filter(|s| owner.is_none_or(|ns| s.namespace == ns) && s.visible_to(namespace));
        match found {
            None => Err(format!(
                "could not find service {service} among the services this gateway sees"
            )),
            Some(s) if s.port(port).is_none() => Err(format!("service {host} has no port {port}")),
            Some(_) => Ok((naming::cluster(port, "", host), host.to_string())),
        }
    }
}

/// The WorkloadEntries (same namespace) a ServiceEntry's `workloadSelector` selects.
fn selected_workloads<'s>(
    snapshot: &'s Snapshot,
    namespace: &str,
    entry: &ServiceEntry,
) -> Vec<&'s WorkloadEntry> {
    let Some(selector) = &entry.workload_selector else {
        return Vec::new();
    };
    snapshot
        .of_kind(Kind::WorkloadEntry)
        .filter(|object| object.metadata.namespace == namespace)
        .filter_map(|object| match &object.spec {
            Spec::WorkloadEntry(workload) => Some(workload),
            _ => None,
        })
        .filter(|workload| {
            selector
                .labels
                .iter()
                .all(|(k, v)| workload.labels.get(k) == Some(v))
        })
        .collect()
}

/// Splits `region/zone/subzone`.
fn locality(text: &str) -> (String, String, String) {
    let mut parts = text.splitn(3, '/').map(str::to_string);
    (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    )
}

/// One service per ServiceEntry host. STATIC → EDS from `endpoints` (or selected WorkloadEntries);
/// DNS → STRICT_DNS and DNS_ROUND_ROBIN → LOGICAL_DNS over the endpoints, or the host itself when none are
/// listed; NONE and DYNAMIC_DNS → ORIGINAL_DST (admitpilot has no dynamic forward proxy).
fn entry_services(
    meta: &ObjectMeta,
    entry: &ServiceEntry,
    workloads: &[&WorkloadEntry],
) -> Vec<Service> {
    let discovery = match entry.resolution {
        Some(Resolution::Static) => Discovery::Eds,
        Some(Resolution::Dns) => Discovery::StrictDns,
        Some(Resolution::DnsRoundRobin) => Discovery::LogicalDns,
        Some(Resolution::None | Resolution::DynamicDns) | None => Discovery::OriginalDst,
    };
    let ports: Vec<ServicePort> = entry
        .ports
        .iter()
        .filter_map(|p| {
            Some(ServicePort {
                number: p.number?,
                name: p.name.clone(),
                protocol: if p.protocol.is_empty() {
                    infer_protocol(&p.name, None)
                } else {
                    p.protocol.to_ascii_uppercase()
                },
            })
        })
        .collect();
    let members: Vec<&WorkloadEntry> = entry
        .endpoints
        .iter()
        .chain(workloads.iter().copied())
        .collect();
    entry
        .hosts
        .iter()
        .map(|host| {
            let mut endpoints: BTreeMap<u32, Vec<Endpoint>> = BTreeMap::new();
            for (port, spec) in ports.iter().zip(&entry.ports) {
                let target = spec.target_port.unwrap_or(port.number);
                let list = endpoints.entry(port.number).or_default();
                for member in &members {
                    if member.address.starts_with("unix://") {
                        continue;
                    }
                    let (region, zone, subzone) = locality(&member.locality);
                    list.push(Endpoint {
                        address: member.address.clone(),
                        port: member.ports.get(&port.name).copied().unwrap_or(target),
                        region,
                        zone,
                        subzone,
                        weight: member.weight.unwrap_or(1).max(1),
                        labels: member.labels.clone(),
                    });
                }
                if list.is_empty()
                    && matches!(discovery, Discovery::StrictDns | Discovery::LogicalDns)
                {
                    list.push(Endpoint {
                        address: host.clone(),
                        port: target,
                        region: String::new(),
                        zone: String::new(),
                        subzone: String::new(),
                        weight: 1,
                        labels: BTreeMap::new(),
                    });
                }
            }
            Service {
                hostname: host.clone(),
                namespace: meta.namespace.clone(),
                ports: ports.clone(),
                discovery,
                endpoints,
                export_to: entry.export_to.clone(),
            }
        })
        .collect()
}

fn kube_service(
    meta: &ObjectMeta,
    spec: &ServiceSpec,
    slices: &[(&ObjectMeta, &EndpointSlice)],
    domain_suffix: &str,
) -> Service {
    let ports: Vec<ServicePort> = spec
        .ports
        .iter()
        .flatten()
        .filter_map(|p| {
            let number = u32::try_from(p.port).ok()?;
            let name = p.name.clone().unwrap_or_default();
            let protocol = infer_protocol(&name, p.app_protocol.as_deref());
            Some(ServicePort {
                number,
                name,
                protocol,
            })
        })
        .collect();
    let export_to = meta
        .annotations
        .get(EXPORT_TO_ANNOTATION)
        .map(|list| {
            list.split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let hostname = naming::service_fqdn(&meta.name, &meta.namespace, domain_suffix);
    if spec.type_.as_deref() == Some("ExternalName") {
        let target = spec.external_name.clone().unwrap_or_default();
        let endpoints = ports
            .iter()
            .map(|p| {
                let endpoint = Endpoint {
                    address: target.clone(),
                    port: p.number,
                    region: String::new(),
                    zone: String::new(),
                    subzone: String::new(),
                    weight: 1,
                    labels: BTreeMap::new(),
                };
                (p.number, vec![endpoint])
            })
            .collect();
        return Service {
            hostname,
            namespace: meta.namespace.clone(),
            ports,
            discovery: Discovery::StrictDns,
            endpoints,
            export_to,
        };
    }
    let mut endpoints: BTreeMap<u32, Vec<Endpoint>> = BTreeMap::new();
    for (slice_meta, slice) in slices {
        if slice.address_type == "FQDN" {
            continue;
        }
        for port in &ports {
            let Some(target) = slice
                .ports
                .iter()
                .flatten()
                .find(|sp| sp.name.as_deref().unwrap_or_default() == port.name)
                .and_then(|sp| sp.port)
                .and_then(|n| u32::try_from(n).ok())
            else {
                continue;
            };
            for endpoint in &slice.endpoints {
                let ready = endpoint
                    .conditions
                    .as_ref()
                    .and_then(|c| c.ready)
                    .unwrap_or(true);
                if !ready {
                    continue;
                }
                for address in &endpoint.addresses {
                    endpoints.entry(port.number).or_default().push(Endpoint {
                        address: address.clone(),
                        port: target,
                        region: String::new(),
                        zone: endpoint.zone.clone().unwrap_or_default(),
                        subzone: String::new(),
                        weight: 1,
                        labels: slice_meta.labels.clone(),
                    });
                }
            }
        }
    }
    for list in endpoints.values_mut() {
        list.sort();
        list.dedup();
    }
    Service {
        hostname,
        namespace: meta.namespace.clone(),
        ports,
        discovery: Discovery::Eds,
        endpoints,
        export_to,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_to_dot_means_own_namespace() {
        let service = Service {
            hostname: "a.b.svc.cluster.local".into(),
            namespace: "b".into(),
            ports: vec![],
            discovery: Discovery::Eds,
            endpoints: BTreeMap::new(),
            export_to: vec![".".into()],
        };
        assert!(service.visible_to("b"));
        assert!(!service.visible_to("c"));
    }
}
