//! Echo backends for end-to-end tests: HTTP servers on 127.0.0.1 that answer with what they received, the
//! Service and EndpointSlice objects that name them, a CA-signed certificate Secret, and a request helper.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

/// An echo backend (HTTP/1.1, and HTTP/2 without TLS): answers `{"backend", "path", "host", "headers", "version"}`
/// as JSON; a path starting `/slow` answers
/// after 2 s, one starting `/flaky` answers 503 every other time. Records how many requests it got.
pub struct Echo {
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// How many requests it got.
    pub requests: Arc<AtomicU32>,
    task: tokio::task::JoinHandle<()>,
}

impl Echo {
    /// Starts one named `name`.
    pub async fn start(name: &'static str) -> Echo {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(AtomicU32::new(0));
        let seen = Arc::clone(&requests);
        let flaky = Arc::new(Mutex::new(0u32));
        let app = axum::Router::new().fallback(
            move |version: axum::http::Version, uri: axum::http::Uri, headers: axum::http::HeaderMap| {
                let seen = Arc::clone(&seen);
                let flaky = Arc::clone(&flaky);
                async move {
                    seen.fetch_add(1, Ordering::SeqCst);
                    if uri.path().starts_with("/slow") {
                        tokio::time::sleep(Duration::from_secs(2)).await;
                    }
                    let status = if uri.path().starts_with("/flaky") {
                        let mut n = flaky.lock().unwrap();
                        *n += 1;
                        if *n % 2 == 1 {
                            503
                        } else {
                            200
                        }
                    } else {
                        200
                    };
                    let headers: serde_json::Map<String, Value> = headers
                        .iter()
                        .map(|(k, v)| (k.to_string(), json!(v.to_str().unwrap_or_default())))
                        .collect();
                    let body = json!({"backend": name, "path": uri.path(), "host": headers.get("host"),
                        "headers": headers, "version": format!("{version:?}")});
                    (
                        axum::http::StatusCode::from_u16(status).unwrap(),
                        body.to_string(),
                    )
                }
            },
        );
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Echo {
            port,
            requests,
            task,
        }
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A Service `namespace/name` (port 80, named http) whose EndpointSlice has 127.0.0.1 at `port`.
pub fn service(name: &str, namespace: &str, port: u16) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec: {{ports: [{{name: http, port: 80}}]}}\n---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {{name: {name}-1, namespace: {namespace}, labels: {{kubernetes.io/service-name: {name}}}}}\naddressType: IPv4\nports: [{{name: http, port: {port}, protocol: TCP}}]\nendpoints: [{{addresses: [127.0.0.1], conditions: {{ready: true}}}}]\n"
    )
}

/// A CA (its PEM) and the Secret `default/shop-cert` holding a certificate for `shop.example` it signed.
pub fn certificate() -> (String, String) {
    use base64::Engine;
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["shop.example".to_string()])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    let b64 = |text: String| base64::engine::general_purpose::STANDARD.encode(text);
    let secret = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: shop-cert, namespace: default}}\ntype: kubernetes.io/tls\ndata:\n  tls.crt: {}\n  tls.key: {}\n",
        b64(leaf.pem()),
        b64(leaf_key.serialize_pem())
    );
    (ca.pem(), secret)
}

/// A client trusting `ca` that resolves shop.example to 127.0.0.1:`port`.
pub fn https_client(ca: &str, port: u16) -> reqwest::Client {
    reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca.as_bytes()).unwrap())
        .resolve("shop.example", ([127, 0, 0, 1], port).into())
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// A response: status, headers, and the body as JSON (a string when it is not JSON).
#[derive(Debug)]
pub struct Reply {
    /// Status code.
    pub status: u16,
    /// Headers.
    pub headers: reqwest::header::HeaderMap,
    /// Body.
    pub body: Value,
}

/// Sends the request and reads the reply.
pub async fn send(http: &reqwest::Client, request: reqwest::RequestBuilder) -> Reply {
    let _ = http;
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    Reply {
        status,
        headers,
        body: serde_json::from_str(&text).unwrap_or(Value::String(text)),
    }
}
