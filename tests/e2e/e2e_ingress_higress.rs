//! Higress's own e2e Ingress cases (`test/e2e/conformance/tests` in alibaba/higress), end to end: the real
//! `admitpilot serve --config-dir` binary, a real Envoy 1.40 labelled as Higress's gateway
//! (`higress: higress-system-higress-gateway`) and echo backends on 127.0.0.1 standing for Higress's
//! `infra-backend-v1/v2/v3` and `infra-backend-mirror` (namespace `higress-conformance-infra`). The manifests are
//! written here from the cases' facts (setup → request → expected), one host per case (a case with no host gets
//! paths of its own); each request of the table is labelled with the case's ShortName. Higress's expected
//! behaviour is asserted; where admitpilot knowingly differs, the request is listed in [`KNOWN_DIFFERENCES`] (the
//! test fails when such a difference goes away, so the list stays true). At the end every `*update_rejected` stat
//! of Envoy is 0 and Envoy still runs.
//!
//! Cases left out, and why:
//! - `HttpRouteLimiter`: `higress.io/route-limit-rps`, `route-limit-rpm` and `route-limit-burst-multiplier` are
//!   warned, not enforced (no per-route local rate limit).
//! - `HTTPRouteDownstreamEncryption`: `auth-tls-secret` (client certificates) and `ssl-cipher` are warned, not
//!   enforced (per-host downstream TLS settings from annotations are not applied).
//! - `ConfigmapHttps`: the `higress-https` ConfigMap (certificates by domain, `fallbackForInvalidSecret`) is not
//!   read.
//! - `IngressLoadBalanceMcpSse`: `load-balance: mcp-sse` needs Higress's Envoy fork (its
//!   `mcp_sse_stateful_session` filter); admitpilot admits the value with a warning and uses the default balancer.
//! - `HTTPRouteExactDomainFallback`: Higress's ingress controller does not implement the fallback from an exact
//!   host to a wildcard host; its Istio fork's gateway does (see [`KNOWN_DIFFERENCES`]), and admitpilot does not.
//!   Its requests are still sent: the exact and the wildcard host answer as Higress expects, the fallback is a
//!   known difference.
//! - `ConfigMapGlobalEnvoy`, `configmap-gzip`, Http2Rpc, registries and Wasm plugins: not Ingress annotations.
//!
//! Skips with a message when Envoy is not installed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::echo;
use support::envoy;
use support::pipeline;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use echo::*;
use envoy::*;
use pipeline::*;
use serde_json::{json, Value};

const NODE_ID: &str = "router~127.0.0.1~higress-gateway.default~default.svc.cluster.local";
/// Higress's test namespace, where every Ingress, Service and Secret of this test is.
const NS: &str = "higress-conformance-infra";
const V1: &str = "infra-backend-v1";
const V2: &str = "infra-backend-v2";
const V3: &str = "infra-backend-v3";
const MIRROR: &str = "infra-backend-mirror";
/// The hosts served over TLS (the certificate's names).
const TLS_HOSTS: [&str; 3] = [
    "ssl-redirect.test.com",
    "force-ssl-redirect.test.com",
    "foo.without-sni.example",
];

/// Requests whose Higress expectation admitpilot knowingly does not meet: the request (`<ShortName>: <request
/// of CASES>`), the status admitpilot answers instead, and why. Both come from one difference in how the gateway
/// picks routes: Higress's Istio fork (`higress-group/istio`, branch `istio-1.19`, with `ENBALE_SCOPED_RDS` and
/// `HOST_RDS_MERGE_SUBSET`, both on by default) gives every HTTP connection manager scoped RDS keyed by (listener
/// port, Host), and builds the route configuration of a host from the VirtualServices of that host followed by
/// those of every wildcard host covering it (`buildHostRDSConfig`, `pilot/pkg/networking/core/v1alpha3/gateway.go`);
/// admitpilot serves Istio's gateway model (one route configuration per HTTPS server, virtual hosts by exact or
/// wildcard domain).
const KNOWN_DIFFERENCES: &[(&str, u16, &str)] = &[
    (
        "HTTPHttpsWithoutSni: GET https-no-sni://foo.without-sni.example/foo",
        404,
        "without SNI the TLS handshake lands on the filter chain without server names (the HTTPS server of host `*`, \
         from the TLS entry without hosts, with its Secret); that chain's route configuration \
         (`https.<port>.https-<port>-ingress.ingress~*.<namespace>`) holds only the `*` virtual host, whose routes \
         have no /foo: 404. Higress picks the routes by the Host header whatever the filter chain.",
    ),
    (
        "HTTPRouteExactDomainFallback: GET www.fallback.example/foo",
        404,
        "the virtual host www.fallback.example has only its own Ingress's routes (Exact /bar): 404. Higress appends \
         the routes of *.fallback.example (and of `*`) to www.fallback.example's route configuration, after its own.",
    ),
];

macro_rules! nginx {
    ($key:literal) => {
        concat!("nginx.ingress.kubernetes.io/", $key)
    };
}
macro_rules! higress {
    ($key:literal) => {
        concat!("higress.io/", $key)
    };
}

/// An Ingress rule: its host (`""`: none) and its paths as `(path, pathType, service)`.
type Rule<'a> = (&'a str, &'a [(&'a str, &'a str, &'a str)]);

/// An Ingress of class `higress` in [`NS`] (JSON, which is YAML); backends on port 80.
fn ingress(name: &str, annotations: &[(&str, &str)], rules: &[Rule<'_>]) -> Value {
    let rules: Vec<Value> = rules
        .iter()
        .map(|(host, paths)| {
            let paths: Vec<Value> = paths
                .iter()
                .map(|(path, kind, service)| {
                    json!({"path": path, "pathType": kind,
                        "backend": {"service": {"name": service, "port": {"number": 80}}}})
                })
                .collect();
            let mut rule = json!({"http": {"paths": paths}});
            if !host.is_empty() {
                rule["host"] = json!(host);
            }
            rule
        })
        .collect();
    let annotations: serde_json::Map<String, Value> = annotations
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": name, "namespace": NS, "annotations": annotations},
        "spec": {"ingressClassName": "higress", "rules": rules}})
}

/// `ingress` with a TLS entry for `hosts` (none: every host) with the Secret `secret`.
fn with_tls(mut ingress: Value, hosts: &[&str], secret: &str) -> Value {
    let mut entry = json!({"secretName": secret});
    if !hosts.is_empty() {
        entry["hosts"] = json!(hosts);
    }
    ingress["spec"]["tls"] = json!([entry]);
    ingress
}

/// Every Ingress of the test, oldest first (each created a second after the one before).
fn ingresses() -> String {
    let mut out = Vec::new();
    let prefix = |path| (path, "Prefix", V1);
    // HTTPRouteSimpleSameNamespace: no host.
    out.push(ingress(
        "simple-same-namespace",
        &[],
        &[("", &[("/hello-world", "Prefix", V1)])],
    ));
    // HTTPRouteHostNameSameNamespace: Higress's own host names (no other case uses foo.com, bar.com, *.bar.com).
    out.push(ingress(
        "hostname-same-namespace",
        &[],
        &[
            ("foo.com", &[("/foo", "Prefix", V1), ("/bar", "Prefix", V2)]),
            ("bar.com", &[("/foo", "Prefix", V2), ("/bar", "Prefix", V3)]),
            ("*.bar.com", &[("/any", "Prefix", V1)]),
            ("api.bar.com", &[("/bar", "Prefix", V2)]),
            ("api-bar.com", &[("/bar", "Prefix", V3)]),
        ],
    ));
    // HTTPRouteMatchPath.
    out.push(ingress(
        "match-path",
        &[],
        &[(
            "match-path.example",
            &[
                ("/foo", "Prefix", V2),
                ("/foo", "Exact", V1),
                ("/bar", "Prefix", V2),
                ("/cat/", "Prefix", V3),
            ],
        )],
    ));
    // HTTPRouteEnableIgnoreCase.
    out.push(ingress(
        "ignore-case",
        &[(higress!("ignore-path-case"), "true")],
        &[(
            "ignore-case.example",
            &[
                ("/foo", "Exact", V1),
                ("/bar", "Prefix", V2),
                ("/cat/", "Prefix", V3),
            ],
        )],
    ));
    // HTTPRouteFullPathRegex: no host; a prefix regex and a full-path regex.
    out.push(ingress(
        "use-regex",
        &[(nginx!("use-regex"), "true")],
        &[("", &[("/foo/[A-Z0-9]{3}", "ImplementationSpecific", V1)])],
    ));
    out.push(ingress(
        "full-path-regex",
        &[(higress!("full-path-regex"), "true")],
        &[("", &[("/bar/[A-Z0-9]{3}", "ImplementationSpecific", V2)])],
    ));
    // HTTPRouteRewritePath: rewrite-target alone makes a path with regex characters a regex.
    out.push(ingress(
        "rewrite-path",
        &[(nginx!("rewrite-target"), "/$1")],
        &[(
            "rewrite-path.example",
            &[("/svc/(.*)", "ImplementationSpecific", V1)],
        )],
    ));
    // HTTPRouteRewriteHost.
    out.push(ingress(
        "rewrite-host",
        &[(nginx!("upstream-vhost"), "higress.io")],
        &[
            ("foo.rewrite-host.example", &[("/foo", "Prefix", V1)]),
            ("bar.rewrite-host.example", &[("/foo", "Prefix", V2)]),
        ],
    ));
    // HTTPRouteAppRoot, HTTPRoutePermanentRedirect, HTTPRoutePermanentRedirectCode, HTTPRouteTemporalRedirect.
    out.push(ingress(
        "app-root",
        &[(nginx!("app-root"), "/foo")],
        &[("app-root.example", &[prefix("/")])],
    ));
    out.push(ingress(
        "permanent-redirect",
        &[(nginx!("permanent-redirect"), "http://bar.com")],
        &[("permanent-redirect.example", &[prefix("/foo")])],
    ));
    out.push(ingress(
        "permanent-redirect-code",
        &[
            (nginx!("permanent-redirect"), "http://bar.com"),
            (nginx!("permanent-redirect-code"), "308"),
        ],
        &[("permanent-redirect-code.example", &[prefix("/foo")])],
    ));
    out.push(ingress(
        "temporal-redirect",
        &[(nginx!("temporal-redirect"), "http://bar.com")],
        &[("temporal-redirect.example", &[prefix("/foo")])],
    ));
    // HttpRedirectAsHttps, HttpForceRedirectHttps: TLS hosts with a Secret.
    out.push(with_tls(
        ingress(
            "ssl-redirect",
            &[(nginx!("ssl-redirect"), "true")],
            &[("ssl-redirect.test.com", &[prefix("/")])],
        ),
        &["ssl-redirect.test.com"],
        "test-secret",
    ));
    out.push(with_tls(
        ingress(
            "force-ssl-redirect",
            &[(nginx!("force-ssl-redirect"), "true")],
            &[("force-ssl-redirect.test.com", &[prefix("/")])],
        ),
        &["force-ssl-redirect.test.com"],
        "test-secret",
    ));
    // HTTPRouteCanaryHeader: a main Ingress, a canary by header value, a canary by header pattern.
    out.push(ingress(
        "canary-header",
        &[],
        &[(
            "canary-header.example",
            &[
                ("/echo", "Exact", V2),
                ("/foo", "Exact", V3),
                ("/foo", "Prefix", V3),
                ("/baz", "Prefix", V2),
            ],
        )],
    ));
    out.push(ingress(
        "canary-header-value",
        &[
            (nginx!("canary"), "true"),
            (nginx!("canary-by-header"), "traffic-split-higress"),
            (nginx!("canary-by-header-value"), "true"),
        ],
        &[(
            "canary-header.example",
            &[
                ("/echo", "Exact", V1),
                ("/foo", "Exact", V2),
                ("/foo", "Prefix", V1),
            ],
        )],
    ));
    out.push(ingress(
        "canary-header-pattern",
        &[
            (nginx!("canary"), "true"),
            (nginx!("canary-by-header"), "traffic-split-higress"),
            (nginx!("canary-by-header-pattern"), "test.com"),
        ],
        &[("canary-header.example", &[("/baz", "Prefix", V1)])],
    ));
    // HTTPRouteCanaryHeaderWithCustomizedHeader: a canary without the main's match-header finds no main route;
    // one repeating it does.
    let canary = [
        (nginx!("canary"), "true"),
        (nginx!("canary-by-header"), "traffic-split-higress"),
        (nginx!("canary-by-header-value"), "true"),
    ];
    out.push(ingress(
        "canary-customized-main",
        &[(higress!("exact-match-header-abc"), "123")],
        &[("canary.higress.io", &[("/echo", "Exact", V2)])],
    ));
    out.push(ingress(
        "canary-customized",
        &canary,
        &[("canary.higress.io", &[("/echo", "Exact", V1)])],
    ));
    out.push(ingress(
        "same-canary-main",
        &[(higress!("exact-match-header-user"), "higress")],
        &[("same.canary.higress.io", &[("/echo", "Exact", V2)])],
    ));
    let mut same = canary.to_vec();
    same.push((higress!("exact-match-header-user"), "higress"));
    out.push(ingress(
        "same-canary",
        &same,
        &[("same.canary.higress.io", &[("/echo", "Exact", V1)])],
    ));
    // HTTPRouteCanaryWeight.
    out.push(ingress(
        "canary-weight",
        &[],
        &[(
            "canary-weight.example",
            &[("/weight-0", "Exact", V1), ("/weight-100", "Exact", V1)],
        )],
    ));
    for (weight, path, service) in [("0", "/weight-0", V3), ("100", "/weight-100", V2)] {
        out.push(ingress(
            &format!("canary-weight-{weight}"),
            &[
                (nginx!("canary"), "true"),
                (nginx!("canary-weight"), weight),
            ],
            &[("canary-weight.example", &[(path, "Exact", service)])],
        ));
    }
    // HTTPRouteEnableCors: off, defaults, everything set.
    out.push(ingress(
        "cors-foo1",
        &[(nginx!("enable-cors"), "false")],
        &[("foo1.cors.example", &[prefix("/")])],
    ));
    out.push(ingress(
        "cors-foo2",
        &[(nginx!("enable-cors"), "true")],
        &[("foo2.cors.example", &[prefix("/")])],
    ));
    out.push(ingress(
        "cors-foo3",
        &[
            (nginx!("enable-cors"), "true"),
            (nginx!("cors-allow-methods"), "POST"),
            (nginx!("cors-allow-headers"), "Host,Origin"),
            (nginx!("cors-expose-headers"), "*"),
            (nginx!("cors-allow-origin"), "http://bar.com"),
            (nginx!("cors-allow-credentials"), "true"),
            (nginx!("cors-max-age"), "60"),
        ],
        &[("foo3.cors.example", &[prefix("/")])],
    ));
    // HTTPRouteDefaultBackend: the backend Service does not exist.
    out.push(ingress(
        "default-backend",
        &[(nginx!("default-backend"), V1)],
        &[(
            "default-backend.example",
            &[("/foo", "Prefix", "non-existent")],
        )],
    ));
    // HTTPRouteMirrorTargetService.
    out.push(ingress(
        "mirror",
        &[(nginx!("mirror-target-service"), MIRROR)],
        &[("mirror.example", &[prefix("/mirror")])],
    ));
    // HTTPRouteMatchHeaders, HTTPRouteMatchQueryParams, HTTPRouteMatchMethods.
    out.push(ingress(
        "match-headers",
        &[
            (higress!("exact-match-header-abc"), "123"),
            (
                higress!("regex-match-header-content-type"),
                "application/(json|xml)",
            ),
            (higress!("prefix-match-header-user-id"), "10086-1"),
        ],
        &[("match-headers.example", &[("/foo", "Exact", V1)])],
    ));
    out.push(ingress(
        "match-query",
        &[
            (higress!("exact-match-query-abc"), "123"),
            (
                higress!("regex-match-query-content-type"),
                "application/(json|xml)",
            ),
            (higress!("prefix-match-query-user-id"), "10086-1"),
        ],
        &[("match-query.example", &[("/foo", "Exact", V1)])],
    ));
    out.push(ingress(
        "match-methods",
        &[(higress!("match-method"), "POST PUT PATCH")],
        &[("match-methods.example", &[("/foo", "Exact", V1)])],
    ));
    // HTTPRouteMatchPseudoHeaders: Higress's own wildcard host (no other case uses *.foo.com).
    out.push(ingress(
        "pseudo-authority-exact",
        &[(
            higress!("exact-match-pseudo-header-authority"),
            "test.foo.com",
        )],
        &[("*.foo.com", &[("/v1", "Prefix", V1)])],
    ));
    out.push(ingress(
        "pseudo-authority-regex",
        &[(
            higress!("regex-match-pseudo-header-authority"),
            r"test.+\.foo\.com",
        )],
        &[("*.foo.com", &[("/v2", "Prefix", V2)])],
    ));
    out.push(ingress(
        "pseudo-path-prefix",
        &[(higress!("prefix-match-pseudo-header-path"), "/v3/bar")],
        &[("*.foo.com", &[("/v3", "Prefix", V3)])],
    ));
    // HTTPRouteSameHostAndPath: the fourth Ingress repeats the first's key (headers in another order), is newer,
    // and is left out.
    for (name, headers, path, service) in [
        (
            "same-1",
            &[("abc", "123"), ("def", "456")][..],
            "/hello-world",
            V1,
        ),
        (
            "same-2",
            &[("abc", "123"), ("def", "def")][..],
            "/hello-world",
            V2,
        ),
        ("same-3", &[("abc", "123")][..], "/hello-world", V3),
        (
            "same-4",
            &[("def", "456"), ("abc", "123")][..],
            "/hello-world",
            V2,
        ),
        ("same-root", &[][..], "/", V1),
        ("same-root-abc", &[("abc", "123")][..], "/", V2),
    ] {
        let keys: Vec<String> = headers
            .iter()
            .map(|(k, _)| format!("higress.io/exact-match-header-{k}"))
            .collect();
        let annotations: Vec<(&str, &str)> = keys
            .iter()
            .zip(headers)
            .map(|(k, (_, v))| (k.as_str(), *v))
            .collect();
        out.push(ingress(
            name,
            &annotations,
            &[("same-host-path.example", &[(path, "Prefix", service)])],
        ));
    }
    // HTTPRouteRequestHeaderControl.
    for (path, key, value) in [
        (
            "/foo1",
            higress!("request-header-control-add"),
            "stage test",
        ),
        (
            "/foo2",
            higress!("request-header-control-add"),
            "stage test\ncanary true",
        ),
        (
            "/foo3",
            higress!("request-header-control-add"),
            "x-test \"higress; test=true\"\n'x-test2' \"higress; test=false\"",
        ),
        (
            "/foo4",
            higress!("request-header-control-update"),
            "stage pro",
        ),
        ("/foo5", higress!("request-header-control-remove"), "stage"),
        (
            "/foo6",
            higress!("request-header-control-remove"),
            "stage,canary",
        ),
    ] {
        out.push(ingress(
            &format!("request-header-control{}", path.replace('/', "-")),
            &[(key, value)],
            &[("request-header-control.example", &[prefix(path)])],
        ));
    }
    // HTTPRouteResponseHeaderControl.
    for (path, value) in [
        ("/foo1", "stage test"),
        (
            "/foo2",
            "stage test\ncanary true\nx-test \"higress; test=true\"\n'x-test2' \"higress; test=false\"",
        ),
    ] {
        out.push(ingress(
            &format!("response-header-control{}", path.replace('/', "-")),
            &[(higress!("response-header-control-add"), value)],
            &[("response-header-control.example", &[prefix(path)])],
        ));
    }
    // HTTPRouteWhitelistSourceRange: the client (127.0.0.1) is not 1.1.1.1; `*` restricts nothing.
    out.push(ingress(
        "whitelist-foo",
        &[(nginx!("whitelist-source-range"), "1.1.1.1")],
        &[("foo.whitelist.example", &[prefix("/foo")])],
    ));
    out.push(ingress(
        "whitelist-bar",
        &[(nginx!("whitelist-source-range"), "*")],
        &[("bar.whitelist.example", &[prefix("/bar")])],
    ));
    // HttpTimeout: 1 s (the echo backend answers /slow after 2 s).
    out.push(ingress(
        "timeout",
        &[(higress!("timeout"), "1")],
        &[("timeout.example", &[prefix("/")])],
    ));
    // HTTPHttpsWithoutSni: A's TLS has no hosts (so serves `*`) and its rule no host; B's TLS names its host.
    // Higress's A routes `/`; here a path of its own, so the no-host 404s of the other cases stay 404s.
    out.push(with_tls(
        ingress(
            "https-without-sni-a",
            &[],
            &[("", &[prefix("/https-without-sni")])],
        ),
        &[],
        "default-secret",
    ));
    out.push(with_tls(
        ingress(
            "https-without-sni-b",
            &[],
            &[("foo.without-sni.example", &[("/foo", "Exact", V2)])],
        ),
        &["foo.without-sni.example"],
        "foo-secret",
    ));
    // HTTPRouteExactDomainFallback (not a conformance claim, see the module doc).
    out.push(ingress(
        "exact-domain-fallback-a",
        &[],
        &[("*.fallback.example", &[prefix("/")])],
    ));
    out.push(ingress(
        "exact-domain-fallback-b",
        &[],
        &[("www.fallback.example", &[("/bar", "Exact", V2)])],
    ));
    out.iter_mut()
        .enumerate()
        .map(|(i, ingress)| {
            ingress["metadata"]["creationTimestamp"] =
                json!(format!("2026-01-01T00:{:02}:{:02}Z", i / 60, i % 60));
            ingress.to_string()
        })
        .collect::<Vec<_>>()
        .join("\n---\n")
}

/// A CA (PEM) and a certificate it signed for [`TLS_HOSTS`] (PEM, key PEM).
fn certificate_for_hosts() -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(TLS_HOSTS.map(String::from).to_vec())
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    (ca.pem(), leaf.pem(), leaf_key.serialize_pem())
}

/// A `kubernetes.io/tls` Secret `name` in [`NS`].
fn tls_secret(name: &str, cert: &str, key: &str) -> String {
    use base64::Engine;
    let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: {name}, namespace: {NS}}}\ntype: kubernetes.io/tls\ndata:\n  tls.crt: {}\n  tls.key: {}\n",
        b64(cert),
        b64(key)
    )
}

/// The mirror backend: answers 200 and records the path of every request it gets.
struct Recorder {
    port: u16,
    paths: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Recorder {
    async fn start() -> Recorder {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let paths = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&paths);
        let app = axum::Router::new().fallback(move |uri: axum::http::Uri| {
            let seen = Arc::clone(&seen);
            async move {
                seen.lock().unwrap().push(uri.path().to_string());
                "mirrored"
            }
        });
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Recorder { port, paths, task }
    }

    fn saw(&self, path: &str) -> bool {
        self.paths.lock().unwrap().iter().any(|p| p == path)
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// How a request reaches the gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    /// Plain HTTP on the HTTP port, Host header set.
    Http,
    /// HTTPS on the HTTPS port with SNI (and Host) the host.
    Https,
    /// HTTPS to `127.0.0.1` (an IP: no SNI), Host header the host.
    HttpsNoSni,
}

/// What a reply must show.
#[derive(Debug, Clone, Copy)]
enum Want {
    /// 200 from this backend.
    To(&'static str),
    /// This status (the backend is not checked, as Higress checks it only on 200).
    Status(u16),
    /// A redirect: this status and `Location`.
    Redirect(u16, &'static str),
    /// The backend saw this path.
    Path(&'static str),
    /// The backend saw this Host.
    Host(&'static str),
    /// The backend saw this request header with this value.
    Seen(&'static str, &'static str),
    /// The backend did not see this request header.
    Unseen(&'static str),
    /// The response has this header with this value.
    Header(&'static str, &'static str),
    /// The response has no `access-control-*` header.
    NoCors,
}

/// The requests of one case (its ShortName): each written `METHOD TARGET [name:value …]`, where the target is
/// `host/path` over HTTP, `https://host/path` over HTTPS with SNI, `https-no-sni://host/path` over HTTPS to
/// 127.0.0.1 (an IP: no SNI) with that Host, or `/path` with no Host set; and what its reply must show.
type Case = (&'static str, &'static [(&'static str, &'static [Want])]);

/// Every request, case by case, with Higress's expectations.
const CASES: &[Case] = {
    use Want::*;
    &[
        ("HTTPRouteSimpleSameNamespace", &[("GET /hello-world", &[To(V1)])]),
        (
            "HTTPRouteHostNameSameNamespace",
            &[
                ("GET foo.com/foo", &[To(V1)]),
                ("GET foo.com/bar", &[To(V2)]),
                ("GET bar.com/foo", &[To(V2)]),
                ("GET bar.com/bar", &[To(V3)]),
                ("GET any.bar.com/any", &[To(V1)]),
                ("GET api.bar.com/bar", &[To(V2)]),
                ("GET api-bar.com/bar", &[To(V3)]),
            ],
        ),
        (
            "HTTPRouteMatchPath",
            &[
                ("GET match-path.example/foo", &[To(V1)]),
                ("GET match-path.example/bar", &[To(V2)]),
                ("GET match-path.example/bard", &[Status(404)]),
                ("GET match-path.example/cat", &[To(V3)]),
                ("GET match-path.example/cat/ok", &[To(V3)]),
                ("GET match-path.example/foo/", &[To(V2)]),
            ],
        ),
        (
            "HTTPRouteEnableIgnoreCase",
            &[
                ("GET ignore-case.example/foo", &[To(V1)]),
                ("GET ignore-case.example/fOO", &[To(V1)]),
                ("GET ignore-case.example/BAR", &[To(V2)]),
                ("GET ignore-case.example/CAT/ok", &[To(V3)]),
            ],
        ),
        (
            "HTTPRouteFullPathRegex",
            &[
                ("GET /foo/1234", &[To(V1)]),
                ("GET /bar/123", &[To(V2)]),
                ("GET /bar/1234", &[Status(404)]),
            ],
        ),
        (
            "HTTPRouteRewritePath",
            &[("GET rewrite-path.example/svc/foo", &[To(V1), Path("/foo")])],
        ),
        (
            "HTTPRouteRewriteHost",
            &[
                ("GET foo.rewrite-host.example/foo", &[To(V1), Host("higress.io")]),
                ("GET bar.rewrite-host.example/foo", &[To(V2), Host("higress.io")]),
            ],
        ),
        (
            "HTTPRouteAppRoot",
            &[("GET app-root.example/", &[Redirect(302, "http://app-root.example/foo")])],
        ),
        (
            "HTTPRoutePermanentRedirect",
            &[("GET permanent-redirect.example/foo", &[Redirect(301, "http://bar.com/foo")])],
        ),
        (
            "HTTPRoutePermanentRedirectCode",
            &[("GET permanent-redirect-code.example/foo", &[Redirect(308, "http://bar.com/foo")])],
        ),
        (
            "HTTPRouteTemporalRedirect",
            &[("GET temporal-redirect.example/foo", &[Redirect(302, "http://bar.com/foo")])],
        ),
        // On the HTTPS port Higress's gateway does not redirect (`IgnoreRedirect`).
        (
            "HttpRedirectAsHttps",
            &[
                ("GET ssl-redirect.test.com/test", &[Redirect(308, "https://ssl-redirect.test.com/test")]),
                ("GET https://ssl-redirect.test.com/test", &[To(V1)]),
            ],
        ),
        (
            "HttpForceRedirectHttps",
            &[
                ("GET force-ssl-redirect.test.com/test", &[Redirect(308, "https://force-ssl-redirect.test.com/test")]),
                ("GET https://force-ssl-redirect.test.com/test", &[To(V1)]),
            ],
        ),
        (
            "HTTPRouteCanaryHeader",
            &[
                ("GET canary-header.example/echo traffic-split-higress:true", &[To(V1)]),
                ("GET canary-header.example/echo", &[To(V2)]),
                ("GET canary-header.example/foo traffic-split-higress:true", &[To(V2)]),
                ("GET canary-header.example/foo/bar traffic-split-higress:true", &[To(V1)]),
                ("GET canary-header.example/foo", &[To(V3)]),
                ("GET canary-header.example/foo/bar", &[To(V3)]),
                ("GET canary-header.example/baz traffic-split-higress:test.com", &[To(V1)]),
                ("GET canary-header.example/baz traffic-split-higress:test.com.abc", &[To(V1)]),
                ("GET canary-header.example/baz", &[To(V2)]),
                ("GET canary-header.example/baz traffic-split-higress:test.org", &[To(V2)]),
            ],
        ),
        (
            "HTTPRouteCanaryHeaderWithCustomizedHeader",
            &[
                ("GET canary.higress.io/echo traffic-split-higress:true", &[Status(404)]),
                ("GET canary.higress.io/echo", &[Status(404)]),
                ("GET canary.higress.io/echo abc:123", &[To(V2)]),
                ("GET same.canary.higress.io/echo traffic-split-higress:true user:higress", &[To(V1)]),
                ("GET same.canary.higress.io/echo user:higress", &[To(V2)]),
            ],
        ),
        // Each sent 10 times.
        (
            "HTTPRouteCanaryWeight",
            &[
                ("GET canary-weight.example/weight-0", &[To(V1)]),
                ("GET canary-weight.example/weight-100", &[To(V2)]),
            ],
        ),
        (
            "HTTPRouteEnableCors",
            &[
                ("OPTIONS foo1.cors.example/ origin:http://bar.com", &[To(V1), NoCors]),
                (
                    "OPTIONS foo2.cors.example/ origin:http://bar.com",
                    &[
                        Status(200),
                        Header("access-control-allow-origin", "http://bar.com"),
                        Header("access-control-allow-credentials", "true"),
                    ],
                ),
                (
                    "OPTIONS foo3.cors.example/ origin:http://bar.com",
                    &[
                        Status(200),
                        Header("access-control-allow-origin", "http://bar.com"),
                        Header("access-control-allow-credentials", "true"),
                        Header("access-control-expose-headers", "*"),
                    ],
                ),
                ("OPTIONS foo3.cors.example/ origin:http://foo.com", &[Status(200), NoCors]),
            ],
        ),
        ("HTTPRouteDefaultBackend", &[("GET default-backend.example/foo", &[To(V1)])]),
        // The mirror's copy is checked after the table.
        ("HTTPRouteMirrorTargetService", &[("GET mirror.example/mirror", &[To(V1)])]),
        (
            "HTTPRouteMatchHeaders",
            &[
                ("GET match-headers.example/foo", &[Status(404)]),
                ("GET match-headers.example/foo abc:12", &[Status(404)]),
                (
                    "GET match-headers.example/foo abc:12 content-type:application/json user-id:10086-1-1",
                    &[Status(404)],
                ),
                (
                    "GET match-headers.example/foo abc:123 content-type:application/json user-id:10086-1-1",
                    &[To(V1)],
                ),
                (
                    "GET match-headers.example/foo abc:123 content-type:application/xml user-id:10086-1",
                    &[To(V1)],
                ),
            ],
        ),
        (
            "HTTPRouteMatchQueryParams",
            &[
                ("GET match-query.example/foo", &[Status(404)]),
                (
                    "GET match-query.example/foo?abc=12&content-type=application/json&user-id=10086-1-1",
                    &[Status(404)],
                ),
                (
                    "GET match-query.example/foo?abc=123&content-type=application/json&user-id=10086-1-1",
                    &[To(V1)],
                ),
            ],
        ),
        (
            "HTTPRouteMatchMethods",
            &[
                ("GET match-methods.example/foo", &[Status(404)]),
                ("POST match-methods.example/foo", &[To(V1)]),
                ("PUT match-methods.example/foo", &[To(V1)]),
                ("PATCH match-methods.example/foo", &[To(V1)]),
            ],
        ),
        (
            "HTTPRouteMatchPseudoHeaders",
            &[
                ("GET bad.foo.com/v1", &[Status(404)]),
                ("GET test.foo.com/v1", &[To(V1)]),
                ("GET test.foo.com/v2", &[Status(404)]),
                ("GET test2.foo.com/v2", &[To(V2)]),
                ("GET bar.foo.com/v3", &[Status(404)]),
                ("GET bar.foo.com/v3/bar", &[To(V3)]),
            ],
        ),
        (
            "HTTPRouteSameHostAndPath",
            &[
                ("GET same-host-path.example/hello-world abc:123 def:456", &[To(V1)]),
                ("GET same-host-path.example/hello-world abc:123 def:def", &[To(V2)]),
                ("GET same-host-path.example/hello-world abc:123", &[To(V3)]),
                ("GET same-host-path.example/ abc:123", &[To(V2)]),
                ("GET same-host-path.example/", &[To(V1)]),
            ],
        ),
        (
            "HTTPRouteRequestHeaderControl",
            &[
                ("GET request-header-control.example/foo1", &[To(V1), Seen("stage", "test")]),
                (
                    "GET request-header-control.example/foo2",
                    &[To(V1), Seen("stage", "test"), Seen("canary", "true")],
                ),
                (
                    "GET request-header-control.example/foo3",
                    &[
                        To(V1),
                        Seen("x-test", "higress; test=true"),
                        Seen("x-test2", "higress; test=false"),
                    ],
                ),
                ("GET request-header-control.example/foo4 stage:test", &[To(V1), Seen("stage", "pro")]),
                ("GET request-header-control.example/foo5 stage:test", &[To(V1), Unseen("stage")]),
                (
                    "GET request-header-control.example/foo6 stage:test canary:true",
                    &[To(V1), Unseen("stage"), Unseen("canary")],
                ),
            ],
        ),
        (
            "HTTPRouteResponseHeaderControl",
            &[
                ("GET response-header-control.example/foo1", &[To(V1), Header("stage", "test")]),
                (
                    "GET response-header-control.example/foo2",
                    &[
                        To(V1),
                        Header("stage", "test"),
                        Header("canary", "true"),
                        Header("x-test", "higress; test=true"),
                        Header("x-test2", "higress; test=false"),
                    ],
                ),
            ],
        ),
        (
            "HTTPRouteWhitelistSourceRange",
            &[
                ("GET foo.whitelist.example/foo", &[Status(403)]),
                ("GET bar.whitelist.example/bar", &[To(V1)]),
            ],
        ),
        // The backend answers /slow after 2 s; the route's timeout is 1 s.
        (
            "HttpTimeout",
            &[
                ("GET timeout.example/slow", &[Status(504)]),
                ("GET timeout.example/fast", &[To(V1)]),
            ],
        ),
        (
            "HTTPHttpsWithoutSni",
            &[
                ("GET https://foo.without-sni.example/foo", &[To(V2)]),
                ("GET https-no-sni://foo.without-sni.example/foo", &[To(V2)]),
            ],
        ),
        (
            "HTTPRouteExactDomainFallback",
            &[
                ("GET www.fallback.example/bar", &[To(V2)]),
                ("GET www.fallback.example/foo", &[To(V1)]),
                ("GET other.fallback.example/foo", &[To(V1)]),
            ],
        ),
    ]
};

/// A request of [`CASES`], parsed.
struct Request<'a> {
    via: Via,
    method: reqwest::Method,
    /// `""`: none set.
    host: &'a str,
    path: &'a str,
    headers: Vec<(&'a str, &'a str)>,
}

impl<'a> Request<'a> {
    fn parse(text: &'a str) -> Request<'a> {
        let mut words = text.split_whitespace();
        let method = reqwest::Method::from_bytes(words.next().unwrap().as_bytes()).unwrap();
        let target = words.next().unwrap();
        let (via, target) = if let Some(t) = target.strip_prefix("https://") {
            (Via::Https, t)
        } else if let Some(t) = target.strip_prefix("https-no-sni://") {
            (Via::HttpsNoSni, t)
        } else {
            (Via::Http, target)
        };
        let (host, path) = target.split_at(target.find('/').unwrap());
        let headers = words.map(|h| h.split_once(':').unwrap()).collect();
        Request {
            via,
            method,
            host,
            path,
            headers,
        }
    }
}

/// The gateway's clients and addresses.
struct Gateway {
    http: reqwest::Client,
    https: reqwest::Client,
    no_sni: reqwest::Client,
    http_port: u16,
    https_port: u16,
}

impl Gateway {
    /// Sends a request of [`CASES`]; `Err` when no reply came (connection, TLS).
    async fn send(&self, text: &str) -> Result<Reply, String> {
        let r = Request::parse(text);
        let (http_port, https_port) = (self.http_port, self.https_port);
        let mut request = match r.via {
            Via::Http => self
                .http
                .request(r.method, format!("http://127.0.0.1:{http_port}{}", r.path)),
            Via::Https => self.https.request(
                r.method,
                format!("https://{}:{https_port}{}", r.host, r.path),
            ),
            Via::HttpsNoSni => self.no_sni.request(
                r.method,
                format!("https://127.0.0.1:{https_port}{}", r.path),
            ),
        };
        if !r.host.is_empty() && r.via != Via::Https {
            request = request.header("host", r.host);
        }
        for (k, v) in r.headers {
            request = request.header(k, v);
        }
        let response = request.send().await.map_err(|e| format!("{e:?}"))?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let text = response.text().await.map_err(|e| format!("{e:?}"))?;
        Ok(Reply {
            status,
            headers,
            body: serde_json::from_str(&text).unwrap_or(Value::String(text)),
        })
    }
}

/// What in `reply` does not match `want` (empty: all matched).
fn mismatches(reply: &Reply, want: &[Want]) -> Vec<String> {
    let seen = &reply.body["headers"];
    let header = |name: &str| {
        reply
            .headers
            .get(name)
            .map(|v| v.to_str().unwrap_or_default().to_string())
    };
    let mut out = Vec::new();
    for w in want {
        let ok = match *w {
            Want::To(backend) => reply.status == 200 && reply.body["backend"] == backend,
            Want::Status(status) => reply.status == status,
            Want::Redirect(status, location) => {
                reply.status == status && header("location").as_deref() == Some(location)
            }
            Want::Path(path) => reply.body["path"] == path,
            Want::Host(host) => reply.body["host"] == host,
            Want::Seen(name, value) => seen[name] == value,
            Want::Unseen(name) => seen.get(name).is_none(),
            Want::Header(name, value) => header(name).as_deref() == Some(value),
            Want::NoCors => !reply
                .headers
                .keys()
                .any(|k| k.as_str().starts_with("access-control-")),
        };
        if !ok {
            out.push(format!("{w:?}"));
        }
    }
    out
}

/// A reply in short: status, backend (or body), Location and `access-control-*` headers.
fn summary(reply: &Reply) -> String {
    let backend = match reply.body.get("backend") {
        Some(b) => format!(
            "backend {b}, path {}, host {}",
            reply.body["path"], reply.body["host"]
        ),
        None => format!("body {}", reply.body),
    };
    let headers: BTreeMap<&str, &str> = reply
        .headers
        .iter()
        .filter(|(k, _)| {
            k.as_str() == "location"
                || k.as_str().starts_with("access-control-")
                || ["stage", "canary", "x-test", "x-test2"].contains(&k.as_str())
        })
        .map(|(k, v)| (k.as_str(), v.to_str().unwrap_or_default()))
        .collect();
    format!("{} ({backend}) {headers:?}", reply.status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn higress_e2e_ingress_cases_are_served_by_envoy() {
    let Some(binary) = envoy_binary() else {
        return;
    };
    let started = std::time::Instant::now();
    let (v1, v2, v3) = (
        Echo::start(V1).await,
        Echo::start(V2).await,
        Echo::start(V3).await,
    );
    let mirror = Recorder::start().await;
    let (http_port, https_port) = (free_port(), free_port());
    let (ca, cert, key) = certificate_for_hosts();
    let dir = tempfile::tempdir().unwrap();
    let secrets = ["test-secret", "default-secret", "foo-secret"]
        .map(|name| tls_secret(name, &cert, &key))
        .join("---\n");
    write(dir.path(), "secrets.yaml", &secrets);
    let services = [
        service(V1, NS, v1.port),
        service(V2, NS, v2.port),
        service(V3, NS, v3.port),
        service(MIRROR, NS, mirror.port),
    ]
    .join("---\n");
    write(dir.path(), "services.yaml", &services);
    write(
        dir.path(),
        "ingressclass.yaml",
        "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: higress}\nspec: {controller: higress.io/higress-controller}\n",
    );
    write(dir.path(), "ingresses.yaml", &ingresses());
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
    let mut envoy = EnvoyProcess::start(&binary, &bootstrap, 53_800).await;
    let mut https = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca.as_bytes()).unwrap())
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(Duration::from_secs(10));
    for host in TLS_HOSTS {
        https = https.resolve(host, ([127, 0, 0, 1], https_port).into());
    }
    let gateway = Gateway {
        http: reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap(),
        https: https.build().unwrap(),
        // An IP address in the URL: rustls sends no SNI. HTTP/1.1, so the Host header is the host.
        no_sni: reqwest::Client::builder()
            .use_rustls_tls()
            .danger_accept_invalid_certs(true)
            .http1_only()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap(),
        http_port,
        https_port,
    };

    // Converged once a no-host route answers on the HTTP port and each TLS host on the HTTPS port.
    let probes = [
        "GET /hello-world",
        "GET https://ssl-redirect.test.com/test",
        "GET https://force-ssl-redirect.test.com/test",
        "GET https://foo.without-sni.example/foo",
    ];
    let deadline = tokio::time::Instant::now() + CONVERGE;
    for probe in probes {
        loop {
            match gateway.send(probe).await {
                Ok(reply) if reply.status == 200 => break,
                other => assert!(
                    tokio::time::Instant::now() < deadline,
                    "never converged: {probe} got {:?}\n{}",
                    other.map(|r| summary(&r)),
                    admitpilot.log()
                ),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    eprintln!("converged after {:?}", started.elapsed());

    let mut failures = Vec::new();
    let mut known = Vec::new();
    let mut passed = BTreeMap::<&str, usize>::new();
    for (case, requests) in CASES {
        for (request, want) in *requests {
            let times = if *case == "HTTPRouteCanaryWeight" {
                10
            } else {
                1
            };
            let mut wrong = None;
            for _ in 0..times {
                let reply = gateway.send(request).await;
                if reply
                    .as_ref()
                    .map_or(true, |r| !mismatches(r, want).is_empty())
                {
                    wrong = Some(reply);
                    break;
                }
            }
            let label = format!("{case}: {request}");
            let describe = |reply: &Result<Reply, String>| match reply {
                Ok(r) => format!("wanted {:?}, got {}", mismatches(r, want), summary(r)),
                Err(e) => format!("no reply: {e}"),
            };
            match (wrong, KNOWN_DIFFERENCES.iter().find(|k| k.0 == label)) {
                (None, None) => *passed.entry(case).or_default() += 1,
                (None, Some(_)) => failures.push(format!(
                    "{label}: now as Higress expects; remove it from KNOWN_DIFFERENCES"
                )),
                (Some(Ok(r)), Some((_, status, why))) if r.status == *status => {
                    known.push(format!("{label}: {}\n    why: {why}", describe(&Ok(r))));
                }
                (Some(reply), Some((_, status, _))) => failures.push(format!(
                    "{label} (a known difference answering {status}): {}",
                    describe(&reply)
                )),
                (Some(reply), None) => failures.push(format!("{label}: {}", describe(&reply))),
            }
        }
    }

    // HTTPRouteMirrorTargetService: the mirror got a copy of /mirror.
    let deadline = tokio::time::Instant::now() + CONVERGE;
    while !mirror.saw("/mirror") {
        if tokio::time::Instant::now() > deadline {
            failures.push(format!(
                "HTTPRouteMirrorTargetService: the mirror never got /mirror (it got {:?})",
                mirror.paths.lock().unwrap()
            ));
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    eprintln!("passed, per case: {passed:#?}");
    eprintln!("known differences from Higress ({}):", known.len());
    for k in &known {
        eprintln!("  {k}");
    }
    eprintln!("took {:?}", started.elapsed());
    assert!(
        failures.is_empty(),
        "{} requests not as Higress expects:\n{}",
        failures.len(),
        failures.join("\n")
    );
    envoy.assert_nothing_rejected("Higress's e2e cases").await;
    assert!(envoy.exit_status().is_none(), "Envoy is still running");
}
