//! TLSRoute and TCPRoute rules (pure): takes their specs, records the CRDs' CEL failures (each named by its
//! message) with the API server's text.

use std::net::IpAddr;

use super::common::{self, cel, ARRAY};
use admitpilot_model::gateway_api::StreamRoute;
use admitpilot_model::Findings;

/// Checks a TLSRoute (`tls` true) or TCPRoute spec.
pub fn validate(route: &StreamRoute, tls: bool, out: &mut Findings) {
    common::parent_refs(&route.parent_refs, out);
    if tls {
        let label_ok = |h: &str| {
            !h.is_empty()
                && h.split('.').all(|label| {
                    !label.is_empty()
                        && label
                            .bytes()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                        && !label.starts_with('-')
                        && !label.ends_with('-')
                })
        };
        let hostnames = &route.hostnames;
        if hostnames.iter().any(|h| h.parse::<IpAddr>().is_ok()) {
            cel(
                out,
                "spec.hostnames",
                ARRAY,
                "Hostnames cannot contain an IP",
            );
        }
        if hostnames.iter().any(|h| !h.contains('*') && !label_ok(h)) {
            cel(
                out,
                "spec.hostnames",
                ARRAY,
                "Hostnames must be valid based on RFC-1123",
            );
        }
        if hostnames
            .iter()
            .any(|h| h.contains('*') && !h.strip_prefix("*.").is_some_and(label_ok))
        {
            cel(
                out,
                "spec.hostnames",
                ARRAY,
                "Wildcards on hostnames must be the first label, and the rest of hostname must be valid based on \
                 RFC-1123",
            );
        }
    }
    for (i, rule) in route.rules.iter().enumerate() {
        for (j, backend) in rule.backend_refs.iter().enumerate() {
            common::backend_port(backend, &format!("spec.rules[{i}].backendRefs[{j}]"), out);
        }
    }
}
