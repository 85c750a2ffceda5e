//! ServiceEntry rules: takes a decoded istio ServiceEntry spec and its metadata, records findings with field paths
//! (hosts, addresses, ports, resolution-specific endpoint rules, workload selector, exportTo).

use std::collections::BTreeSet;

use super::common::{self, validate_endpoint, validate_endpoint_ports, FieldPath, Protocol};
use admitpilot_model::istio::service_entry::{Location, Resolution};
use admitpilot_model::{istio::ServiceEntry, Findings, ObjectMeta};

/// Label that opts a ServiceEntry out of automatic IP allocation.
const AUTOALLOCATE_LABEL: &str = "networking.istio.io/enable-autoallocate-ip";
/// Label that binds a ServiceEntry to a waypoint.
const USE_WAYPOINT_LABEL: &str = "istio.io/use-waypoint";

/// Validates one ServiceEntry, recording every error and warning.
pub fn validate(spec: &ServiceEntry, meta: &ObjectMeta, out: &mut Findings) {
    let mut p = FieldPath::new("spec");
    let resolution = spec.resolution.unwrap_or(Resolution::None);
    if let Some(selector) = &spec.workload_selector {
        let path = p.child("workloadSelector.labels");
        common::validate_workload_selector(&selector.labels, &path, out);
        if !spec.endpoints.is_empty() {
            out.error(
                p.as_str(),
                "only one of workloadSelector and endpoints may be set",
            );
        }
    }
    validate_hosts(spec, resolution, &mut p, out);
    validate_addresses(spec, resolution, &mut p, out);
    let port_names = validate_ports(spec, meta, resolution, &mut p, out);

    match resolution {
        Resolution::None => {
            if !spec.endpoints.is_empty() {
                out.error(p.child("endpoints"), "resolution NONE takes no endpoints");
            }
            if spec.workload_selector.is_some() {
                out.warning(
                    p.child("workloadSelector"),
                    "workloadSelector has no effect with resolution NONE",
                );
            }
        }
        Resolution::Static => {
            let mut endpoints = p.field("endpoints");
            for (i, endpoint) in spec.endpoints.iter().enumerate() {
                if super::deadline::expired() {
                    break;
                }
                if super::deadline::expired() {
                    break;
                }
                validate_endpoint(
                    endpoint,
                    Some(&port_names),
                    false,
                    &mut endpoints.index(i),
                    out,
                );
            }
        }
        Resolution::Dns | Resolution::DnsRoundRobin => {
            validate_dns(spec, resolution, &port_names, &mut p, out);
        }
        Resolution::DynamicDns => validate_dynamic_dns(spec, meta, &mut p, out),
    }

    if resolution != Resolution::None && spec.hosts.len() > 1 {
        let opaque = spec.ports.iter().any(|port| {
            let protocol = Protocol::parse(&port.protocol);
            !protocol.is_http() && !protocol.is_tls()
        });
        // Mirrors Istio's `ValidateServiceEntry` multiple-hosts rule, with its text.
        if opaque {
            out.error(
                p.child("ports"),
                "multiple hosts provided with non-HTTP, non-TLS ports",
            );
        }
    }
    common::validate_export_to(
        &meta.namespace,
        &spec.export_to,
        common::ExportToContext::ServiceEntry,
        &p.child("exportTo"),
        out,
    );
}

fn validate_hosts(
    spec: &ServiceEntry,
    resolution: Resolution,
    p: &mut FieldPath,
    out: &mut Findings,
) {
    // Mirrors Istio's `ValidateServiceEntry` host rules (`*` refused, `ValidateWildcardDomain`, and
    // `ValidatePartialWildCard` as a warning unless DYNAMIC_DNS), with its texts; addresses and ports below too.
    let mut hosts = p.field("hosts");
    if spec.hosts.is_empty() {
        out.error(hosts.as_str(), "service entry must have at least one host");
    }
    for (i, host) in spec.hosts.iter().enumerate() {
        if super::deadline::expired() {
            break;
        }
        let at = hosts.index(i);
        if host == "*" {
            out.error(at.as_str(), "invalid host *");
            continue;
        }
        if let Err(e) = common::check_wildcard_domain(host) {
            out.error(at.as_str(), e);
        }
        if resolution != Resolution::DynamicDns {
            if let Err(e) = common::check_partial_wildcard(host) {
                out.warning(at.as_str(), e);
            }
        }
    }
}

fn validate_addresses(
    spec: &ServiceEntry,
    resolution: Resolution,
    p: &mut FieldPath,
    out: &mut Findings,
) {
    let mut addresses = p.field("addresses");
    let mut cidr = false;
    for (i, address) in spec.addresses.iter().enumerate() {
        cidr |= address.contains('/');
        common::validate_ip_or_cidr(address, addresses.index(i).as_str(), out);
    }
    if cidr && !matches!(resolution, Resolution::None | Resolution::Static) {
        out.error(
            addresses.as_str(),
            "CIDR addresses are allowed only for NONE/STATIC resolution types",
        );
    }
}

/// Validates the ports and returns their names (for endpoint port checks).
fn validate_ports<'a>(
    spec: &'a ServiceEntry,
    meta: &ObjectMeta,
    resolution: Resolution,
    p: &mut FieldPath,
    out: &mut Findings,
) -> BTreeSet<&'a str> {
    let auto_allocation = resolution != Resolution::None
        && spec.addresses.is_empty()
        && !meta
            .labels
            .get(AUTOALLOCATE_LABEL)
            .is_some_and(|v| v.eq_ignore_ascii_case("false"));
    let mut names = BTreeSet::new();
    let mut numbers = BTreeSet::new();
    let mut ports = p.field("ports");
    for (i, port) in spec.ports.iter().enumerate() {
        let at = ports.index(i);
        let number = port.number.unwrap_or(0);
        if !names.insert(port.name.as_str()) {
            out.error(
                at.child("name"),
                format!(
                    "service entry port name {} already defined",
                    common::go_quote(&port.name)
                ),
            );
        }
        if !numbers.insert(number) {
            out.error(
                at.child("number"),
                format!("service entry port {number} already defined"),
            );
        }
        if let Some(target) = port.target_port.filter(|t| *t != 0) {
            common::validate_port(target, &at.child("targetPort"), out);
        }
        if spec.addresses.is_empty()
            && !auto_allocation
            && (port.protocol.is_empty() || port.protocol == "TCP")
        {
            out.warning(
                at.as_str(),
                "TCP (or unset-protocol) ports need addresses when IP auto-allocation is off",
            );
        }
        common::validate_port_name(&port.name, &at.child("name"), out);
        common::validate_protocol(&port.protocol, &at.child("protocol"), out);
        common::validate_port(number, &at.child("number"), out);
    }
    names
}

fn validate_dns(
    spec: &ServiceEntry,
    resolution: Resolution,
    port_names: &BTreeSet<&str>,
    p: &mut FieldPath,
    out: &mut Findings,
) {
    // Mirrors Istio's `ValidateServiceEntry` DNS rules (`ValidateFQDN` on hosts without endpoints; endpoint
    // addresses an IP or `ValidateFQDN`), with its texts.
    if spec.endpoints.is_empty() {
        if let Some(err) = spec.hosts.iter().find_map(|h| common::check_fqdn(h).err()) {
            out.error(
                p.child("hosts"),
                format!(
                    "hosts must be FQDN or contain only prefix wildcards if no endpoints are provided for resolution mode {}, {err}",
                    resolution_name(resolution)
                ),
            );
        }
    }
    if resolution == Resolution::DnsRoundRobin && spec.endpoints.len() > 1 {
        out.error(
            p.child("endpoints"),
            "resolution DNS_ROUND_ROBIN allows at most one endpoint",
        );
    }
    {
        let mut endpoints = p.field("endpoints");
        for (i, endpoint) in spec.endpoints.iter().enumerate() {
            if super::deadline::expired() {
                break;
            }
            let mut at = endpoints.index(i);
            if !common::is_ip(&endpoint.address) && common::check_fqdn(&endpoint.address).is_err() {
                out.error(
                    at.child("address"),
                    format!(
                        "endpoint address {} is not a valid FQDN or an IP address",
                        common::go_quote(&endpoint.address)
                    ),
                );
            }
            common::validate_labels(&endpoint.labels, &at.child("labels"), out);
            validate_endpoint_ports(endpoint, Some(port_names), &mut at, out);
        }
    }
    if !spec.addresses.is_empty() && spec.hosts.len() > 1 {
        let tcp = spec.ports.iter().any(|port| {
            matches!(
                Protocol::parse(&port.protocol),
                Protocol::Tcp
                    | Protocol::Https
                    | Protocol::Tls
                    | Protocol::Mongo
                    | Protocol::Redis
                    | Protocol::Mysql
            )
        });
        if tcp {
            out.warning(
                p.child("hosts"),
                "service entry can not have more than one host specified simultaneously with address and tcp port",
            );
        }
    }
}

/// A DNS resolution's name as Istio prints it.
fn resolution_name(resolution: Resolution) -> &'static str {
    match resolution {
        Resolution::DnsRoundRobin => "DNS_ROUND_ROBIN",
        _ => "DNS",
    }
}

fn validate_dynamic_dns(
    spec: &ServiceEntry,
    meta: &ObjectMeta,
    p: &mut FieldPath,
    out: &mut Findings,
) {
    // Mirrors Istio's `ValidateServiceEntry` DYNAMIC_DNS rule (`host.Name.IsWildCarded`), with its text.
    for _ in spec.hosts.iter().filter(|h| !h.starts_with('*')) {
        out.error(
            p.child("hosts"),
            "host must be wildcarded for resolution mode DYNAMIC_DNS",
        );
    }
    if !spec.addresses.is_empty() {
        out.error(
            p.child("addresses"),
            "resolution DYNAMIC_DNS takes no addresses",
        );
    }
    if !spec.endpoints.is_empty() {
        out.error(
            p.child("endpoints"),
            "resolution DYNAMIC_DNS takes no endpoints",
        );
    }
    let mut ports = p.field("ports");
    for (i, port) in spec.ports.iter().enumerate() {
        let protocol = Protocol::parse(&port.protocol);
        if !matches!(
            protocol,
            Protocol::Http | Protocol::Tls | Protocol::Grpc | Protocol::Http2
        ) {
            out.error(
                ports.index(i).child("protocol"),
                "resolution DYNAMIC_DNS supports only HTTP, TLS, GRPC and HTTP2 ports",
            );
        }
    }
    drop(ports);
    let waypoint = meta
        .labels
        .get(USE_WAYPOINT_LABEL)
        .is_some_and(|v| !v.is_empty() && !v.eq_ignore_ascii_case("none"));
    if spec.location == Some(Location::MeshInternal) && waypoint {
        out.error(
            p.child("location"),
            "MESH_INTERNAL with resolution DYNAMIC_DNS is not supported with waypoints",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(spec: serde_json::Value) -> (Vec<String>, Vec<String>) {
        crate::testing::run_rules(spec, &crate::testing::meta("se", "ns"), validate)
    }

    #[test]
    fn accepts_typical_entries() {
        let (e, w) = run(
            json!({"hosts": ["api.example.com"], "ports": [{"number": 443, "name": "https", "protocol": "TLS"}],
            "location": "MESH_EXTERNAL", "resolution": "DNS"}),
        );
        assert!(e.is_empty() && w.is_empty(), "{e:?} {w:?}");
        let (e, w) = run(
            json!({"hosts": ["db.internal"], "addresses": ["10.0.0.0/24"], "ports": [{"number": 5432, "name": "tcp", "protocol": "TCP"}],
            "resolution": "STATIC", "endpoints": [{"address": "10.0.0.5", "ports": {"tcp": 15432}}], "exportTo": ["~"]}),
        );
        assert!(e.is_empty() && w.is_empty(), "{e:?} {w:?}");
        let (e, _) = run(
            json!({"hosts": ["*.example.com"], "ports": [{"number": 80, "name": "http", "protocol": "HTTP"}],
            "resolution": "DYNAMIC_DNS"}),
        );
        assert!(e.is_empty(), "{e:?}");
    }

    #[test]
    fn hosts_addresses_ports() {
        let (e, w) = run(
            json!({"hosts": ["*", "*foo.com"], "addresses": ["1.2.3.4/40", "10.0.0.0/8"], "resolution": "DNS",
            "ports": [{"number": 80, "name": "a"}, {"number": 80, "name": "a", "protocol": "SMTP", "targetPort": 70000}]}),
        );
        // *, bad cidr, cidr with DNS, dup name, dup number, targetPort, protocol, several hosts with TCP ports,
        // DNS hosts not FQDN
        assert_eq!(e.len(), 9, "{e:?}");
        assert_eq!(w.len(), 1, "{w:?}");
        let (e, _) = run(json!({}));
        assert_eq!(e.len(), 1);
    }

    #[test]
    fn resolution_rules() {
        let (e, _) = run(json!({"hosts": ["a.com"], "endpoints": [{"address": "1.2.3.4"}]}));
        assert_eq!(e.len(), 1, "{e:?}");
        let (e, _) = run(
            json!({"hosts": ["a.com"], "resolution": "STATIC", "ports": [{"number": 80, "name": "http", "protocol": "HTTP"}],
            "endpoints": [{"address": "a.com"}, {"address": "1.2.3.4", "ports": {"grpc": 9000}}, {"address": "unix:///sock"}]}),
        );
        assert_eq!(e.len(), 2, "{e:?}");
        let (e, _) = run(
            json!({"hosts": ["a.com"], "resolution": "DNS_ROUND_ROBIN", "ports": [{"number": 80, "name": "http", "protocol": "HTTP"}],
            "endpoints": [{"address": "a.com"}, {"address": "bad host"}]}),
        );
        assert_eq!(e.len(), 2, "{e:?}");
        let (e, _) = run(
            json!({"hosts": ["a.com"], "resolution": "DYNAMIC_DNS", "addresses": ["1.1.1.1"],
            "ports": [{"number": 80, "name": "tcp", "protocol": "TCP"}], "endpoints": [{"address": "1.1.1.1"}]}),
        );
        assert_eq!(e.len(), 4, "{e:?}");
        let (e, _) = run(
            json!({"hosts": ["a.com"], "workloadSelector": {"labels": {"app": "x"}}, "endpoints": [{"address": "1.1.1.1"}], "resolution": "STATIC"}),
        );
        assert_eq!(e.len(), 1, "{e:?}");
    }
}
