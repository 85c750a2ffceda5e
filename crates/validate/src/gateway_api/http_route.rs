//! HTTPRoute rules (pure): takes an HTTPRoute spec, records the HTTPRoute CRD's CEL failures with the API
//! server's text and field paths (each check names the rule it mirrors by its message), and the RE2 and header
//! checks of [`super::common`].

use super::common::{self, cel, FilterSet, OBJECT};
use crate::common::validate_regex;
use admitpilot_model::duration::parse_duration_nanos;
use admitpilot_model::gateway_api::common::HttpRouteFilter;
use admitpilot_model::gateway_api::http_route::{
    HttpRouteMatch, HttpRouteRule, HttpRouteTimeouts, PathMatchType,
};
use admitpilot_model::gateway_api::HttpRoute;
use admitpilot_model::Findings;

/// The `HTTPRouteTimeouts` CEL rule "backendRequest timeout cannot be longer than request timeout"
/// (`!(has(self.request) && has(self.backendRequest) && duration(self.request) != duration('0s') &&
/// duration(self.backendRequest) > duration(self.request))`), evaluated as CEL evaluates it: a `false` conjunct wins
/// over an error, and a duration that does not parse is otherwise an error the API server reports as a type
/// conversion error (even next to the schema's pattern error for the same field).
fn timeouts_rule(timeouts: &HttpRouteTimeouts, at: &str, out: &mut Findings) {
    const RULE: &str = "backendRequest timeout cannot be longer than request timeout";
    let (Some(request), Some(backend)) = (&timeouts.request, &timeouts.backend_request) else {
        return;
    };
    let (request, backend) = (parse_duration_nanos(request), parse_duration_nanos(backend));
    let conjuncts = [
        request.map(|r| r != 0),
        request.zip(backend).map(|(r, b)| b > r),
    ];
    if conjuncts.contains(&Some(false)) {
        return;
    }
    if conjuncts.contains(&None) {
        let message = format!(
            "type conversion error from 'string' to 'google.protobuf.Duration' evaluating rule: {RULE}"
        );
        cel(out, at, OBJECT, &message);
    } else {
        cel(out, at, OBJECT, RULE);
    }
}

/// Checks an HTTPRoute spec.
pub fn validate(route: &HttpRoute, out: &mut Findings) {
    let matches = route.rules.iter().map(|r| r.matches.len()).sum();
    let names = route.rules.iter().map(|r| r.name.as_deref());
    common::route_rules(&route.parent_refs, matches, names, out);
    for (i, rule) in route.rules.iter().enumerate() {
        validate_rule(rule, &format!("spec.rules[{i}]"), out);
    }
}

fn has_prefix_replacement(filters: &[HttpRouteFilter], redirect: bool) -> bool {
    filters.iter().any(|f| {
        let path = if redirect {
            f.request_redirect.as_ref().and_then(|r| r.path.as_ref())
        } else {
            f.url_rewrite.as_ref().and_then(|r| r.path.as_ref())
        };
        path.is_some_and(|p| {
            p.modifier_type == "ReplacePrefixMatch" && p.replace_prefix_match.is_some()
        })
    })
}

fn validate_rule(rule: &HttpRouteRule, at: &str, out: &mut Findings) {
    if !rule.backend_refs.is_empty() && rule.filters.iter().any(|f| f.request_redirect.is_some()) {
        cel(
            out,
            at,
            OBJECT,
            "RequestRedirect filter must not be used together with backendRefs",
        );
    }
    let one_prefix_match = rule.matches.len() == 1
        && rule.matches[0]
            .path
            .as_ref()
            .is_some_and(|p| p.match_type == PathMatchType::PathPrefix);
    let prefix_rules = [
        (
            has_prefix_replacement(&rule.filters, true),
            "When using RequestRedirect filter with path.replacePrefixMatch, exactly one PathPrefix match must \
             be specified",
        ),
        (
            has_prefix_replacement(&rule.filters, false),
            "When using URLRewrite filter with path.replacePrefixMatch, exactly one PathPrefix match must be \
             specified",
        ),
        (
            rule.backend_refs.iter().any(|b| has_prefix_replacement(&b.filters, true)),
            "Within backendRefs, when using RequestRedirect filter with path.replacePrefixMatch, exactly one \
             PathPrefix match must be specified",
        ),
        (
            rule.backend_refs.iter().any(|b| has_prefix_replacement(&b.filters, false)),
            "Within backendRefs, When using URLRewrite filter with path.replacePrefixMatch, exactly one \
             PathPrefix match must be specified",
        ),
    ];
    for (applies, message) in prefix_rules {
        if applies && !one_prefix_match {
            cel(out, at, OBJECT, message);
        }
    }
    if let Some(timeouts) = &rule.timeouts {
        timeouts_rule(timeouts, &format!("{at}.timeouts"), out);
    }
    for (i, m) in rule.matches.iter().enumerate() {
        validate_match(m, &format!("{at}.matches[{i}]"), out);
    }
    common::filters(
        &rule.filters,
        &format!("{at}.filters"),
        FilterSet::Http,
        out,
    );
    for (i, backend) in rule.backend_refs.iter().enumerate() {
        let path = format!("{at}.backendRefs[{i}]");
        common::backend_port(backend, &path, out);
        common::filters(
            &backend.filters,
            &format!("{path}.filters"),
            FilterSet::Http,
            out,
        );
    }
}

/// The characters an `Exact` or `PathPrefix` path may hold (the rule "must only contain valid characters
/// (matching ^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$) for types ['Exact', 'PathPrefix']").
fn valid_path_characters(path: &str) -> bool {
    let bytes = path.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3);
                if !hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
                    return false;
                }
                i += 3;
            }
            b if b.is_ascii_alphanumeric() || b"-/._~!$&'()*+,;=:@".contains(&b) => i += 1,
            _ => return false,
        }
    }
    !bytes.is_empty()
}

fn validate_match(m: &HttpRouteMatch, at: &str, out: &mut Findings) {
    if let Some(path) = &m.path {
        let at = format!("{at}.path");
        let value = path.value();
        if path.match_type == PathMatchType::RegularExpression {
            validate_regex(value, &format!("{at}.value"), out);
        } else {
            let rules: [(bool, &str); 9] = [
                (
                    !value.starts_with('/'),
                    "value must be an absolute path and start with '/' when type one of ['Exact', 'PathPrefix']",
                ),
                (value.contains("//"), "must not contain '//' when type one of ['Exact', 'PathPrefix']"),
                (value.contains("/./"), "must not contain '/./' when type one of ['Exact', 'PathPrefix']"),
                (value.contains("/../"), "must not contain '/../' when type one of ['Exact', 'PathPrefix']"),
                (value.contains("%2f"), "must not contain '%2f' when type one of ['Exact', 'PathPrefix']"),
                (value.contains("%2F"), "must not contain '%2F' when type one of ['Exact', 'PathPrefix']"),
                (value.contains('#'), "must not contain '#' when type one of ['Exact', 'PathPrefix']"),
                (value.ends_with("/.."), "must not end with '/..' when type one of ['Exact', 'PathPrefix']"),
                (value.ends_with("/."), "must not end with '/.' when type one of ['Exact', 'PathPrefix']"),
            ];
            for (_, message) in rules.iter().filter(|(fails, _)| *fails) {
                cel(out, &at, OBJECT, message);
            }
            if !valid_path_characters(value) {
                cel(
                    out,
                    &at,
                    OBJECT,
                    "must only contain valid characters (matching ^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$) \
                     for types ['Exact', 'PathPrefix']",
                );
            }
        }
    }
    common::value_matches(&m.headers, &format!("{at}.headers"), true, out);
    common::value_matches(&m.query_params, &format!("{at}.queryParams"), false, out);
}

#[cfg(test)]
mod tests {
    use super::super::error_texts;
    use serde_json::{json, Value};

    fn route(spec: Value) -> Vec<String> {
        error_texts(
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "r", "namespace": "ns"}, "spec": spec}),
        )
    }

    fn one_rule(rule: Value) -> Vec<String> {
        route(json!({"parentRefs": [{"name": "gw"}], "rules": [rule]}))
    }

    #[test]
    fn a_valid_route_passes() {
        let errors = one_rule(json!({
            "matches": [{"path": {"type": "PathPrefix", "value": "/api"},
                "headers": [{"name": "x-env", "value": "prod"}], "queryParams": [{"name": "q", "value": "1"}],
                "method": "GET"}],
            "filters": [{"type": "RequestHeaderModifier",
                "requestHeaderModifier": {"set": [{"name": "x-a", "value": "1"}], "add": [{"name": "x-b", "value": "2"}]}}],
            "backendRefs": [{"name": "svc", "port": 8080, "weight": 0}]}));
        assert_eq!(errors, Vec::<String>::new());
    }

    #[test]
    fn path_rules_give_the_api_servers_text() {
        assert_eq!(
            one_rule(json!({"matches": [{"path": {"type": "Exact", "value": "api"}}]})),
            ["spec.rules[0].matches[0].path: Invalid value: \"object\": value must be an absolute path and start \
              with '/' when type one of ['Exact', 'PathPrefix']"]
        );
        assert_eq!(
            one_rule(json!({"matches": [{"path": {"type": "PathPrefix", "value": "/a//b"}}]})),
            ["spec.rules[0].matches[0].path: Invalid value: \"object\": must not contain '//' when type one of \
              ['Exact', 'PathPrefix']"]
        );
        let bad_chars =
            one_rule(json!({"matches": [{"path": {"type": "Exact", "value": "/a b"}}]}));
        assert_eq!(bad_chars.len(), 1, "{bad_chars:?}");
        assert!(bad_chars[0].contains("must only contain valid characters"));
    }

    #[test]
    fn regexes_envoy_refuses_are_denied() {
        let errors =
            one_rule(json!({"matches": [{"path": {"type": "RegularExpression", "value": "/(a"}}]}));
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].starts_with("spec.rules[0].matches[0].path.value: "),
            "{errors:?}"
        );
        let header = one_rule(json!({"matches": [{"headers": [
            {"type": "RegularExpression", "name": "x", "value": "a{2000}"}]}]}));
        assert_eq!(header.len(), 1, "{header:?}");
    }

    #[test]
    fn header_names_in_another_case_and_set_plus_add_are_denied() {
        let twice = one_rule(json!({"filters": [{"type": "RequestHeaderModifier",
            "requestHeaderModifier": {"set": [{"name": "X-A", "value": "1"}, {"name": "x-a", "value": "2"}]}}]}));
        assert_eq!(twice.len(), 1, "{twice:?}");
        assert!(
            twice[0].starts_with("spec.rules[0].filters[0].requestHeaderModifier.set[1].name: ")
        );
        let both = one_rule(json!({"filters": [{"type": "ResponseHeaderModifier",
            "responseHeaderModifier": {"set": [{"name": "x-a", "value": "1"}], "add": [{"name": "X-A", "value": "2"}]}}]}));
        assert_eq!(both.len(), 1, "{both:?}");
        assert!(
            both[0].starts_with("spec.rules[0].filters[0].responseHeaderModifier.add[0].name: ")
        );
        let matches = one_rule(
            json!({"matches": [{"headers": [{"name": "X-A", "value": "1"}, {"name": "x-a", "value": "1"}]}]}),
        );
        assert_eq!(matches.len(), 1, "{matches:?}");
    }

    #[test]
    fn filter_and_backend_rules_give_the_api_servers_text() {
        assert_eq!(
            one_rule(json!({"filters": [{"type": "RequestRedirect", "requestRedirect": {"scheme": "https"}}],
                "backendRefs": [{"name": "svc", "port": 80}]})),
            ["spec.rules[0]: Invalid value: \"object\": RequestRedirect filter must not be used together with \
              backendRefs"]
        );
        assert_eq!(
            one_rule(json!({"backendRefs": [{"name": "svc"}]})),
            ["spec.rules[0].backendRefs[0]: Invalid value: \"object\": Must have port for Service reference"]
        );
        assert_eq!(
            one_rule(json!({"filters": [{"type": "URLRewrite"}], "backendRefs": [{"name": "s", "port": 80}]})),
            ["spec.rules[0].filters[0]: Invalid value: \"object\": filter.urlRewrite must be specified for \
              URLRewrite filter.type"]
        );
        assert_eq!(
            one_rule(json!({"matches": [{"path": {"type": "Exact", "value": "/a"}}],
                "filters": [{"type": "URLRewrite", "urlRewrite": {"path": {"type": "ReplacePrefixMatch",
                "replacePrefixMatch": "/b"}}}], "backendRefs": [{"name": "s", "port": 80}]})),
            ["spec.rules[0]: Invalid value: \"object\": When using URLRewrite filter with path.replacePrefixMatch, \
              exactly one PathPrefix match must be specified"]
        );
        assert_eq!(
            one_rule(json!({"timeouts": {"request": "1s", "backendRequest": "2s"},
                "backendRefs": [{"name": "s", "port": 80}]})),
            ["spec.rules[0].timeouts: Invalid value: \"object\": backendRequest timeout cannot be longer than \
              request timeout"]
        );
        assert_eq!(
            one_rule(json!({"filters": [
                {"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "a", "value": "1"}]}},
                {"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "b", "value": "1"}]}}],
                "backendRefs": [{"name": "s", "port": 80}]})),
            ["spec.rules[0].filters: Invalid value: \"array\": RequestHeaderModifier filter cannot be repeated"]
        );
    }

    #[test]
    fn parent_refs_to_one_parent_need_distinct_sections() {
        assert_eq!(
            route(json!({"parentRefs": [{"name": "gw"}, {"name": "gw", "sectionName": "http"}]})),
            ["spec.parentRefs: Invalid value: \"array\": sectionName or port must be specified when parentRefs \
              includes 2 or more references to the same parent"]
        );
        assert_eq!(
            route(json!({"parentRefs": [{"name": "gw", "sectionName": "a"}, {"name": "gw", "sectionName": "a"}]})),
            ["spec.parentRefs: Invalid value: \"array\": sectionName or port must be unique when parentRefs \
              includes 2 or more references to the same parent"]
        );
    }

    #[test]
    fn openapi_failures_come_with_the_api_servers_text() {
        assert_eq!(
            route(json!({"parentRefs": [{"name": "gw"}], "hostnames": ["Bad_Host"]})),
            ["spec.hostnames[0]: Invalid value: \"Bad_Host\": spec.hostnames[0] in body should match \
              '^(\\*\\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'"]
        );
    }
}
