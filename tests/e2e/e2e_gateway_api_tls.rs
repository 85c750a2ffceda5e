//! Gateway API TLS end to end: the real `admitpilot serve --config-dir` binary, a real Envoy 1.40 (SotW, default
//! `initial_fetch_timeout`) serving the Gateway `default/gw`, and backends on 127.0.0.1. A TLS `Passthrough`
//! listener sends each connection, still encrypted, to the TLSRoute whose host names match its SNI (the client
//! verifies the backend's own certificate); a TLS listener that terminates hands the decrypted bytes to the backend
//! of the TLSRoute its SNI names; a TCP listener sends bytes to its TCPRoute's. BackendTLSPolicy: Envoy calls the backend over
//! TLS with the policy's SNI and verifies its certificate against the ConfigMap's CA and the policy's host name, and
//! a backend whose certificate does not pass gets no request. Every `*update_rejected` stat stays 0.
//!
//! Skips with a message when Envoy is not installed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::envoy;
use support::pipeline;
use support::tls_backends;

use std::time::Duration;

use envoy::*;
use pipeline::*;
use tls_backends::{Ca, StreamBackend};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const NODE_ID: &str = "router~127.0.0.1~gw.default~default.svc.cluster.local";

/// Sends `bytes` over `stream` and reads the reply to the end.
async fn exchange(
    mut stream: impl tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    bytes: &str,
) -> String {
    stream.write_all(bytes.as_bytes()).await.ok();
    let mut reply = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut reply)).await;
    String::from_utf8_lossy(&reply).into_owned()
}

/// What a TLS client verifying against `ca` with SNI `sni` gets back through 127.0.0.1:`port`, or the error.
async fn over_tls(ca: &Ca, port: u16, sni: &str, bytes: &str) -> Result<String, String> {
    over_tls_with(&ca.client(), port, sni, bytes).await
}

/// What the TLS client `client` with SNI `sni` gets back through 127.0.0.1:`port`, or the error.
async fn over_tls_with(
    client: &tokio_rustls::TlsConnector,
    port: u16,
    sni: &str,
    bytes: &str,
) -> Result<String, String> {
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| e.to_string())?;
    let name = rustls::pki_types::ServerName::try_from(sni.to_string()).unwrap();
    let tls = tokio::time::timeout(Duration::from_secs(5), client.connect(name, tcp))
        .await
        .map_err(|_| "handshake timed out".to_string())?
        .map_err(|e| e.to_string())?;
    Ok(exchange(tls, bytes).await)
}

/// The status of `GET <path>` with Host `host` sent by the TLS client `client` with SNI `sni` to 127.0.0.1:`port`
/// over HTTP/1.1; 0 when no answer comes (the handshake or the connection failed).
async fn https_status(
    client: &tokio_rustls::TlsConnector,
    port: u16,
    (sni, host, path): (&str, &str, &str),
) -> u16 {
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    let reply = over_tls_with(client, port, sni, &request)
        .await
        .unwrap_or_default();
    reply
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse::<u16>().ok())
        .unwrap_or(0)
}

/// What a plain TCP client gets back through 127.0.0.1:`port`.
async fn over_tcp(port: u16, bytes: &str) -> String {
    match tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
        Ok(tcp) => exchange(tcp, bytes).await,
        Err(e) => e.to_string(),
    }
}

/// A Service `name` on port 9000 whose endpoint is 127.0.0.1:`port`.
fn service(name: &str, port: u16) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: default}}\nspec: {{ports: [{{name: tcp, port: 9000}}]}}\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: {name}-1, namespace: default, labels: {{kubernetes.io/service-name: {name}}}}}\naddressType: IPv4\nports: [{{name: tcp, port: {port}, protocol: TCP}}]\nendpoints: [{{addresses: [127.0.0.1], conditions: {{ready: true}}}}]\n"
    )
}

/// Writes `config` and the Services of `backends` (name, port) into a folder, starts `admitpilot serve` on it (folder
/// mode serves certificates and CAs only when asked: `--xds-unauthenticated-secrets`) and an Envoy serving the
/// Gateway `default/gw`; the folder lives as long as admitpilot does.
async fn serve(
    binary: &std::path::Path,
    config: &str,
    backends: &[(&str, u16)],
    base_id: u32,
) -> (tempfile::TempDir, Admitpilot, EnvoyProcess) {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "gateway.yaml", config);
    let services: Vec<String> = backends
        .iter()
        .map(|(name, port)| service(name, *port))
        .collect();
    write(dir.path(), "services.yaml", &services.join("---\n"));
    let admitpilot =
        Admitpilot::start_with_args(dir.path(), &["--xds-unauthenticated-secrets"]).await;
    let bootstrap = bootstrap(AdsApi::Sotw, admitpilot.xds_port, NODE_ID).replace(
        "LABELS: { app: e2e }",
        "LABELS: { gateway.networking.k8s.io/gateway-name: gw }",
    );
    let envoy = EnvoyProcess::start(binary, &bootstrap, base_id).await;
    (dir, admitpilot, envoy)
}

/// The GatewayClass `admitpilot` and the TLS Secret `default/<name>` holding `cert` and `key` (PEM), as YAML
/// documents ending with a separator.
fn class_and_tls_secret(name: &str, (cert, key): (&str, &str)) -> String {
    use base64::Engine;
    let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: admitpilot}}
spec: {{controllerName: admitpilot.io/gateway-controller}}
---
apiVersion: v1
kind: Secret
metadata: {{name: {name}, namespace: default}}
type: kubernetes.io/tls
data: {{tls.crt: {}, tls.key: {}}}
---
",
        b64(cert),
        b64(key)
    )
}

/// Polls `check` until it returns `Some`, failing with the admitpilot log after the deadline.
async fn eventually<T, F: std::future::Future<Output = Option<T>>>(
    what: &str,
    admitpilot: &Admitpilot,
    mut check: impl FnMut() -> F,
) -> T {
    let deadline = tokio::time::Instant::now() + CONVERGE;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: never converged\n{}",
            admitpilot.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_and_tcp_routes_are_served_by_envoy() {
    let Some(binary) = envoy_binary() else {
        return;
    };
    let ca = Ca::new();
    let a = StreamBackend::start("a", Some(ca.leaf("a.example"))).await;
    let b = StreamBackend::start("b", Some(ca.leaf("b.example"))).await;
    let db = StreamBackend::start("db", None).await;
    let (passthrough, terminate, tcp) = (free_port(), free_port(), free_port());
    let store = StreamBackend::start("store", None).await;
    let (cert, key) = ca.leaf_for(&["shop.example", "store.example"]);
    let config = class_and_tls_secret("shop-cert", (&cert, &key))
        + &format!(
            r#"apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: default}}
spec:
  gatewayClassName: admitpilot
  listeners:
  - {{name: passthrough, port: {passthrough}, protocol: TLS, hostname: "*.example", tls: {{mode: Passthrough}}}}
  - name: terminate
    port: {terminate}
    protocol: TLS
    tls: {{mode: Terminate, certificateRefs: [{{name: shop-cert}}]}}
  - {{name: tcp, port: {tcp}, protocol: TCP}}
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TLSRoute
metadata: {{name: a, namespace: default}}
spec:
  parentRefs: [{{name: gw, sectionName: passthrough}}]
  hostnames: [a.example]
  rules: [{{backendRefs: [{{name: a, port: 9000}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TLSRoute
metadata: {{name: b, namespace: default}}
spec:
  parentRefs: [{{name: gw, sectionName: passthrough}}]
  hostnames: [b.example]
  rules: [{{backendRefs: [{{name: b, port: 9000}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TLSRoute
metadata: {{name: gone, namespace: default}}
spec:
  parentRefs: [{{name: gw, sectionName: passthrough}}]
  hostnames: [gone.example]
  rules: [{{backendRefs: [{{name: missing, port: 9000}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TLSRoute
metadata: {{name: shop, namespace: default}}
spec:
  parentRefs: [{{name: gw, sectionName: terminate}}]
  hostnames: [shop.example]
  rules: [{{backendRefs: [{{name: db, port: 9000}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TLSRoute
metadata: {{name: store, namespace: default}}
spec:
  parentRefs: [{{name: gw, sectionName: terminate}}]
  hostnames: [store.example]
  rules: [{{backendRefs: [{{name: store, port: 9000}}]}}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata: {{name: db, namespace: default}}
spec:
  parentRefs: [{{name: gw, sectionName: tcp}}]
  rules: [{{backendRefs: [{{name: db, port: 9000}}]}}]
"#
        );
    let (_dir, admitpilot, envoy) = serve(
        &binary,
        &config,
        &[
            ("a", a.port),
            ("b", b.port),
            ("db", db.port),
            ("store", store.port),
        ],
        53_700,
    )
    .await;

    // Passthrough: the client's TLS session ends at the backend its SNI names (it verifies that backend's own
    // certificate), so Envoy never decrypts it.
    for (sni, expected) in [("a.example", "a:hello"), ("b.example", "b:hello")] {
        let reply = eventually(sni, &admitpilot, || async {
            over_tls(&ca, passthrough, sni, "hello")
                .await
                .ok()
                .filter(|r| !r.is_empty())
        })
        .await;
        assert_eq!(reply, expected, "SNI {sni}");
    }
    // No TLSRoute names c.example: no filter chain matches and the connection is closed. gone.example's only
    // backend does not exist: its chain has no filters, so Envoy accepts the connection and closes it.
    for sni in ["c.example", "gone.example"] {
        let rejected = over_tls(&ca, passthrough, sni, "hello").await;
        assert!(
            rejected.as_ref().map_or(true, String::is_empty),
            "{sni}: {rejected:?}"
        );
    }

    // Terminate: Envoy ends TLS with the listener's certificate and the backend of the TLSRoute the SNI names gets
    // the plain bytes.
    for (sni, expected) in [("shop.example", "db:ping"), ("store.example", "store:ping")] {
        let reply = eventually(sni, &admitpilot, || async {
            over_tls(&ca, terminate, sni, "ping")
                .await
                .ok()
                .filter(|r| !r.is_empty())
        })
        .await;
        assert_eq!(reply, expected, "SNI {sni}");
    }

    // TCP: bytes in, bytes out.
    let reply = eventually("tcp", &admitpilot, || async {
        Some(over_tcp(tcp, "raw").await).filter(|r| r.starts_with("db:"))
    })
    .await;
    assert_eq!(reply, "db:raw");
    envoy.assert_nothing_rejected("tls and tcp routes").await;
}

/// BackendTLSPolicy: the gateway calls the backend over TLS, with the policy's host name as SNI, trusting only the
/// ConfigMap's CA and only a certificate for that host name; a backend whose certificate names another host, and
/// one whose policy's CA cannot be resolved, get no request (503), never a request in plain text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backend_tls_policies_are_enforced_by_envoy() {
    let Some(binary) = envoy_binary() else {
        return;
    };
    let ca = Ca::new();
    let secure = StreamBackend::start_as("secure", Some(ca.leaf("secure.example")), true).await;
    let impostor = StreamBackend::start_as("impostor", Some(ca.leaf("other.example")), true).await;
    let unresolved =
        StreamBackend::start_as("unresolved", Some(ca.leaf("unresolved.example")), true).await;
    let port = free_port();
    let policy = |name: &str, ca_ref: &str, hostname: &str| {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: BackendTLSPolicy\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  targetRefs: [{{group: \"\", kind: Service, name: {name}}}]\n  validation:\n    caCertificateRefs: [{{group: \"\", kind: ConfigMap, name: {ca_ref}}}]\n    hostname: {hostname}\n"
        )
    };
    let ca_pem: String = ca.pem.lines().map(|l| format!("    {l}\n")).collect();
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
  listeners: [{{name: http, port: {port}, protocol: HTTP}}]
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: backend-ca, namespace: default}}
data:
  ca.crt: |
{ca_pem}---
{}---
{}---
{}---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: r, namespace: default}}
spec:
  parentRefs: [{{name: gw}}]
  rules:
  - matches: [{{path: {{value: /secure}}}}]
    backendRefs: [{{name: secure, port: 9000}}]
  - matches: [{{path: {{value: /impostor}}}}]
    backendRefs: [{{name: impostor, port: 9000}}]
  - matches: [{{path: {{value: /unresolved}}}}]
    backendRefs: [{{name: unresolved, port: 9000}}]
"#,
        policy("secure", "backend-ca", "secure.example"),
        policy("impostor", "backend-ca", "secure.example"),
        policy("unresolved", "no-such-configmap", "unresolved.example"),
    );
    let (_dir, _admitpilot, envoy) = serve(
        &binary,
        &config,
        &[
            ("secure", secure.port),
            ("impostor", impostor.port),
            ("unresolved", unresolved.port),
        ],
        53_710,
    )
    .await;
    let http = client();
    let base = format!("http://127.0.0.1:{port}");
    wait_for_response(
        &http,
        &format!("{base}/secure"),
        200,
        "secure sni=secure.example",
    )
    .await;
    for path in ["/impostor", "/unresolved"] {
        let (status, body) = get(&http, &format!("{base}{path}")).await.unwrap();
        assert_eq!(status, 503, "{path}: {body}");
        assert!(!body.contains("sni="), "{path} reached its backend: {body}");
    }
    envoy.assert_nothing_rejected("backend tls policies").await;
}

/// GatewayBackendClientCertificate: a Gateway whose `spec.tls.backend.clientCertificateRef` names a Secret of another
/// namespace that a ReferenceGrant opens to it presents that certificate to a backend its BackendTLSPolicy protects;
/// the backend, which completes a handshake only with a client certificate its CA signed, answers. With the reference
/// gone the gateway presents none, and the backend gets no request (503).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_presents_its_client_certificate_to_backends() {
    use base64::Engine;
    let Some(binary) = envoy_binary() else {
        return;
    };
    let (server_ca, client_ca) = (Ca::new(), Ca::new());
    let backend =
        StreamBackend::start_mutual("mutual", server_ca.leaf("mutual.example"), &client_ca.pem)
            .await;
    let port = free_port();
    let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    let (client_cert, client_key) = client_ca.leaf("gw.default");
    let ca_pem: String = server_ca
        .pem
        .lines()
        .map(|l| format!("    {l}\n"))
        .collect();
    let gateway = |tls: &str| {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: default}}\nspec:\n  gatewayClassName: admitpilot\n  listeners: [{{name: http, port: {port}, protocol: HTTP}}]\n{tls}"
        )
    };
    let presenting = gateway(
        "  tls: {backend: {clientCertificateRef: {name: gateway-client, namespace: certs}}}\n",
    );
    let rest = format!(
        r#"apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: admitpilot}}
spec: {{controllerName: admitpilot.io/gateway-controller}}
---
apiVersion: v1
kind: Secret
metadata: {{name: gateway-client, namespace: certs}}
type: kubernetes.io/tls
data: {{tls.crt: {}, tls.key: {}}}
---
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {{name: gateways-of-default, namespace: certs}}
spec:
  from: [{{group: gateway.networking.k8s.io, kind: Gateway, namespace: default}}]
  to: [{{group: "", kind: Secret, name: gateway-client}}]
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: backend-ca, namespace: default}}
data:
  ca.crt: |
{ca_pem}---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {{name: mutual, namespace: default}}
spec:
  targetRefs: [{{group: "", kind: Service, name: mutual}}]
  validation:
    caCertificateRefs: [{{group: "", kind: ConfigMap, name: backend-ca}}]
    hostname: mutual.example
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: r, namespace: default}}
spec:
  parentRefs: [{{name: gw}}]
  rules: [{{backendRefs: [{{name: mutual, port: 9000}}]}}]
"#,
        b64(&client_cert),
        b64(&client_key),
    );
    let (dir, admitpilot, envoy) = serve(
        &binary,
        &format!("{presenting}---\n{rest}"),
        &[("mutual", backend.port)],
        53_720,
    )
    .await;
    let http = client();
    let url = format!("http://127.0.0.1:{port}/");
    wait_for_response(&http, &url, 200, "mutual sni=mutual.example").await;
    write(
        dir.path(),
        "gateway.yaml",
        &format!("{}---\n{rest}", gateway("")),
    );
    let refused = eventually("no client certificate, no request", &admitpilot, || async {
        get(&http, &url).await.filter(|(status, _)| *status == 503)
    })
    .await;
    assert!(
        !refused.1.contains("sni="),
        "reached its backend: {refused:?}"
    );
    envoy
        .assert_nothing_rejected("backend client certificate")
        .await;
}

/// Misdirected requests (GatewayHTTPSListenerDetectMisdirectedRequests): four HTTPS listeners on one port, without
/// a host name, `second.test`, `*.wild.test` and `four.wild.test`. A request whose Host another, more specific
/// listener serves, or that the host name of the listener its SNI chose does not cover, gets 421; one for the
/// chosen listener's own hosts is routed (or 404 where no route matches).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_listeners_answer_421_for_a_host_another_listener_serves() {
    let Some(binary) = envoy_binary() else {
        return;
    };
    let ca = Ca::new();
    let web = support::echo::Echo::start("web").await;
    let port = free_port();
    let (cert, key) = ca.leaf_for(&[
        "any.test",
        "second.test",
        "three.wild.test",
        "four.wild.test",
    ]);
    let listener = |name: &str, hostname: &str| {
        format!(
            "  - {{name: {name}, port: {port}, protocol: HTTPS, {hostname} tls: {{certificateRefs: [{{name: cert}}]}}}}\n"
        )
    };
    let route = |name: &str, section: &str, hostnames: &str| {
        format!(
            "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: default}}\n\
             spec:\n  parentRefs: [{{name: gw, sectionName: {section}}}]\n  hostnames: {hostnames}\n  \
             rules: [{{matches: [{{path: {{type: PathPrefix, value: /{name}}}}}], backendRefs: [{{name: web, port: 9000}}]}}]\n"
        )
    };
    let config = class_and_tls_secret("cert", (&cert, &key))
        + &format!(
            "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: default}}
spec:
  gatewayClassName: admitpilot
  listeners:
{}{}{}{}{}{}{}{}",
            listener("any", ""),
            listener("second", "hostname: second.test,"),
            listener("wild", "hostname: '*.wild.test',"),
            listener("four", "hostname: four.wild.test,"),
            route("any", "any", "[any.test]"),
            route("second", "second", "[]"),
            route("wild", "wild", "[]"),
            route("four", "four", "[]"),
        );
    let (_dir, admitpilot, envoy) = serve(&binary, &config, &[("web", web.port)], 53_550).await;
    let client = ca.client();
    let status = |sni: &'static str, host: &'static str, path: &'static str| {
        let client = &client;
        async move { https_status(client, port, (sni, host, path)).await }
    };
    eventually("the four listeners", &admitpilot, || async {
        (status("four.wild.test", "four.wild.test", "/four").await == 200).then_some(())
    })
    .await;
    let expected = [
        ("any.test", "any.test", "/any", 200),
        ("any.test", "second.test", "/second", 421),
        ("any.test", "unknown.test", "/any", 404),
        ("second.test", "second.test", "/second", 200),
        ("second.test", "any.test", "/any", 421),
        ("three.wild.test", "three.wild.test", "/wild", 200),
        ("three.wild.test", "five.wild.test", "/wild", 200),
        ("three.wild.test", "four.wild.test", "/four", 421),
        ("three.wild.test", "second.test", "/second", 421),
        ("four.wild.test", "four.wild.test", "/four", 200),
        ("four.wild.test", "three.wild.test", "/wild", 421),
    ];
    for (sni, host, path, code) in expected {
        assert_eq!(
            status(sni, host, path).await,
            code,
            "SNI {sni}, Host {host}{path}"
        );
    }
    envoy.assert_nothing_rejected("misdirected requests").await;
}

/// Client certificate validation (GatewayFrontendClientCertificateValidation and its InsecureFallback): the
/// Gateway's `spec.tls.frontend` names a ConfigMap CA for its HTTPS listeners. On the port that requires it only a
/// client certificate that CA signed gets through; on the port with `AllowInsecureFallback`, every client does; a
/// port whose CA does not resolve is not served at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_listeners_validate_client_certificates_against_the_gateways_ca() {
    let Some(binary) = envoy_binary() else {
        return;
    };
    let (site_ca, client_ca, rogue_ca) = (Ca::new(), Ca::new(), Ca::new());
    let web = support::echo::Echo::start("web").await;
    let (strict, lenient, unresolved) = (free_port(), free_port(), free_port());
    let (cert, key) = site_ca.leaf("secure.test");
    let indent = |pem: &str| pem.replace('\n', "\n    ");
    let config = class_and_tls_secret("cert", (&cert, &key))
        + &format!(
            "apiVersion: v1
kind: ConfigMap
metadata: {{name: client-ca, namespace: default}}
data:
  ca.crt: |
    {}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: gw, namespace: default}}
spec:
  gatewayClassName: admitpilot
  tls:
    frontend:
      default: {{validation: {{caCertificateRefs: [{{group: '', kind: ConfigMap, name: client-ca}}]}}}}
      perPort:
      - {{port: {lenient}, tls: {{validation: {{mode: AllowInsecureFallback,
          caCertificateRefs: [{{group: '', kind: ConfigMap, name: client-ca}}]}}}}}}
      - {{port: {unresolved}, tls: {{validation: {{caCertificateRefs: [{{group: '', kind: ConfigMap, name: missing}}]}}}}}}
  listeners:
  - {{name: strict, port: {strict}, protocol: HTTPS, tls: {{certificateRefs: [{{name: cert}}]}}}}
  - {{name: lenient, port: {lenient}, protocol: HTTPS, tls: {{certificateRefs: [{{name: cert}}]}}}}
  - {{name: unresolved, port: {unresolved}, protocol: HTTPS, tls: {{certificateRefs: [{{name: cert}}]}}}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: web, namespace: default}}
spec:
  parentRefs: [{{name: gw}}]
  rules: [{{backendRefs: [{{name: web, port: 9000}}]}}]
",
            indent(client_ca.pem.trim_end()),
        );
    let (_dir, admitpilot, envoy) = serve(&binary, &config, &[("web", web.port)], 53_560).await;
    let signed = client_ca.leaf("client.test");
    let rogue = rogue_ca.leaf("client.test");
    // Who, their TLS client, and the status the validating port gives them (0: no answer).
    let clients = [
        (
            "a client certificate the CA signed",
            site_ca.client_presenting((&signed.0, &signed.1)),
            200,
        ),
        ("no client certificate", site_ca.client(), 0),
        (
            "a client certificate of another CA",
            site_ca.client_presenting((&rogue.0, &rogue.1)),
            0,
        ),
    ];
    let status = |client: &tokio_rustls::TlsConnector, port: u16| {
        let client = client.clone();
        async move { https_status(&client, port, ("secure.test", "secure.test", "/")).await }
    };
    eventually("the validating listener", &admitpilot, || async {
        (status(&clients[0].1, strict).await == 200).then_some(())
    })
    .await;
    eventually("the lenient listener", &admitpilot, || async {
        (status(&clients[1].1, lenient).await == 200).then_some(())
    })
    .await;
    for (who, client, required) in &clients {
        assert_eq!(
            status(client, strict).await,
            *required,
            "{who} on the validating port"
        );
        assert_eq!(
            status(client, lenient).await,
            200,
            "{who} on the AllowInsecureFallback port"
        );
        assert_eq!(
            status(client, unresolved).await,
            0,
            "{who} on the port whose CA does not resolve"
        );
    }
    envoy
        .assert_nothing_rejected("client certificate validation")
        .await;
}
