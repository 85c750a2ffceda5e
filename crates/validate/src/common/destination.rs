//! Destinations (pure): takes one route destination (host, subset, port), records Istio's `validateDestination`
//! findings; shared by VirtualService routes and Sidecar egress/ingress.

use super::address::validate_port;
use super::host::{check_subset_name, check_wildcard_domain};
use super::path::FieldPath;
use admitpilot_model::istio::virtual_service::Destination;
use admitpilot_model::Findings;

/// Validates a route destination: host a wildcard domain (not `*`), subset a DNS label, port in range. Mirrors
/// Istio's `validateDestination` (`ValidateWildcardDomain`, `validateSubsetName`, `validatePortSelector`), with its
/// texts.
pub fn validate_destination(d: &Destination, p: &mut FieldPath, out: &mut Findings) {
    if d.host == "*" {
        out.error(p.child("host"), "invalid destination host *");
    } else if let Err(e) = check_wildcard_domain(&d.host) {
        out.error(p.child("host"), e);
    }
    if !d.subset.is_empty() {
        if let Err(e) = check_subset_name(&d.subset) {
            out.error(p.child("subset"), e);
        }
    }
    if let Some(port) = &d.port {
        validate_port(port.number.unwrap_or(0), &p.child("port.number"), out);
    }
}
