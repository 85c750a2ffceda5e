//! Every listening port of `serve`: the webhook and the xDS server speak TLS 1.2 and 1.3 only (a TLS 1.0 or 1.1
//! ClientHello is refused, a TLS 1.2 one answered), the xDS certificate is reloaded when its files change, and the
//! plain-HTTP admin port leaks no private key or credential (`/debug/configz`, `/debug/syncz`, `/metrics`), nor do
//! the logs; and the xDS ports' limits (connections, pre-authentication timeout, calls per connection, request
//! size) bite and are counted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use support::tls_probe;

use std::sync::Arc;
use std::time::Duration;

use admitpilot::app::{App, XdsAuth, XdsConfig};
use admitpilot::source::SourceSettings;
use admitpilot::xds::TranslateFn;
use base64::Engine as _;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
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
        limits: admitpilot::xds::ConnectionLimits::default(),
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
    // As `kubectl apply` leaves it: the annotation holds the whole Secret, key included.
    let applied = format!(
        "{{\"apiVersion\":\"v1\",\"data\":{{\"tls.key\":\"{}\"}},\"kind\":\"Secret\"}}",
        b64(&key)
    );
    let annotated = format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: applied-cert\n  namespace: gw\n  annotations:\n    kubectl.kubernetes.io/last-applied-configuration: '{applied}'\ntype: kubernetes.io/tls\ndata:\n  tls.crt: {}\n  tls.key: {}\n",
        b64(&cert),
        b64(&key)
    );
    std::fs::write(dir.join("applied.yaml"), annotated).unwrap();
    // A credential in higress-config: SkyWalking's access token.
    std::fs::write(
        dir.join("higress-config.yaml"),
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: higress-config, namespace: higress-system}}\ndata:\n  higress: |-\n    tracing:\n      enable: true\n      sampling: 100\n      timeout: 500\n      skywalking:\n        service: skywalking-oap.op-system.svc.cluster.local\n        port: 11800\n        access_token: {TOKEN_MARK}\n"),
    )
    .unwrap();
}

/// A SkyWalking access token, marked so a leak is found anywhere.
const TOKEN_MARK: &str = "SKYWALKING-TOKEN-MARK";

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
    assert!(configz.contains("applied-cert"), "{configz}");
    assert!(configz.contains("skywalking"), "{configz}");
    assert!(configz.contains("<redacted>"), "{configz}");
    assert!(!configz.contains("last-applied"), "{configz}");
    for path in ["/debug/configz", "/debug/syncz", "/metrics"] {
        let text = get_text(&http, &format!("{admin}{path}")).await;
        assert!(!text.contains(KEY_MARK), "{path} shows a private key");
        assert!(!text.contains(TOKEN_MARK), "{path} shows an access token");
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
    assert!(!text.contains(TOKEN_MARK), "the logs show an access token");
}

/// Whether the server closed `stream` (EOF or reset) before `deadline` passed.
async fn closed_by_server(stream: &mut tokio::net::TcpStream, deadline: Duration) -> bool {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 4096];
    let start = tokio::time::Instant::now();
    loop {
        let left = deadline.saturating_sub(start.elapsed());
        match tokio::time::timeout(left, stream.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            // The server's HTTP/2 SETTINGS and the like: keep reading.
            Ok(Ok(_)) => {}
        }
    }
}

/// Opens an SotW call on `channel` that asks for clusters and stays open; yields the response stream (or the
/// call's status) and the sender keeping the call open.
async fn open_call(
    channel: tonic::transport::Channel,
) -> (
    Result<tonic::Streaming<DiscoveryResponse>, tonic::Status>,
    tokio::sync::mpsc::Sender<DiscoveryRequest>,
) {
    let mut client = AggregatedDiscoveryServiceClient::new(channel)
        .max_decoding_message_size(64 << 20)
        .max_encoding_message_size(64 << 20);
    let (sender, receiver) = tokio::sync::mpsc::channel(4);
    sender
        .send(DiscoveryRequest {
            node: Some(gateway_node("gw")),
            type_url: CDS.into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let call = client
        .stream_aggregated_resources(tokio_stream::wrappers::ReceiverStream::new(receiver))
        .await;
    (call.map(tonic::Response::into_inner), sender)
}

const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

/// Each limit of the xDS ports bites, is counted, and frees what it held: connections past the cap are closed,
/// a connection that starts no call is closed after the pre-authentication timeout, a connection holds a limited
/// number of calls, and an oversized request ends its stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_xds_ports_bound_connections_calls_and_requests() {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new();
    let (_snapshots, receiver) =
        tokio::sync::watch::channel(Arc::new(admitpilot::model::Snapshot {
            version: 1,
            ..Default::default()
        }));
    let limits = admitpilot::xds::ConnectionLimits {
        max_connections: 3,
        max_streams: 2,
        pre_auth_timeout: Duration::from_millis(500),
        idle_timeout: Duration::from_millis(500),
        ..Default::default()
    };
    let running = App::new(serve_config(dir.path()))
        .snapshots(receiver)
        .xds(
            XdsConfig {
                limits,
                ..xds_config(&pki)
            },
            TranslateFn::caching(admitpilot::translate::Options::default()),
        )
        .start()
        .await
        .unwrap();
    let plain = running.xds_plaintext_addr.unwrap();
    let admin = format!("http://{}", running.admin_addr);
    let http = reqwest::Client::new();
    let limit = |name: &str, text: &str| {
        text.lines()
            .find(|line| {
                line.starts_with(&format!("admitpilot_xds_limits_total{{limit=\"{name}\"}}"))
            })
            .and_then(|line| line.rsplit(' ').next())
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0)
    };

    // Three connections that send nothing are held; a fourth is closed at once; the three go after 500 ms.
    let mut idle = Vec::new();
    for _ in 0..3 {
        idle.push(tokio::net::TcpStream::connect(plain).await.unwrap());
    }
    let mut fourth = tokio::net::TcpStream::connect(plain).await.unwrap();
    assert!(closed_by_server(&mut fourth, Duration::from_secs(5)).await);
    for stream in &mut idle {
        assert!(closed_by_server(stream, Duration::from_secs(10)).await);
    }
    let metrics = get_text(&http, &format!("{admin}/metrics")).await;
    assert!(limit("connections", &metrics) >= 1, "{metrics}");
    assert!(limit("pre_auth_timeout", &metrics) >= 3, "{metrics}");

    // One connection, two calls held open; the third is refused with a status.
    let channel = plain_channel(plain).await;
    let (first, _keep_first) = open_call(channel.clone()).await;
    let mut first = first.unwrap();
    assert!(first.message().await.unwrap().is_some());
    let (second, _keep_second) = open_call(channel.clone()).await;
    let mut second = second.unwrap();
    assert!(second.message().await.unwrap().is_some());
    let (third, _keep_third) = open_call(channel.clone()).await;
    let status = match third {
        Err(status) => status,
        Ok(mut responses) => responses.message().await.unwrap_err(),
    };
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status}");

    // A request over 4 MiB ends its stream.
    let (sender, receiver) = tokio::sync::mpsc::channel(4);
    let mut client = AggregatedDiscoveryServiceClient::new(plain_channel(plain).await)
        .max_encoding_message_size(64 << 20);
    sender
        .send(DiscoveryRequest {
            node: Some(gateway_node("gw")),
            type_url: CDS.into(),
            error_detail: Some(envoy_types::pb::google::rpc::Status {
                code: 3,
                message: "x".repeat(admitpilot::xds::MAX_REQUEST_BYTES + 1),
                details: Vec::new(),
            }),
            ..Default::default()
        })
        .await
        .unwrap();
    let status = match client
        .stream_aggregated_resources(tokio_stream::wrappers::ReceiverStream::new(receiver))
        .await
    {
        Err(status) => status,
        Ok(responses) => responses.into_inner().message().await.unwrap_err(),
    };
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status}");
    let metrics = get_text(&http, &format!("{admin}/metrics")).await;
    assert!(limit("streams_per_connection", &metrics) >= 1, "{metrics}");
    assert!(limit("request_size", &metrics) >= 1, "{metrics}");
    running.shutdown().await.unwrap();
}
