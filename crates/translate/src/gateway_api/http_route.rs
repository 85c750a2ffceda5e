//! HTTPRoute rules as Istio HTTP routes (pure): takes the rules attached to one listener host name and yields the
//! routes of the VirtualService that serves them, in the spec's precedence order (`HTTPRouteRule` docs: an
//! `Exact` path, then the longest prefix, then a method, then the most header matches, then the most query
//! matches; ties go to the oldest route, then namespace/name, then rule and match order). A `RegularExpression`
//! path ranks after `Exact` and before prefixes, as Envoy Gateway ranks it (the spec leaves it to
//! implementations). One Istio route per match, so the order is per match, as the spec's is.
//!
//! A `PathPrefix` matches whole path segments (`/a` matches `/a` and `/a/b`, not `/ab`): it becomes an exact
//! match on `/a` and a prefix match on `/a/` (split into two routes when a prefix replacement must differ).

use std::cmp::{Ordering, Reverse};
use std::sync::Arc;

use super::backends;
use admitpilot_model::gateway_api::common::{
    Cors, HeaderModifier, HttpRouteFilter, MatchType, PathModifier, ValueMatch,
};
use admitpilot_model::gateway_api::http_route::{HttpRouteMatch, HttpRouteRule, PathMatchType};
use admitpilot_model::istio::virtual_service::{
    CorsPolicy, FaultAbort, HeaderOperations, Headers, HttpBody, HttpDirectResponse,
    HttpFaultInjection, HttpMatchRequest, HttpMirrorPolicy, HttpRedirect, HttpRetry, HttpRewrite,
    HttpRoute, HttpRouteDestination, Percent, RedirectPortSelection, RegexRewrite, StringMatch,
    UnmatchedPreflights,
};
use admitpilot_model::{ConfigObject, Snapshot};

/// One match of one rule of one route, attached to a listener host name.
#[derive(Debug, Clone)]
pub struct Attached<'a> {
    /// The HTTPRoute (or GRPCRoute, converted to HTTP rules first).
    pub route: &'a Arc<ConfigObject>,
    /// The rule.
    pub rule: &'a HttpRouteRule,
    /// The rule's index.
    pub rule_index: usize,
    /// The match and its index; a rule without matches matches every request.
    pub matched: Option<(usize, &'a HttpRouteMatch)>,
}

fn path_rank(m: Option<&HttpRouteMatch>) -> (u8, Reverse<usize>) {
    match m.and_then(|m| m.path.as_ref()) {
        Some(path) => {
            let rank = match path.match_type {
                PathMatchType::Exact => 0,
                PathMatchType::RegularExpression => 1,
                PathMatchType::PathPrefix => 2,
            };
            (rank, Reverse(path.value().len()))
        }
        None => (2, Reverse(1)),
    }
}

/// The spec's precedence between two attached matches.
pub fn precedence(a: &Attached<'_>, b: &Attached<'_>) -> Ordering {
    let key = |x: &Attached<'_>| {
        let m = x.matched.map(|(_, m)| m);
        (
            path_rank(m),
            Reverse(m.is_some_and(|m| m.method.is_some())),
            Reverse(m.map_or(0, |m| m.headers.len())),
            Reverse(m.map_or(0, |m| m.query_params.len())),
        )
    };
    key(a).cmp(&key(b)).then_with(|| {
        let meta = |x: &Attached<'_>| {
            let meta = &x.route.metadata;
            (
                meta.creation_timestamp.clone(),
                meta.namespace.clone(),
                meta.name.clone(),
                x.rule_index,
                x.matched.map_or(0, |(i, _)| i),
            )
        };
        meta(a).cmp(&meta(b))
    })
}

fn string_match(match_type: MatchType, value: &str) -> StringMatch {
    match match_type {
        MatchType::Exact => StringMatch {
            exact: Some(value.to_string()),
            ..StringMatch::default()
        },
        MatchType::RegularExpression => StringMatch {
            regex: Some(value.to_string()),
            ..StringMatch::default()
        },
    }
}

fn value_matches(
    matches: &[ValueMatch],
    lowercase: bool,
) -> std::collections::BTreeMap<String, StringMatch> {
    matches
        .iter()
        .map(|m| {
            let name = if lowercase {
                m.name.to_ascii_lowercase()
            } else {
                m.name.clone()
            };
            (name, string_match(m.match_type, &m.value))
        })
        .collect()
}

/// The Istio matches of one Gateway API match: for a `PathPrefix`, the exact and the segment-prefix halves.
fn istio_matches(m: Option<&HttpRouteMatch>) -> Vec<HttpMatchRequest> {
    let Some(m) = m else {
        return vec![HttpMatchRequest {
            uri: Some(StringMatch {
                prefix: Some("/".into()),
                ..StringMatch::default()
            }),
            ..HttpMatchRequest::default()
        }];
    };
    let base = HttpMatchRequest {
        headers: value_matches(&m.headers, true),
        query_params: value_matches(&m.query_params, false),
        method: m
            .method
            .as_deref()
            .map(|method| string_match(MatchType::Exact, method)),
        ..HttpMatchRequest::default()
    };
    let with_uri = |uri: StringMatch| HttpMatchRequest {
        uri: Some(uri),
        ..base.clone()
    };
    let Some(path) = &m.path else {
        return vec![with_uri(StringMatch {
            prefix: Some("/".into()),
            ..StringMatch::default()
        })];
    };
    let value = path.value();
    match path.match_type {
        PathMatchType::Exact => vec![with_uri(string_match(MatchType::Exact, value))],
        PathMatchType::RegularExpression => {
            vec![with_uri(string_match(MatchType::RegularExpression, value))]
        }
        PathMatchType::PathPrefix => {
            let trimmed = value.trim_end_matches('/');
            if trimmed.is_empty() {
                return vec![with_uri(StringMatch {
                    prefix: Some("/".into()),
                    ..StringMatch::default()
                })];
            }
            vec![
                with_uri(string_match(MatchType::Exact, trimmed)),
                with_uri(StringMatch {
                    prefix: Some(format!("{trimmed}/")),
                    ..StringMatch::default()
                }),
            ]
        }
    }
}

fn header_operations(modifier: &HeaderModifier) -> HeaderOperations {
    HeaderOperations {
        set: modifier
            .set
            .iter()
            .map(|h| (h.name.to_ascii_lowercase(), h.value.clone()))
            .collect(),
        add: modifier
            .add
            .iter()
            .map(|h| (h.name.to_ascii_lowercase(), h.value.clone()))
            .collect(),
        remove: modifier
            .remove
            .iter()
            .map(|h| h.to_ascii_lowercase())
            .collect(),
    }
}

fn headers_of(filters: &[HttpRouteFilter]) -> Option<Headers> {
    let request = filters
        .iter()
        .find_map(|f| f.request_header_modifier.as_ref())
        .map(header_operations);
    let response = filters
        .iter()
        .find_map(|f| f.response_header_modifier.as_ref())
        .map(header_operations);
    (request.is_some() || response.is_some()).then_some(Headers { request, response })
}

/// A CORS origin (`*`, `https://a.example`, `https://*.example`) as an Istio string match.
fn origin(origin: &str) -> StringMatch {
    if !origin.contains('*') {
        return string_match(MatchType::Exact, origin);
    }
    let pattern = origin
        .split('*')
        .map(regex::escape)
        .collect::<Vec<_>>()
        .join(".*");
    string_match(MatchType::RegularExpression, &pattern)
}

fn cors(cors: &Cors) -> CorsPolicy {
    CorsPolicy {
        allow_origins: cors.allow_origins.iter().map(|o| origin(o)).collect(),
        allow_methods: cors.allow_methods.clone(),
        allow_headers: cors.allow_headers.clone(),
        expose_headers: cors.expose_headers.clone(),
        max_age: Some(format!("{}s", cors.max_age.unwrap_or(5))),
        allow_credentials: cors.allow_credentials,
        // A preflight from an origin the policy does not allow is answered by the gateway, never forwarded to the
        // backend (istiod's conversion sets `IGNORE` too; Gateway API v1.6 `HTTPCORSFilter`).
        unmatched_preflights: Some(UnmatchedPreflights::Ignore),
        ..CorsPolicy::default()
    }
}

/// The prefix replacement of a path modifier, if it is one.
fn prefix_replacement(path: Option<&PathModifier>) -> Option<&str> {
    path.filter(|p| p.modifier_type == "ReplacePrefixMatch")
        .and_then(|p| p.replace_prefix_match.as_deref())
}

/// What a prefix replacement becomes for the half of a split `PathPrefix` match that matched `uri`: the exact
/// half replaces the whole path, the `/a/` half keeps the separator.
fn replaced(replacement: &str, uri: &StringMatch) -> String {
    if uri.prefix.as_deref().is_some_and(|p| p != "/") {
        let trimmed = replacement.trim_end_matches('/');
        format!("{trimmed}/")
    } else {
        replacement.to_string()
    }
}

/// Everything the rule does, for the match `m` (the uri of the Istio match, for prefix replacements).
fn actions(
    snapshot: &Snapshot,
    attached: &Attached<'_>,
    uri: Option<&StringMatch>,
    (route_kind, domain_suffix): (&str, &str),
) -> HttpRoute {
    let rule = attached.rule;
    let namespace = attached.route.metadata.namespace.as_str();
    let filters = &rule.filters;
    let mut route = HttpRoute {
        headers: headers_of(filters),
        ..HttpRoute::default()
    };
    let dest = |b| backends::destination(snapshot, b, (route_kind, namespace), domain_suffix);
    if let Some(redirect) = filters.iter().find_map(|f| f.request_redirect.as_ref()) {
        let full = redirect
            .path
            .as_ref()
            .filter(|p| p.modifier_type == "ReplaceFullPath")
            .and_then(|p| p.replace_full_path.clone());
        let prefix = prefix_replacement(redirect.path.as_ref())
            .zip(uri)
            .map(|(r, uri)| replaced(r, uri));
        route.redirect = Some(HttpRedirect {
            uri: full.unwrap_or_default(),
            authority: redirect.hostname.clone().unwrap_or_default(),
            port: redirect.port,
            // No port: the scheme's default when the scheme changes, else the listener's (the spec; istiod
            // converts it so).
            derive_port: redirect
                .port
                .is_none()
                .then_some(if redirect.scheme.is_some() {
                    RedirectPortSelection::FromProtocolDefault
                } else {
                    RedirectPortSelection::FromRequestPort
                }),
            scheme: redirect.scheme.clone().unwrap_or_default(),
            redirect_code: Some(redirect.status_code.unwrap_or(302)),
            prefix_rewrite: prefix.unwrap_or_default(),
        });
        return route;
    }
    if let Some(rewrite) = filters.iter().find_map(|f| f.url_rewrite.as_ref()) {
        let mut istio = HttpRewrite {
            authority: rewrite.hostname.clone().unwrap_or_default(),
            ..HttpRewrite::default()
        };
        if let Some(full) = rewrite
            .path
            .as_ref()
            .filter(|p| p.modifier_type == "ReplaceFullPath")
            .and_then(|p| p.replace_full_path.as_ref())
        {
            istio.uri_regex_rewrite = Some(RegexRewrite {
                pattern: "^/.*$".into(),
                rewrite: full.clone(),
            });
        } else if let Some((r, uri)) = prefix_replacement(rewrite.path.as_ref()).zip(uri) {
            istio.uri = replaced(r, uri);
        }
        route.rewrite = Some(istio);
    }
    route.mirrors = filters
        .iter()
        .filter_map(|f| f.request_mirror.as_ref())
        .filter_map(|mirror| {
            let destination = dest(&mirror.backend_ref)?;
            let percent = match (&mirror.percent, &mirror.fraction) {
                (Some(p), _) => Some(f64::from(*p)),
                (None, Some(f)) => Some(
                    f64::from(f.numerator) * 100.0 / f64::from(f.denominator.unwrap_or(100).max(1)),
                ),
                (None, None) => None,
            };
            Some(HttpMirrorPolicy {
                destination: Some(destination),
                percentage: percent.map(|value| Percent { value: Some(value) }),
            })
        })
        .collect();
    route.cors_policy = filters.iter().find_map(|f| f.cors.as_ref()).map(cors);
    if let Some(timeouts) = &rule.timeouts {
        route.timeout = timeouts.request.clone().filter(|t| t != "0s");
    }
    let backend_timeout = rule
        .timeouts
        .as_ref()
        .and_then(|t| t.backend_request.clone());
    if let Some(retry) = &rule.retry {
        route.retries = Some(HttpRetry {
            attempts: Some(i32::try_from(retry.attempts.unwrap_or(0)).unwrap_or(i32::MAX)),
            retry_on: retry
                .codes
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(","),
            backoff: retry.backoff.clone(),
            per_try_timeout: backend_timeout.clone(),
            ..HttpRetry::default()
        });
    } else if let Some(per_try) = backend_timeout {
        route.retries = Some(HttpRetry {
            attempts: Some(1),
            per_try_timeout: Some(per_try),
            ..HttpRetry::default()
        });
    }
    let weighted: Vec<_> = rule
        .backend_refs
        .iter()
        .filter(|b| b.weight() > 0)
        .collect();
    route.route = weighted
        .iter()
        .filter_map(|b| {
            let destination = dest(b)?;
            Some(HttpRouteDestination {
                destination: Some(destination),
                weight: Some(b.weight()),
                headers: headers_of(&b.filters),
            })
        })
        .collect();
    // Some backends invalid: their share of the requests gets the spec's 500, as an abort of that share before
    // the router (Envoy's fault filter), the rest goes to the valid ones.
    let total: u64 = weighted.iter().map(|b| u64::from(b.weight())).sum();
    let valid: u64 = route
        .route
        .iter()
        .map(|d| u64::from(d.weight.unwrap_or(0)))
        .sum();
    if !route.route.is_empty() && valid < total {
        #[allow(clippy::cast_precision_loss)]
        let share = (total - valid) as f64 * 100.0 / total as f64;
        route.fault = Some(HttpFaultInjection {
            abort: Some(FaultAbort {
                http_status: Some(500),
                percentage: Some(Percent { value: Some(share) }),
                ..FaultAbort::default()
            }),
            ..HttpFaultInjection::default()
        });
    }
    if route.route.is_empty() {
        // No valid backend (or none with weight): the spec's 500.
        route.direct_response = Some(HttpDirectResponse {
            status: Some(500),
            body: Some(HttpBody {
                string: Some(String::new()),
                bytes: None,
            }),
        });
        route.rewrite = None;
        route.mirrors.clear();
        route.retries = None;
        route.timeout = None;
    }
    route
}

/// The Istio routes of the attached matches of one listener host name, in precedence order.
pub fn routes(
    snapshot: &Snapshot,
    mut attached: Vec<Attached<'_>>,
    domain_suffix: &str,
) -> Vec<HttpRoute> {
    attached.sort_by(precedence);
    let mut out = Vec::new();
    for a in &attached {
        // The kind a ReferenceGrant must name as `from` for the route's cross-namespace backends.
        let route_kind = a.route.kind().info().kind;
        let matches = istio_matches(a.matched.map(|(_, m)| m));
        let name = format!(
            "{}.{}.{}.{}",
            a.route.metadata.namespace,
            a.route.metadata.name,
            a.rule_index,
            a.matched.map_or(0, |(i, _)| i)
        );
        let splits_prefix = a.rule.filters.iter().any(|f| {
            prefix_replacement(f.url_rewrite.as_ref().and_then(|r| r.path.as_ref())).is_some()
                || prefix_replacement(f.request_redirect.as_ref().and_then(|r| r.path.as_ref()))
                    .is_some()
        });
        if splits_prefix {
            for m in matches {
                let mut route = actions(snapshot, a, m.uri.as_ref(), (route_kind, domain_suffix));
                route.name.clone_from(&name);
                route.matches = vec![m];
                out.push(route);
            }
        } else {
            let mut route = actions(snapshot, a, None, (route_kind, domain_suffix));
            route.name = name;
            route.matches = matches;
            out.push(route);
        }
    }
    out
}
