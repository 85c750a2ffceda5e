use std::collections::BTreeSet;

use super::unreachable::{covers, prefix_match, warn_covered_prefixes, PrefixMatch};
use super::*;
use admitpilot_model::istio::virtual_service::{HttpMatchRequest, HttpRoute, StringMatch};
use serde_json::json;

fn run(spec: serde_json::Value) -> (Vec<String>, Vec<String>) {
    run_with(spec, ObjectMeta::default())
}

fn run_with(spec: serde_json::Value, meta: ObjectMeta) -> (Vec<String>, Vec<String>) {
    crate::testing::run_rules(spec, &meta, validate)
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
    let (errors, _) =
        run(json!({"hosts": ["*"], "gateways": ["ns/gw"], "http": [{"route": simple_route()}]}));
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
    let (errors, _) =
        run(json!({"hosts": ["*.com"], "gateways": ["mesh"], "tls": tls("outbound_.80_._.a.com")}));
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
    // The CRD's x-kubernetes-validations message (istio/api test data).
    assert_eq!(
        errors[0],
        "spec.http[2].sessionPersistence.type: type must match the specified session persistence configuration"
    );
    assert_eq!(
        errors[1],
        "spec.http[3].sessionPersistence.cookie.name: cookie name is required"
    );
    // Names are quoted as Go's `%q` does.
    let (errors, _) = run(json!({"hosts": ["a"], "http": [
        {"route": simple_route(), "sessionPersistence": {"type": "HEADER", "header": {"name": "x s\u{1}"}}},
        {"route": simple_route(), "sessionPersistence": {"type": "STICKY\n"}}
    ]}));
    assert_eq!(
        errors,
        [
            r#"spec.http[0].sessionPersistence.header.name: "x s\x01" is not a valid header name"#,
            r#"spec.http[1].sessionPersistence.type: unknown session persistence type "STICKY\n"; use COOKIE or HEADER"#,
        ]
    );
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
