//! WorkloadEntry rules: takes a decoded istio WorkloadEntry spec and its metadata, records findings with field
//! paths (address, ports, labels). The endpoint check is shared with ServiceEntry endpoints.

use std::collections::BTreeSet;

use super::common::{self, FieldPath};
use super::gateway::UNIX_PREFIX;
use crate::model::{istio::WorkloadEntry, Findings, ObjectMeta};

/// Validates one WorkloadEntry, recording every error and warning.
pub fn validate(spec: &WorkloadEntry, _meta: &ObjectMeta, out: &mut Findings) {
    validate_endpoint(spec, None, true, &mut FieldPath::new("spec"), out);
}

/// Validates a workload entry or ServiceEntry endpoint. `service_ports` (ServiceEntry) are the port names the
/// endpoint may map; `allow_fqdn` accepts host names besides IPs and `unix://` paths. Mirrors Istio's
/// `validateWorkloadEntry` (addresses: `ValidateUnixAddress`, `netutil.IsValidIPAddress`, `ValidateFQDN`), with its
/// texts.
pub(super) fn validate_endpoint(
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
            format!(
                "address is unset with network {}",
                common::go_quote(&we.network)
            ),
        );
    }
    let unix = we.address.starts_with(UNIX_PREFIX);
    if let Some(socket) = we.address.strip_prefix(UNIX_PREFIX) {
        if let Err(e) = common::check_unix_address(socket) {
            out.error(&address_path, e);
        }
        if !we.ports.is_empty() {
            out.error(
                p.child("ports"),
                format!("unix endpoint {} must not include ports", we.address),
            );
        }
    } else if !we.address.is_empty() && !common::is_ip(&we.address) {
        if !allow_fqdn {
            out.error(
                &address_path,
                format!(
                    "endpoint address {} is not a valid IP address",
                    common::go_quote(&we.address)
                ),
            );
        } else if common::check_fqdn(&we.address).is_err() {
            out.error(
                &address_path,
                format!(
                    "endpoint address {} is not a valid FQDN or an IP address",
                    common::go_quote(&we.address)
                ),
            );
        }
    }
    validate_endpoint_ports(we, service_ports, p, out);
    common::validate_labels(&we.labels, &p.child("labels"), out);
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
pub(super) fn validate_endpoint_ports(
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
        common::validate_port_name(name, &at, out);
        common::validate_port(*number, &at, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(spec: serde_json::Value) -> (usize, usize) {
        let we: WorkloadEntry = serde_json::from_value(spec).unwrap();
        let mut out = Findings::default();
        validate(&we, &ObjectMeta::default(), &mut out);
        let errors = out.0.iter().filter(|f| f.is_error()).count();
        (errors, out.0.len() - errors)
    }

    #[test]
    fn accepts_ip_fqdn_and_unix() {
        assert_eq!(
            run(json!({"address": "10.0.0.1", "ports": {"http": 8080}, "labels": {"app": "vm"}})),
            (0, 0)
        );
        assert_eq!(run(json!({"address": "vm.example.com"})), (0, 0));
        assert_eq!(run(json!({"address": "unix:///var/run/app.sock"})), (0, 0));
        assert_eq!(run(json!({"network": "net1"})), (0, 1));
    }

    #[test]
    fn rejects_bad_entries() {
        assert_eq!(run(json!({})), (1, 0));
        assert_eq!(
            run(json!({"address": "unix://relative", "ports": {"a": 1}})),
            (2, 0)
        );
        assert_eq!(run(json!({"address": "bad address"})), (1, 0));
        assert_eq!(
            run(json!({"address": "1.2.3.4", "ports": {"Bad_Name": 0}, "labels": {"a b": "c"}})),
            (3, 0)
        );
    }
}
