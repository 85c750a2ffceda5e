//! VirtualService rules: takes a decoded istio VirtualService spec and its metadata, records findings with field
//! paths (hosts, gateways, HTTP/TLS/TCP routes, matches, destinations, retries, faults, CORS, header operations,
//! plus the unreachable/overlapping-rule warnings).
//!
//! Where things live: [`hosts`] (hosts and gateways), [`routes`] (HTTP, TLS and TCP routes), [`matches`](mod@matches),
//! [`destinations`], [`headers`] (header operations) and [`unreachable`](mod@unreachable) (the unreachable-rule warnings). This file
//! walks a VirtualService through them.

mod destinations;
mod headers;
mod hosts;
mod matches;
mod routes;
mod unreachable;

use self::hosts::{validate_gateway_names, validate_hosts, VsHosts};
use self::routes::{validate_http_route, validate_tcp_route, validate_tls_route};
use self::unreachable::{warn_unreachable_http, warn_unreachable_l4};
use crate::common;
use crate::common::FieldPath;
use crate::host_index::HostIndex;
use admitpilot_model::istio::VirtualService;
use admitpilot_model::Findings;
use admitpilot_model::ObjectMeta;

/// Annotation set on VirtualServices generated from the Kubernetes Gateway API.
const ROUTE_SEMANTICS_ANNOTATION: &str = "internal.istio.io/route-semantics";

/// The reserved gateway name meaning "all sidecars".
const MESH_GATEWAY: &str = "mesh";

/// Validates one VirtualService, recording every error and warning.
pub fn validate(spec: &VirtualService, meta: &ObjectMeta, out: &mut Findings) {
    let mut p = FieldPath::new("spec");
    let delegate = spec.hosts.is_empty();
    if delegate {
        if !spec.gateways.is_empty() {
            out.error(
                p.child("gateways"),
                "a delegate VirtualService (no hosts) must not list gateways",
            );
        }
        if !spec.tls.is_empty() {
            out.error(
                p.child("tls"),
                "a delegate VirtualService (no hosts) must not have TLS routes",
            );
        }
        if !spec.tcp.is_empty() {
            out.error(
                p.child("tcp"),
                "a delegate VirtualService (no hosts) must not have TCP routes",
            );
        }
    }
    let gateway_semantics = meta
        .annotations
        .get(ROUTE_SEMANTICS_ANNOTATION)
        .is_some_and(|v| v == "gateway");
    let applies_to_gateway =
        !spec.gateways.is_empty() && !spec.gateways.iter().any(|g| g == MESH_GATEWAY);
    let applies_to_mesh = !applies_to_gateway;
    // Istio's `isGateway`, which SNI hosts use: true unless `mesh` is listed, so also with no gateways at all.
    let sni_on_gateway = !spec.gateways.iter().any(|g| g == MESH_GATEWAY);
    if !spec.gateways.is_empty() {
        validate_gateway_names(&spec.gateways, gateway_semantics, &p.child("gateways"), out);
    }

    if !applies_to_gateway {
        check_jwt_claim_routes(spec, &mut p, out);
    }
    validate_hosts(spec, applies_to_gateway, applies_to_mesh, &mut p, out);

    if spec.http.is_empty() && spec.tcp.is_empty() && spec.tls.is_empty() {
        out.error(
            p.as_str(),
            "a VirtualService needs at least one http, tcp or tls route",
        );
    }
    {
        let mut http = p.field("http");
        for (i, route) in spec.http.iter().enumerate() {
            if crate::deadline::expired() {
                break;
            }
            validate_http_route(route, delegate, gateway_semantics, &mut http.index(i), out);
        }
    }
    {
        let hosts = VsHosts {
            names: &spec.hosts,
            index: HostIndex::of(&spec.hosts),
        };
        let mut tls = p.field("tls");
        for (i, route) in spec.tls.iter().enumerate() {
            if crate::deadline::expired() {
                break;
            }
            validate_tls_route(
                route,
                &hosts,
                sni_on_gateway,
                gateway_semantics,
                &mut tls.index(i),
                out,
            );
        }
    }
    {
        let mut tcp = p.field("tcp");
        for (i, route) in spec.tcp.iter().enumerate() {
            if crate::deadline::expired() {
                break;
            }
            validate_tcp_route(route, gateway_semantics, &mut tcp.index(i), out);
        }
    }
    if !spec.export_to.is_empty() {
        common::validate_export_to(
            &meta.namespace,
            &spec.export_to,
            common::ExportToContext::Plain,
            &p.child("exportTo"),
            out,
        );
    }
    warn_unreachable_http(&spec.http, &p.child("http"), out);
    if !spec.tcp.is_empty() {
        warn_unreachable_l4(
            spec.tcp.iter().map(|r| r.matches.as_slice()),
            &p.child("tcp"),
            out,
        );
    }
    if !spec.tls.is_empty() {
        warn_unreachable_l4(
            spec.tls.iter().map(|r| r.matches.as_slice()),
            &p.child("tls"),
            out,
        );
    }
}

fn check_jwt_claim_routes(spec: &VirtualService, p: &mut FieldPath, out: &mut Findings) {
    let mut http = p.field("http");
    for (i, route) in spec.http.iter().enumerate() {
        let mut r = http.index(i);
        let mut m = r.field("match");
        for (j, mr) in route.matches.iter().enumerate() {
            let mut at = m.index(j);
            for (field, map) in [
                ("headers", &mr.headers),
                ("withoutHeaders", &mr.without_headers),
            ] {
                for key in map.keys().filter(|k| common::is_jwt_claim_route(k)) {
                    out.error(
                        at.field(field).child(key),
                        "JWT claim based routing is only supported for VirtualServices bound to gateways (not the mesh)",
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
