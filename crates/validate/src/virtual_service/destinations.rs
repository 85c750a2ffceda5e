//! VirtualService route destinations (pure): takes the weighted destinations of a route, records Istio's findings for
//! each destination, its weight and the total, and the header operations they carry.

use super::headers::validate_headers;
use crate::common::validate_destination;
use crate::common::FieldPath;
use admitpilot_model::istio::virtual_service::Destination;
use admitpilot_model::istio::virtual_service::Headers;
use admitpilot_model::istio::virtual_service::HttpRouteDestination;
use admitpilot_model::istio::virtual_service::RouteDestination;
use admitpilot_model::Findings;

/// Checks the weighted destinations of an HTTP, TCP or TLS route and their total weight; `parts` gives each
/// one's destination, weight and (HTTP only) header operations.
pub(super) fn validate_destinations<R>(
    routes: &[R],
    parts: impl Fn(&R) -> (Option<&Destination>, Option<u32>, Option<&Headers>),
    gateway_semantics: bool,
    p: &mut FieldPath,
    out: &mut Findings,
) {
    let mut total: u64 = 0;
    for (i, r) in routes.iter().enumerate() {
        let mut at = p.index(i);
        let (destination, weight, headers) = parts(r);
        total += validate_weighted(destination, weight, gateway_semantics, &mut at, out);
        if let Some(headers) = headers {
            validate_headers(headers, &mut at.field("headers"), out);
        }
    }
    check_total_weight(routes.len(), total, p, out);
}

/// Destination, weight and header operations of an HTTP route destination.
pub(super) fn http_destination_parts(
    r: &HttpRouteDestination,
) -> (Option<&Destination>, Option<u32>, Option<&Headers>) {
    (r.destination.as_ref(), r.weight, r.headers.as_ref())
}

/// Destination and weight of a TCP or TLS route destination (no header operations).
pub(super) fn l4_destination_parts(
    r: &RouteDestination,
) -> (Option<&Destination>, Option<u32>, Option<&Headers>) {
    (r.destination.as_ref(), r.weight, None)
}

/// Checks one weighted destination (HTTP or TCP/TLS) at `at`; returns its weight for the total.
fn validate_weighted(
    destination: Option<&Destination>,
    weight: Option<u32>,
    gateway_semantics: bool,
    at: &mut FieldPath,
    out: &mut Findings,
) -> u64 {
    match destination {
        None => out.error(at.child("destination"), "destination is required"),
        Some(d) if !gateway_semantics => validate_destination(d, &mut at.field("destination"), out),
        Some(_) => {}
    }
    u64::from(weight.unwrap_or(0))
}

/// Several destinations need a positive total weight.
fn check_total_weight(count: usize, total: u64, p: &FieldPath, out: &mut Findings) {
    if count > 1 && total == 0 {
        out.error(p.as_str(), "the destination weights add up to 0");
    }
}
