//! GRPCRoute rules as HTTPRoute rules (pure): takes a GRPCRoute, yields the HTTPRoute rules that match the same
//! requests, which [`super::http_route`] then turns into routes with the rest (as istiod converts GRPCRoute,
//! `pilot/pkg/config/kube/gateway` `createGRPCURIMatch`). A gRPC call is an HTTP/2 POST to `/<service>/<method>`:
//! - `Exact` service and method: the exact path `/<service>/<method>`; a service alone: the path prefix
//!   `/<service>` (whole segments, so `/pkg.Svc/Any`); a method alone: the regular expression `/[^/]+/<method>`;
//! - `RegularExpression`: the regular expression `/<service>/<method>`, `[^/]+` for the part not given;
//! - header matches and filters as HTTPRoute's (the spec's GRPCRoute filters are a subset of HTTPRoute's).
//!
//! The backends are reached as their Service port says (as in Istio): a port whose `appProtocol` is `grpc` or
//! `kubernetes.io/h2c`, or whose name starts with `grpc`/`http2`, gets HTTP/2; the webhook warns about a GRPCRoute
//! backend port that does not say so.

use admitpilot_model::gateway_api::common::MatchType;
use admitpilot_model::gateway_api::grpc_route::{GrpcMethodMatch, GrpcRoute, GrpcRouteMatch};
use admitpilot_model::gateway_api::http_route::{
    HttpPathMatch, HttpRouteMatch, HttpRouteRule, PathMatchType,
};

/// The HTTPRoute rules matching what `route`'s rules match, rule for rule (so rule indexes stay the GRPCRoute's).
pub fn as_http_rules(route: &GrpcRoute) -> Vec<HttpRouteRule> {
    route
        .rules
        .iter()
        .map(|rule| HttpRouteRule {
            name: rule.name.clone(),
            matches: rule.matches.iter().map(http_match).collect(),
            filters: rule.filters.clone(),
            backend_refs: rule.backend_refs.clone(),
            ..HttpRouteRule::default()
        })
        .collect()
}

fn http_match(m: &GrpcRouteMatch) -> HttpRouteMatch {
    HttpRouteMatch {
        path: m.method.as_ref().and_then(path),
        headers: m.headers.clone(),
        ..HttpRouteMatch::default()
    }
}

/// The path match of a method match (`None`: every path).
fn path(method: &GrpcMethodMatch) -> Option<HttpPathMatch> {
    let service = method.service.as_deref().filter(|s| !s.is_empty());
    let name = method.method.as_deref().filter(|m| !m.is_empty());
    let (match_type, value) = match (method.match_type, service, name) {
        (_, None, None) => return None,
        (MatchType::Exact, Some(service), Some(name)) => {
            (PathMatchType::Exact, format!("/{service}/{name}"))
        }
        (MatchType::Exact, Some(service), None) => {
            (PathMatchType::PathPrefix, format!("/{service}"))
        }
        (MatchType::Exact, None, Some(name)) => {
            (PathMatchType::RegularExpression, format!("/[^/]+/{name}"))
        }
        (MatchType::RegularExpression, service, name) => (
            PathMatchType::RegularExpression,
            format!(
                "/{}/{}",
                service.unwrap_or("[^/]+"),
                name.unwrap_or("[^/]+")
            ),
        ),
    };
    Some(HttpPathMatch {
        match_type,
        value: Some(value),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn method(match_type: MatchType, service: Option<&str>, name: Option<&str>) -> GrpcMethodMatch {
        GrpcMethodMatch {
            match_type,
            service: service.map(str::to_string),
            method: name.map(str::to_string),
        }
    }

    fn of(m: GrpcMethodMatch) -> Option<(PathMatchType, String)> {
        path(&m).map(|p| (p.match_type, p.value().to_string()))
    }

    #[test]
    fn methods_become_paths_as_istio_converts_them() {
        use MatchType::{Exact, RegularExpression};
        assert_eq!(
            of(method(Exact, Some("pkg.Echo"), Some("Say"))),
            Some((PathMatchType::Exact, "/pkg.Echo/Say".into()))
        );
        assert_eq!(
            of(method(Exact, Some("pkg.Echo"), None)),
            Some((PathMatchType::PathPrefix, "/pkg.Echo".into()))
        );
        assert_eq!(
            of(method(Exact, None, Some("Say"))),
            Some((PathMatchType::RegularExpression, "/[^/]+/Say".into()))
        );
        assert_eq!(
            of(method(RegularExpression, Some("pkg\\..*"), None)),
            Some((PathMatchType::RegularExpression, "/pkg\\..*/[^/]+".into()))
        );
        assert_eq!(of(method(Exact, None, None)), None);
    }
}
