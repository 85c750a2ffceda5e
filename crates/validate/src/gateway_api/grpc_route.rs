//! GRPCRoute rules (pure): takes a GRPCRoute spec, records the GRPCRoute CRD's CEL failures (each named by its
//! message) with the API server's text, and the RE2 and header checks of [`super::common`].

use super::common::{self, cel, FilterSet, OBJECT};
use crate::common::validate_regex;
use admitpilot_model::gateway_api::common::MatchType;
use admitpilot_model::gateway_api::GrpcRoute;
use admitpilot_model::Findings;

/// Checks a GRPCRoute spec.
pub fn validate(route: &GrpcRoute, out: &mut Findings) {
    let matches = route.rules.iter().map(|r| r.matches.len()).sum();
    let names = route.rules.iter().map(|r| r.name.as_deref());
    common::route_rules(&route.parent_refs, matches, names, out);
    for (i, rule) in route.rules.iter().enumerate() {
        let at = format!("spec.rules[{i}]");
        for (j, m) in rule.matches.iter().enumerate() {
            let at = format!("{at}.matches[{j}]");
            if let Some(method) = &m.method {
                let at = format!("{at}.method");
                if method.service.is_none() && method.method.is_none() {
                    cel(
                        out,
                        &at,
                        OBJECT,
                        "One or both of 'service' or 'method' must be specified",
                    );
                }
                if method.match_type == MatchType::Exact {
                    if method.service.as_deref().is_some_and(|s| !valid_service(s)) {
                        cel(
                            out,
                            &at,
                            OBJECT,
                            "service must only contain valid characters (matching \
                             ^(?i)\\.?[a-z_][a-z_0-9]*(\\.[a-z_][a-z_0-9]*)*$)",
                        );
                    }
                    if method
                        .method
                        .as_deref()
                        .is_some_and(|m| !valid_identifier(m))
                    {
                        cel(
                            out,
                            &at,
                            OBJECT,
                            "method must only contain valid characters (matching ^[A-Za-z_][A-Za-z_0-9]*$)",
                        );
                    }
                } else {
                    for (field, value) in [("service", &method.service), ("method", &method.method)]
                    {
                        if let Some(value) = value {
                            validate_regex(value, &format!("{at}.{field}"), out);
                        }
                    }
                }
            }
            common::value_matches(&m.headers, &format!("{at}.headers"), true, out);
        }
        common::filters(
            &rule.filters,
            &format!("{at}.filters"),
            FilterSet::Grpc,
            out,
        );
        for (j, backend) in rule.backend_refs.iter().enumerate() {
            let path = format!("{at}.backendRefs[{j}]");
            common::backend_port(backend, &path, out);
            common::filters(
                &backend.filters,
                &format!("{path}.filters"),
                FilterSet::Grpc,
                out,
            );
        }
    }
}

/// `^[A-Za-z_][A-Za-z_0-9]*$`.
fn valid_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `^(?i)\.?[a-z_][a-z_0-9]*(\.[a-z_][a-z_0-9]*)*$`.
fn valid_service(s: &str) -> bool {
    let s = s.strip_prefix('.').unwrap_or(s);
    s.split('.').all(valid_identifier)
}

#[cfg(test)]
mod tests {
    use super::super::error_texts;
    use serde_json::json;

    #[test]
    fn method_rules_give_the_api_servers_text() {
        let route = |method: serde_json::Value| {
            error_texts(
                json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GRPCRoute",
                "metadata": {"name": "r", "namespace": "ns"},
                "spec": {"parentRefs": [{"name": "gw"}], "rules": [{"matches": [{"method": method}],
                    "backendRefs": [{"name": "s", "port": 9000}]}]}}),
            )
        };
        assert_eq!(
            route(json!({"service": "pkg.Echo", "method": "Say"})),
            Vec::<String>::new()
        );
        assert_eq!(
            route(json!({"type": "Exact"})),
            ["spec.rules[0].matches[0].method: Invalid value: \"object\": One or both of 'service' or 'method' \
              must be specified"]
        );
        assert_eq!(
            route(json!({"service": "pkg.Echo", "method": "Say-it"})).len(),
            1
        );
    }
}
