//! Gateway API end to end: the real `admitpilot serve --config-dir` binary with GatewayClass, Gateway, Services,
//! ReferenceGrant and HTTPRoute objects, a real Envoy 1.40 (SotW, default `initial_fetch_timeout`) whose node
//! metadata names the Gateway (`gateway.networking.k8s.io/gateway-name: gw`, namespace `default`), and echo
//! backends on 127.0.0.1 that answer with what they received. Each feature is checked with real requests; every
//! `*update_rejected` stat stays 0. The webhook denies an invalid HTTPRoute with the API server's message.
//!
//! Skips with a message when Envoy is not installed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::echo;
use support::envoy;
use support::pipeline;

use std::sync::atomic::Ordering;
use std::time::Duration;

use echo::*;
use envoy::*;
use pipeline::*;
use serde_json::{json, Value};

const NODE_ID: &str = "router~127.0.0.1~gw.default~default.svc.cluster.local";

/// [`service`] whose port says it speaks HTTP/2 without TLS (`appProtocol: kubernetes.io/h2c`), as gRPC backends do.
fn h2c_service(name: &str, namespace: &str, port: u16) -> String {
    service_speaking(name, namespace, port, ("grpc", "kubernetes.io/h2c"))
}

/// [`service`] whose port is named `port_name` and says it speaks `app_protocol`.
fn service_speaking(
    name: &str,
    namespace: &str,
    port: u16,
    (port_name, app_protocol): (&str, &str),
) -> String {
    service(name, namespace, port)
        .replace(
            "{name: http, port: 80}",
            &format!("{{name: {port_name}, port: 80, appProtocol: {app_protocol}}}"),
        )
        .replace(
            "ports: [{name: http, port:",
            &format!("ports: [{{name: {port_name}, port:"),
        )
}

/// `admitpilot serve` on the folder `dir` and an Envoy (base id `base_id`) serving the Gateway `default/gw`.
async fn serve_gateway(
    binary: &std::path::Path,
    dir: &std::path::Path,
    base_id: u32,
) -> (Admitpilot, EnvoyProcess) {
    let admitpilot = Admitpilot::start(dir).await;
    let bootstrap = bootstrap(AdsApi::Sotw, admitpilot.xds_port, NODE_ID).replace(
        "LABELS: { app: e2e }",
        "LABELS: { gateway.networking.k8s.io/gateway-name: gw }",
    );
    let envoy = EnvoyProcess::start(binary, &bootstrap, base_id).await;
    (admitpilot, envoy)
}

const ROUTES: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: admitpilot}
spec: {controllerName: admitpilot.io/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: main, namespace: default, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  parentRefs: [{name: gw}]
  hostnames: ["shop.example"]
  rules:
  - matches: [{path: {type: PathPrefix, value: /api}}]
    backendRefs: [{name: v1, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /api}, headers: [{name: x-tester, value: "yes"}]}]
    backendRefs: [{name: v2, port: 80}]
  - matches: [{path: {type: Exact, value: /login}, method: POST, queryParams: [{name: flow, value: sso}]}]
    backendRefs: [{name: v2, port: 80}]
  - matches: [{path: {type: RegularExpression, value: "/items/[0-9]+"}}]
    backendRefs: [{name: v1, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /cart}}]
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier: {set: [{name: x-gateway, value: admitpilot}], add: [{name: x-trace, value: "1"}], remove: [x-internal]}
    - type: ResponseHeaderModifier
      responseHeaderModifier: {set: [{name: cache-control, value: no-store}]}
    - type: RequestMirror
      requestMirror: {backendRef: {name: mirror, port: 80}}
    backendRefs: [{name: v1, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /old}}]
    filters:
    - type: URLRewrite
      urlRewrite: {hostname: new.example, path: {type: ReplacePrefixMatch, replacePrefixMatch: /new}}
    backendRefs: [{name: v1, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /full}}]
    filters:
    - type: URLRewrite
      urlRewrite: {path: {type: ReplaceFullPath, replaceFullPath: /replaced}}
    backendRefs: [{name: v1, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /account}}]
    filters:
    - type: RequestRedirect
      requestRedirect: {scheme: https, hostname: secure.example, port: 8443, statusCode: 301}
  - matches: [{path: {type: PathPrefix, value: /moved}}]
    filters:
    - type: RequestRedirect
      requestRedirect: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /new-home}, statusCode: 308}
  - matches: [{path: {type: PathPrefix, value: /split}}]
    backendRefs: [{name: v1, port: 80, weight: 1}, {name: v2, port: 80, weight: 0}]
  - matches: [{path: {type: PathPrefix, value: /broken}}]
    backendRefs: [{name: not-deployed, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /partly}}]
    backendRefs: [{name: v1, port: 80, weight: 3}, {name: not-deployed, port: 80, weight: 1}]
  - matches: [{path: {type: PathPrefix, value: /public}}]
    filters:
    - type: CORS
      cors: {allowOrigins: ["https://www.example.com"], allowMethods: [GET, POST], allowHeaders: [content-type], maxAge: 600}
    backendRefs: [{name: v1, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /slow}}]
    timeouts: {request: 300ms}
    backendRefs: [{name: v1, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /flaky}}]
    retry: {attempts: 2, codes: [503]}
    backendRefs: [{name: v2, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /granted}}]
    backendRefs: [{name: team, namespace: team, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: from-default, namespace: team}
spec:
  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: default}]
  to: [{group: "", kind: Service}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: wildcard, namespace: default, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  parentRefs: [{name: gw}]
  hostnames: ["*.example"]
  rules: [{backendRefs: [{name: v2, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: other-namespace, namespace: team}
spec:
  parentRefs: [{name: gw, namespace: default}]
  hostnames: ["team.example"]
  rules: [{backendRefs: [{name: team, port: 80}]}]
"#;

/// The Gateway: HTTP on `port`; HTTPS on `https_port` with `default/shop-cert`; HTTPS with certificates of the
/// namespace `certs` on `granted_port` (a ReferenceGrant there allows `shop-cert`) and `refused_port` (none allows
/// `other-cert`).
fn gateway(port: u16, https_port: u16, granted_port: u16, refused_port: u16) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: default}}\nspec:\n  gatewayClassName: admitpilot\n  listeners:\n  - {{name: http, port: {port}, protocol: HTTP, hostname: \"*.example\"}}\n  - {{name: https, port: {https_port}, protocol: HTTPS, hostname: shop.example, tls: {{certificateRefs: [{{name: shop-cert}}]}}}}\n  - {{name: granted, port: {granted_port}, protocol: HTTPS, hostname: shop.example, tls: {{certificateRefs: [{{name: shop-cert, namespace: certs}}]}}}}\n  - {{name: refused, port: {refused_port}, protocol: HTTPS, hostname: shop.example, tls: {{certificateRefs: [{{name: other-cert, namespace: certs}}]}}}}\n"
    )
}

/// The ReferenceGrant in `certs` that lets Gateways of `default` use the Secret `shop-cert` (and no other).
const CERTS_GRANT: &str = "apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: gateways-from-default, namespace: certs}
spec:
  from: [{group: gateway.networking.k8s.io, kind: Gateway, namespace: default}]
  to: [{group: \"\", kind: Secret, name: shop-cert}]
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_api_routes_are_served_by_envoy() {
    let Some(binary) = envoy_binary() else {
        return;
    };
    let (v1, v2, mirror, team) = (
        Echo::start("v1").await,
        Echo::start("v2").await,
        Echo::start("mirror").await,
        Echo::start("team").await,
    );
    let (port, https_port, granted_port, refused_port) =
        (free_port(), free_port(), free_port(), free_port());
    let (ca, secret) = certificate();
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "gateway.yaml",
        &gateway(port, https_port, granted_port, refused_port),
    );
    write(dir.path(), "secret.yaml", &secret);
    let in_certs = secret.replace("namespace: default", "namespace: certs");
    write(
        dir.path(),
        "certs-secrets.yaml",
        &format!(
            "{in_certs}---\n{}",
            in_certs.replace("name: shop-cert", "name: other-cert")
        ),
    );
    write(dir.path(), "certs-grant.yaml", CERTS_GRANT);
    write(dir.path(), "routes.yaml", ROUTES);
    let services = [
        service("v1", "default", v1.port),
        service("v2", "default", v2.port),
        service("mirror", "default", mirror.port),
        service("team", "team", team.port),
    ]
    .join("---\n");
    write(dir.path(), "services.yaml", &services);
    let admitpilot =
        Admitpilot::start_with_args(dir.path(), &["--xds-unauthenticated-secrets"]).await; // folder mode serves the HTTPS listener's certificate only when asked
    let bootstrap = bootstrap(AdsApi::Sotw, admitpilot.xds_port, NODE_ID).replace(
        "LABELS: { app: e2e }",
        "LABELS: { gateway.networking.k8s.io/gateway-name: gw }",
    );
    let envoy = EnvoyProcess::start(&binary, &bootstrap, 53_500).await;
    // Redirects are answers to check, not to follow.
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let get = |path: &str, host: &str| http.get(format!("{base}{path}")).header("host", host);
    // Converged once the catch-all wildcard route answers.
    let deadline = tokio::time::Instant::now() + CONVERGE;
    loop {
        if let Ok(r) = get("/", "any.example").send().await {
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
    let backend = |r: &Reply| r.body["backend"].as_str().unwrap_or_default().to_string();

    // Path prefix matches whole segments; the more specific host's route wins over the wildcard route.
    let r = send(&http, get("/api/x", "shop.example")).await;
    assert_eq!((r.status, backend(&r)), (200, "v1".into()), "prefix");
    let r = send(&http, get("/apix", "shop.example")).await;
    assert_eq!(r.status, 404, "a prefix matches whole segments only");
    // A header match outranks the plain prefix (more header matches first).
    let r = send(
        &http,
        get("/api/x", "shop.example").header("x-tester", "yes"),
    )
    .await;
    assert_eq!(backend(&r), "v2", "header match precedence");
    // Exact path with method and query parameter.
    let login = format!("{base}/login?flow=sso");
    let r = send(&http, http.post(&login).header("host", "shop.example")).await;
    assert_eq!(
        (r.status, backend(&r)),
        (200, "v2".into()),
        "exact+method+query"
    );
    let r = send(&http, http.get(&login).header("host", "shop.example")).await;
    assert_eq!(r.status, 404, "the method must match");
    let r = send(
        &http,
        http.post(format!("{base}/login"))
            .header("host", "shop.example"),
    )
    .await;
    assert_eq!(r.status, 404, "the query parameter must match");
    // Regular expression path.
    assert_eq!(
        send(&http, get("/items/42", "shop.example")).await.status,
        200
    );
    assert_eq!(
        send(&http, get("/items/abc", "shop.example")).await.status,
        404
    );
    // Request and response header modifiers, mirror.
    let mirrored = mirror.requests.load(Ordering::SeqCst);
    let r = send(
        &http,
        get("/cart", "shop.example").header("x-internal", "secret"),
    )
    .await;
    let seen = &r.body["headers"];
    assert_eq!(seen["x-gateway"], "admitpilot", "{r:?}", r = r.body);
    assert_eq!(seen["x-trace"], "1");
    assert!(seen.get("x-internal").is_none(), "removed header");
    assert_eq!(r.headers["cache-control"], "no-store", "response header");
    let deadline = tokio::time::Instant::now() + CONVERGE;
    while mirror.requests.load(Ordering::SeqCst) <= mirrored {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the mirror never got the request"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // URL rewrite of host and prefix, and of the full path.
    let r = send(&http, get("/old/x", "shop.example")).await;
    assert_eq!(
        (r.body["path"].as_str(), r.body["host"].as_str()),
        (Some("/new/x"), Some("new.example"))
    );
    let r = send(&http, get("/full/x/y", "shop.example")).await;
    assert_eq!(r.body["path"], "/replaced");
    // Redirects: scheme, host, port, 301; prefix replacement with 308.
    let r = send(&http, get("/account/me", "shop.example")).await;
    assert_eq!(r.status, 301);
    assert_eq!(
        r.headers["location"],
        "https://secure.example:8443/account/me"
    );
    // No port and no scheme: the listener's port (the spec), kept in the Location.
    let r = send(&http, get("/moved/page", "shop.example")).await;
    assert_eq!(r.status, 308);
    assert_eq!(
        r.headers["location"],
        format!("http://shop.example:{port}/new-home/page")
    );
    // Weight 0 receives nothing.
    for _ in 0..20 {
        assert_eq!(
            backend(&send(&http, get("/split", "shop.example")).await),
            "v1"
        );
    }
    // A rule whose only backend does not exist answers 500.
    assert_eq!(
        send(&http, get("/broken", "shop.example")).await.status,
        500
    );
    // One backend of weight 1 in 4 does not exist: about a quarter of the requests get 500, the rest reach v1
    // (400 requests: outside 15%..35% is more than 4.6 standard deviations away).
    let mut failed = 0;
    for _ in 0..400 {
        let reply = send(&http, get("/partly", "shop.example")).await;
        match reply.status {
            500 => failed += 1,
            200 => assert_eq!(backend(&reply), "v1"),
            other => panic!("/partly answered {other}"),
        }
    }
    assert!((60..=140).contains(&failed), "{failed} of 400 got 500");
    // CORS preflight.
    let preflight = http
        .request(reqwest::Method::OPTIONS, format!("{base}/public/x"))
        .header("host", "shop.example")
        .header("origin", "https://www.example.com")
        .header("access-control-request-method", "POST");
    let r = send(&http, preflight).await;
    assert_eq!(
        r.headers["access-control-allow-origin"],
        "https://www.example.com"
    );
    assert_eq!(r.headers["access-control-max-age"], "600");
    // A preflight from an origin the policy does not allow is answered by the gateway, not forwarded.
    let refused = http
        .request(reqwest::Method::OPTIONS, format!("{base}/public/x"))
        .header("host", "shop.example")
        .header("origin", "https://evil.example")
        .header("access-control-request-method", "POST");
    let r = send(&http, refused).await;
    assert!(
        !r.headers.contains_key("access-control-allow-origin"),
        "{:?}",
        r.headers
    );
    assert_eq!(
        backend(&r),
        "",
        "the preflight reached a backend: {:?}",
        r.body
    );
    // Request timeout.
    assert_eq!(send(&http, get("/slow", "shop.example")).await.status, 504);
    // Retry on 503: the backend fails every other request, the retry succeeds.
    for _ in 0..4 {
        assert_eq!(send(&http, get("/flaky", "shop.example")).await.status, 200);
    }
    // A backend in another namespace that a ReferenceGrant allows.
    assert_eq!(
        backend(&send(&http, get("/granted", "shop.example")).await),
        "team"
    );
    // Host names: the wildcard route serves other hosts of the listener; a route from another namespace is not
    // admitted by a listener that allows only its own (the default `Same`); a host outside the listener's is not
    // served.
    assert_eq!(backend(&send(&http, get("/", "other.example")).await), "v2");
    assert_eq!(
        backend(&send(&http, get("/", "team.example")).await),
        "v2",
        "team route not admitted"
    );
    assert_eq!(send(&http, get("/", "shop.other")).await.status, 404);

    // The HTTPS listener terminates TLS with the certificateRefs Secret (over SDS) and serves the same route.
    // So does the listener whose certificate is in `certs`, which a ReferenceGrant there allows; the one whose
    // certificate no grant allows is not served at all.
    for https_port in [https_port, granted_port] {
        let url = format!("https://shop.example:{https_port}/api/x");
        let https = https_client(&ca, https_port);
        let deadline = tokio::time::Instant::now() + CONVERGE;
        let r = loop {
            if let Ok(response) = https.get(&url).send().await {
                break response.text().await.unwrap();
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "HTTPS on {https_port} never answered"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(
            serde_json::from_str::<Value>(&r).unwrap()["backend"],
            "v1",
            "{r}"
        );
    }
    let refused = https_client(&ca, refused_port)
        .get(format!("https://shop.example:{refused_port}/api/x"))
        .send()
        .await;
    assert!(
        refused.is_err(),
        "a certificate no ReferenceGrant allows was served: {refused:?}"
    );

    envoy.assert_nothing_rejected("gateway api").await;
    // Folder mode shows the status a leader would write: the Gateway is Programmed once its gateway acknowledged it.
    admitpilot
        .wait_for_admin("/debug/configz", "the Gateway Programmed", |text| {
            let configz: Value = serde_json::from_str(text).unwrap();
            configz["objects"].as_array().unwrap().iter().any(|o| {
                o["kind"] == "KubernetesGateway"
                    && o["name"] == "gw"
                    && o["status"]["conditions"]
                        .as_array()
                        .is_some_and(|conditions| {
                            conditions
                                .iter()
                                .any(|c| c["type"] == "Programmed" && c["status"] == "True")
                        })
            })
        })
        .await;

    // The webhook denies an invalid HTTPRoute with the API server's message and field path.
    let review = admitpilot
        .review(
            json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
            "metadata": {"name": "bad", "namespace": "default"},
            "spec": {"parentRefs": [{"name": "gw"}], "rules": [
                {"matches": [{"path": {"type": "PathPrefix", "value": "api"}}],
                 "backendRefs": [{"name": "v1", "port": 80}]}]}}),
        )
        .await;
    assert_eq!(review["allowed"], false);
    assert_eq!(
        review["status"]["message"],
        "configuration is invalid: spec.rules[0].matches[0].path: Invalid value: \"object\": value must be an \
         absolute path and start with '/' when type one of ['Exact', 'PathPrefix']"
    );
    drop(admitpilot);
}

/// GRPCRoutes: the real binary translates their method and header matches and filters, and Envoy sends gRPC calls
/// (HTTP/2 without TLS, as gRPC clients speak to a plain-text gateway) to the backends over HTTP/2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_routes_are_served_by_envoy_over_http2() {
    let Some(binary) = envoy_binary() else {
        return;
    };
    let (say, other) = (Echo::start("say").await, Echo::start("other").await);
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: admitpilot}}
spec: {{controllerName: admitpilot.io/gateway-controller}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: default}}
spec:
  gatewayClassName: admitpilot
  listeners: [{{name: grpc, port: {port}, protocol: HTTP}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {{name: echo, namespace: default}}
spec:
  parentRefs: [{{name: gw}}]
  rules:
  - matches: [{{method: {{service: pkg.Echo, method: Say}}}}]
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier: {{set: [{{name: x-grpc-route, value: say}}]}}
    backendRefs: [{{name: say, port: 80}}]
  - matches: [{{method: {{service: pkg.Echo}}, headers: [{{name: x-tenant, value: b}}]}}]
    backendRefs: [{{name: other, port: 80}}]
  - matches: [{{method: {{type: RegularExpression, method: "Ping.*"}}}}]
    backendRefs: [{{name: other, port: 80}}]
"#
    );
    write(dir.path(), "grpc.yaml", &config);
    let services = [
        h2c_service("say", "default", say.port),
        h2c_service("other", "default", other.port),
    ]
    .join("---\n");
    write(dir.path(), "services.yaml", &services);
    let (admitpilot, envoy) = serve_gateway(&binary, dir.path(), 53_600).await;
    let grpc = reqwest::Client::builder()
        .http2_prior_knowledge()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let call = |path: &str, tenant: Option<&str>| {
        let mut request = grpc
            .post(format!("http://127.0.0.1:{port}{path}"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(vec![0u8, 0, 0, 0, 0]);
        if let Some(tenant) = tenant {
            request = request.header("x-tenant", tenant);
        }
        request
    };
    let deadline = tokio::time::Instant::now() + CONVERGE;
    let said = loop {
        if let Ok(reply) = call("/pkg.Echo/Say", None).send().await {
            if reply.status() == 200 {
                break reply.json::<Value>().await.unwrap();
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never converged:\n{}",
            admitpilot.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(said["backend"], "say");
    assert_eq!(
        said["version"], "HTTP/2.0",
        "the backend is called over HTTP/2"
    );
    assert_eq!(said["headers"]["x-grpc-route"], "say");
    let reply = |path: &'static str, tenant: Option<&'static str>| {
        let request = call(path, tenant);
        async move {
            let reply = request.send().await.unwrap();
            let status = reply.status().as_u16();
            let grpc_status = reply
                .headers()
                .get("grpc-status")
                .map(|v| v.to_str().unwrap_or_default().to_string());
            (
                status,
                grpc_status,
                reply.json::<Value>().await.unwrap_or_default(),
            )
        }
    };
    let (status, _, body) = reply("/pkg.Echo/Other", Some("b")).await;
    assert_eq!((status, body["backend"].as_str()), (200, Some("other")));
    let (status, _, body) = reply("/any.Service/PingNow", None).await;
    assert_eq!((status, body["backend"].as_str()), (200, Some("other")));
    // Same service, no tenant header and not the Say method: no rule matches, which Envoy answers to a gRPC
    // client as gRPC does (HTTP 200, grpc-status 12 UNIMPLEMENTED, for its 404).
    let (status, grpc_status, body) = reply("/pkg.Echo/Other", None).await;
    assert_eq!(
        (status, grpc_status.as_deref()),
        (200, Some("12")),
        "{body}"
    );
    envoy.assert_nothing_rejected("grpc routes").await;
}

/// `admitpilot serve --config-dir examples/gateway-api` (the folder as shipped, its fixed ports moved to free ones)
/// serves the example's routes through a real Envoy: HTTP, HTTPS with the example's certificate, and the TCP
/// listener.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_folder_serves_traffic_through_envoy() {
    let Some(binary) = envoy_binary() else {
        return;
    };
    let (v1, v2, mirror) = (
        Echo::start("v1").await,
        Echo::start("v2").await,
        Echo::start("mirror").await,
    );
    let (http_port, https_port, tcp_port) = (free_port(), free_port(), free_port());
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/gateway-api");
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(&example).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let text = std::fs::read_to_string(&path)
                .unwrap()
                .replace("8080", &http_port.to_string())
                .replace("8443", &https_port.to_string())
                .replace("port: 9000", &format!("port: {tcp_port}"))
                .replace("8081", &v1.port.to_string())
                .replace("8082", &v2.port.to_string())
                .replace("8083", &mirror.port.to_string());
            write(
                dir.path(),
                &path.file_name().unwrap().to_string_lossy(),
                &text,
            );
        }
    }
    let admitpilot =
        Admitpilot::start_with_args(dir.path(), &["--xds-unauthenticated-secrets"]).await;
    let bootstrap = bootstrap(
        AdsApi::Sotw,
        admitpilot.xds_port,
        "router~127.0.0.1~public.web~web.svc.cluster.local",
    )
    .replace("NAMESPACE: default", "NAMESPACE: web")
    .replace(
        "LABELS: { app: e2e }",
        "LABELS: { gateway.networking.k8s.io/gateway-name: public }",
    );
    let envoy = EnvoyProcess::start(&binary, &bootstrap, 53_520).await;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let shop = |path: &str| {
        http.get(format!("http://127.0.0.1:{http_port}{path}"))
            .header("host", "shop.example.com")
    };
    let deadline = tokio::time::Instant::now() + CONVERGE;
    loop {
        if let Ok(r) = shop("/cart").send().await {
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
    let tester = send(&http, shop("/api/x").header("x-tester", "yes")).await;
    assert_eq!(tester.body["backend"], "v2");
    let cart = send(&http, shop("/cart").header("x-internal", "secret")).await;
    assert_eq!(cart.body["backend"], "v1");
    assert_eq!(cart.body["headers"]["x-gateway"], "admitpilot");
    assert!(cart.body["headers"]["x-internal"].is_null());
    assert_eq!(cart.headers["cache-control"], "no-store");
    let old = send(&http, shop("/old/x")).await;
    assert_eq!(
        (old.body["path"].as_str(), old.body["host"].as_str()),
        (Some("/new/x"), Some("new.example.com"))
    );
    let account = send(&http, shop("/account")).await;
    assert_eq!(account.status, 301);
    assert_eq!(
        account.headers["location"],
        format!("https://shop.example.com:{https_port}/account").as_str()
    );
    assert_eq!(send(&http, shop("/broken")).await.status, 500);
    let login = send(
        &http,
        http.post(format!("http://127.0.0.1:{http_port}/login?flow=sso"))
            .header("host", "shop.example.com"),
    )
    .await;
    assert_eq!(login.body["backend"], "v2");
    let other = send(
        &http,
        http.get(format!("http://127.0.0.1:{http_port}/"))
            .header("host", "other.example.org"),
    )
    .await;
    assert_eq!(other.body["backend"], "v1");
    // HTTPS with the example's certificate (self-signed: the client does not verify it here).
    let https = reqwest::Client::builder()
        .use_rustls_tls()
        .danger_accept_invalid_certs(true)
        .resolve("shop.example.com", ([127, 0, 0, 1], https_port).into())
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let secure = send(
        &https,
        https.get(format!("https://shop.example.com:{https_port}/api/x")),
    )
    .await;
    assert_eq!(secure.status, 200, "{:?}", secure.body);
    // The TCP listener: an HTTP request written as bytes reaches v1 unchanged.
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", tcp_port))
        .await
        .unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    tcp.write_all(b"GET /raw HTTP/1.0\r\nHost: raw\r\n\r\n")
        .await
        .unwrap();
    let mut reply = String::new();
    tcp.read_to_string(&mut reply).await.unwrap();
    assert!(reply.contains("\"backend\":\"v1\""), "{reply}");
    envoy.assert_nothing_rejected("the example folder").await;
}

/// ListenerSets: a set's listener (another port) joins the Gateway's in the gateway's config; a route naming the set
/// is served on the set's listener only, a route naming the Gateway on the Gateway's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listener_sets_add_listeners_to_their_gateway() {
    let Some(binary) = envoy_binary() else {
        return;
    };
    let (main, team) = (Echo::start("main").await, Echo::start("team").await);
    let (gateway_port, set_port) = (free_port(), free_port());
    let config = format!(
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: admitpilot}}
spec: {{controllerName: admitpilot.io/gateway-controller}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: default}}
spec:
  gatewayClassName: admitpilot
  allowedListeners: {{namespaces: {{from: Same}}}}
  listeners: [{{name: http, port: {gateway_port}, protocol: HTTP}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {{name: team, namespace: default}}
spec:
  parentRef: {{name: gw}}
  listeners: [{{name: team-http, port: {set_port}, protocol: HTTP}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: main, namespace: default}}
spec:
  parentRefs: [{{name: gw}}]
  rules: [{{backendRefs: [{{name: main, port: 80}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: team, namespace: default}}
spec:
  parentRefs: [{{kind: ListenerSet, name: team}}]
  rules: [{{backendRefs: [{{name: team, port: 80}}]}}]
"#
    );
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "gateway.yaml", &config);
    let services = [
        service("main", "default", main.port),
        service("team", "default", team.port),
    ]
    .join("---\n");
    write(dir.path(), "services.yaml", &services);
    let (_admitpilot, envoy) = serve_gateway(&binary, dir.path(), 53_530).await;
    let http = client();
    let backend_on = |port: u16| {
        let http = http.clone();
        async move {
            let deadline = tokio::time::Instant::now() + CONVERGE;
            loop {
                if let Ok(r) = http.get(format!("http://127.0.0.1:{port}/")).send().await {
                    if r.status() == 200 {
                        let body: Value = r.json().await.unwrap();
                        return body["backend"].as_str().unwrap_or_default().to_string();
                    }
                }
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "port {port} never answered"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    assert_eq!(backend_on(gateway_port).await, "main");
    assert_eq!(backend_on(set_port).await, "team");
    envoy.assert_nothing_rejected("listener sets").await;
}

/// Listener isolation (GatewayHTTPListenerIsolation): four HTTP listeners on one port, without a host name,
/// `*.shop.test`, `api.shop.test` and `*.docs.test`; a request is answered only by the routes of the most specific listener its host
/// matches, even when a route of a wider listener names that host too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_is_answered_by_its_most_specific_listener_only() {
    let Some(binary) = envoy_binary() else {
        return;
    };
    let backend = Echo::start("isolated").await;
    let port = free_port();
    let route = |name: &str, listener: &str, hostnames: &str| {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: {name}, namespace: default}}
spec:
  parentRefs: [{{name: gw, sectionName: {listener}}}]
  hostnames: {hostnames}
  rules: [{{matches: [{{path: {{type: PathPrefix, value: /{name}}}}}], backendRefs: [{{name: isolated, port: 80}}]}}]
"
        )
    };
    let config = [
        format!(
            "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: admitpilot}}
spec: {{controllerName: admitpilot.io/gateway-controller}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: default}}
spec:
  gatewayClassName: admitpilot
  listeners:
  - {{name: any, port: {port}, protocol: HTTP}}
  - {{name: shop, port: {port}, protocol: HTTP, hostname: '*.shop.test'}}
  - {{name: api, port: {port}, protocol: HTTP, hostname: api.shop.test}}
  - {{name: docs, port: {port}, protocol: HTTP, hostname: '*.docs.test'}}
"
        ),
        // Names hosts the two narrower listeners own: it answers only for other.test.
        route("wide", "any", "[other.test, '*.shop.test', api.shop.test]"),
        route("shop", "shop", "['*.test']"),
        route("api", "api", "[]"),
        // Every host on the listener without a host name; `*.docs.test` is the docs listener's even where its
        // routes do not go.
        route("catchall", "any", "[]"),
        route("docs", "docs", "[a.docs.test]"),
        service("isolated", "default", backend.port),
    ]
    .join("---\n");
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "gateway.yaml", &config);
    let (admitpilot, envoy) = serve_gateway(&binary, dir.path(), 53_540).await;
    let http = client();
    let status = |host: &'static str, path: &'static str| {
        let http = http.clone();
        async move {
            http.get(format!("http://127.0.0.1:{port}{path}"))
                .header("host", host)
                .send()
                .await
                .map(|r| r.status().as_u16())
                .unwrap_or(0)
        }
    };
    let deadline = tokio::time::Instant::now() + CONVERGE;
    while status("api.shop.test", "/api").await != 200 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "never converged:\n{}",
            admitpilot.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let expected = [
        ("other.test", "/wide", 200),
        ("other.test", "/shop", 404),
        ("www.shop.test", "/wide", 404),
        ("www.shop.test", "/shop", 200),
        ("www.shop.test", "/api", 404),
        ("api.shop.test", "/wide", 404),
        ("api.shop.test", "/shop", 404),
        ("api.shop.test", "/api", 200),
        ("elsewhere.test", "/catchall", 200),
        ("a.docs.test", "/docs", 200),
        ("a.docs.test", "/catchall", 404),
        ("b.docs.test", "/catchall", 404),
        ("www.shop.test", "/catchall", 404),
    ];
    for (host, path, code) in expected {
        assert_eq!(status(host, path).await, code, "{host}{path}");
    }
    envoy.assert_nothing_rejected("listener isolation").await;
}

/// Backend protocols and filters through real Envoy: a Service port whose `appProtocol` is `kubernetes.io/ws`
/// carries a WebSocket (the opening handshake and messages both ways, to a backend that speaks RFC 6455), and a
/// `RequestHeaderModifier` on one backendRef changes the requests that backend gets only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websockets_and_backend_filters_reach_their_backends() {
    let Some(binary) = envoy_binary() else {
        return;
    };
    let chat = support::websocket::WebSocketEcho::start().await;
    let (plain, marked) = (Echo::start("plain").await, Echo::start("marked").await);
    let port = free_port();
    let config = format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: admitpilot}}
spec: {{controllerName: admitpilot.io/gateway-controller}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: default}}
spec:
  gatewayClassName: admitpilot
  listeners: [{{name: http, port: {port}, protocol: HTTP}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: app, namespace: default}}
spec:
  parentRefs: [{{name: gw}}]
  rules:
  - matches: [{{path: {{type: PathPrefix, value: /chat}}}}]
    backendRefs: [{{name: chat, port: 80}}]
  - matches: [{{path: {{type: PathPrefix, value: /api}}}}]
    backendRefs:
    - {{name: plain, port: 80, weight: 1}}
    - name: marked
      port: 80
      weight: 1
      filters:
      - type: RequestHeaderModifier
        requestHeaderModifier: {{set: [{{name: x-backend, value: marked}}], remove: [x-drop]}}
---
{}---
{}---
{}",
        service_speaking("chat", "default", chat.port, ("ws", "kubernetes.io/ws")),
        service("plain", "default", plain.port),
        service("marked", "default", marked.port),
    );
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "gateway.yaml", &config);
    let (admitpilot, envoy) = serve_gateway(&binary, dir.path(), 53_570).await;
    let deadline = tokio::time::Instant::now() + CONVERGE;
    let reply = loop {
        let (status, reply) =
            support::websocket::exchange(port, "chat.test", "/chat", "hello").await;
        if reply.is_some() {
            break reply;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no WebSocket through the gateway (last answer {status:?}):\n{}",
            admitpilot.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(reply.as_deref(), Some("echo: hello"));
    // Half the requests go to each backend; only the marked one's have the filter's effect.
    let http = client();
    let mut seen = std::collections::BTreeMap::new();
    for _ in 0..40 {
        let answer = send(
            &http,
            http.get(format!("http://127.0.0.1:{port}/api"))
                .header("x-drop", "1"),
        )
        .await;
        let backend = answer.body["backend"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let headers = &answer.body["headers"];
        match backend.as_str() {
            "marked" => {
                assert_eq!(headers["x-backend"], "marked");
                assert!(headers["x-drop"].is_null(), "{headers}");
            }
            "plain" => {
                assert!(headers["x-backend"].is_null(), "{headers}");
                assert_eq!(headers["x-drop"], "1");
            }
            other => panic!("answered by {other:?}: {}", answer.body),
        }
        *seen.entry(backend).or_insert(0) += 1;
    }
    assert_eq!(seen.len(), 2, "both backends answer: {seen:?}");
    envoy
        .assert_nothing_rejected("websockets and backend filters")
        .await;
}
