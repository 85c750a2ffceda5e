//! VirtualService rules: takes a decoded istio VirtualService spec and its metadata, records findings with field
//! paths (hosts, gateways, HTTP/TLS/TCP routes, matches, destinations, retries, faults, CORS, header operations,
//! plus the unreachable/overlapping-rule warnings). Also holds the destination and string-match checks that other
//! networking kinds reuse.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

use ahash::{AHashMap, AHashSet};

use super::common::{self, validate_destination, FieldPath};
use super::host_index::{overlapping_pairs, HostIndex};
use crate::model::istio::virtual_service::{
    CorsPolicy, Destination, HeaderOperations, Headers, HttpDirectResponse, HttpFaultInjection,
    HttpMatchRequest, HttpMirrorPolicy, HttpRedirect, HttpRetry, HttpRewrite, HttpRoute,
    HttpRouteDestination, L4MatchAttributes, Percent, RouteDestination, SessionPersistence,
    StringMatch, TcpRoute, TlsMatchAttributes, TlsRoute, GRPC_STATUS_NAMES,
};
use crate::model::{istio::VirtualService, Findings, ObjectMeta};

/// Annotation set on VirtualServices generated from the Kubernetes Gateway API.
const ROUTE_SEMANTICS_ANNOTATION: &str = "internal.istio.io/route-semantics";
/// The reserved gateway name meaning "all sidecars".
const MESH_GATEWAY: &str = "mesh";
/// Direct-response bodies above this are rejected.
const DIRECT_RESPONSE_MAX: usize = 1024 * 1024;
/// Direct-response bodies above this draw a warning.
const DIRECT_RESPONSE_WARN: usize = 100 * 1024;

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
            if super::deadline::expired() {
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
            if super::deadline::expired() {
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
            if super::deadline::expired() {
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

fn validate_hosts(
    spec: &VirtualService,
    applies_to_gateway: bool,
    applies_to_mesh: bool,
    p: &mut FieldPath,
    out: &mut Findings,
) {
    let mut hosts_path = p.field("hosts");
    let sni = spec
        .tls
        .iter()
        .any(|t| t.matches.iter().any(|m| !m.sni_hosts.is_empty()));
    let mut all_valid = true;
    for (i, host) in spec.hosts.iter().enumerate() {
        if super::deadline::expired() {
            break;
        }
        // Mirrors Istio's `ValidateVirtualService` host loop: a (gateway-bound) wildcard domain or an IP
        // (`netutil.IsValidIPAddress`), and no `*` on the mesh; same texts.
        let result = if applies_to_gateway {
            check_gateway_bound_host(sni, host)
        } else {
            common::check_wildcard_domain(host)
        };
        match result {
            Err(e) if !common::is_ip(host) => {
                out.error(hosts_path.index(i).as_str(), e);
                all_valid = false;
            }
            Err(_) => {}
            Ok(()) if applies_to_mesh && host == "*" => {
                out.error(
                    hosts_path.index(i).as_str(),
                    "wildcard host * is not allowed for virtual services bound to the mesh gateway",
                );
                all_valid = false;
            }
            Ok(()) => {}
        }
    }
    if all_valid {
        // Istio's duplicate-host check (`host.Name.Matches`), with its text; Istio reports every matching pair,
        // admitpilot each host that overlaps another once (with one host it overlaps), to stay linear-ish.
        for (a, b) in overlapping_pairs(&spec.hosts) {
            if super::deadline::expired() {
                break;
            }
            let (a, b) = (&spec.hosts[a], &spec.hosts[b]);
            out.error(
                hosts_path.as_str(),
                format!("duplicate hosts in virtual service: {a} & {b}"),
            );
        }
    }
}

/// Checks a host of a gateway-bound VirtualService: a wildcard domain, or with SNI routes the auto-generated
/// `outbound_.<port>_._.<host>` form. Mirrors Istio's `ValidateWildcardDomainForVirtualServiceBoundToGateway`
/// (with `parseAutoGeneratedSNIDomain`), with its texts; the 255-character limit applies to both forms.
fn check_gateway_bound_host(sni: bool, host: &str) -> Result<(), String> {
    if host.len() > common::DOMAIN_MAX {
        // Istio's `CheckDNS1123Preconditions` comes first; `check_wildcard_domain` gives its text.
        return common::check_wildcard_domain(host);
    }
    if sni && host.starts_with("outbound_") {
        let parts: Vec<&str> = host.split('_').collect();
        if parts.len() < 4 {
            return Err(format!(
                "domain name {host} invalid, should follow '{OUTBOUND_SNI_FORMAT}' format"
            ));
        }
        let port = parts[1].trim_matches('.');
        let name = parts[3].trim_matches('.');
        if parts[0] != "outbound" {
            return Err(format!(
                "domain name {} invalid (label {} invalid)",
                common::go_quote(host),
                common::go_quote(parts[0])
            ));
        }
        if !port.bytes().any(|c| c.is_ascii_digit()) {
            return Err(outbound_label_error(host, port));
        }
        if !name.bytes().any(|c| c.is_ascii_alphabetic()) {
            return Err(outbound_label_error(host, name));
        }
        return Ok(());
    }
    common::check_wildcard_domain(host)
}

/// The shape of an auto-generated SNI host (Istio's `outboundHostNameFormat`).
const OUTBOUND_SNI_FORMAT: &str = "outbound_.<PORT>_._.<HOSTNAME>";

/// Istio's text for a bad port or host label of an auto-generated SNI host.
fn outbound_label_error(host: &str, label: &str) -> String {
    format!(
        "domain name {} invalid (label {} invalid). should follow {OUTBOUND_SNI_FORMAT} format",
        common::go_quote(host),
        common::go_quote(label)
    )
}

/// Validates gateway references: `namespace/name` (both DNS labels) or a legacy FQDN (`name.namespace`, warned).
/// Mirrors Istio's `validateGatewayNames`, with its texts and its early return after a legacy name.
pub(super) fn validate_gateway_names(
    names: &[String],
    gateway_semantics: bool,
    path: &str,
    out: &mut Findings,
) {
    for name in names {
        match name.split_once('/') {
            None => {
                if let Some((gw, ns)) = name.split_once('.') {
                    let ns = ns.split('.').next().unwrap_or(ns);
                    out.warning(
                        path,
                        format!(
                            "using legacy gatewayName format {}; prefer the <namespace>/<name> format: {}",
                            common::go_quote(name),
                            common::go_quote(&format!("{ns}/{gw}"))
                        ),
                    );
                }
                if let Err(e) = common::check_fqdn(name) {
                    out.error(path, e);
                }
                // Istio returns here: entries after a legacy name are not checked.
                return;
            }
            Some((ns, gw)) => {
                if ns.is_empty() || gw.is_empty() {
                    out.error(path, "config namespace and gateway name cannot be empty");
                }
                if !common::is_dns1123_label(ns) {
                    out.error(
                        path,
                        format!("invalid value for namespace: {}", common::go_quote(ns)),
                    );
                }
                if !gateway_semantics && !common::is_dns1123_label(gw) {
                    out.error(
                        path,
                        format!("invalid value for gateway name: {}", common::go_quote(gw)),
                    );
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// HTTP routes

fn validate_http_route(
    route: &HttpRoute,
    delegate: bool,
    gateway_semantics: bool,
    p: &mut FieldPath,
    out: &mut Findings,
) {
    validate_route_conflicts(route, delegate, p, out);
    {
        let mut m = p.field("match");
        for (i, mr) in route.matches.iter().enumerate() {
            validate_http_match(mr, &mut m.index(i), out);
        }
    }
    if let Some(headers) = &route.headers {
        validate_headers(headers, &mut p.field("headers"), out);
    }
    if let Some(cors) = &route.cors_policy {
        validate_cors(cors, &mut p.field("corsPolicy"), out);
    }
    if let Some(fault) = &route.fault {
        validate_fault(fault, &mut p.field("fault"), out);
    }
    if let Some(value) = route.mirror_percent {
        if value > 100 {
            out.error(
                p.child("mirrorPercent"),
                format!("mirrorPercent {value} is above 100"),
            );
        }
        out.warning(
            p.child("mirrorPercent"),
            "mirrorPercent is deprecated; use mirrorPercentage",
        );
    }
    if let Some(Percent { value: Some(v) }) = &route.mirror_percentage {
        validate_mirror_percentage(*v, &p.child("mirrorPercentage"), out);
    }
    if let Some(mirror) = &route.mirror {
        validate_destination(mirror, &mut p.field("mirror"), out);
    }
    {
        let mut mirrors = p.field("mirrors");
        for (i, mirror) in route.mirrors.iter().enumerate() {
            validate_mirror(mirror, &mut mirrors.index(i), out);
        }
    }
    if let Some(redirect) = &route.redirect {
        validate_redirect(redirect, &route.matches, &p.child("redirect"), out);
    }
    if let Some(direct) = &route.direct_response {
        validate_direct_response(direct, &mut p.field("directResponse"), out);
    }
    if let Some(retries) = &route.retries {
        validate_retry(retries, &mut p.field("retries"), out);
    }
    if let Some(rewrite) = &route.rewrite {
        validate_rewrite(rewrite, &mut p.field("rewrite"), out);
    }
    validate_authority_rewrite(route, p, out);
    validate_destinations(
        &route.route,
        http_destination_parts,
        gateway_semantics,
        &mut p.field("route"),
        out,
    );
    common::validate_duration_field(route.timeout.as_ref(), p, "timeout", out);
    if let Some(session) = &route.session_persistence {
        validate_session_persistence(session, &mut p.field("sessionPersistence"), out);
    }
}

/// Session persistence: the settings present must match `type` (COOKIE by default), names must be set, and the
/// timeouts are durations.
fn validate_session_persistence(s: &SessionPersistence, p: &mut FieldPath, out: &mut Findings) {
    let header = match s.kind.as_str() {
        "" | "COOKIE" => false,
        "HEADER" => true,
        other => {
            out.error(
                p.child("type"),
                format!("unknown session persistence type {other:?}; use COOKIE or HEADER"),
            );
            return;
        }
    };
    if header != s.header.is_some() || (header && s.cookie.is_some()) {
        out.error(
            p.child("type"),
            "type must match the session persistence settings given (cookie for COOKIE, header for HEADER)",
        );
    }
    if let Some(cookie) = &s.cookie {
        if cookie.name.is_empty() {
            out.error(p.child("cookie.name"), "cookie name is required");
        }
        if !matches!(cookie.lifetime_type.as_str(), "" | "PERMANENT" | "SESSION") {
            out.error(
                p.child("cookie.lifetimeType"),
                "lifetimeType must be PERMANENT or SESSION",
            );
        }
    }
    if let Some(h) = &s.header {
        if !common::is_header_token(&h.name) {
            out.error(
                p.child("header.name"),
                format!("{:?} is not a valid header name", h.name),
            );
        }
    }
    common::validate_duration_field(s.absolute_timeout.as_ref(), p, "absoluteTimeout", out);
    common::validate_duration_field(s.idle_timeout.as_ref(), p, "idleTimeout", out);
}

fn validate_route_conflicts(route: &HttpRoute, delegate: bool, p: &FieldPath, out: &mut Findings) {
    let path = p.as_str();
    let label = if route.name.is_empty() {
        String::new()
    } else {
        format!(" {:?}", route.name)
    };
    if !delegate && route.delegate.is_some() {
        if route.redirect.is_some() {
            out.error(
                path,
                format!("root HTTP route{label} delegates, so it must not set redirect"),
            );
        }
        if !route.route.is_empty() {
            out.error(
                path,
                format!("root HTTP route{label} delegates, so it must not set route"),
            );
        }
        return;
    }
    if delegate && route.delegate.is_some() {
        out.error(
            p.child("delegate"),
            "an HTTP route of a delegate VirtualService cannot delegate again",
        );
    }
    let conflicts: &[(bool, &str)] = if route.redirect.is_some() {
        &[
            (!route.route.is_empty(), "route and redirect"),
            (route.fault.is_some(), "fault and redirect"),
            (route.rewrite.is_some(), "rewrite and redirect"),
            (
                route.direct_response.is_some(),
                "directResponse and redirect",
            ),
        ]
    } else if route.direct_response.is_some() {
        &[
            (!route.route.is_empty(), "route and directResponse"),
            (route.fault.is_some(), "fault and directResponse"),
            (route.rewrite.is_some(), "rewrite and directResponse"),
        ]
    } else {
        if route.route.is_empty() {
            out.error(
                path,
                "an HTTP route needs one of route, redirect or directResponse",
            );
        }
        &[]
    };
    for (set, what) in conflicts {
        if *set {
            out.error(path, format!("an HTTP route cannot set both {what}"));
        }
    }
    if route.mirror.is_some() && !route.mirrors.is_empty() {
        out.error(path, "an HTTP route cannot set both mirror and mirrors");
    }
}

fn validate_http_match(mr: &HttpMatchRequest, p: &mut FieldPath, out: &mut Findings) {
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

fn validate_headers(headers: &Headers, p: &mut FieldPath, out: &mut Findings) {
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

/// The authority may be rewritten in only one place (rewrite.authority, or a request `:authority`/`host` header).
fn validate_authority_rewrite(route: &HttpRoute, p: &FieldPath, out: &mut Findings) {
    let mut current: Option<&str> = route
        .rewrite
        .as_ref()
        .map(|r| r.authority.as_str())
        .filter(|a| !a.is_empty());
    let Some(request) = route.headers.as_ref().and_then(|h| h.request.as_ref()) else {
        return;
    };
    for map in [&request.set, &request.add] {
        for (name, value) in map.iter().filter(|(k, _)| common::is_authority_header(k)) {
            if let Some(have) = current {
                out.error(
                    p.child("headers.request"),
                    format!("the authority is rewritten more than once ({have:?}, then {name}: {value:?})"),
                );
                return;
            }
            current = Some(value);
        }
    }
}

fn validate_cors(cors: &CorsPolicy, p: &mut FieldPath, out: &mut Findings) {
    {
        let mut origins = p.field("allowOrigins");
        for (i, origin) in cors.allow_origins.iter().enumerate() {
            let at = origins.index(i);
            let value = origin
                .exact
                .as_deref()
                .or(origin.prefix.as_deref())
                .or(origin.regex.as_deref())
                .unwrap_or_default();
            if value.is_empty() {
                out.error(
                    at.as_str(),
                    "an allowed origin needs a non-empty exact, prefix or regex",
                );
            } else {
                validate_string_match(origin, true, at.as_str(), out);
            }
        }
    }
    {
        let mut methods = p.field("allowMethods");
        for (i, method) in cors.allow_methods.iter().enumerate() {
            if !CORS_METHODS.contains(&method.as_str()) {
                out.error(
                    methods.index(i).as_str(),
                    format!("{method:?} is not a supported HTTP method"),
                );
            }
        }
    }
    for (field, list) in [
        ("allowHeaders", &cors.allow_headers),
        ("exposeHeaders", &cors.expose_headers),
    ] {
        let mut at = p.field(field);
        for (i, name) in list.iter().enumerate() {
            common::validate_cors_header_name(name, at.index(i).as_str(), out);
        }
    }
    if let Some(max_age) = &cors.max_age {
        let path = p.child("maxAge");
        common::validate_duration(max_age, &path, out);
        if common::parse_duration_nanos(max_age).is_some_and(|n| n % 1_000_000_000 != 0) {
            out.error(path, "maxAge is only accurate to whole seconds");
        }
    }
}

/// Methods allowed in a CORS policy (Go's net/http method names plus `*`).
const CORS_METHODS: &[&str] = &[
    "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "CONNECT", "OPTIONS", "TRACE", "*",
];

fn validate_fault(fault: &HttpFaultInjection, p: &mut FieldPath, out: &mut Findings) {
    if fault.abort.is_none() && fault.delay.is_none() {
        out.error(p.as_str(), "fault injection needs an abort and/or a delay");
    }
    if let Some(abort) = &fault.abort {
        let mut a = p.field("abort");
        validate_opt_percentage(abort.percentage.as_ref(), &a.child("percentage"), out);
        let set = usize::from(abort.http_status.is_some())
            + usize::from(abort.grpc_status.is_some())
            + usize::from(abort.http2_error.is_some());
        if set > 1 {
            out.error(
                a.as_str(),
                "only one of httpStatus, grpcStatus and http2Error may be set",
            );
        }
        if let Some(status) = abort.http_status {
            validate_http_status(i64::from(status), &a.child("httpStatus"), out);
        } else if let Some(status) = &abort.grpc_status {
            if !GRPC_STATUS_NAMES.contains(&status.as_str()) {
                out.error(
                    a.child("grpcStatus"),
                    format!("{status:?} is not a gRPC status name (such as NOT_FOUND)"),
                );
            }
        } else if abort.http2_error.is_some() {
            out.error(
                a.field("http2Error").as_str(),
                "HTTP/2 error aborts are not supported",
            );
        } else {
            out.warning(
                a.as_str(),
                "abort is configured without an error type (httpStatus or grpcStatus)",
            );
        }
    }
    if let Some(delay) = &fault.delay {
        let d = p.field("delay");
        validate_opt_percentage(delay.percentage.as_ref(), &d.child("percentage"), out);
        if delay.fixed_delay.is_some() && delay.exponential_delay.is_some() {
            out.error(
                d.as_str(),
                "only one of fixedDelay and exponentialDelay may be set",
            );
        }
        if let Some(fixed) = &delay.fixed_delay {
            common::validate_duration(fixed, &d.child("fixedDelay"), out);
        } else if let Some(exp) = &delay.exponential_delay {
            let path = d.child("exponentialDelay");
            common::validate_duration(exp, &path, out);
            out.error(path, "exponentialDelay is not supported");
        }
    }
}

fn validate_opt_percentage(percent: Option<&Percent>, path: &str, out: &mut Findings) {
    if let Some(percent) = percent {
        common::validate_fractional_percent(percent.value.unwrap_or(0.0), path, out);
    }
}

fn validate_mirror_percentage(value: f64, path: &str, out: &mut Findings) {
    if value > 100.0 {
        out.error(path, format!("mirror percentage {value} is above 100"));
    }
    if value < 0.0 {
        out.error(path, format!("mirror percentage {value} is below 0"));
    }
}

/// Records an error unless `status` is an HTTP status Istio accepts (200..=600).
pub(super) fn validate_http_status(status: i64, path: &str, out: &mut Findings) {
    if !(200..=600).contains(&status) {
        out.error(path, format!("HTTP status {status} is outside 200..599"));
    }
}

fn validate_mirror(mirror: &HttpMirrorPolicy, p: &mut FieldPath, out: &mut Findings) {
    let Some(destination) = &mirror.destination else {
        out.error(p.child("destination"), "a mirror needs a destination");
        return;
    };
    validate_destination(destination, &mut p.field("destination"), out);
    if let Some(Percent { value: Some(v) }) = &mirror.percentage {
        validate_mirror_percentage(*v, &p.child("percentage"), out);
    }
}

fn validate_redirect(
    redirect: &HttpRedirect,
    matches: &[HttpMatchRequest],
    path: &str,
    out: &mut Findings,
) {
    if redirect.port.is_some() && redirect.derive_port.is_some() {
        out.error(path, "only one of port and derivePort may be set");
    }
    if !redirect.uri.is_empty() && !redirect.prefix_rewrite.is_empty() {
        out.error(path, "a redirect may set only one of uri and prefixRewrite");
    }
    if !redirect.prefix_rewrite.is_empty()
        && matches
            .iter()
            .any(|m| m.uri.as_ref().is_some_and(|u| u.prefix.is_none()))
    {
        out.error(
            path,
            "redirect prefixRewrite requires every URI match to be a prefix match",
        );
    }
    if redirect.uri.is_empty()
        && redirect.prefix_rewrite.is_empty()
        && redirect.authority.is_empty()
        && redirect.port.is_none()
        && redirect.derive_port.is_none()
        && redirect.scheme.is_empty()
    {
        out.error(
            path,
            "a redirect must set uri, prefixRewrite, authority, scheme or port",
        );
    }
    if let Some(code) = redirect
        .redirect_code
        .filter(|c| *c != 0 && !(300..=399).contains(c))
    {
        out.error(path, format!("redirectCode {code} is not a 3xx code"));
    }
    if !redirect.scheme.is_empty() && redirect.scheme != "http" && redirect.scheme != "https" {
        out.error(
            path,
            format!(
                "redirect scheme {:?} must be \"http\" or \"https\"",
                redirect.scheme
            ),
        );
    }
    if let Some(e) = redirect
        .port
        .filter(|p| *p > 0)
        .and_then(|p| common::check_port(p).err())
    {
        out.error(path, e);
    }
}

fn validate_direct_response(direct: &HttpDirectResponse, p: &mut FieldPath, out: &mut Findings) {
    if let Some(body) = &direct.body {
        let b = p.field("body");
        if body.string.is_some() && body.bytes.is_some() {
            out.error(b.as_str(), "only one of string and bytes may be set");
        }
        // `bytes` is base64 text; its decoded size is about three quarters of its length.
        let size = body
            .string
            .as_ref()
            .map(String::len)
            .or(body.bytes.as_ref().map(|s| s.len() / 4 * 3))
            .unwrap_or(0);
        if size > DIRECT_RESPONSE_MAX {
            out.error(
                b.as_str(),
                "direct response body is larger than 1MB; large bodies burden the control plane",
            );
        } else if size > DIRECT_RESPONSE_WARN {
            out.warning(
                b.as_str(),
                "direct response body is larger than 100KB; large bodies burden the control plane",
            );
        }
    }
    validate_http_status(
        i64::from(direct.status.unwrap_or(0)),
        &p.child("status"),
        out,
    );
}

/// Envoy retry conditions Istio accepts in `retryOn` (besides HTTP status codes).
const RETRY_ON_POLICIES: &[&str] = &[
    "5xx",
    "gateway-error",
    "reset",
    "reset-before-request",
    "connect-failure",
    "retriable-4xx",
    "refused-stream",
    "retriable-status-codes",
    "retriable-headers",
    "envoy-ratelimited",
    "http3-post-connect-failure",
    "cancelled",
    "deadline-exceeded",
    "internal",
    "resource-exhausted",
    "unavailable",
];

/// Validates a retry policy (Istio's `ValidateHTTPRetry`).
pub(super) fn validate_retry(retry: &HttpRetry, p: &mut FieldPath, out: &mut Findings) {
    let attempts = retry.attempts.unwrap_or(0);
    if attempts < 0 {
        out.error(p.child("attempts"), "attempts must not be negative");
    }
    if attempts == 0
        && (retry.per_try_timeout.is_some()
            || !retry.retry_on.is_empty()
            || retry.retry_remote_localities.is_some())
    {
        out.error(
            p.as_str(),
            "retry settings are configured but attempts is 0 (retries disabled)",
        );
    }
    common::validate_duration_field(retry.per_try_timeout.as_ref(), p, "perTryTimeout", out);
    if !retry.retry_on.is_empty() {
        for policy in retry.retry_on.split(',') {
            let is_status = policy
                .parse::<u16>()
                .is_ok_and(common::is_known_http_status);
            if !is_status && !RETRY_ON_POLICIES.contains(&policy) {
                out.error(
                    p.child("retryOn"),
                    format!("{policy:?} is not a valid retryOn condition"),
                );
            }
        }
    }
    common::validate_duration_field(retry.backoff.as_ref(), p, "backoff", out);
}

fn validate_rewrite(rewrite: &HttpRewrite, p: &mut FieldPath, out: &mut Findings) {
    if !rewrite.uri.is_empty() && rewrite.uri_regex_rewrite.is_some() {
        out.error(
            p.as_str(),
            "a rewrite may set only one of uri and uriRegexRewrite",
        );
    }
    if rewrite.uri.is_empty() && rewrite.uri_regex_rewrite.is_none() && rewrite.authority.is_empty()
    {
        out.error(
            p.as_str(),
            "a rewrite must set uri, uriRegexRewrite or authority",
        );
        return;
    }
    if let Some(re) = &rewrite.uri_regex_rewrite {
        let path = p.child("uriRegexRewrite");
        if re.pattern.is_empty() || re.rewrite.is_empty() {
            out.error(path, "uriRegexRewrite needs both match and rewrite");
        } else if let Err(e) = common::check_regex(&re.pattern) {
            out.error(format!("{path}.match"), e);
        }
    }
}

/// Checks the weighted destinations of an HTTP, TCP or TLS route and their total weight; `parts` gives each
/// one's destination, weight and (HTTP only) header operations.
fn validate_destinations<R>(
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
fn http_destination_parts(
    r: &HttpRouteDestination,
) -> (Option<&Destination>, Option<u32>, Option<&Headers>) {
    (r.destination.as_ref(), r.weight, r.headers.as_ref())
}

/// Destination and weight of a TCP or TLS route destination (no header operations).
fn l4_destination_parts(
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

// ---------------------------------------------------------------------------------------------------------------
// TLS and TCP routes

/// The hosts of the VirtualService, listed and indexed, for the SNI host checks.
struct VsHosts<'a> {
    names: &'a [String],
    index: HostIndex,
}

/// Hosts named in full in a message; the rest are counted.
const HOSTS_SHOWN: usize = 5;

impl VsHosts<'_> {
    /// The first few hosts, then how many more there are.
    fn describe(&self) -> String {
        let shown = self.names[..self.names.len().min(HOSTS_SHOWN)].join(", ");
        match self.names.len().saturating_sub(HOSTS_SHOWN) {
            0 => shown,
            more => format!("{shown} and {more} more"),
        }
    }
}

fn validate_tls_route(
    route: &TlsRoute,
    hosts: &VsHosts<'_>,
    sni_on_gateway: bool,
    gateway_semantics: bool,
    p: &mut FieldPath,
    out: &mut Findings,
) {
    if route.matches.is_empty() {
        out.error(p.child("match"), "a TLS route needs at least one match");
    }
    {
        let mut m = p.field("match");
        for (i, mr) in route.matches.iter().enumerate() {
            validate_tls_match(mr, hosts, sni_on_gateway, &mut m.index(i), out);
        }
    }
    if route.route.is_empty() {
        out.error(
            p.child("route"),
            "a TLS route needs at least one destination",
        );
    }
    validate_destinations(
        &route.route,
        l4_destination_parts,
        gateway_semantics,
        &mut p.field("route"),
        out,
    );
}

fn validate_tls_match(
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
/// [`HOSTS_SHOWN`] VirtualService hosts are abbreviated in the list (`… and N more`).
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

fn validate_tcp_route(
    route: &TcpRoute,
    gateway_semantics: bool,
    p: &mut FieldPath,
    out: &mut Findings,
) {
    {
        let mut m = p.field("match");
        for (i, mr) in route.matches.iter().enumerate() {
            let mut at = m.index(i);
            validate_l4_match(mr, &mut at, out);
        }
    }
    if route.route.is_empty() {
        out.error(
            p.child("route"),
            "a TCP route needs at least one destination",
        );
    }
    validate_destinations(
        &route.route,
        l4_destination_parts,
        gateway_semantics,
        &mut p.field("route"),
        out,
    );
}

fn validate_l4_match(mr: &L4MatchAttributes, p: &mut FieldPath, out: &mut Findings) {
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

// ---------------------------------------------------------------------------------------------------------------
// Unreachable and overlapping rules (warnings only)

/// The fields of an HTTP match that decide routing (all but its name), for comparing and hashing.
#[allow(clippy::type_complexity)]
fn routing_fields(
    m: &HttpMatchRequest,
) -> (
    (
        &Option<StringMatch>,
        &Option<StringMatch>,
        &Option<StringMatch>,
        &Option<StringMatch>,
        &BTreeMap<String, StringMatch>,
        &Option<u32>,
    ),
    (
        &BTreeMap<String, String>,
        &Vec<String>,
        &BTreeMap<String, StringMatch>,
        &Option<bool>,
    ),
    (&BTreeMap<String, StringMatch>, &String, &String),
) {
    let HttpMatchRequest {
        name: _,
        uri,
        scheme,
        method,
        authority,
        headers,
        port,
        source_labels,
        gateways,
        query_params,
        ignore_uri_case,
        without_headers,
        source_namespace,
        stat_prefix,
    } = m;
    (
        (uri, scheme, method, authority, headers, port),
        (source_labels, gateways, query_params, ignore_uri_case),
        (without_headers, source_namespace, stat_prefix),
    )
}

fn rule_name(route: &HttpRoute, index: usize) -> String {
    if route.name.is_empty() {
        format!("#{index}")
    } else {
        format!("{:?}", route.name)
    }
}

fn match_name(m: &HttpMatchRequest, index: usize) -> String {
    if m.name.is_empty() {
        format!("#{index}")
    } else {
        format!("{:?}", m.name)
    }
}

/// A prefix-URI match reduced to the fields the overlap analysis compares (Istio's heuristic).
struct PrefixMatch {
    rule: String,
    name: String,
    prefix: String,
    port: u32,
    method: String,
    authority: String,
    headers: BTreeMap<String, String>,
    query: BTreeMap<String, String>,
    without: BTreeMap<String, String>,
}

fn exact_or_prefix(sm: Option<&StringMatch>) -> String {
    match sm {
        Some(StringMatch { exact: Some(e), .. }) if !e.is_empty() => format!("exact:{e}"),
        Some(StringMatch {
            prefix: Some(p), ..
        }) if !p.is_empty() => format!("prefix:{p}"),
        _ => String::new(),
    }
}

fn reduce_map(map: &BTreeMap<String, StringMatch>) -> BTreeMap<String, String> {
    map.iter()
        .map(|(k, v)| (k.clone(), exact_or_prefix(Some(v))))
        .collect()
}

fn prefix_match(
    route: &HttpRoute,
    rule: usize,
    m: &HttpMatchRequest,
    index: usize,
) -> Option<PrefixMatch> {
    let prefix = m.uri.as_ref()?.prefix.as_ref().filter(|p| !p.is_empty())?;
    let mut method = exact_or_prefix(m.method.as_ref());
    if method.is_empty() {
        method = "exact:GET".into();
    }
    Some(PrefixMatch {
        rule: rule_name(route, rule),
        name: match_name(m, index),
        prefix: prefix.clone(),
        port: m.port.unwrap_or(0),
        method,
        authority: exact_or_prefix(m.authority.as_ref()),
        headers: reduce_map(&m.headers),
        query: reduce_map(&m.query_params),
        without: reduce_map(&m.without_headers),
    })
}

/// Tells whether the earlier match `a` covers the later match `b`.
fn covers(a: &PrefixMatch, b: &PrefixMatch) -> bool {
    let loose = |x: &str, y: &str| x == y || x.starts_with(y);
    let maps = |x: &BTreeMap<String, String>, y: &BTreeMap<String, String>| {
        x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| loose(v, w)))
    };
    b.prefix.starts_with(&a.prefix)
        && a.port == b.port
        && loose(&a.method, &b.method)
        && loose(&a.authority, &b.authority)
        && maps(&a.headers, &b.headers)
        && maps(&a.query, &b.query)
        && maps(&a.without, &b.without)
}

/// Earlier prefix matches compared with each later one, at most, by the "covered by an earlier prefix" analysis.
const MAX_COVER_CHECKS: usize = 64;

/// An HTTP match compared and hashed without its name (names do not affect routing).
struct Unnamed<'a>(&'a HttpMatchRequest);

impl PartialEq for Unnamed<'_> {
    fn eq(&self, other: &Self) -> bool {
        routing_fields(self.0) == routing_fields(other.0)
    }
}

impl Eq for Unnamed<'_> {}

impl Hash for Unnamed<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        routing_fields(self.0).hash(state);
    }
}

/// Prefix matches by URI prefix, byte by byte, so that the matches whose prefix starts a given URI are found in
/// time linear in its length.
#[derive(Default)]
struct PrefixTrie {
    /// Node 0 is the empty prefix.
    nodes: Vec<TrieNode>,
}

#[derive(Default)]
struct TrieNode {
    /// Children by next byte, sorted.
    children: Vec<(u8, usize)>,
    /// Matches whose prefix ends here.
    matches: Vec<usize>,
}

impl PrefixTrie {
    fn child(&self, node: usize, byte: u8) -> Option<usize> {
        let children = &self.nodes[node].children;
        children
            .binary_search_by_key(&byte, |(b, _)| *b)
            .ok()
            .map(|at| children[at].1)
    }

    fn insert(&mut self, prefix: &str, item: usize) {
        if self.nodes.is_empty() {
            self.nodes.push(TrieNode::default());
        }
        let mut node = 0;
        for byte in prefix.bytes() {
            node = match self.nodes[node]
                .children
                .binary_search_by_key(&byte, |(b, _)| *b)
            {
                Ok(at) => self.nodes[node].children[at].1,
                Err(at) => {
                    let next = self.nodes.len();
                    self.nodes.push(TrieNode::default());
                    self.nodes[node].children.insert(at, (byte, next));
                    next
                }
            };
        }
        self.nodes[node].matches.push(item);
    }

    /// The matches whose prefix is a proper prefix of `prefix`, shortest prefix first.
    fn shorter_prefixes<'t>(&'t self, prefix: &'t str) -> impl Iterator<Item = usize> + 't {
        let mut node = (!self.nodes.is_empty()).then_some(0);
        let last = prefix.len().saturating_sub(1);
        prefix.bytes().take(last).flat_map(move |byte| {
            node = node.and_then(|n| self.child(n, byte));
            node.map(|n| self.nodes[n].matches.as_slice())
                .unwrap_or_default()
                .iter()
                .copied()
        })
    }
}

fn warn_unreachable_http(routes: &[HttpRoute], path: &str, out: &mut Findings) {
    let mut seen: AHashMap<Unnamed<'_>, usize> = AHashMap::default();
    let mut catch_all: Option<usize> = None;
    let mut prefixes = Vec::new();
    for (r, route) in routes.iter().enumerate() {
        if super::deadline::expired() {
            break;
        }
        if route.matches.is_empty() {
            if catch_all.is_some() {
                out.warning(
                    path,
                    format!(
                        "rule {} is never used: only the last rule may have no matches",
                        rule_name(route, r)
                    ),
                );
            }
            catch_all = Some(r);
            continue;
        }
        let mut duplicates = 0;
        for (m, mr) in route.matches.iter().enumerate() {
            if catch_all.is_some() {
                out.warning(
                    path,
                    format!(
                        "rule {} is never used: an earlier rule has no matches",
                        rule_name(route, r)
                    ),
                );
                continue;
            }
            if let Some(first) = seen.get(&Unnamed(mr)) {
                out.warning(
                    path,
                    format!(
                        "rule {} match {} is never used: rule {} has the same match",
                        rule_name(route, r),
                        match_name(mr, m),
                        rule_name(&routes[*first], *first)
                    ),
                );
                duplicates += 1;
                continue;
            }
            seen.insert(Unnamed(mr), r);
            prefixes.extend(prefix_match(route, r, mr, m));
        }
        if duplicates == route.matches.len() {
            out.warning(
                path,
                format!(
                    "rule {} is never used: earlier rules take all its matches",
                    rule_name(route, r)
                ),
            );
        }
    }
    warn_covered_prefixes(&prefixes, path, out);
}

/// Warns about each prefix match that an earlier match with a shorter prefix covers (Istio's heuristic), naming
/// the first such match found; each match is compared with at most [`MAX_COVER_CHECKS`] earlier ones.
fn warn_covered_prefixes(prefixes: &[PrefixMatch], path: &str, out: &mut Findings) {
    let mut trie = PrefixTrie::default();
    let mut truncated = false;
    for (i, b) in prefixes.iter().enumerate() {
        if super::deadline::expired() {
            break;
        }
        let (covering, more) = {
            let mut candidates = trie.shorter_prefixes(&b.prefix);
            let covering = candidates
                .by_ref()
                .take(MAX_COVER_CHECKS)
                .map(|at| &prefixes[at])
                .find(|a| covers(a, b));
            (covering, candidates.next().is_some())
        };
        match covering {
            Some(a) => out.warning(
                path,
                format!(
                    "rule {} match {} (prefix {:?}) is never used: match {} (prefix {:?}) of rule {} covers it",
                    b.rule, b.name, b.prefix, a.name, a.prefix, a.rule
                ),
            ),
            None => truncated |= more,
        }
        trie.insert(&b.prefix, i);
    }
    if truncated {
        out.warning(
            path,
            format!(
                "some matches were compared with only {MAX_COVER_CHECKS} earlier matches of shorter prefixes: a \
                 match those cover may be never used without a warning"
            ),
        );
    }
}

fn warn_unreachable_l4<'a, M: Eq + Hash + 'a>(
    routes: impl Iterator<Item = &'a [M]>,
    path: &str,
    out: &mut Findings,
) {
    let mut seen: AHashSet<&M> = AHashSet::default();
    let mut catch_all = false;
    for (r, matches) in routes.enumerate() {
        if matches.is_empty() {
            if catch_all {
                out.warning(
                    path,
                    format!("rule #{r} is never used: only the last rule may have no matches"),
                );
            }
            catch_all = true;
            continue;
        }
        let mut duplicates = 0;
        for (m, mr) in matches.iter().enumerate() {
            if catch_all {
                out.warning(
                    path,
                    format!("rule #{r} is never used: an earlier rule has no matches"),
                );
                continue;
            }
            if seen.contains(mr) {
                out.warning(
                    path,
                    format!(
                        "rule #{r} match #{m} is never used: an earlier rule has the same match"
                    ),
                );
                duplicates += 1;
            } else {
                seen.insert(mr);
            }
        }
        if duplicates == matches.len() {
            out.warning(
                path,
                format!("rule #{r} is never used: earlier rules take all its matches"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use serde_json::json;

    fn run(spec: serde_json::Value) -> (Vec<String>, Vec<String>) {
        run_with(spec, ObjectMeta::default())
    }

    fn run_with(spec: serde_json::Value, meta: ObjectMeta) -> (Vec<String>, Vec<String>) {
        crate::validate::testing::run_rules(spec, &meta, validate)
    }

    fn simple_route() -> serde_json::Value {
        json!([{"destination": {"host": "reviews.default.svc.cluster.local", "subset": "v1"}}])
    }

    #[test]
    fn accepts_a_typical_virtual_service() {
        let (errors, warnings) = run(json!({
            "hosts": ["reviews", "*.example.com"],
            "gateways": ["istio-system/ingress", "mesh"],
            "http": [{
                "match": [{"uri": {"prefix": "/api"}, "headers": {"x-user": {"regex": "^a.*"}}}],
                "route": [{"destination": {"host": "reviews", "port": {"number": 9080}}, "weight": 80},
                          {"destination": {"host": "reviews", "subset": "v2"}, "weight": 20}],
                "timeout": "1.5s",
                "retries": {"attempts": 3, "perTryTimeout": "2s", "retryOn": "5xx,503,reset"},
                "headers": {"request": {"set": {"x-a": "%HOSTNAME%"}, "remove": ["x-b"]}},
                "corsPolicy": {"allowOrigins": [{"exact": "https://a.com"}], "allowMethods": ["GET"], "maxAge": "24h"}
            }, {"route": simple_route()}]
        }));
        assert!(errors.is_empty(), "{errors:?}");
        assert!(warnings.is_empty(), "{warnings:?}");
    }

    #[test]
    fn hosts_rules() {
        let (errors, _) = run(json!({"hosts": ["*"], "http": [{"route": simple_route()}]}));
        assert_eq!(errors.len(), 1, "{errors:?}");
        let (errors, _) = run(
            json!({"hosts": ["*"], "gateways": ["ns/gw"], "http": [{"route": simple_route()}]}),
        );
        assert!(errors.is_empty(), "{errors:?}");
        let (errors, _) =
            run(json!({"hosts": ["a.foo.com", "*.foo.com"], "http": [{"route": simple_route()}]}));
        assert_eq!(errors.len(), 1, "{errors:?}");
        let (errors, _) = run(json!({"hosts": ["bad_host!"], "http": [{"route": simple_route()}]}));
        assert!(errors[0].starts_with("spec.hosts[0]"), "{errors:?}");
        let (errors, _) = run(json!({"hosts": ["10.0.0.1"], "http": [{"route": simple_route()}]}));
        assert!(errors.is_empty(), "{errors:?}");
    }

    /// Istio's `ValidateWildcardDomainForVirtualServiceBoundToGateway` checks the 255-character limit before the
    /// `outbound_` form, and `validateSniHost` treats a VirtualService without gateways as gateway-bound.
    #[test]
    fn auto_generated_sni_hosts() {
        let tls = |sni: &str| json!([{"match": [{"sniHosts": [sni]}], "route": simple_route()}]);
        let short = "outbound_.80_._.a.example.com";
        let (errors, _) = run(json!({"hosts": [short], "gateways": ["ns/gw"], "tls": tls(short)}));
        assert!(errors.is_empty(), "{errors:?}");
        let long = format!("outbound_.80_._.{}.com", "a".repeat(239));
        assert_eq!(long.len(), 259);
        let (errors, _) = run(json!({"hosts": [long], "gateways": ["ns/gw"], "tls": tls(&long)}));
        assert!(errors[0].contains("too long (max 255)"), "{errors:?}");
        let (errors, _) = run(json!({"hosts": ["*.com"], "tls": tls("outbound_.80_._.a.com")}));
        assert!(errors.is_empty(), "{errors:?}");
        let (errors, _) = run(
            json!({"hosts": ["*.com"], "gateways": ["mesh"], "tls": tls("outbound_.80_._.a.com")}),
        );
        assert_eq!(errors.len(), 1, "{errors:?}");
        let (errors, _) =
            run(json!({"hosts": ["outbound_x"], "gateways": ["ns/gw"], "tls": tls("outbound_x")}));
        assert!(
            errors[0].ends_with(
                "domain name outbound_x invalid, should follow 'outbound_.<PORT>_._.<HOSTNAME>' format"
            ),
            "{errors:?}"
        );
    }

    #[test]
    fn delegate_rules() {
        let (errors, _) = run(json!({"gateways": ["ns/gw"], "tcp": [{"route": simple_route()}]}));
        assert_eq!(errors.len(), 2, "{errors:?}");
        let (errors, _) = run(json!({"http": [{"delegate": {"name": "x"}}]}));
        assert!(
            errors.iter().any(|e| e.contains("cannot delegate again")),
            "{errors:?}"
        );
        let (errors, _) = run(
            json!({"hosts": ["a.com"], "http": [{"delegate": {"name": "x"}, "route": simple_route()}]}),
        );
        assert_eq!(errors.len(), 1, "{errors:?}");
    }

    #[test]
    fn route_conflicts_and_requirements() {
        let (errors, _) = run(json!({"hosts": ["a"]}));
        assert_eq!(
            errors,
            vec!["spec: a VirtualService needs at least one http, tcp or tls route"]
        );
        let (errors, _) = run(json!({"hosts": ["a"], "http": [{}]}));
        assert_eq!(errors.len(), 1);
        let (errors, _) = run(json!({"hosts": ["a"], "http": [{
            "route": simple_route(), "redirect": {"uri": "/x"}, "rewrite": {"uri": "/y"}, "fault": {"abort": {"httpStatus": 500}}
        }]}));
        assert_eq!(errors.len(), 3, "{errors:?}");
        let (errors, _) = run(json!({"hosts": ["a"], "http": [{
            "route": simple_route(), "mirror": {"host": "m"}, "mirrors": [{"destination": {"host": "n"}}]
        }]}));
        assert_eq!(errors.len(), 1, "{errors:?}");
    }

    #[test]
    fn destinations_and_weights() {
        let (errors, _) = run(json!({"hosts": ["a"], "http": [{"route": [
            {"destination": {"host": "*"}}, {"destination": {"host": "b", "subset": "Bad_Subset", "port": {"number": 70000}}}
        ]}]}));
        assert_eq!(errors.len(), 4, "{errors:?}"); // host *, subset, port, total weight 0
        let (errors, _) = run(json!({"hosts": ["a"], "tcp": [{"route": [{"weight": 1}]}]}));
        assert_eq!(
            errors,
            vec!["spec.tcp[0].route[0].destination: destination is required"]
        );
    }

    #[test]
    fn match_rules() {
        let (errors, _) = run(json!({"hosts": ["a"], "http": [{"match": [{
            "uri": {"regex": "(bad"}, "method": {"prefix": ""}, "headers": {"bad header": {"exact": "x"}},
            "withoutHeaders": {"x": {"regex": "*"}}, "port": 0, "sourceNamespace": "Bad_NS",
            "queryParams": {"q": {"exact": "1", "prefix": "2"}}
        }], "route": simple_route()}]}));
        assert_eq!(errors.len(), 5, "{errors:?}");
        let (errors, _) = run(
            json!({"hosts": ["a"], "http": [{"match": [{"headers": {"@request.auth.claims.group": {"exact": "x"}}}], "route": simple_route()}]}),
        );
        assert_eq!(errors.len(), 1, "{errors:?}");
        let (errors, _) = run(
            json!({"hosts": ["a"], "gateways": ["ns/gw"], "http": [{"match": [{"headers": {"@request.auth.claims.group": {"exact": "x"}}}], "route": simple_route()}]}),
        );
        assert!(errors.is_empty(), "{errors:?}");
    }

    #[test]
    fn redirect_rewrite_direct_response() {
        let (errors, _) = run(json!({"hosts": ["a"], "http": [
            {"redirect": {"uri": "/a", "prefixRewrite": "/b"}},
            {"redirect": {}},
            {"redirect": {"uri": "/a", "redirectCode": 200}},
            {"redirect": {"scheme": "ftp"}},
            {"match": [{"uri": {"exact": "/a"}}], "redirect": {"prefixRewrite": "/b"}},
            {"redirect": {"derivePort": "FROM_REQUEST_PORT"}}
        ]}));
        assert_eq!(errors.len(), 5, "{errors:?}");
        let (errors, _) = run(json!({"hosts": ["a"], "http": [
            {"rewrite": {}, "route": simple_route()},
            {"rewrite": {"uri": "/a", "uriRegexRewrite": {"match": "a", "rewrite": "b"}}, "route": simple_route()},
            {"rewrite": {"uriRegexRewrite": {"match": "a"}}, "route": simple_route()},
            {"directResponse": {"status": 700}},
            {"directResponse": {"status": 503, "body": {"string": "down"}}}
        ]}));
        assert_eq!(errors.len(), 4, "{errors:?}");
    }

    #[test]
    fn retries_faults_cors() {
        let (errors, _) = run(json!({"hosts": ["a"], "http": [{"route": simple_route(),
            "retries": {"attempts": 0, "perTryTimeout": "0.1ms", "retryOn": "5xx,nonsense,404"},
            "fault": {"abort": {"grpcStatus": "NOPE", "percentage": {"value": 101}}, "delay": {"exponentialDelay": "1s"}},
            "corsPolicy": {"allowOrigins": [{"exact": ""}], "allowMethods": ["FETCH"], "allowHeaders": ["a b"], "maxAge": "1.5s"}
        }]}));
        // attempts 0 + settings, perTryTimeout, nonsense, grpc status, percentage, exponentialDelay,
        // empty origin, method, header, maxAge precision
        assert_eq!(errors.len(), 10, "{errors:?}");
    }

    #[test]
    fn header_operations() {
        let (errors, _) = run(json!({"hosts": ["a"], "http": [{"route": simple_route(),
            "rewrite": {"authority": "x.com"},
            "headers": {"request": {"set": {":path": "/x", "host": "y.com", "x-ok": "%BAD"}, "remove": ["Host"]},
                        "response": {"add": {":status": "200"}}}
        }]}));
        // :path, bad value, remove Host, response :status, authority twice
        assert_eq!(errors.len(), 5, "{errors:?}");
    }

    #[test]
    fn tls_routes() {
        let (errors, warnings) = run(json!({"hosts": ["*.a.com"], "gateways": ["ns/gw"], "tls": [
            {"match": [{"sniHosts": ["x.a.com", "b.com", "1.2.3.4"]}], "route": simple_route()},
            {"match": [], "route": []}
        ]}));
        assert_eq!(errors.len(), 3, "{errors:?}"); // b.com not covered, no match, no route
        assert_eq!(warnings.len(), 1, "{warnings:?}"); // IP SNI
    }

    #[test]
    fn gateway_names_and_export_to() {
        let (errors, warnings) = run(
            json!({"hosts": ["a.com"], "gateways": ["ns/Bad_Name", "/x", "gw.ns", "ns/Bad_Too"],
            "exportTo": ["*", "ns1"], "http": [{"route": simple_route()}]}),
        );
        assert_eq!(
            warnings,
            [
                r#"spec.gateways: using legacy gatewayName format "gw.ns"; prefer the <namespace>/<name> format: "ns/gw""#
            ]
        );
        // Bad name, empty ns (+ns not label), export * + others; as in Istio, nothing after the legacy name.
        assert_eq!(
            errors,
            [
                r#"spec.gateways: invalid value for gateway name: "Bad_Name""#,
                "spec.gateways: config namespace and gateway name cannot be empty",
                r#"spec.gateways: invalid value for namespace: """#,
                "spec.exportTo: cannot have both public (*) and non-public exportTo values for a resource",
            ]
        );
    }

    #[test]
    fn covered_prefix_matches_are_those_the_pairwise_rule_finds() {
        use proptest::prelude::*;
        let prefix = prop::sample::select(vec!["/a", "/ab", "/abc", "/b", "/a/", "/"]);
        let method = prop::sample::select(vec!["", "GET", "POST"]);
        let matches = prop::collection::vec((prefix, method), 1..24);
        proptest!(|(matches in matches)| {
            let routes: Vec<HttpRoute> = matches
                .iter()
                .map(|(prefix, method)| {
                    let mut mr = HttpMatchRequest {
                        uri: Some(StringMatch { prefix: Some((*prefix).into()), ..Default::default() }),
                        ..Default::default()
                    };
                    if !method.is_empty() {
                        mr.method = Some(StringMatch { exact: Some((*method).into()), ..Default::default() });
                    }
                    HttpRoute { matches: vec![mr], ..Default::default() }
                })
                .collect();
            let prefixes: Vec<PrefixMatch> = routes
                .iter()
                .enumerate()
                .filter_map(|(r, route)| prefix_match(route, r, &route.matches[0], 0))
                .collect();
            let pairwise: BTreeSet<String> = prefixes
                .iter()
                .enumerate()
                .filter(|(i, b)| prefixes[..*i].iter().any(|a| a.prefix != b.prefix && covers(a, b)))
                .map(|(_, b)| b.rule.clone())
                .collect();
            let mut out = Findings::default();
            warn_covered_prefixes(&prefixes, "spec.http", &mut out);
            let found: BTreeSet<String> = out
                .into_vec()
                .iter()
                .filter_map(|f| f.message.strip_prefix("rule ")?.split(' ').next().map(String::from))
                .collect();
            prop_assert_eq!(found, pairwise);
        });
    }

    #[test]
    fn unreachable_rules_are_warnings() {
        let (errors, warnings) = run(json!({"hosts": ["a"], "http": [
            {"match": [{"uri": {"prefix": "/a"}}], "route": simple_route()},
            {"match": [{"uri": {"prefix": "/a"}, "name": "dup"}], "route": simple_route()},
            {"match": [{"uri": {"prefix": "/ab"}}], "route": simple_route()},
            {"route": simple_route()},
            {"route": simple_route()}
        ]}));
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(warnings.len(), 4, "{warnings:?}");
    }

    #[test]
    fn session_persistence() {
        let (errors, _) = run(json!({"hosts": ["a"], "http": [
            {"route": simple_route(), "sessionPersistence": {"absoluteTimeout": "5m", "cookie": {"name": "s", "lifetimeType": "PERMANENT"}}},
            {"route": simple_route(), "sessionPersistence": {"type": "HEADER", "header": {"name": "x-session"}}},
            {"route": simple_route(), "sessionPersistence": {"type": "HEADER"}},
            {"route": simple_route(), "sessionPersistence": {"cookie": {"name": ""}, "idleTimeout": "0s"}}
        ]}));
        assert_eq!(errors.len(), 3, "{errors:?}");
    }

    #[test]
    fn gateway_semantics_skip_destination_checks() {
        let meta = ObjectMeta {
            annotations: [(
                ROUTE_SEMANTICS_ANNOTATION.to_string(),
                "gateway".to_string(),
            )]
            .into(),
            ..ObjectMeta::default()
        };
        let (errors, _) = run_with(
            json!({"hosts": ["a.com"], "gateways": ["ns/Gw_Name"], "http": [{"route": [{"destination": {"host": "*"}}]}]}),
            meta,
        );
        assert!(errors.is_empty(), "{errors:?}");
    }
}
