//! VirtualService routes (pure): takes one HTTP, TLS or TCP route, records Istio's findings for its fields (session
//! persistence, conflicts, rewrites, redirects, direct responses, retries, faults, mirrors, CORS) and walks its
//! matches ([`super::matches`]) and destinations ([`super::destinations`]).

use super::destinations::{http_destination_parts, l4_destination_parts, validate_destinations};
use super::headers::validate_headers;
use super::hosts::VsHosts;
use super::matches::{
    validate_http_match, validate_l4_match, validate_string_match, validate_tls_match,
};
use crate::common;
use crate::common::validate_destination;
use crate::common::FieldPath;
use admitpilot_model::istio::virtual_service::CorsPolicy;
use admitpilot_model::istio::virtual_service::HttpDirectResponse;
use admitpilot_model::istio::virtual_service::HttpFaultInjection;
use admitpilot_model::istio::virtual_service::HttpMatchRequest;
use admitpilot_model::istio::virtual_service::HttpMirrorPolicy;
use admitpilot_model::istio::virtual_service::HttpRedirect;
use admitpilot_model::istio::virtual_service::HttpRetry;
use admitpilot_model::istio::virtual_service::HttpRewrite;
use admitpilot_model::istio::virtual_service::HttpRoute;
use admitpilot_model::istio::virtual_service::Percent;
use admitpilot_model::istio::virtual_service::SessionPersistence;
use admitpilot_model::istio::virtual_service::TcpRoute;
use admitpilot_model::istio::virtual_service::TlsRoute;
use admitpilot_model::istio::virtual_service::GRPC_STATUS_NAMES;
use admitpilot_model::Findings;

/// Direct-response bodies above this are rejected.
const DIRECT_RESPONSE_MAX: usize = 1024 * 1024;

/// Direct-response bodies above this draw a warning.
const DIRECT_RESPONSE_WARN: usize = 100 * 1024;

pub(super) fn validate_http_route(
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
///
/// Istio's webhook (`ValidateVirtualService`, pkg/config/validation/validation.go) has no session-persistence check:
/// the field is validated by the CRD only. The type/settings rule mirrors the CRD's x-kubernetes-validations rule,
/// with its message as in istio/api's tests/testdata/virtualservice-session-persistence.yaml; the cookie and header
/// names mirror what Envoy requires of the config they become (`type.http.v3.Cookie.name` and
/// `stateful_session.header.v3.HeaderBasedSessionState.name`, both `min_len: 1`), the header name further held to
/// the RFC 7230 token rule of Istio's `validHeaderNameRegex` (the one its header-name checks share). Those two texts
/// are ours.
fn validate_session_persistence(s: &SessionPersistence, p: &mut FieldPath, out: &mut Findings) {
    let header = match s.kind.as_str() {
        "" | "COOKIE" => false,
        "HEADER" => true,
        other => {
            out.error(
                p.child("type"),
                format!(
                    "unknown session persistence type {}; use COOKIE or HEADER",
                    common::go_quote(other)
                ),
            );
            return;
        }
    };
    if header != s.header.is_some() || (header && s.cookie.is_some()) {
        out.error(
            p.child("type"),
            "type must match the specified session persistence configuration",
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
                format!("{} is not a valid header name", common::go_quote(&h.name)),
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

pub(super) fn validate_tls_route(
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

pub(super) fn validate_tcp_route(
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
