//! Every listening port of `serve`: the webhook and the xDS server speak TLS 1.2 and 1.3 only (a TLS 1.0 or 1.1
//! ClientHello is refused, a TLS 1.2 one answered), the xDS certificate is reloaded when its files change, and the
//! plain-HTTP admin port leaks no private key (`/debug/configz`, `/debug/syncz`, `/metrics`), nor do the logs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;
#[path = "support/tls_probe.rs"]
mod tls_probe;

use std::sync::Arc;
use std::time::Duration;

use admitpilot::app::{App, XdsAuth, XdsConfig};
use admitpilot::source::SourceSettings;
use admitpilot::xds::TranslateFn;
use base64::Engine as _;
use support::logs::CapturedLogs;
use support::serve::{get_text, serve_config};
use support::xds_auth::{first_response, gateway_node, plain_channel, tls_channel, Pki, SDS};
use tls_probe::*;

const KEY_MARK: &str = "PRIVATE KEY";

fn xds_config(pki: &Pki) -> XdsConfig {
    XdsConfig {
        addr: "127.0.0.1:0".parse().unwrap(),
        tls: Some(pki.files.clone()),
        auth: XdsAuth::Open {
            serve_secrets: false,
        },
        plaintext_addr: Some("127.0.0.1:0".parse().unwrap()),
        reload_interval: Duration::from_millis(200),
    }
}

/// The app serving an empty snapshot (its sender, keep it alive) with the webhook and xDS over `pki`'s TLS.
async fn start(
    dir: &std::path::Path,
    pki: &Pki,
) -> (
    tokio::sync::watch::Sender<Arc<admitpilot::model::Snapshot>>,
    admitpilot::app::Running,
) {
    let (snapshots, receiver) =
        tokio::sync::watch::channel(Arc::new(admitpilot::model::Snapshot {
            version: 1,
            ..Default::default()
        }));
    let running = App::new(serve_config(dir))
        .snapshots(receiver)
        .xds(
            xds_config(pki),
            TranslateFn::caching(admitpilot::translate::Options::default()),
        )
        .start()
        .await
        .unwrap();
    (snapshots, running)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_and_xds_refuse_tls_before_1_2() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new();
    let (snapshots, running) = start(dir.path(), &pki).await;
    let ports = [
        ("webhook", running.webhook_addr),
        ("xDS", running.xds_addr.unwrap()),
    ];
    for (what, addr) in ports {
        let probe = move |version| tokio::task::spawn_blocking(move || accepts(addr, version));
        assert!(!probe(TLS10).await.unwrap(), "{what} accepted TLS 1.0");
        assert!(!probe(TLS11).await.unwrap(), "{what} accepted TLS 1.1");
        // The probe itself works: the same hello at TLS 1.2 gets a ServerHello.
        assert!(probe(TLS12).await.unwrap(), "{what} refused TLS 1.2");
    }
    drop(snapshots);
    running.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_xds_certificate_is_reloaded_when_its_files_change() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new();
    let (_snapshots, running) = start(dir.path(), &pki).await;
    let addr = running.xds_addr.unwrap();
    // A client that trusts only a second CA connects once the files hold a certificate that CA signed.
    let next = Pki::new();
    let connects = |ca: String| async move {
        tonic::transport::Channel::from_shared(format!("https://localhost:{}", addr.port()))
            .unwrap()
            .tls_config(
                tonic::transport::ClientTlsConfig::new()
                    .ca_certificate(tonic::transport::Certificate::from_pem(ca))
                    .domain_name("localhost"),
            )
            .unwrap()
            .connect()
            .await
            .is_ok()
    };
    assert!(connects(pki.ca_pem.clone()).await);
    assert!(!connects(next.ca_pem.clone()).await);
    std::fs::copy(&next.files.key, &pki.files.key).unwrap();
    std::fs::copy(&next.files.cert, &pki.files.cert).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !connects(next.ca_pem.clone()).await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the xDS certificate was not reloaded"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    running.shutdown().await.unwrap();
}

/// A TLS Gateway and its Secret in a config folder; the key is marked so a leak is found anywhere.
fn write_tls_config(dir: &std::path::Path, pki: &Pki) {
    let (cert, key) = pki.issue(&["secure.example"]);
    assert!(key.contains(KEY_MARK));
    let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
    let yaml = format!(
        "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: gw}}\nspec:\n  selector: {{app: gw}}\n  servers:\n  - port: {{number: 8443, name: https, protocol: HTTPS}}\n    hosts: [secure.example]\n    tls: {{mode: SIMPLE, credentialName: gw-cert}}\n---\napiVersion: v1\nkind: Secret\nmetadata: {{name: gw-cert, namespace: gw}}\ntype: kubernetes.io/tls\ndata:\n  tls.crt: {}\n  tls.key: {}\n",
        b64(&cert),
        b64(&key)
    );
    std::fs::write(dir.join("gw.yaml"), yaml).unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn the_admin_port_and_the_logs_leak_no_private_key() {
    let logs = CapturedLogs::install();
    let dir = tempfile::tempdir().unwrap();
    let config = tempfile::tempdir().unwrap();
    let pki = Pki::new();
    write_tls_config(config.path(), &pki);
    let sources = SourceSettings {
        config_dir: Some(config.path().to_path_buf()),
        ..SourceSettings::default()
    };
    let running = App::new(serve_config(dir.path()))
        .sources(sources)
        .xds(
            xds_config(&pki),
            TranslateFn::caching(admitpilot::translate::Options::default()),
        )
        .start()
        .await
        .unwrap();
    let admin = format!("http://{}", running.admin_addr);
    let http = reqwest::Client::new();
    support::eventually(|| {
        running
            .snapshots
            .as_ref()
            .is_some_and(|s| s.borrow().version > 0)
    })
    .await;
    // A gateway connects on both ports; neither verifies it, so neither sends the key.
    let cert = "kubernetes://gw-cert";
    let tls = tls_channel(running.xds_addr.unwrap(), &pki.ca_pem).await;
    let names = first_response(tls, None, gateway_node("gw"), SDS, &[cert])
        .await
        .unwrap();
    assert!(names.is_empty(), "{names:?}");
    let plain = plain_channel(running.xds_plaintext_addr.unwrap()).await;
    let names = first_response(plain, None, gateway_node("gw"), SDS, &[cert])
        .await
        .unwrap();
    assert!(names.is_empty(), "{names:?}");

    let configz = get_text(&http, &format!("{admin}/debug/configz")).await;
    assert!(configz.contains("gw-cert"), "{configz}");
    assert!(configz.contains("<redacted>"), "{configz}");
    for path in ["/debug/configz", "/debug/syncz", "/metrics"] {
        let text = get_text(&http, &format!("{admin}{path}")).await;
        assert!(!text.contains(KEY_MARK), "{path} shows a private key");
        assert!(
            !text.contains("LS0tLS1CRUdJTiBQUklWQVRF"),
            "{path} shows a base64 private key"
        );
    }
    let metrics = get_text(&http, &format!("{admin}/metrics")).await;
    assert!(
        metrics.contains("admitpilot_xds_secret_denied_total{reason=\"unauthenticated\"} 2"),
        "{metrics}"
    );
    running.shutdown().await.unwrap();
    let text = logs.text();
    assert!(text.contains("secrets withheld"), "{text}");
    assert!(!text.contains(KEY_MARK), "the logs show a private key");
}
