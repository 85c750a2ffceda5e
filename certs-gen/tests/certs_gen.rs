//! certs-gen end to end: runs the real binary.
//!
//! File mode writes PEM files (key mode 0600) covering the service names, keeps them on re-run, renews with
//! `--force`. Kubernetes mode talks to a small in-process HTTP double of the Kubernetes API server, not a
//! real cluster: it serves the real JSON shapes (Secret, ValidatingWebhookConfiguration, `Status` errors with
//! resourceVersion conflicts) for exactly the calls certs-gen makes (get/create/replace a Secret, get/replace a
//! ValidatingWebhookConfiguration), and can answer every call with a 403 `Forbidden` Status as a cluster
//! whose RBAC denies access does. The binary reaches it through a kubeconfig file, as it would a cluster.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_certs-gen");

/// Kills the child if the test ends before it does.
struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs certs-gen with `args` and `env`, waiting at most 60 s.
fn certs_gen(args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut command = Command::new(BIN);
    command
        .args(args)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (key, value) in env {
        command.env(key, value);
    }
    let mut guard = ChildGuard(command.spawn().unwrap());
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = guard.0.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "certs-gen did not finish");
        std::thread::sleep(Duration::from_millis(20));
    };
    // The output is a few lines: it fits in the pipe buffers, so reading after exit cannot block.
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    guard
        .0
        .stdout
        .take()
        .unwrap()
        .read_to_end(&mut stdout)
        .unwrap();
    guard
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_end(&mut stderr)
        .unwrap();
    Output {
        status,
        stdout,
        stderr,
    }
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap()
}

fn san_dns_names(cert_pem: &str) -> Vec<String> {
    let (_, pem) = x509_parser::pem::parse_x509_pem(cert_pem.as_bytes()).unwrap();
    let cert = pem.parse_x509().unwrap();
    let san = cert.subject_alternative_name().unwrap().unwrap();
    san.value
        .general_names
        .iter()
        .map(|name| name.to_string())
        .collect()
}

#[test]
fn file_mode_writes_keeps_and_force_renews() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("certs");
    let out_str = out.to_str().unwrap();
    let args = [
        "--service",
        "admitpilot",
        "--namespace",
        "higress-system",
        "--out-dir",
        out_str,
        "--dns-name",
        "webhook.example",
        "--ip",
        "10.1.2.3",
    ];
    let first = certs_gen(&args, &[]);
    assert!(first.status.success(), "{}", text(&first));
    let names = san_dns_names(&read(&out, "tls.crt"));
    for expected in [
        "DNSName(admitpilot)",
        "DNSName(admitpilot.higress-system)",
        "DNSName(admitpilot.higress-system.svc)",
        "DNSName(admitpilot.higress-system.svc.cluster.local)",
        "DNSName(webhook.example)",
        "IPAddress(0a:01:02:03)", // 10.1.2.3
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} missing from {names:?}"
        );
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(out.join("tls.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let cert = read(&out, "tls.crt");

    let again = certs_gen(&args, &[]);
    assert!(again.status.success(), "{}", text(&again));
    assert!(text(&again).contains("keeping them"), "{}", text(&again));
    assert_eq!(read(&out, "tls.crt"), cert);

    // Other names: renewed without --force.
    let mut other = args.to_vec();
    other.extend(["--dns-name", "more.example"]);
    let renamed = certs_gen(&other, &[]);
    assert!(text(&renamed).contains("renewing"), "{}", text(&renamed));
    let renamed_cert = read(&out, "tls.crt");
    assert_ne!(renamed_cert, cert);

    let mut forced = other.clone();
    forced.push("--force");
    let renewed = certs_gen(&forced, &[]);
    assert!(renewed.status.success(), "{}", text(&renewed));
    assert_ne!(read(&out, "tls.crt"), renamed_cert);
}

#[test]
fn usage_errors_are_reported() {
    let output = certs_gen(&["--service", "s", "--namespace", "n"], &[]);
    assert!(!output.status.success());
    assert!(text(&output).contains("--out-dir"), "{}", text(&output));
}

// === Kubernetes API server double ===

#[derive(Default)]
struct Cluster {
    secrets: BTreeMap<(String, String), Value>,
    webhook_configs: BTreeMap<String, Value>,
    forbidden: bool,
    next_version: u64,
    requests: Vec<String>,
}

type Shared = Arc<Mutex<Cluster>>;

fn status(code: StatusCode, reason: &str, message: String) -> Response {
    let body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code.as_u16(),
    });
    (code, Json(body)).into_response()
}

fn forbidden(resource: &str, name: &str, namespace: Option<&str>) -> Response {
    let scope = namespace.map_or(" at the cluster scope".to_string(), |ns| {
        format!(" in the namespace \"{ns}\"")
    });
    let group = if resource == "secrets" {
        ""
    } else {
        "admissionregistration.k8s.io"
    };
    status(
        StatusCode::FORBIDDEN,
        "Forbidden",
        format!(
            "{resource} \"{name}\" is forbidden: User \"system:serviceaccount:higress-system:certs-gen\" cannot \
             get resource \"{resource}\" in API group \"{group}\"{scope}"
        ),
    )
}

fn not_found(resource: &str, name: &str) -> Response {
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!("{resource} \"{name}\" not found"),
    )
}

/// Stamps server-side metadata and bumps resourceVersion.
fn stamp(cluster: &mut Cluster, object: &mut Value) {
    cluster.next_version += 1;
    object["metadata"]["resourceVersion"] = json!(cluster.next_version.to_string());
    if object["metadata"]["uid"].is_null() {
        object["metadata"]["uid"] = json!(format!("uid-{}", cluster.next_version));
        object["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
    }
}

async fn get_secret(
    State(cluster): State<Shared>,
    UrlPath((ns, name)): UrlPath<(String, String)>,
) -> Response {
    let mut cluster = cluster.lock().unwrap();
    cluster.requests.push(format!("GET secret {ns}/{name}"));
    if cluster.forbidden {
        return forbidden("secrets", &name, Some(&ns));
    }
    match cluster.secrets.get(&(ns, name.clone())) {
        Some(secret) => Json(secret.clone()).into_response(),
        None => not_found("secrets", &name),
    }
}

async fn create_secret(
    State(cluster): State<Shared>,
    UrlPath(ns): UrlPath<String>,
    Json(mut secret): Json<Value>,
) -> Response {
    let mut cluster = cluster.lock().unwrap();
    let name = secret["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    cluster.requests.push(format!("POST secret {ns}/{name}"));
    if cluster.forbidden {
        return forbidden("secrets", &name, Some(&ns));
    }
    if cluster.secrets.contains_key(&(ns.clone(), name.clone())) {
        return status(
            StatusCode::CONFLICT,
            "AlreadyExists",
            format!("secrets \"{name}\" already exists"),
        );
    }
    assert_eq!(secret["kind"], "Secret");
    assert_eq!(secret["apiVersion"], "v1");
    stamp(&mut cluster, &mut secret);
    cluster.secrets.insert((ns, name), secret.clone());
    (StatusCode::CREATED, Json(secret)).into_response()
}

async fn replace_secret(
    State(cluster): State<Shared>,
    UrlPath((ns, name)): UrlPath<(String, String)>,
    Json(mut secret): Json<Value>,
) -> Response {
    let mut cluster = cluster.lock().unwrap();
    cluster.requests.push(format!("PUT secret {ns}/{name}"));
    if cluster.forbidden {
        return forbidden("secrets", &name, Some(&ns));
    }
    let key = (ns, name.clone());
    let Some(current) = cluster.secrets.get(&key) else {
        return not_found("secrets", &name);
    };
    if current["metadata"]["resourceVersion"] != secret["metadata"]["resourceVersion"] {
        return status(
            StatusCode::CONFLICT,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on secrets \"{name}\": the object has been modified"
            ),
        );
    }
    stamp(&mut cluster, &mut secret);
    cluster.secrets.insert(key, secret.clone());
    Json(secret).into_response()
}

async fn get_vwc(State(cluster): State<Shared>, UrlPath(name): UrlPath<String>) -> Response {
    let mut cluster = cluster.lock().unwrap();
    cluster.requests.push(format!("GET vwc {name}"));
    if cluster.forbidden {
        return forbidden("validatingwebhookconfigurations", &name, None);
    }
    match cluster.webhook_configs.get(&name) {
        Some(config) => Json(config.clone()).into_response(),
        None => not_found(
            "validatingwebhookconfigurations.admissionregistration.k8s.io",
            &name,
        ),
    }
}

/// Applies a JSON merge patch (RFC 7386), as the API server does for `application/merge-patch+json`.
fn merge_patch(target: &mut Value, patch: &Value) {
    let Some(fields) = patch.as_object() else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    for (key, value) in fields {
        if value.is_null() {
            target.as_object_mut().unwrap().remove(key);
        } else {
            merge_patch(&mut target[key], value);
        }
    }
}

async fn patch_vwc(
    State(cluster): State<Shared>,
    UrlPath(name): UrlPath<String>,
    headers: axum::http::HeaderMap,
    body: String,
) -> Response {
    let mut cluster = cluster.lock().unwrap();
    cluster.requests.push(format!("PATCH vwc {name}"));
    if cluster.forbidden {
        return forbidden("validatingwebhookconfigurations", &name, None);
    }
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if content_type != "application/merge-patch+json" {
        return status(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format: {content_type}"),
        );
    }
    let patch: Value = serde_json::from_str(&body).unwrap();
    let Some(current) = cluster.webhook_configs.get(&name).cloned() else {
        return not_found(
            "validatingwebhookconfigurations.admissionregistration.k8s.io",
            &name,
        );
    };
    let wanted_version = &patch["metadata"]["resourceVersion"];
    if !wanted_version.is_null() && *wanted_version != current["metadata"]["resourceVersion"] {
        return status(StatusCode::CONFLICT, "Conflict", format!("Operation cannot be fulfilled on validatingwebhookconfigurations.admissionregistration.k8s.io \"{name}\": the object has been modified; please apply your changes to the latest version and try again"));
    }
    let mut config = current;
    merge_patch(&mut config, &patch);
    stamp(&mut cluster, &mut config);
    cluster.webhook_configs.insert(name, config.clone());
    Json(config).into_response()
}

/// A ValidatingWebhookConfiguration as the Helm chart installs it: two webhooks, no caBundle yet.
fn webhook_config() -> Value {
    let webhook = |name: &str, path: &str| {
        json!({
            "name": name,
            "clientConfig": {"service": {"name": "admitpilot", "namespace": "higress-system", "path": path, "port": 443}},
            "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["networking.istio.io"], "apiVersions": ["*"], "resources": ["*"], "scope": "*"}],
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 10,
        })
    };
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "admitpilot", "resourceVersion": "1", "uid": "vwc-uid", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "webhooks": [webhook("validation.admitpilot.io", "/validate"), webhook("configmaps.admitpilot.io", "/validate")],
    })
}

/// Starts the double on 127.0.0.1 in a background thread; returns its state and a kubeconfig pointing at it.
fn start_double(dir: &Path) -> (Shared, PathBuf) {
    let cluster: Shared = Arc::default();
    cluster.lock().unwrap().next_version = 100;
    cluster
        .lock()
        .unwrap()
        .webhook_configs
        .insert("admitpilot".into(), webhook_config());
    let app = Router::new()
        .route("/api/v1/namespaces/{ns}/secrets", post(create_secret))
        .route(
            "/api/v1/namespaces/{ns}/secrets/{name}",
            get(get_secret).put(replace_secret),
        )
        .route(
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{name}",
            get(get_vwc).patch(patch_vwc),
        )
        .with_state(cluster.clone());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: double\n  cluster:\n    server: http://127.0.0.1:{port}\n\
             users:\n- name: certs-gen\n  user:\n    token: test-token\ncontexts:\n- name: double\n  context:\n    \
             cluster: double\n    user: certs-gen\n    namespace: higress-system\ncurrent-context: double\n"
        ),
    )
    .unwrap();
    (cluster, kubeconfig)
}

const KUBE_ARGS: [&str; 8] = [
    "--service",
    "admitpilot",
    "--namespace",
    "higress-system",
    "--secret",
    "admitpilot-webhook-tls",
    "--webhook-config",
    "admitpilot",
];

fn secret_text(cluster: &Shared, key: &str) -> String {
    let cluster = cluster.lock().unwrap();
    let secret = &cluster.secrets[&(
        "higress-system".to_string(),
        "admitpilot-webhook-tls".to_string(),
    )];
    assert_eq!(secret["type"], "kubernetes.io/tls");
    let encoded = secret["data"][key].as_str().unwrap();
    String::from_utf8(decode_base64(encoded)).unwrap()
}

fn decode_base64(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bits = 0u32;
    let mut count = 0;
    let mut out = Vec::new();
    for byte in text.bytes().filter(|b| *b != b'=') {
        let value = ALPHABET.iter().position(|c| *c == byte).unwrap() as u32;
        bits = (bits << 6) | value;
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
            bits &= (1 << count) - 1;
        }
    }
    out
}

fn ca_bundles(cluster: &Shared) -> Vec<String> {
    let cluster = cluster.lock().unwrap();
    cluster.webhook_configs["admitpilot"]["webhooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            String::from_utf8(decode_base64(
                w["clientConfig"]["caBundle"].as_str().unwrap(),
            ))
            .unwrap()
        })
        .collect()
}

#[test]
fn kube_mode_stores_the_secret_patches_every_ca_bundle_and_is_safe_to_rerun() {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, kubeconfig) = start_double(dir.path());
    let env = [("KUBECONFIG", kubeconfig.as_path())];

    let first = certs_gen(&KUBE_ARGS, &env);
    assert!(first.status.success(), "{}", text(&first));
    let ca = secret_text(&cluster, "ca.crt");
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"));
    assert!(secret_text(&cluster, "tls.key").contains("PRIVATE KEY"));
    assert_eq!(ca_bundles(&cluster), vec![ca.clone(), ca.clone()]);
    // The rest of the configuration is untouched.
    let config = cluster.lock().unwrap().webhook_configs["admitpilot"].clone();
    assert_eq!(config["webhooks"][0]["failurePolicy"], "Fail");
    assert_eq!(
        config["webhooks"][1]["clientConfig"]["service"]["path"],
        "/validate"
    );

    let again = certs_gen(&KUBE_ARGS, &env);
    assert!(again.status.success(), "{}", text(&again));
    assert!(text(&again).contains("keeping them"), "{}", text(&again));
    assert!(
        text(&again).contains("already up to date"),
        "{}",
        text(&again)
    );
    assert_eq!(secret_text(&cluster, "ca.crt"), ca);
    // Only the first run wrote the configuration and the Secret.
    let puts = |cluster: &Shared| {
        cluster
            .lock()
            .unwrap()
            .requests
            .iter()
            .filter(|r| *r == "PATCH vwc admitpilot")
            .count()
    };
    assert_eq!(puts(&cluster), 1);
    let secret_writes = cluster
        .lock()
        .unwrap()
        .requests
        .iter()
        .filter(|r| r.starts_with("P") && r.contains("secret"))
        .count();
    assert_eq!(secret_writes, 1);

    let mut forced = KUBE_ARGS.to_vec();
    forced.push("--force");
    let renewed = certs_gen(&forced, &env);
    assert!(renewed.status.success(), "{}", text(&renewed));
    let new_ca = secret_text(&cluster, "ca.crt");
    assert_ne!(new_ca, ca);
    assert_eq!(ca_bundles(&cluster), vec![new_ca.clone(), new_ca]);
}

#[test]
fn kube_mode_explains_rbac_denials() {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, kubeconfig) = start_double(dir.path());
    cluster.lock().unwrap().forbidden = true;
    let output = certs_gen(&KUBE_ARGS, &[("KUBECONFIG", kubeconfig.as_path())]);
    assert!(!output.status.success());
    let message = text(&output);
    assert!(
        message.contains("forbidden to get Secret higress-system/admitpilot-webhook-tls"),
        "{message}"
    );
    assert!(message.contains("RBAC"), "{message}");
    assert!(
        message.contains("cannot get resource \"secrets\""),
        "{message}"
    );
}

#[test]
fn kube_mode_reports_a_missing_webhook_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, kubeconfig) = start_double(dir.path());
    cluster.lock().unwrap().webhook_configs.clear();
    let output = certs_gen(&KUBE_ARGS, &[("KUBECONFIG", kubeconfig.as_path())]);
    assert!(!output.status.success());
    let message = text(&output);
    assert!(
        message.contains("ValidatingWebhookConfiguration admitpilot"),
        "{message}"
    );
    assert!(message.contains("not found"), "{message}");
}
