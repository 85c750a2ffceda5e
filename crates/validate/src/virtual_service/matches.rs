//! VirtualService matches (pure): takes HTTP, TLS and TCP match blocks, records Istio's findings for their URI,
//! header, query, SNI, port and gateway conditions.

use std::collections::BTreeMap;

use super::hosts::{check_gateway_bound_host, validate_gateway_names, VsHosts};
use crate::common;
use crate::common::FieldPath;
use admitpilot_model::istio::virtual_service::HttpMatchRequest;
use admitpilot_model::istio::virtual_service::L4MatchAttributes;
use admitpilot_model::istio::virtual_service::StringMatch;
use admitpilot_model::istio::virtual_service::TlsMatchAttributes;
use admitpilot_model::Findings;

pub(super) fn validate_http_match(mr: &HttpMatchRequest, p: &mut FieldPath, out: &mut Findings) {
    {
        let headers = p.field("headers");
        for (name, sm) in &mr.headers {
            let at = headers.child(name);
            common::validate_match_header_name(name, &at, out);
            validate_string_match(sm, true, &at, out);
        }
    }
    {
        let without = p.field("withoutHeaders");
        for (name, sm) in &mr.without_headers {
            let at = without.child(name);
            common::validate_match_header_name(name, &at, out);
            // A bare `*` regex means "header present", not an RE2 pattern.
            if sm.regex.as_deref() != Some("*") {
                validate_string_match(sm, true, &at, out);
            }
        }
    }
    // An empty URI prefix is allowed (Envoy matches everything); scheme/method/authority prefixes are not.
    for (field, sm, empty_prefix_is_error) in [
        ("uri", &mr.uri, false),
        ("scheme", &mr.scheme, true),
        ("method", &mr.method, true),
        ("authority", &mr.authority, true),
    ] {
        if let Some(sm) = sm {
            validate_string_match(sm, empty_prefix_is_error, &p.child(field), out);
        }
    }
    {
        let query = p.field("queryParams");
        for (name, sm) in &mr.query_params {
            validate_string_match(sm, true, &query.child(name), out);
        }
    }
    if let Some(port) = mr.port.filter(|p| *p != 0) {
        common::validate_port(port, &p.child("port"), out);
    }
    if !mr.source_labels.is_empty() {
        common::validate_labels(&mr.source_labels, &p.child("sourceLabels"), out);
    }
    if !mr.gateways.is_empty() {
        validate_gateway_names(&mr.gateways, false, &p.child("gateways"), out);
    }
    if !mr.source_namespace.is_empty() && !common::is_dns1123_label(&mr.source_namespace) {
        // Mirrors Istio's `validateHTTPRoute` (`labels.IsDNS1123Label`), with its text.
        out.error(
            p.child("sourceNamespace"),
            format!("sourceNamespace match {} is invalid", mr.source_namespace),
        );
    }
}

/// Validates a StringMatch: at most one of exact/prefix/regex; a non-empty prefix (when `empty_prefix_is_error`);
/// a valid RE2 regex.
pub(super) fn validate_string_match(
    sm: &StringMatch,
    empty_prefix_is_error: bool,
    path: &str,
    out: &mut Findings,
) {
    let set = usize::from(sm.exact.is_some())
        + usize::from(sm.prefix.is_some())
        + usize::from(sm.regex.is_some());
    if set > 1 {
        out.error(path, "only one of exact, prefix and regex may be set");
    }
    if empty_prefix_is_error && sm.prefix.as_deref() == Some("") {
        out.error(path, "prefix match must not be empty");
    }
    if let Some(re) = &sm.regex {
        common::validate_regex(re, path, out);
    }
}

pub(super) fn validate_tls_match(
    mr: &TlsMatchAttributes,
    hosts: &VsHosts<'_>,
    sni_on_gateway: bool,
    p: &mut FieldPath,
    out: &mut Findings,
) {
    if mr.sni_hosts.is_empty() {
        out.error(
            p.child("sniHosts"),
            "TLS match must have at least one SNI host",
        );
    }
    {
        let mut sni = p.field("sniHosts");
        for (i, host) in mr.sni_hosts.iter().enumerate() {
            validate_sni_host(host, hosts, sni_on_gateway, sni.index(i).as_str(), out);
        }
    }
    validate_l4_common(
        &mr.destination_subnets,
        mr.port,
        &mr.source_labels,
        &mr.gateways,
        p,
        out,
    );
}

/// Validates one SNI host of a TLS match. Mirrors Istio's `validateSniHost`, with its texts, except that more than
/// [`HOSTS_SHOWN`](super::hosts::HOSTS_SHOWN) VirtualService hosts are abbreviated in the list (`… and N more`).
fn validate_sni_host(
    host: &str,
    hosts: &VsHosts<'_>,
    sni_on_gateway: bool,
    path: &str,
    out: &mut Findings,
) {
    let result = if sni_on_gateway {
        check_gateway_bound_host(true, host)
    } else {
        common::check_wildcard_domain(host)
    };
    if let Err(e) = result {
        if common::is_ip(host) {
            out.warning(
                path,
                format!(
                    "using an IP address ({}) goes against SNI spec and most clients do not support this",
                    common::go_quote(host)
                ),
            );
        } else {
            out.error(path, e);
        }
        return;
    }
    if hosts.index.covering(host).is_none() {
        out.error(
            path,
            format!(
                "SNI host {} is not a compatible subset of any of the virtual service hosts: [{}]",
                common::go_quote(host),
                hosts.describe()
            ),
        );
    }
}

pub(super) fn validate_l4_match(mr: &L4MatchAttributes, p: &mut FieldPath, out: &mut Findings) {
    if !mr.source_subnet.is_empty() {
        common::validate_ip_or_cidr(&mr.source_subnet, &p.child("sourceSubnet"), out);
    }
    validate_l4_common(
        &mr.destination_subnets,
        mr.port,
        &mr.source_labels,
        &mr.gateways,
        p,
        out,
    );
}

fn validate_l4_common(
    subnets: &[String],
    port: Option<u32>,
    source_labels: &BTreeMap<String, String>,
    gateways: &[String],
    p: &mut FieldPath,
    out: &mut Findings,
) {
    {
        let mut at = p.field("destinationSubnets");
        for (i, subnet) in subnets.iter().enumerate() {
            common::validate_ip_or_cidr(subnet, at.index(i).as_str(), out);
        }
    }
    if let Some(port) = port.filter(|p| *p != 0) {
        common::validate_port(port, &p.child("port"), out);
    }
    if !source_labels.is_empty() {
        common::validate_labels(source_labels, &p.child("sourceLabels"), out);
    }
    if !gateways.is_empty() {
        validate_gateway_names(gateways, false, &p.child("gateways"), out);
    }
}
