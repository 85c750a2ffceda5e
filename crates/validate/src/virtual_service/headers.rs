//! VirtualService header operations (pure): takes the `headers` of a route or destination, records Istio's findings
//! for the names and values it sets, adds and removes.

use crate::common;
use crate::common::FieldPath;
use admitpilot_model::istio::virtual_service::HeaderOperations;
use admitpilot_model::istio::virtual_service::Headers;
use admitpilot_model::Findings;

pub(super) fn validate_headers(headers: &Headers, p: &mut FieldPath, out: &mut Findings) {
    if let Some(ops) = &headers.request {
        validate_header_ops(ops, true, &mut p.field("request"), out);
    }
    if let Some(ops) = &headers.response {
        validate_header_ops(ops, false, &mut p.field("response"), out);
    }
}

fn validate_header_ops(
    ops: &HeaderOperations,
    request: bool,
    p: &mut FieldPath,
    out: &mut Findings,
) {
    for (field, map) in [("set", &ops.set), ("add", &ops.add)] {
        let at = p.field(field);
        for (name, value) in map {
            let path = at.child(name);
            if request {
                common::validate_request_header_set_name(name, &path, out);
            } else {
                common::validate_header_operation_name(name, &path, out);
            }
            common::validate_header_value(value, &path, out);
        }
    }
    let mut remove = p.field("remove");
    for (i, name) in ops.remove.iter().enumerate() {
        common::validate_header_operation_name(name, remove.index(i).as_str(), out);
    }
}
