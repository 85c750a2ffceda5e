//! Ingress with Higress's annotations end to end: the real `admitpilot serve --config-dir` binary with an
//! IngressClass of Higress's controller, Ingresses, Services and a TLS Secret; a real Envoy 1.40 (SotW, default
//! `initial_fetch_timeout`) labelled as Higress's gateway (`higress: higress-system-higress-gateway`); echo
//! backends on 127.0.0.1. Every supported annotation is checked with real requests (cases written from Higress's
//! own e2e Ingress tests, `test/e2e/conformance/tests`), every `*update_rejected` stat stays 0, and the webhook
//! denies an invalid annotation value naming the key.
//!
//! Skips with a message when Envoy is not installed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::echo;
use support::envoy;
use support::pipeline;
use support::tls_backends;

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::time::Duration;

use echo::*;
use envoy::*;
use pipeline::*;
use serde_json::json;

/// An Ingress rule: its host and its paths as `(path, pathType, service)`.
type Rule<'a> = (&'a str, &'a [(&'a str, &'a str, &'a str)]);

const NODE_ID: &str = "router~127.0.0.1~higress-gateway.default~default.svc.cluster.local";

/// One Ingress of class `higress` in `default`: `name`, its annotations (`key: value` lines), and its rules as
/// `(host, [(path, pathType, service)])`.
fn ingress(name: &str, annotations: &[(&str, &str)], rules: &[Rule<'_>]) -> String {
    let annotations: String = annotations
        .iter()
        .map(|(k, v)| format!("    {k}: {}\n", json!(v)))
        .collect();
    let rules: String = rules
        .iter()
        .map(|(host, paths)| {
            let paths: String = paths
                .iter()
                .map(|(path, kind, service)| {
                    format!(
                        "      - path: {}\n        pathType: {kind}\n        backend: {{service: {{name: {service}, port: {{number: 80}}}}}}\n",
                        json!(path)
                    )
                })
                .collect();
            format!("  - host: {host}\n    http:\n      paths:\n{paths}")
        })
        .collect();
    let annotations = if annotations.is_empty() {
        String::new()
    } else {
        format!("  annotations:\n{annotations}")
    };
    format!(
        "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: {name}\n  namespace: default\n  creationTimestamp: \"2026-01-01T00:00:00Z\"\n{annotations}spec:\n  ingressClassName: higress\n  rules:\n{rules}---\n"
    )
}

/// A Service `name` in `default` whose endpoints are 127.0.0.1 at each of `ports` (one EndpointSlice each).
fn service_on(name: &str, ports: &[u16]) -> String {
    let mut out = format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: default}}\nspec: {{ports: [{{name: http, port: 80}}]}}\n---\n"
    );
    for (i, port) in ports.iter().enumerate() {
        out.push_str(&format!(
            "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: {name}-{i}, namespace: default, labels: {{kubernetes.io/service-name: {name}}}}}\naddressType: IPv4\nports: [{{name: http, port: {port}, protocol: TCP}}]\nendpoints: [{{addresses: [127.0.0.1], conditions: {{ready: true}}}}]\n---\n"
        ));
    }
    out
}

/// Every Ingress of the test (one host per case).
fn ingresses() -> String {
    const N: &str = "nginx.ingress.kubernetes.io/";
    let n = |k: &str| format!("{N}{k}");
    let h = |k: &str| format!("higress.io/{k}");
    let mut out = String::new();
    let mut add = |name: &str, annotations: &[(String, &str)], rules: &[Rule<'_>]| {
        let a: Vec<(&str, &str)> = annotations.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        out.push_str(&ingress(name, &a, rules));
    };
    add(
        "basic",
        &[],
        &[(
            "basic.example",
            &[
                ("/hello", "Prefix", "v1"),
                ("/exact", "Exact", "v2"),
                ("/impl", "ImplementationSpecific", "v3"),
            ],
        )],
    );
    add(
        "rewrite-target",
        &[(n("use-regex"), "true"), (n("rewrite-target"), "/$1")],
        &[(
            "rewrite.example",
            &[("/svc/(.*)", "ImplementationSpecific", "v1")],
        )],
    );
    add(
        "rewrite-path",
        &[(h("rewrite-path"), "/new")],
        &[("rewrite-path.example", &[("/old", "Prefix", "v1")])],
    );
    add(
        "full-path-regex",
        &[(h("full-path-regex"), "true")],
        &[(
            "full-regex.example",
            &[("/bar/[0-9]{3}", "ImplementationSpecific", "v1")],
        )],
    );
    add(
        "upstream-vhost",
        &[(n("upstream-vhost"), "upstream.example")],
        &[("vhost.example", &[("/", "Prefix", "v1")])],
    );
    // Canaries: a main Ingress and a canary Ingress for the same host and path.
    for (host, canary) in [
        (
            "canary-header.example",
            vec![(n("canary-by-header"), "x-canary")],
        ),
        (
            "canary-value.example",
            vec![
                (n("canary-by-header"), "x-env"),
                (n("canary-by-header-value"), "beta"),
            ],
        ),
        (
            "canary-pattern.example",
            vec![
                (h("canary-by-header"), "x-user"),
                (h("canary-by-header-pattern"), "vip"),
            ],
        ),
        (
            "canary-cookie.example",
            vec![(n("canary-by-cookie"), "canary")],
        ),
        ("canary-100.example", vec![(n("canary-weight"), "100")]),
        ("canary-0.example", vec![(n("canary-weight"), "0")]),
        (
            "canary-30.example",
            vec![(n("canary-weight"), "3"), (n("canary-weight-total"), "10")],
        ),
    ] {
        let main = host.trim_end_matches(".example");
        add(main, &[], &[(host, &[("/echo", "Exact", "v1")])]);
        let mut annotations = vec![(n("canary"), "true")];
        annotations.extend(canary);
        add(
            &format!("{main}-canary"),
            &annotations,
            &[(host, &[("/echo", "Exact", "v2")])],
        );
    }
    add(
        "cors",
        &[
            (n("enable-cors"), "true"),
            (
                n("cors-allow-origin"),
                "http://bar.com, https://*.trusted.example",
            ),
            (n("cors-allow-methods"), "GET, POST"),
            (n("cors-allow-headers"), "x-custom"),
            (n("cors-expose-headers"), "x-exposed"),
            (n("cors-allow-credentials"), "false"),
            (n("cors-max-age"), "60"),
        ],
        &[("cors.example", &[("/", "Prefix", "v1")])],
    );
    add(
        "cors-off",
        &[(n("enable-cors"), "false")],
        &[("cors-off.example", &[("/", "Prefix", "v1")])],
    );
    add(
        "force-ssl-redirect",
        &[(n("force-ssl-redirect"), "true")],
        &[("force.example", &[("/", "Prefix", "v1")])],
    );
    add(
        "app-root",
        &[(n("app-root"), "/app")],
        &[("root.example", &[("/", "Prefix", "v1")])],
    );
    add(
        "permanent-redirect",
        &[(n("permanent-redirect"), "http://bar.com")],
        &[("perm.example", &[("/foo", "Prefix", "v1")])],
    );
    add(
        "permanent-redirect-code",
        &[
            (n("permanent-redirect"), "http://bar.com"),
            (n("permanent-redirect-code"), "308"),
        ],
        &[("perm308.example", &[("/foo", "Prefix", "v1")])],
    );
    add(
        "temporal-redirect",
        &[(h("temporal-redirect"), "https://bar.com/new")],
        &[("temp.example", &[("/foo", "Prefix", "v1")])],
    );
    add(
        "backend-http2",
        &[(n("backend-protocol"), "HTTP2")],
        &[("h2.example", &[("/", "Prefix", "h2")])],
    );
    add(
        "backend-https",
        &[(n("backend-protocol"), "HTTPS")],
        &[("https-backend.example", &[("/", "Prefix", "tlsb")])],
    );
    add(
        "whitelist-deny",
        &[(n("whitelist-source-range"), "1.1.1.1")],
        &[("allowlist.example", &[("/private", "Prefix", "v1")])],
    );
    add(
        "whitelist-other-path",
        &[],
        &[("allowlist.example", &[("/public", "Prefix", "v1")])],
    );
    add(
        "whitelist-ignore-case",
        &[
            (n("whitelist-source-range"), "1.1.1.1"),
            (h("ignore-path-case"), "true"),
        ],
        &[("allowlist-case.example", &[("/private", "Prefix", "v1")])],
    );
    add(
        "whitelist-allow",
        &[(n("whitelist-source-range"), "10.0.0.0/8, 127.0.0.1/32")],
        &[("allowed.example", &[("/", "Prefix", "v1")])],
    );
    add(
        "timeout",
        &[(h("timeout"), "1")],
        &[("timeout.example", &[("/", "Prefix", "v1")])],
    );
    add(
        "retries",
        &[
            (n("proxy-next-upstream"), "error http_503"),
            (n("proxy-next-upstream-tries"), "3"),
        ],
        &[("retry.example", &[("/", "Prefix", "flaky")])],
    );
    add(
        "retries-off",
        &[(n("proxy-next-upstream"), "off")],
        &[("retry-off.example", &[("/", "Prefix", "flaky2")])],
    );
    add(
        "cookie-affinity",
        &[
            (n("affinity"), "cookie"),
            (n("session-cookie-name"), "route"),
            (n("session-cookie-max-age"), "600"),
        ],
        &[("cookie.example", &[("/", "Prefix", "pair-cookie")])],
    );
    add(
        "cookie-expires",
        &[
            (n("session-cookie-path"), "/app"),
            (n("session-cookie-expires"), "300"),
        ],
        &[("cookie2.example", &[("/", "Prefix", "pair-cookie2")])],
    );
    add(
        "retries-per-try-timeout",
        &[
            (n("proxy-next-upstream"), "timeout"),
            (n("proxy-next-upstream-tries"), "1"),
            (n("proxy-next-upstream-timeout"), "1"),
        ],
        &[("retry-timeout.example", &[("/", "Prefix", "v1")])],
    );
    add(
        "hash-by-header",
        &[(n("upstream-hash-by"), "$http_x_user")],
        &[("hash.example", &[("/", "Prefix", "pair-hash")])],
    );
    add(
        "load-balance",
        &[(n("load-balance"), "least_conn")],
        &[("lb.example", &[("/", "Prefix", "pair-lb")])],
    );
    add(
        "mirror",
        &[(n("mirror-target-service"), "mirror")],
        &[("mirror.example", &[("/", "Prefix", "v1")])],
    );
    add(
        "mirror-none",
        &[
            (n("mirror-target-service"), "mirror"),
            (n("mirror-percentage"), "0"),
        ],
        &[("mirror0.example", &[("/", "Prefix", "v1")])],
    );
    add(
        "header-control",
        &[
            (
                h("request-header-control-add"),
                "x-added one\n\"x-quoted\" 'a b'",
            ),
            (h("request-header-control-update"), "x-stage pro"),
            (h("request-header-control-remove"), "x-internal"),
            (h("response-header-control-add"), "x-resp yes"),
            (h("response-header-control-update"), "x-server-stage prod"),
            (h("response-header-control-remove"), "content-type"),
        ],
        &[("headers.example", &[("/", "Prefix", "v1")])],
    );
    add(
        "default-backend-annotation",
        &[(n("default-backend"), "v2")],
        &[("fallback.example", &[("/foo", "Prefix", "not-deployed")])],
    );
    add(
        "ignore-path-case",
        &[(h("ignore-path-case"), "true")],
        &[("case.example", &[("/foo", "Exact", "v1")])],
    );
    add(
        "match-method",
        &[(h("match-method"), "POST PUT")],
        &[("method.example", &[("/", "Prefix", "v1")])],
    );
    add(
        "match-header-query",
        &[
            (h("exact-match-header-abc"), "123"),
            (h("regex-match-query-q"), "a.*"),
            (h("prefix-match-pseudo-header-authority"), "match."),
        ],
        &[("match.example", &[("/", "Prefix", "v1")])],
    );
    out
}

/// Ingresses beside the annotated ones: TLS with `ssl-redirect`, a default backend, the oldest of two Ingresses
/// winning a path, and one of another class (not served).
const OTHERS: &str = r#"
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: higress
spec: {controller: higress.io/higress-controller}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: secure
  namespace: default
  annotations: {nginx.ingress.kubernetes.io/ssl-redirect: "true"}
spec:
  ingressClassName: higress
  tls: [{hosts: [shop.example], secretName: shop-cert}]
  rules:
  - host: shop.example
    http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: v1, port: {name: http}}}}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: catch-all, namespace: default, creationTimestamp: "2026-01-02T00:00:00Z"}
spec:
  ingressClassName: higress
  defaultBackend: {service: {name: v3, port: {number: 80}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: older, namespace: default, creationTimestamp: "2025-01-01T00:00:00Z"}
spec:
  ingressClassName: higress
  rules: [{host: conflict.example, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: v1, port: {number: 80}}}}]}}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: newer, namespace: default, creationTimestamp: "2026-06-01T00:00:00Z"}
spec:
  ingressClassName: higress
  rules: [{host: conflict.example, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: v2, port: {number: 80}}}}]}}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: other-class, namespace: default}
spec:
  ingressClassName: nginx
  rules: [{host: nginx.example, http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: v1, port: {number: 80}}}}]}}]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ingress_annotations_are_served_by_envoy() {
    let Some(binary) = envoy_binary() else {
        return;
    };
    let (v1, v2, v3, mirror, a, b) = (
        Echo::start("v1").await,
        Echo::start("v2").await,
        Echo::start("v3").await,
        Echo::start("mirror").await,
        Echo::start("a").await,
        Echo::start("b").await,
    );
    let (flaky, flaky2, h2) = (
        Echo::start("flaky").await,
        Echo::start("flaky2").await,
        Echo::start("h2").await,
    );
    let tls_ca = tls_backends::Ca::new();
    let tls_backend = tls_backends::StreamBackend::start_as(
        "tlsb",
        Some(tls_ca.leaf("tlsb.default.svc.cluster.local")),
        true,
    )
    .await;
    let (http_port, https_port) = (free_port(), free_port());
    let (ca, secret) = certificate();
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "secret.yaml", &secret);
    write(dir.path(), "ingresses.yaml", &ingresses());
    write(dir.path(), "others.yaml", OTHERS);
    let services = [
        service_on("v1", &[v1.port]),
        service_on("v2", &[v2.port]),
        service_on("v3", &[v3.port]),
        service_on("mirror", &[mirror.port]),
        service_on("flaky", &[flaky.port]),
        service_on("flaky2", &[flaky2.port]),
        service_on("h2", &[h2.port]),
        service_on("tlsb", &[tls_backend.port]),
        service_on("pair-cookie", &[a.port, b.port]),
        service_on("pair-cookie2", &[a.port, b.port]),
        service_on("pair-hash", &[a.port, b.port]),
        service_on("pair-lb", &[a.port, b.port]),
    ]
    .concat();
    write(dir.path(), "services.yaml", &services);
    let http_flag = format!("--ingress-http-port={http_port}");
    let https_flag = format!("--ingress-https-port={https_port}");
    let admitpilot = Admitpilot::start_with_args(
        dir.path(),
        &["--xds-unauthenticated-secrets", &http_flag, &https_flag],
    )
    .await;
    let bootstrap = bootstrap(AdsApi::Sotw, admitpilot.xds_port, NODE_ID).replace(
        "LABELS: { app: e2e }",
        "LABELS: { higress: higress-system-higress-gateway }",
    );
    let mut envoy = EnvoyProcess::start(&binary, &bootstrap, 53_700).await;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let base = format!("http://127.0.0.1:{http_port}");
    let get = |path: &str, host: &str| http.get(format!("{base}{path}")).header("host", host);
    let backend = |r: &Reply| r.body["backend"].as_str().unwrap_or_default().to_string();
    // Converged once the default backend answers an unknown host.
    let deadline = tokio::time::Instant::now() + CONVERGE;
    loop {
        if let Ok(r) = get("/", "unknown.example").send().await {
            if r.status() == 200 {
                break;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never converged:\n{}",
            admitpilot.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let expect = |r: &Reply, status: u16, to: &str, what: &str| {
        assert_eq!(
            (r.status, backend(r).as_str()),
            (status, to),
            "{what}: {:?}",
            r.body
        );
    };

    // pathType: Prefix matches whole segments, Exact the path only, ImplementationSpecific is Prefix.
    for (path, status, to) in [
        ("/hello", 200, "v1"),
        ("/hello/x", 200, "v1"),
        ("/hellox", 404, ""),
        ("/exact", 200, "v2"),
        ("/exact/x", 404, ""),
        ("/impl/x", 200, "v3"),
    ] {
        expect(
            &send(&http, get(path, "basic.example")).await,
            status,
            to,
            path,
        );
    }
    // spec.defaultBackend answers hosts no rule names; the oldest Ingress wins a path; other classes are not served.
    expect(
        &send(&http, get("/x", "unknown.example")).await,
        200,
        "v3",
        "spec.defaultBackend",
    );
    expect(
        &send(&http, get("/", "conflict.example")).await,
        200,
        "v1",
        "oldest Ingress wins",
    );
    expect(
        &send(&http, get("/", "nginx.example")).await,
        200,
        "v3",
        "another class is not served",
    );

    // use-regex + rewrite-target; higress.io/rewrite-path; full-path-regex; upstream-vhost.
    let r = send(&http, get("/svc/foo/bar", "rewrite.example")).await;
    assert_eq!(r.body["path"], "/foo/bar", "rewrite-target");
    let r = send(&http, get("/old/x", "rewrite-path.example")).await;
    assert_eq!(r.body["path"], "/new/x", "rewrite-path");
    expect(
        &send(&http, get("/bar/123", "full-regex.example")).await,
        200,
        "v1",
        "full-path-regex",
    );
    assert_eq!(
        send(&http, get("/bar/1234", "full-regex.example"))
            .await
            .status,
        404,
        "full-path-regex anchors"
    );
    let r = send(&http, get("/", "vhost.example")).await;
    assert_eq!(r.body["host"], "upstream.example", "upstream-vhost");

    // Canaries by header, header value, header pattern, cookie and weight.
    let canary = |host: &'static str, header: Option<(&'static str, &'static str)>| {
        let mut request = get("/echo", host);
        if let Some((k, v)) = header {
            request = request.header(k, v);
        }
        request
    };
    for (host, header, to) in [
        ("canary-header.example", Some(("x-canary", "always")), "v2"),
        ("canary-header.example", Some(("x-canary", "never")), "v1"),
        ("canary-header.example", None, "v1"),
        ("canary-value.example", Some(("x-env", "beta")), "v2"),
        ("canary-value.example", Some(("x-env", "always")), "v2"),
        ("canary-value.example", Some(("x-env", "prod")), "v1"),
        ("canary-pattern.example", Some(("x-user", "a-vip-1")), "v2"),
        ("canary-pattern.example", Some(("x-user", "regular")), "v1"),
        (
            "canary-cookie.example",
            Some(("cookie", "a=b; canary=always")),
            "v2",
        ),
        (
            "canary-cookie.example",
            Some(("cookie", "canary=never")),
            "v1",
        ),
        ("canary-100.example", None, "v2"),
        ("canary-0.example", None, "v1"),
    ] {
        expect(&send(&http, canary(host, header)).await, 200, to, host);
    }
    let mut seen = BTreeSet::new();
    for _ in 0..60 {
        seen.insert(backend(
            &send(&http, canary("canary-30.example", None)).await,
        ));
    }
    assert_eq!(
        seen,
        BTreeSet::from(["v1".to_string(), "v2".to_string()]),
        "canary-weight 3 of 10"
    );

    // CORS: an allowed origin (exact or wildcard) gets the headers, another none; enable-cors false has none.
    let preflight = |host: &str, origin: &str| {
        http.request(reqwest::Method::OPTIONS, format!("{base}/"))
            .header("host", host)
            .header("origin", origin)
            .header("access-control-request-method", "POST")
    };
    let r = send(&http, preflight("cors.example", "http://bar.com")).await;
    assert_eq!(
        r.headers["access-control-allow-origin"], "http://bar.com",
        "{:?}",
        r.headers
    );
    assert_eq!(r.headers["access-control-max-age"], "60");
    assert!(r.headers["access-control-allow-methods"]
        .to_str()
        .unwrap()
        .contains("POST"));
    assert!(
        r.headers.get("access-control-allow-credentials").is_none(),
        "credentials false"
    );
    let r = send(
        &http,
        preflight("cors.example", "https://app.trusted.example"),
    )
    .await;
    assert_eq!(
        r.headers["access-control-allow-origin"],
        "https://app.trusted.example"
    );
    let r = send(&http, preflight("cors.example", "http://foo.com")).await;
    assert!(
        r.headers.get("access-control-allow-origin").is_none(),
        "a forbidden origin"
    );
    let r = send(
        &http,
        get("/", "cors.example").header("origin", "http://bar.com"),
    )
    .await;
    assert_eq!(r.headers["access-control-expose-headers"], "x-exposed");
    let r = send(&http, preflight("cors-off.example", "http://bar.com")).await;
    assert!(
        r.headers.get("access-control-allow-origin").is_none(),
        "enable-cors false"
    );

    // ssl-redirect on the HTTP port only; the HTTPS port serves the route with the Ingress's Secret (SDS).
    let r = send(&http, get("/x", "shop.example")).await;
    assert_eq!(
        (r.status, r.headers["location"].to_str().unwrap()),
        (308, "https://shop.example/x")
    );
    let https = https_client(&ca, https_port);
    let r = send(
        &https,
        https.get(format!("https://shop.example:{https_port}/x")),
    )
    .await;
    expect(&r, 200, "v1", "TLS from spec.tls via SDS");
    let r = send(&http, get("/y", "force.example")).await;
    assert_eq!(
        (r.status, r.headers["location"].to_str().unwrap()),
        (308, "https://force.example/y")
    );

    // app-root, permanent (301 or the code given) and temporal (302) redirects.
    let r = send(&http, get("/", "root.example")).await;
    assert_eq!(
        (r.status, r.headers["location"].to_str().unwrap()),
        (302, "http://root.example/app")
    );
    expect(
        &send(&http, get("/other", "root.example")).await,
        200,
        "v1",
        "app-root only redirects /",
    );
    let r = send(&http, get("/foo", "perm.example")).await;
    assert_eq!(
        (r.status, r.headers["location"].to_str().unwrap()),
        (301, "http://bar.com/foo")
    );
    let r = send(&http, get("/foo", "perm308.example")).await;
    assert_eq!(
        (r.status, r.headers["location"].to_str().unwrap()),
        (308, "http://bar.com/foo")
    );
    let r = send(&http, get("/foo", "temp.example")).await;
    assert_eq!(
        (r.status, r.headers["location"].to_str().unwrap()),
        (302, "https://bar.com/new")
    );

    // backend-protocol: HTTP2 reaches the backend as HTTP/2; HTTPS in TLS.
    let r = send(&http, get("/", "h2.example")).await;
    assert_eq!(
        r.body["version"], "HTTP/2.0",
        "backend-protocol HTTP2: {:?}",
        r.body
    );
    let r = send(&http, get("/", "https-backend.example")).await;
    assert_eq!(r.status, 200);
    assert!(
        r.body.as_str().unwrap_or_default().starts_with("tlsb sni="),
        "backend-protocol HTTPS: {:?}",
        r.body
    );

    // whitelist-source-range: a client outside the ranges gets 403 on that Ingress's paths only.
    assert_eq!(
        send(&http, get("/private/x", "allowlist.example"))
            .await
            .status,
        403,
        "not whitelisted"
    );
    expect(
        &send(&http, get("/public", "allowlist.example")).await,
        200,
        "v1",
        "other path of the host",
    );
    // With ignore-path-case the route matches /PRIVATE too, and so does the whitelist.
    assert_eq!(
        send(&http, get("/PRIVATE/x", "allowlist-case.example"))
            .await
            .status,
        403,
        "not whitelisted, whatever the case"
    );
    expect(
        &send(&http, get("/", "allowed.example")).await,
        200,
        "v1",
        "whitelisted",
    );

    // higress.io/timeout (the backend answers /slow after 2 s).
    assert_eq!(
        send(&http, get("/slow", "timeout.example")).await.status,
        504,
        "timeout"
    );
    // proxy-next-upstream: the flaky backend answers 503 every other time; retried, always 200; off, not.
    for _ in 0..4 {
        assert_eq!(
            send(&http, get("/flaky", "retry.example")).await.status,
            200,
            "retried"
        );
    }
    let mut statuses = BTreeSet::new();
    for _ in 0..4 {
        statuses.insert(send(&http, get("/flaky", "retry-off.example")).await.status);
    }
    assert!(
        statuses.contains(&503),
        "proxy-next-upstream off: {statuses:?}"
    );

    // proxy-next-upstream-timeout: one try of at most 1 s at a backend that answers after 2 s.
    assert_eq!(
        send(&http, get("/slow", "retry-timeout.example"))
            .await
            .status,
        504,
        "per-try timeout"
    );

    // Cookie affinity: the gateway sets the cookie; with it every request goes to one backend.
    let r = send(&http, get("/", "cookie.example")).await;
    let cookie = r.headers["set-cookie"].to_str().unwrap().to_string();
    assert!(
        cookie.starts_with("route=") && cookie.contains("Max-Age=600"),
        "{cookie}"
    );
    let cookie = cookie.split(';').next().unwrap().to_string();
    let mut seen = BTreeSet::new();
    for _ in 0..10 {
        seen.insert(backend(
            &send(&http, get("/", "cookie.example").header("cookie", &cookie)).await,
        ));
    }
    assert_eq!(seen.len(), 1, "cookie affinity: {seen:?}");
    let r = send(&http, get("/", "cookie2.example")).await;
    let cookie = r.headers["set-cookie"].to_str().unwrap();
    assert!(
        cookie.starts_with("INGRESSCOOKIE=")
            && cookie.contains("Max-Age=300")
            && cookie.contains("Path=/app"),
        "{cookie}"
    );
    // upstream-hash-by: one user, one backend; both backends serve someone.
    let mut all = BTreeSet::new();
    for user in 0..20 {
        let mut seen = BTreeSet::new();
        for _ in 0..3 {
            seen.insert(backend(
                &send(
                    &http,
                    get("/", "hash.example").header("x_user", user.to_string()),
                )
                .await,
            ));
        }
        assert_eq!(seen.len(), 1, "upstream-hash-by for user {user}");
        all.extend(seen);
    }
    assert_eq!(all.len(), 2, "hashing spreads users: {all:?}");
    // load-balance: least_conn is Envoy's LEAST_REQUEST for that Service's cluster.
    assert_eq!(
        send(&http, get("/", "lb.example")).await.status,
        200,
        "load-balance"
    );
    let dump = envoy.config_dump().await;
    let dump: serde_json::Value = serde_json::from_str(&dump).unwrap();
    let lb_cluster = dumped(&dump, Dumped::Cluster)
        .into_iter()
        .find(|c| {
            c["name"]
                .as_str()
                .is_some_and(|n| n.contains("pair-lb.default"))
        })
        .expect("the pair-lb cluster");
    assert_eq!(lb_cluster["lb_policy"], "LEAST_REQUEST", "{lb_cluster}");

    // mirror-target-service: the mirror gets a copy.
    let mirrored = mirror.requests.load(Ordering::SeqCst);
    expect(
        &send(&http, get("/m", "mirror.example")).await,
        200,
        "v1",
        "mirror",
    );
    let deadline = tokio::time::Instant::now() + CONVERGE;
    while mirror.requests.load(Ordering::SeqCst) <= mirrored {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the mirror never got the request"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // mirror-percentage 0: nothing mirrored (the 100% mirror's copy, sent after, is the only one to arrive).
    let before = mirror.requests.load(Ordering::SeqCst);
    for _ in 0..10 {
        expect(
            &send(&http, get("/", "mirror0.example")).await,
            200,
            "v1",
            "mirror 0%",
        );
    }
    expect(
        &send(&http, get("/m", "mirror.example")).await,
        200,
        "v1",
        "mirror",
    );
    let deadline = tokio::time::Instant::now() + CONVERGE;
    while mirror.requests.load(Ordering::SeqCst) <= before {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the mirror never got the request"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        mirror.requests.load(Ordering::SeqCst),
        before + 1,
        "mirror-percentage 0"
    );

    // Header control: add, update (set) and remove on the request; add and update on the response.
    let r = send(
        &http,
        get("/", "headers.example")
            .header("x-stage", "test")
            .header("x-internal", "secret"),
    )
    .await;
    let seen = &r.body["headers"];
    assert_eq!(
        (seen["x-added"].as_str(), seen["x-quoted"].as_str()),
        (Some("one"), Some("a b")),
        "{seen}"
    );
    assert_eq!(seen["x-stage"], "pro");
    assert!(seen.get("x-internal").is_none(), "removed");
    assert_eq!(r.headers["x-resp"], "yes");
    assert_eq!(r.headers["x-server-stage"], "prod");
    assert!(
        r.headers.get("content-type").is_none(),
        "response header removed"
    );

    // default-backend: the backend Service does not exist, so the default backend answers.
    expect(
        &send(&http, get("/foo", "fallback.example")).await,
        200,
        "v2",
        "default-backend",
    );
    // ignore-path-case, match-method, header/query/pseudo-header matches.
    expect(
        &send(&http, get("/FoO", "case.example")).await,
        200,
        "v1",
        "ignore-path-case",
    );
    assert_eq!(
        send(&http, get("/", "method.example")).await.status,
        404,
        "GET is not matched"
    );
    let r = send(
        &http,
        http.post(format!("{base}/"))
            .header("host", "method.example"),
    )
    .await;
    expect(&r, 200, "v1", "POST is matched");
    assert_eq!(
        send(&http, get("/?q=abc", "match.example")).await.status,
        404,
        "the header is missing"
    );
    assert_eq!(
        send(&http, get("/?q=xyz", "match.example").header("abc", "123"))
            .await
            .status,
        404,
        "the query does not match"
    );
    expect(
        &send(&http, get("/?q=abc", "match.example").header("abc", "123")).await,
        200,
        "v1",
        "all match",
    );

    envoy.assert_nothing_rejected("ingress").await;
    assert!(envoy.exit_status().is_none(), "Envoy is still running");

    // Admission: an invalid value is denied naming the annotation; a typo is warned with the nearest key.
    let review = admitpilot
        .review(json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "bad", "namespace": "default", "annotations": {
                "nginx.ingress.kubernetes.io/canary": "true",
                "nginx.ingress.kubernetes.io/canary-weight": "abc",
                "nginx.ingress.kubernetes.io/rewrite-targett": "/"}},
            "spec": {"ingressClassName": "higress", "rules": [{"host": "a.example", "http": {"paths": [
                {"path": "/", "pathType": "Prefix", "backend": {"service": {"name": "v1", "port": {"number": 80}}}}]}}]}}))
        .await;
    assert_eq!(review["allowed"], false, "{review}");
    let message = review["status"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("nginx.ingress.kubernetes.io/canary-weight")
            && message.contains("\"abc\": not an integer"),
        "{message}"
    );
    let warnings = review["warnings"].to_string();
    assert!(
        warnings.contains("did you mean nginx.ingress.kubernetes.io/rewrite-target?"),
        "{warnings}"
    );
}
