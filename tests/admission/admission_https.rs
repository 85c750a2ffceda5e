//! The webhook over real TLS, in process: a client trusting only the generated CA completes reviews, a client
//! trusting another CA fails the handshake, replaced certificate files are served to new connections without a
//! restart while an established connection keeps working, and the admin server reports it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use admitpilot::admission::server::ServerLimits;
use admitpilot::app::{App, Running, ServeConfig, WebhookConfig};
use admitpilot::model::decode::DecodeOptions;
use admitpilot::tls::{CertSource, TlsFiles};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use serde_json::{json, Value};

/// A CA that signs serving certificates for 127.0.0.1/localhost.
struct TestCa {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl TestCa {
    fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        TestCa {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// Writes a fresh serving pair into `dir` (key first, each file by rename) and returns the cert's DER.
    fn write_serving_pair(&self, dir: &Path, common_name: &str) -> Vec<u8> {
        let mut params =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        replace_file(&dir.join("tls.key"), key.serialize_pem().as_bytes());
        replace_file(&dir.join("tls.crt"), cert.pem().as_bytes());
        cert.der().to_vec()
    }
}

fn replace_file(path: &Path, contents: &[u8]) {
    let tmp = path.with_extension("new");
    std::fs::write(&tmp, contents).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

async fn start(dir: &Path) -> Running {
    let config = ServeConfig {
        webhook: WebhookConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            cert: CertSource::Files(TlsFiles {
                cert: dir.join("tls.crt"),
                key: dir.join("tls.key"),
            }),
            // Far beyond the test deadlines: a rotation must be noticed through file notifications.
            reload_interval: Duration::from_secs(3600),
            decode: DecodeOptions::default(),
            limits: ServerLimits::default(),
            bench_noop: false,
            reference_check: Default::default(),
        },
        admin_addr: "127.0.0.1:0".parse().unwrap(),
    };
    App::new(config).start().await.unwrap()
}

fn client_trusting(ca_pem: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca_pem.as_bytes()).unwrap())
        .tls_info(true)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

fn review_body() -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "abc",
            "kind": {"group": "networking.istio.io", "version": "v1", "kind": "VirtualService"},
            "operation": "CREATE",
            "namespace": "default",
            "object": {
                "apiVersion": "networking.istio.io/v1",
                "kind": "VirtualService",
                "metadata": {"name": "reviews"},
                "spec": {
                    "hosts": ["reviews"],
                    "http": [{"route": [{"destination": {"host": "reviews"}}]}],
                    "bogusField": true,
                },
            },
        },
    })
}

/// Sends one review and returns the peer certificate (DER) and the parsed response.
async fn send_review(client: &reqwest::Client, running: &Running) -> (Vec<u8>, Value) {
    let url = format!("https://127.0.0.1:{}/validate", running.webhook_addr.port());
    let response = client.post(url).json(&review_body()).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let peer = response
        .extensions()
        .get::<reqwest::tls::TlsInfo>()
        .and_then(|info| info.peer_certificate())
        .map(<[u8]>::to_vec)
        .unwrap();
    (peer, response.json().await.unwrap())
}

async fn admin_text(running: &Running, path: &str) -> (u16, String) {
    let url = format!("http://{}{path}", running.admin_addr);
    let response = reqwest::get(url).await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

#[tokio::test]
async fn a_client_trusting_the_ca_completes_reviews_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("test CA");
    let served = ca.write_serving_pair(dir.path(), "first");
    let running = start(dir.path()).await;

    let (peer, review) = send_review(&client_trusting(&ca.pem), &running).await;
    assert_eq!(peer, served);
    assert_eq!(review["response"]["uid"], "abc");
    assert_eq!(review["response"]["allowed"], true);
    assert_eq!(
        review["response"]["warnings"][0],
        "spec.bogusField: unknown field (ignored)"
    );

    let (status, text) = admin_text(&running, "/readyz").await;
    assert_eq!(
        (status, text.contains("[+] certificate loaded")),
        (200, true),
        "{text}"
    );
    assert_eq!(admin_text(&running, "/healthz").await.0, 200);
    let (_, metrics) = admin_text(&running, "/metrics").await;
    assert!(metrics.contains("verdict=\"allowed\"} 1"), "{metrics}");
    running.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_client_trusting_another_ca_fails_the_handshake() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("test CA");
    ca.write_serving_pair(dir.path(), "first");
    let running = start(dir.path()).await;

    let stranger = client_trusting(&TestCa::new("another CA").pem);
    let url = format!("https://127.0.0.1:{}/validate", running.webhook_addr.port());
    let error = stranger
        .post(url)
        .json(&review_body())
        .send()
        .await
        .unwrap_err();
    assert!(error.is_connect(), "{error:?}");
    let chain = format!("{error:?}");
    assert!(
        chain.contains("UnknownIssuer") || chain.contains("certificate"),
        "{chain}"
    );
    running.shutdown().await.unwrap();
}

#[tokio::test]
async fn replaced_files_are_served_to_new_connections_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("test CA");
    let first = ca.write_serving_pair(dir.path(), "first");
    let running = start(dir.path()).await;

    // An established keep-alive connection from before the rotation.
    let old_client = client_trusting(&ca.pem);
    assert_eq!(send_review(&old_client, &running).await.0, first);

    let second = ca.write_serving_pair(dir.path(), "second");
    assert_ne!(first, second);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        // A new client means a new connection and a new handshake.
        let (peer, _) = send_review(&client_trusting(&ca.pem), &running).await;
        if peer == second {
            break;
        }
        assert_eq!(peer, first);
        assert!(
            Instant::now() < deadline,
            "the new certificate was never served"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // The old connection was not dropped: it still answers, with the certificate it negotiated.
    let (peer, review) = send_review(&old_client, &running).await;
    assert_eq!(peer, first);
    assert_eq!(review["response"]["allowed"], true);

    let (_, metrics) = admin_text(&running, "/metrics").await;
    assert!(
        metrics.contains("admitpilot_webhook_cert_reloads_total{result=\"success\"}"),
        "{metrics}"
    );
    running.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_broken_replacement_keeps_the_current_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("test CA");
    let first = ca.write_serving_pair(dir.path(), "first");
    let running = start(dir.path()).await;

    replace_file(
        &dir.path().join("tls.crt"),
        b"-----BEGIN CERTIFICATE-----\nbroken\n",
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, metrics) = admin_text(&running, "/metrics").await;
        if metrics.contains("admitpilot_webhook_cert_reloads_total{result=\"error\"}") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the broken file was never noticed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (peer, _) = send_review(&client_trusting(&ca.pem), &running).await;
    assert_eq!(peer, first);
    running.shutdown().await.unwrap();
}

#[tokio::test]
async fn without_files_a_self_signed_certificate_is_served_and_its_ca_written() {
    let dir = tempfile::tempdir().unwrap();
    let ca_out = dir.path().join("ca.crt");
    let config = ServeConfig {
        webhook: WebhookConfig {
            addr: "127.0.0.1:0".parse().unwrap(),
            cert: CertSource::SelfSigned {
                ca_out: ca_out.clone(),
            },
            reload_interval: Duration::from_secs(5),
            decode: DecodeOptions::default(),
            limits: ServerLimits::default(),
            bench_noop: false,
            reference_check: Default::default(),
        },
        admin_addr: "127.0.0.1:0".parse().unwrap(),
    };
    let running = App::new(config).start().await.unwrap();
    assert_eq!(running.self_signed_ca.as_deref(), Some(ca_out.as_path()));
    let ca_pem = std::fs::read_to_string(&ca_out).unwrap();
    let (_, review) = send_review(&client_trusting(&ca_pem), &running).await;
    assert_eq!(review["response"]["allowed"], true);
    running.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_kubernetes_style_secret_swap_is_noticed() {
    // A mounted Secret: tls.crt -> ..data/tls.crt, ..data -> a versioned folder; an update writes a new folder
    // and renames a fresh `..data_tmp` link over `..data`.
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("test CA");
    let v1 = dir.path().join("..v1");
    std::fs::create_dir(&v1).unwrap();
    let first = ca.write_serving_pair(&v1, "first");
    std::os::unix::fs::symlink("..v1", dir.path().join("..data")).unwrap();
    for name in ["tls.crt", "tls.key"] {
        std::os::unix::fs::symlink(format!("..data/{name}"), dir.path().join(name)).unwrap();
    }
    let running = start(dir.path()).await;
    assert_eq!(
        send_review(&client_trusting(&ca.pem), &running).await.0,
        first
    );

    let v2 = dir.path().join("..v2");
    std::fs::create_dir(&v2).unwrap();
    let second = ca.write_serving_pair(&v2, "second");
    std::os::unix::fs::symlink("..v2", dir.path().join("..data_tmp")).unwrap();
    std::fs::rename(dir.path().join("..data_tmp"), dir.path().join("..data")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (peer, _) = send_review(&client_trusting(&ca.pem), &running).await;
        if peer == second {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the swapped Secret was never served"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    running.shutdown().await.unwrap();
}
