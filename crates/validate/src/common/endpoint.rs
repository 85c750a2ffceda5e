//! Workload endpoints (pure): takes a WorkloadEntry or ServiceEntry endpoint (address, ports, labels), records
//! Istio's `validateWorkloadEntry` findings; shared by WorkloadEntry, ServiceEntry and WorkloadGroup.

use std::collections::BTreeSet;

use super::address::{check_unix_address, is_ip, validate_port, validate_port_name, UNIX_PREFIX};
use super::host::check_fqdn;
use super::labels::validate_labels;
use super::path::FieldPath;
use super::text::go_quote;
use admitpilot_model::istio::WorkloadEntry;
use admitpilot_model::Findings;

/// Validates a workload entry or ServiceEntry endpoint. `service_ports` (ServiceEntry) are the port names the
/// endpoint may map; `allow_fqdn` accepts host names besides IPs and `unix://` paths. Mirrors Istio's
/// `validateWorkloadEntry` (addresses: `ValidateUnixAddress`, `netutil.IsValidIPAddress`, `ValidateFQDN`), with its
/// texts.
pub fn validate_endpoint(
    we: &WorkloadEntry,
    service_ports: Option<&BTreeSet<&str>>,
    allow_fqdn: bool,
    p: &mut FieldPath,
    out: &mut Findings,
) {
    let address_path = p.child("address");
    if we.address.is_empty() {
        if we.network.is_empty() {
            out.error(address_path, "address is required");
            return;
        }
        out.warning(
            &address_path,
            format!("address is unset with network {}", go_quote(&we.network)),
        );
    }
    let unix = we.address.starts_with(UNIX_PREFIX);
    if let Some(socket) = we.address.strip_prefix(UNIX_PREFIX) {
        if let Err(e) = check_unix_address(socket) {
            out.error(&address_path, e);
        }
        if !we.ports.is_empty() {
            out.error(
                p.child("ports"),
                format!("unix endpoint {} must not include ports", we.address),
            );
        }
    } else if !we.address.is_empty() && !is_ip(&we.address) {
        if !allow_fqdn {
            out.error(
                &address_path,
                format!(
                    "endpoint address {} is not a valid IP address",
                    go_quote(&we.address)
                ),
            );
        } else if check_fqdn(&we.address).is_err() {
            out.error(
                &address_path,
                format!(
                    "endpoint address {} is not a valid FQDN or an IP address",
                    go_quote(&we.address)
                ),
            );
        }
    }
    validate_endpoint_ports(we, service_ports, p, out);
    validate_labels(&we.labels, &p.child("labels"), out);
    if unix && service_ports.is_some_and(|ports| ports.len() != 1) {
        out.error(
            address_path,
            "exactly 1 service port required for unix endpoints",
        );
    }
}

/// Validates an endpoint's port map: names are DNS labels declared by the ServiceEntry (when given), numbers in
/// range. Mirrors the port loop of Istio's `validateWorkloadEntry` (`ValidatePortName`, `ValidatePort`), with its
/// texts (Istio's undeclared-port text names the port number, not the name).
pub fn validate_endpoint_ports(
    we: &WorkloadEntry,
    service_ports: Option<&BTreeSet<&str>>,
    p: &mut FieldPath,
    out: &mut Findings,
) {
    let ports = p.field("ports");
    for (name, number) in &we.ports {
        let at = ports.child(name);
        if service_ports.is_some_and(|declared| !declared.contains(name.as_str())) {
            out.error(
                &at,
                format!("endpoint port {number} is not defined by the service entry"),
            );
        }
        validate_port_name(name, &at, out);
        validate_port(*number, &at, out);
    }
}
